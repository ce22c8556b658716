#!/usr/bin/env python3
"""Checks of bench/targets.py on a suite report and peer reports written here:
the newest peer report wins per row, a report whose flush has no evict-last
scrub is left out (unless --any-flush), a peer outside the budget is not the best
peer, the targets that apply to a row (by op, tokens and the peer's fraction of
copy), the copy fraction a missed row would need, the time that would meet the
targets against a copy of the row's bytes alone, the summary; bad input exits 2."""
import io
import json
import os
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout

ROOT = sys.argv[1]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checks, load_bench_script  # noqa: E402

targets = load_bench_script(ROOT, "targets")
check = Checks("targets test")


def spec(tokens, dim, heads=0):
    layout = {"tokens": str(tokens), "dim": str(dim)}
    if heads:
        layout["heads"] = str(heads)
    return {"layout": layout}


def cake_row(shape, op, tokens, dim, us, fraction, copy_us=None):
    row = {"shape": shape, "op": op, "spec": spec(tokens, dim), "cake_us": us,
           "copy_fraction": fraction, "aa_floor": 0.002}
    if copy_us is not None:
        row["same_bytes_copy_us"] = copy_us
    return row


def peer_row(shape, op, nbytes, cake_us, impls, copy_gbps=4000.0):
    """A row as peers.py writes it: the impls and their summary (the best peer within the
    budget, Cake's fraction of the run's copy)."""
    counted = [(us, n) for n, us, ok in impls if ok]
    best_us, best = min(counted) if counted else (0.0, "")
    return {"shape": shape, "op": op, "bytes": nbytes,
            "impls": [{"name": "cake", "median_us": cake_us, "within_budget": True},
                      {"name": "cake A/A", "median_us": cake_us / 2, "within_budget": True}] +
                     [{"name": n, "median_us": us, "within_budget": ok} for n, us, ok in impls],
            "cake_us": cake_us, "copy_fraction": nbytes / (cake_us * 1e-6) / (copy_gbps * 1e9),
            "best_peer": best, "best_peer_us": best_us}


BIG, MID, SMALL = "[65536, 8192] bf16w", "[131072, 4096] bf16w", "[4096, 2048] bf16w"
# The suite run's times differ from the harness's, whose count where a peer report has the row.
cake = {"date": "2026-01-02T00:00:00Z", "copy_gbps": 4000.0, "rows": [
    cake_row(BIG, "fwd", 65536, 8192, 105.0, 0.9),
    # A copy of its bytes alone takes 16 us; 1.4x the weak peer needs 15.
    cake_row(SMALL, "bwd", 4096, 2048, 25.0, 0.4, copy_us=16.0),
    # 1.05x needs 97.1 us, more than the copy's 90.
    cake_row(MID, "ckpt.cast", 131072, 4096, 90.0, 1.1, copy_us=90.0),
    # No peer time: only the backward's 0.90 of copy applies, and it is missed.
    cake_row(MID, "bwd", 131072, 4096, 50.0, 0.85),
]}
# At 4000 GB/s: 396 MB in 100 us is 0.99 of copy (x and y of 2.1 GB: the copy target met),
# 42 MB in 20 us 0.525 and in 21 us 0.5 (a weak peer), 400 MB in 100 us 1.0.
SCRUB = "evict-last scrub + kernel"
older = {"date": "2026-01-01T00:00:00Z", "copy_gbps": 4000.0, "l2_flush": SCRUB, "rows": [
    peer_row(BIG, "fwd", 396_000_000, 100.0, [("torch.compile default", 95.0, True)]),
    peer_row(SMALL, "bwd", 42_000_000, 20.0, [("torch.compile default", 30.0, True)]),
]}
newer = {"date": "2026-01-03T00:00:00Z", "copy_gbps": 4000.0, "l2_flush": SCRUB, "rows": [
    peer_row(BIG, "fwd", 396_000_000, 100.0, [("torch.compile default", 101.0, True)]),
    peer_row(SMALL, "bwd", 42_000_000, 20.0, [("eager", 15.0, False),
                                              ("torch.compile default", 21.0, True)]),
    peer_row(MID, "ckpt.cast", 400_000_000, 100.0, [("torch.compile default", 102.0, True)]),
]}
# The newest report, but its flush left evict-last lines in L2.
warm = {"date": "2026-01-04T00:00:00Z", "copy_gbps": 4000.0, "l2_flush": "kernel", "rows": [
    peer_row(BIG, "fwd", 396_000_000, 100.0, [("torch.compile default", 90.0, True)]),
]}

with tempfile.TemporaryDirectory() as tmp:
    paths = {}
    for name, report in (("cake", cake), ("newer", newer), ("older", older), ("warm", warm)):
        paths[name] = os.path.join(tmp, name + ".json")
        with open(paths[name], "w") as f:
            json.dump(report, f)

    # The newer report listed before the older one still wins.
    peers, left_out = targets.latest_peers([paths["newer"], paths["older"], paths["warm"]])
    check("the report without the scrub is left out", left_out == [paths["warm"]], left_out)
    check("newest report per row, of the current flush", peers[(BIG, "fwd")]["peer_us"] == 101.0,
          peers.get((BIG, "fwd")))
    anyf, _ = targets.latest_peers([paths["newer"], paths["warm"]], any_flush=True)
    check("--any-flush takes the report without the scrub", anyf[(BIG, "fwd")]["peer_us"] == 90.0,
          anyf.get((BIG, "fwd")))
    small = peers.get((SMALL, "bwd"), {})
    check("a peer outside the budget is not the best", small.get("peer_us") == 21.0, small)
    check("the peer's fraction of copy", abs(small.get("peer_fraction", 0) - 0.5) < 1e-9, small)

    rows = {(r["shape"], r["op"]): r for r in targets.check(cake, peers)}
    big = rows[(BIG, "fwd")]
    check("Cake's figures from the peer report's run", big["cake_us"] == 100.0 and
          abs(big["fraction"] - 0.99) < 1e-9, big)
    check("1.01x and 0.99 of copy meet the forward's targets", big["misses"] == [], big)
    names = [n for n, _ in rows[(SMALL, "bwd")]["misses"]]
    check("a short backward against a weak peer misses 1.08x, 1.2x and 1.4x",
          names == ["bwd 1.08x", "T<=4096 1.2x", "weak peer 1.4x"], names)
    need = dict(rows[(SMALL, "bwd")]["misses"])["weak peer 1.4x"]
    check("copy needed for 1.4x at 1.05x from 0.525 of copy",
          abs(need - 0.525 * 1.4 / 1.05) < 1e-9, need)
    small_row = rows[(SMALL, "bwd")]
    check("the time that meets every missed target: the peer's 21 us over 1.4",
          abs(small_row["needed_us"] - 15.0) < 1e-9 and small_row["copy_us"] == 16.0, small_row)
    ckpt = rows[(MID, "ckpt.cast")]
    check("ckpt.cast takes the step's 1.05x", [n for n, _ in ckpt["misses"]] == ["ckpt 1.05x"],
          ckpt["misses"])
    check("1.05x needs 102 / 1.05 us", abs(ckpt["needed_us"] - 102.0 / 1.05) < 1e-9, ckpt)
    check("a row meeting its targets needs no time", big["needed_us"] is None, big)
    copy_only = rows[(MID, "bwd")]
    check("without a peer the suite run's figures and only the copy target",
          copy_only["peer"] is None and copy_only["cake_us"] == 50.0 and
          copy_only["misses"] == [("bwd 0.90 of copy", None)], copy_only)

    out = io.StringIO()
    md = os.path.join(tmp, "t.md")
    with redirect_stdout(out):
        rc = targets.main([paths["cake"], paths["older"], paths["newer"], paths["warm"],
                           "--md", md])
    text = out.getvalue()
    check("exit 0", rc == 0, rc)
    check("the summary counts", "4 rows, 3 with a peer time; 3 miss a target" in text, text)
    check("rows beyond the copy speed",
          "1 of the 3 rows would need more than the run's copy speed" in text, text)
    check("rows that would need less than a copy of their bytes",
          "1 of the 2 rows that miss a speedup target and have a same-bytes copy time would "
          "need less time than a plain copy of their bytes alone" in text, text)
    check("the needed and the copy's time in the table", "| 15.0 | 16.0 |" in text, text)
    check("only missed rows without --all", BIG not in text, text)
    check("the reports left out are counted",
          "newest of 2 peer reports per row (1 report(s) of a flush without" in text, text)
    with open(md) as f:
        check("--md writes what is printed", f.read() == text)

    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        rc_missing = targets.main([paths["cake"], os.path.join(tmp, "none.json")])
    check("a missing report: exit 2", rc_missing == 2, rc_missing)
    check("the missing report is named", "none.json" in err.getvalue(), err.getvalue())

    # A suite row without its spec: a clear error, not a traceback.
    broken = os.path.join(tmp, "broken.json")
    with open(broken, "w") as f:
        json.dump({"rows": [{"shape": BIG, "op": "fwd", "cake_us": 1.0}]}, f)
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        rc_broken = targets.main([broken, paths["newer"]])
    check("a row without its spec: exit 2", rc_broken == 2, rc_broken)
    check("the missing field is named", "'spec'" in err.getvalue(), err.getvalue())

check.finish()
