#!/usr/bin/env python3
"""Plots of a benchmark report (bench.proto JSON from bench/peers.py or
`cake bench`): one panel per op, one bar per shape.

  python3 bench/plot.py REPORT.json [--out-dir DIR] [--prefix NAME]

writes DIR/NAME-speedup.png (Cake's speedup over the best peer whose figure
counts; needs a peers.py report) and DIR/NAME-copy.png (the fraction of the
run's copy bandwidth each row reaches).
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OPS = ("fwd", "bwd", "ckpt", "ckpt.cast")


def panels(report, value, title, xlabel, path, refs):
    rows = report["rows"]
    ops = [op for op in OPS if any(r["op"] == op for r in rows)]
    shapes = []
    for r in rows:
        if r["shape"] not in shapes:
            shapes.append(r["shape"])
    by = {(r["shape"], r["op"]): r for r in rows}
    height = max(3.0, 0.22 * len(shapes) + 1.5)
    fig, axes = plt.subplots(1, len(ops), figsize=(3.6 * len(ops) + 2.5, height), sharey=True,
                             squeeze=False)
    ys = list(range(len(shapes)))
    for ax, op in zip(axes[0], ops):
        vals = [value(by[(s, op)]) if (s, op) in by else None for s in shapes]
        xs = [v if v is not None else 0 for v in vals]
        colors = ["#bbbbbb" if v is None else ("#2a7ab0" if v >= refs[0] else "#d9822b")
                  for v in vals]
        ax.barh(ys, xs, color=colors, height=0.75)
        for ref in refs:
            ax.axvline(ref, color="black", linewidth=0.8, linestyle="--")
        ax.set_title(op)
        ax.set_xlabel(xlabel)
        ax.grid(axis="x", alpha=0.3)
        for y, v in zip(ys, vals):
            if v is not None:
                ax.text(v, y, f" {v:.2f}", va="center", fontsize=6)
    axes[0][0].set_yticks(ys)
    axes[0][0].set_yticklabels(shapes, fontsize=7)
    axes[0][0].invert_yaxis()
    m = report["machine"]
    fig.suptitle(f"{title}\n{m['gpu']}, driver {m['driver']}, {report['date']}, "
                 f"{report['timer']} spans, cold L2", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report")
    ap.add_argument("--out-dir", default=".")
    ap.add_argument("--prefix", default=None, help="file name prefix (default: the report's)")
    args = ap.parse_args()
    with open(args.report) as f:
        report = json.load(f)
    prefix = args.prefix or os.path.splitext(os.path.basename(args.report))[0]
    os.makedirs(args.out_dir, exist_ok=True)
    if any(r.get("best_peer") for r in report["rows"]):
        panels(report, lambda r: r["speedup"] if r.get("best_peer") else None,
               "Cake speedup over the best peer (best peer us / Cake us; > 1: Cake faster)",
               "speedup", os.path.join(args.out_dir, f"{prefix}-speedup.png"), refs=(1.0,))
    panels(report, lambda r: r["copy_fraction"],
           "Fraction of device-to-device copy bandwidth (bytes the op must move / time / copy)",
           "of copy", os.path.join(args.out_dir, f"{prefix}-copy.png"), refs=(0.9, 1.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
