#!/usr/bin/env python3
"""Compares Cake's times in two benchmark reports, row by row.

The reports are bench.proto JSON from `cake bench --json` or `bench/peers.py --json`. Rows
pair up by shape and op (an op's " @program" suffix from `cake bench --program` is
ignored), so a candidate program's run pairs with the routed run, and a run after a change
with the run before it. For each pair: both times, cand / base, and a verdict against the
larger of the two A/A floors (the relative gap between Cake's two copies in each run):
faster, slower, or same (within the floor).

  python3 bench/compare.py BASE.json CAND.json [--filter TEXT]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_io import load_report  # noqa: E402


def load_rows(path):
    report = load_report(path)
    rows = {}
    for row in report.get("rows", []):
        op = row.get("op", "").split(" @")[0]
        rows[(row.get("shape", ""), op)] = row
    return rows


def compare(base, cand):
    """Pairs of rows in both reports, in the candidate's order, and the keys in one only."""
    pairs = []
    for key, c in cand.items():
        b = base.get(key)
        if b is None or not b.get("cake_us") or not c.get("cake_us"):
            continue
        ratio = c["cake_us"] / b["cake_us"]
        floor = max(b.get("aa_floor", 0.0), c.get("aa_floor", 0.0))
        if ratio < 1.0 - floor:
            verdict = "faster"
        elif ratio > 1.0 + floor:
            verdict = "slower"
        else:
            verdict = "same"
        pairs.append({"shape": key[0], "op": key[1], "base_us": b["cake_us"],
                      "cand_us": c["cake_us"], "ratio": ratio, "floor": floor,
                      "verdict": verdict})
    only = sorted(set(base) ^ set(cand))
    return pairs, only


def format_table(pairs, only):
    lines = [f"{'shape':<30} {'op':<10} {'base us':>10} {'cand us':>10} {'cand/base':>9} "
             f"{'A/A':>6}  verdict"]
    for p in pairs:
        lines.append(f"{p['shape']:<30} {p['op']:<10} {p['base_us']:>10.1f} {p['cand_us']:>10.1f} "
                     f"{p['ratio']:>9.3f} {p['floor']:>6.3f}  {p['verdict']}")
    for verdict in ("faster", "slower", "same"):
        ratios = [p["ratio"] for p in pairs if p["verdict"] == verdict]
        if ratios:
            lines.append(f"{verdict}: {len(ratios)} row(s), cand/base {min(ratios):.3f}..{max(ratios):.3f}")
    if only:
        lines.append(f"in one report only: {len(only)} row(s), e.g. {only[0][0]} {only[0][1]}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base")
    ap.add_argument("cand")
    ap.add_argument("--filter", help="keep rows whose 'shape op' contains TEXT (A|B: either)")
    args = ap.parse_args(argv)
    try:
        base, cand = load_rows(args.base), load_rows(args.cand)
    except (OSError, ValueError) as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 2
    if args.filter:
        keep = lambda key: any(t in f"{key[0]} {key[1]}" for t in args.filter.split("|"))
        base = {k: v for k, v in base.items() if keep(k)}
        cand = {k: v for k, v in cand.items() if keep(k)}
    pairs, only = compare(base, cand)
    if not pairs:
        print("compare.py: no row is in both reports", file=sys.stderr)
        return 2
    sys.stdout.write(format_table(pairs, only))
    return 0


if __name__ == "__main__":
    sys.exit(main())
