#!/usr/bin/env python3
"""Plots and tables of benchmark reports (bench.proto JSON from
bench/peers.py or `cake bench`): one panel per op, one bar per shape.

  python3 bench/plot.py REPORT.json [MORE.json ...] [--out-dir DIR]
                        [--prefix NAME] [--table FILE.md]

Several reports (the parts of a suite run in pieces) are merged row by row,
in suite order; a row present in more than one comes from the last. Writes
DIR/NAME-speedup.png (Cake's speedup over the best peer whose figure counts;
peers.py reports only) and DIR/NAME-copy.png (the fraction of each run's copy
bandwidth a row reaches), and with --table a Markdown table of the rows.
Each row's figures come from one run; the table names the run of each row.
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_io import load_report  # noqa: E402

OPS = ("fwd", "bwd", "ckpt", "ckpt.cast")


def panels(report, value, title, xlabel, path, refs, clip):
    """Bars past `clip` are cut there and labelled with their value."""
    rows = report["rows"]
    ops = [op for op in OPS if any(r["op"] == op for r in rows)]
    shapes = []
    for r in rows:
        if r["shape"] not in shapes:
            shapes.append(r["shape"])
    by = {(r["shape"], r["op"]): r for r in rows}
    height = max(3.0, 0.22 * len(shapes) + 1.5)
    # At least 8 inches wide, so that a single op's panel still holds the title lines.
    fig, axes = plt.subplots(1, len(ops), figsize=(max(8.0, 3.6 * len(ops) + 2.5), height),
                             sharey=True, squeeze=False)
    ys = list(range(len(shapes)))
    for ax, op in zip(axes[0], ops):
        vals = [value(by[(s, op)]) if (s, op) in by else None for s in shapes]
        xs = [min(v, clip) if v is not None else 0 for v in vals]
        colors = ["#bbbbbb" if v is None else ("#2a7ab0" if v >= refs[0] else "#d9822b")
                  for v in vals]
        ax.barh(ys, xs, color=colors, height=0.75)
        for ref in refs:
            ax.axvline(ref, color="black", linewidth=0.8, linestyle="--")
        ax.set_title(op)
        ax.set_xlabel(xlabel)
        ax.grid(axis="x", alpha=0.3)
        ax.set_xlim(0, clip * 1.12)
        for y, v in zip(ys, vals):
            if v is not None:
                ax.text(min(v, clip), y, f" {v:.2f}" + (" >" if v > clip else ""), va="center",
                        fontsize=6)
    axes[0][0].set_yticks(ys)
    axes[0][0].set_yticklabels(shapes, fontsize=7)
    axes[0][0].invert_yaxis()
    m = report["machine"]
    runs = report.get("runs", [report["date"]])
    when = runs[0] if len(runs) == 1 else f"{len(runs)} runs {runs[0]} .. {runs[-1]}"
    fig.suptitle(f"{title}\n{m['gpu']}, driver {m['driver']}, {report['timer']} spans, cold L2"
                 f"\n{when}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def merge(paths):
    """The first report's header with the rows of all, each tagged with the
    date of its run."""
    merged, rows = None, {}
    for path in paths:
        report = load_report(path)
        merged = merged or report
        for row in report["rows"]:
            row["run"] = report["date"]
            rows[(row["shape"], row["op"])] = row
    merged = dict(merged)
    merged["rows"] = sorted(rows.values(), key=suite_order)
    merged["runs"] = sorted({r["run"] for r in merged["rows"]})
    return merged


def suite_order(row):
    """BENCH.md's order: plain rows (BF16 weight, then FP32) by H then T, the
    per-head views, the residual rows, the gated rows; ops in OPS order."""
    spec = row["spec"]
    lay = spec["layout"]
    heads = int(lay.get("heads", 0) or 1)
    if spec.get("op") == "RMSNORM_SILU_GATE":
        family = 3
    elif spec.get("residual"):
        family = 2
    elif heads > 1:
        family = 1
    else:
        family = 0
    weight = 1 if spec.get("weight_dtype") == "FP32" else 0
    op = row["op"].split(" ")[0]
    return (family, weight, int(lay["dim"]) if family != 1 else 0, int(lay["tokens"]),
            -heads, row["shape"], OPS.index(op) if op in OPS else len(OPS))


def markdown(report):
    """One line per row: Cake us, best counting peer, speedup, A/A floor,
    fraction of copy, and the peers that do not count."""
    lines = ["| shape | op | Cake us | best peer us | best peer | speedup | A/A | of copy | "
             "not counted |", "|---|---|---:|---:|---|---:|---:|---:|---|"]
    for r in report["rows"]:
        peer = bool(r.get("best_peer"))
        marked = "; ".join(f"{p['name']}: {p['median_us']:.1f} us, {p['note'].split('; ')[-1]}"
                           for p in r["impls"][2:]
                           if not p["within_budget"] or not p["kernel_set_stable"])
        lines.append(f"| {r['shape']} | {r['op']} | {r['cake_us']:.1f} | "
                     f"{r['best_peer_us']:.1f} | {r['best_peer'] if peer else '-'} | "
                     f"{r['speedup']:.2f} | {r['aa_floor']:.3f} | {r['copy_fraction']:.3f} | "
                     f"{marked} |" if peer else
                     f"| {r['shape']} | {r['op']} | {r['cake_us']:.1f} | - | - | - | "
                     f"{r['aa_floor']:.3f} | {r['copy_fraction']:.3f} | {marked} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+")
    ap.add_argument("--out-dir", default=".")
    ap.add_argument("--prefix", default=None, help="file name prefix (default: the first report's)")
    ap.add_argument("--table", help="write a Markdown table of the merged rows here")
    args = ap.parse_args()
    report = merge(args.reports)
    prefix = args.prefix or os.path.splitext(os.path.basename(args.reports[0]))[0]
    if args.table:
        with open(args.table, "w") as f:
            f.write(markdown(report))
        print(f"wrote {args.table}")
    os.makedirs(args.out_dir, exist_ok=True)
    if any(r.get("best_peer") for r in report["rows"]):
        panels(report, lambda r: r["speedup"] if r.get("best_peer") else None,
               "Cake speedup over the best peer (best peer us / Cake us; > 1: Cake faster)",
               "speedup", os.path.join(args.out_dir, f"{prefix}-speedup.png"), refs=(1.0,), clip=2.0)
    panels(report, lambda r: r["copy_fraction"],
           "Fraction of device-to-device copy bandwidth (bytes the op must move / time / copy)",
           "of copy", os.path.join(args.out_dir, f"{prefix}-copy.png"), refs=(0.9, 1.0), clip=1.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
