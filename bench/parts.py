#!/usr/bin/env python3
"""Prints where a replay's time goes: the kernels, memsets and memcpys of each row's median replay.

The report is bench.proto JSON from `cake bench --json` with CUPTI spans (CUDA-event runs
record no parts). For each row, and each implementation picked (Cake by default), the
replay whose span is nearest the median: every part's start from the replay's first start,
its own duration, the idle gap before it (from the latest end so far) and its name.

  python3 bench/parts.py REPORT.json [--filter TEXT] [--impl NAME]

Exit status: 0, 1 when no row matched with parts, 2 when the report cannot be read.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_io import load_report  # noqa: E402


def short_name(name):
    """A kernel's name without its return type and parameter list."""
    name = re.sub(r"^void ", "", name)
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        if name[i] == ")":
            depth += 1
        elif name[i] == "(":
            depth -= 1
            if depth == 0:
                return name[:i] if i > 0 else name
    return name


def format_parts(parts):
    """Lines of start, duration, gap and name; the gap counts from the latest end so far."""
    lines = []
    latest_end = None
    for p in parts:
        start = p.get("start_us", 0.0)
        us = p.get("us", 0.0)
        gap = 0.0 if latest_end is None else max(0.0, start - latest_end)
        lines.append("  %9.1f %9.1f %7.1f  %s" % (start, us, gap, short_name(p.get("name", "?"))))
        latest_end = start + us if latest_end is None else max(latest_end, start + us)
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("--filter", default="", help="rows whose 'shape op' contains TEXT (A|B: either)")
    parser.add_argument("--impl", default="cake", help="implementation name (default: cake)")
    args = parser.parse_args(argv)
    try:
        report = load_report(args.report)
    except (OSError, ValueError) as e:
        print(f"parts.py: {e}", file=sys.stderr)
        return 2
    wanted = [t for t in args.filter.split("|") if t]
    shown = 0
    for row in report.get("rows", []):
        key = "%s %s" % (row.get("shape", ""), row.get("op", ""))
        if wanted and not any(t in key for t in wanted):
            continue
        for impl in row.get("impls", []):
            if impl.get("name") != args.impl:
                continue
            parts = impl.get("median_parts", [])
            print("%s  %s: median %.1f us" % (key, impl.get("name"), impl.get("median_us", 0.0)))
            if not parts:
                print("  (no parts: the run timed with CUDA events, or an older report)")
                continue
            print("  %9s %9s %7s  %s" % ("start us", "us", "gap", "part"))
            for line in format_parts(parts):
                print(line)
            shown += 1
    if shown == 0:
        print("no row with parts matched", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
