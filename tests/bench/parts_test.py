#!/usr/bin/env python3
"""Checks of bench/parts.py on a small report written here: kernel names lose
their return type and parameters, each part's gap counts from the latest end
so far, rows and implementations are picked, a report without parts exits 1
and one that cannot be read exits 2."""
import io
import json
import os
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout

ROOT = sys.argv[1]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checks, load_bench_script  # noqa: E402

parts = load_bench_script(ROOT, "parts")
check = Checks("parts test")

name = "void cake::RowBackward<256, 2, (bool)0>(cake::RowBackwardParams, int (*)(int))"
check("return type and parameters dropped",
      parts.short_name(name) == "cake::RowBackward<256, 2, (bool)0>", parts.short_name(name))
check("a name without parameters stays", parts.short_name("memset") == "memset")

# Two overlapping kernels, then one 3 us after the later end.
lines = parts.format_parts([{"name": "a", "start_us": 0.0, "us": 10.0},
                            {"name": "b", "start_us": 2.0, "us": 4.0},
                            {"name": "c", "start_us": 13.0, "us": 1.0}])
gaps = [float(l.split()[2]) for l in lines]
check("gaps from the latest end", gaps == [0.0, 0.0, 3.0], lines)

report = {"rows": [
    {"shape": "[16384, 4096] bf16w", "op": "bwd", "impls": [
        {"name": "cake", "median_us": 11.0,
         "median_parts": [{"name": "void k1(int)", "start_us": 0.0, "us": 8.0},
                          {"name": "void dw_reduce(int)", "start_us": 9.0, "us": 2.0}]},
        {"name": "cake A/A", "median_us": 12.0,
         "median_parts": [{"name": "void k1(int)", "start_us": 0.0, "us": 12.0}]}]},
    {"shape": "[1024, 2048] bf16w", "op": "fwd", "impls": [
        {"name": "cake", "median_us": 3.0, "median_parts": []}]}]}

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "report.json")
    with open(path, "w") as f:
        json.dump(report, f)

    def run(*argv):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = parts.main([path, *argv])
        return rc, out.getvalue()

    rc, text = run("--filter", "bwd")
    check("exit 0", rc == 0, rc)
    check("the row's median", "[16384, 4096] bf16w bwd  cake: median 11.0 us" in text, text)
    check("the reduce's gap of 1 us", "1.0  dw_reduce" in text, text)
    check("the other row left out", "fwd" not in text, text)
    rc, text = run("--filter", "bwd", "--impl", "cake A/A")
    check("the A/A copy picked", "median 12.0" in text and "dw_reduce" not in text, text)
    rc, text = run("--filter", "fwd")
    check("no parts: exit 1", rc == 1, rc)
    check("no parts: said", "no parts" in text, text)

    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        f.write("{not json")
    for path in (bad, os.path.join(tmp, "missing.json")):
        err = io.StringIO()
        with redirect_stdout(io.StringIO()), redirect_stderr(err):
            rc = parts.main([path])
        check("unreadable report: exit 2", rc == 2, (path, rc))
        check("unreadable report: said", err.getvalue().startswith("parts.py: "), err.getvalue())

check.finish()
