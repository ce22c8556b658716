#!/usr/bin/env python3
"""Checks of bench/compare.py on two small reports written here: rows pair by
shape and op (a --program suffix ignored), the ratio is cand / base, and the
verdict compares it with the larger A/A floor; a report kept gzip-compressed
(REPORT.json.gz) reads as the plain one; bad input exits 2."""
import gzip
import io
import json
import os
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout

ROOT = sys.argv[1]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checks, load_bench_script  # noqa: E402

compare = load_bench_script(ROOT, "compare")
check = Checks("compare test")


def row(shape, op, us, aa):
    return {"shape": shape, "op": op, "cake_us": us, "aa_floor": aa}


base_rows = [row("[4096, 4096] bf16w", "bwd", 100.0, 0.01),
             row("[1024, 2048] bf16w", "fwd", 50.0, 0.02),
             row("gate 260x48x128", "bwd", 10.0, 0.005),
             row("[65536, 2048] bf16w", "fwd", 170.0, 0.001)]
cand_rows = [row("[4096, 4096] bf16w", "bwd @rmsnorm.bwd.split", 80.0, 0.02),
             row("[1024, 2048] bf16w", "fwd", 50.5, 0.002),
             row("gate 260x48x128", "bwd", 12.0, 0.005),
             row("[16384, 4096] residual", "fwd", 130.0, 0.003)]

with tempfile.TemporaryDirectory() as tmp:
    paths = []
    for name, rows in (("base.json", base_rows), ("cand.json", cand_rows)):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            json.dump({"tool": "test", "rows": rows}, f)
        paths.append(path)

    pairs, only = compare.compare(compare.load_rows(paths[0]), compare.load_rows(paths[1]))
    by_shape = {p["shape"]: p for p in pairs}
    check("pairs", len(pairs) == 3, f"{len(pairs)} pairs")
    split = by_shape.get("[4096, 4096] bf16w", {})
    check("program suffix ignored", split.get("op") == "bwd", split)
    check("ratio is cand / base", abs(split.get("ratio", 0) - 0.8) < 1e-12, split)
    check("20% faster beyond a 2% floor", split.get("verdict") == "faster", split)
    within = by_shape.get("[1024, 2048] bf16w", {})
    check("the larger floor counts", abs(within.get("floor", 0) - 0.02) < 1e-12, within)
    check("1% slower within a 2% floor is the same", within.get("verdict") == "same", within)
    check("20% slower", by_shape.get("gate 260x48x128", {}).get("verdict") == "slower")
    check("rows in one report only", len(only) == 2, only)

    # The older suite reports under bench/results are kept as .json.gz.
    packed = os.path.join(tmp, "base.json.gz")
    with open(paths[0], "rb") as src, gzip.open(packed, "wb") as dst:
        dst.write(src.read())
    check("a .json.gz report reads as the plain one",
          compare.load_rows(packed) == compare.load_rows(paths[0]))

    out = io.StringIO()
    with redirect_stdout(out):
        rc = compare.main(paths)
    text = out.getvalue()
    check("exit 0", rc == 0, rc)
    check("summary of the faster rows", "faster: 1 row(s), cand/base 0.800..0.800" in text, text)
    check("summary of the rows in one report", "in one report only: 2 row(s)" in text, text)

    err = io.StringIO()
    with redirect_stderr(err):
        rc_filter = compare.main(paths + ["--filter", "residual"])
        rc_missing = compare.main([paths[0], os.path.join(tmp, "none.json")])
    check("no row in both after the filter: exit 2", rc_filter == 2, rc_filter)
    check("a missing report: exit 2", rc_missing == 2, rc_missing)
    check("the missing report is named", "none.json" in err.getvalue(), err.getvalue())

check.finish()
