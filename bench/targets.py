#!/usr/bin/env python3
"""Checks a `cake bench` suite run against the speed targets, with the peers' latest times.

The rows come from one `cake bench --json` report (the suite run). A row's times come from
the newest `bench/peers.py --json` report (by its `date`) that has it: Cake's time in that
run and its best peer (peers.py's summary: within the budget, a stable kernel set), so that
each ratio is from one run (the peers' times move from process to process). Reports whose L2
flush lacks the evict-last scrub are left out (--any-flush takes them too). A row without a
peer time keeps the suite run's figures and only the copy targets. The targets, per row:

  fwd   >= 1.00x the best peer, and >= 0.93 of copy where x and y hold >= 5x the L2
  bwd   >= 1.08x the best peer, and >= 0.90 of copy there
  ckpt  >= 1.05x the best peer (ckpt.cast too)
  T <= 4096 tokens: >= 1.20x the best peer
  bwd where the best peer moves under 0.70 of copy: >= 1.40x

For each row that misses a speedup target the table gives the fraction of copy bandwidth
Cake would need to meet it (Cake's fraction x target / speedup): above about 1.0 a row
needs more than the run's device-to-device copy moves. It also gives the time that would
meet every missed target (the best peer's over the largest) and, where the suite report
has it (`same_bytes_copy_us`), the time of a plain copy of the row's bytes alone at that
size (the faster of cudaMemcpyAsync and a copy kernel): a needed time below it asks for
less than moving those bytes takes, launch and drain included.

  python3 bench/targets.py CAKE_BENCH.json PEERS.json [MORE.json ...] [--all] [--any-flush]
                           [--md FILE]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_io import load_report  # noqa: E402

L2_BYTES = 60 * 1000 * 1000  # the H200's L2, as BENCH.md counts it
LARGE_BYTES = 5 * L2_BYTES


def op_kind(op):
    """'ckpt.cast @prog' -> 'ckpt'."""
    return op.split(" @")[0].split(".")[0]


def peer_figures(row):
    """Cake's time and fraction of copy in the harness and the best peer, from the summary
    that peers.py writes into each row (peers.py's summarize: within the budget and with a
    stable kernel set), or None where no peer counts."""
    if not row.get("best_peer_us") or not row.get("cake_us"):
        return None
    frac = row.get("copy_fraction", 0.0)
    return {"cake_us": row["cake_us"], "fraction": frac, "peer_us": row["best_peer_us"],
            "peer": row.get("best_peer", ""),
            "peer_fraction": frac * row["cake_us"] / row["best_peer_us"]}


def current_protocol(report):
    """Whether the report's L2 flush scrubs lines kept with the evict-last policy first:
    a flush without the scrub leaves the lines that torch.compile's kernels load with that
    policy in L2 (README, Performance), so peer times before it are of a partly warm L2."""
    return "scrub" in (report.get("l2_flush") or "")


def latest_peers(paths, any_flush=False):
    """({(shape, op): peer_figures + report path and date}, the paths left out): the newest
    report per row, of the current flush only unless any_flush."""
    peers, left_out = {}, []
    for path in paths:
        report = load_report(path)
        if not any_flush and not current_protocol(report):
            left_out.append(path)
            continue
        date = report.get("date", "")
        for row in report.get("rows", []):
            key = (row.get("shape", ""), row.get("op", "").split(" @")[0])
            figures = peer_figures(row)
            if figures is None:
                continue
            if key not in peers or date >= peers[key]["date"]:
                peers[key] = dict(figures, path=path, date=date)
    return peers, left_out


def targets_of(row, kind, peer_fraction):
    """[(name, required speedup)] of the speedup targets that apply to a row."""
    out = {"fwd": [("fwd 1.00x", 1.00)], "bwd": [("bwd 1.08x", 1.08)],
           "ckpt": [("ckpt 1.05x", 1.05)]}.get(kind, [])
    tokens = int(row["spec"]["layout"]["tokens"])
    if tokens <= 4096:
        out.append(("T<=4096 1.2x", 1.20))
    if kind == "bwd" and peer_fraction < 0.70:
        out.append(("weak peer 1.4x", 1.40))
    return out


def check(cake, peers):
    """Each suite row's figures and missed targets. Where a peer report has the row, Cake's
    time and fraction of copy are the harness's of that run (a ratio from one run), else
    the suite run's."""
    rows = []
    for row in cake.get("rows", []):
        op = row.get("op", "").split(" @")[0]
        key = (row.get("shape", ""), op)
        kind = op_kind(op)
        peer = peers.get(key)
        us = peer["cake_us"] if peer else row.get("cake_us")
        frac = peer["fraction"] if peer else row.get("copy_fraction") or 0.0
        out = {"shape": key[0], "op": op, "cake_us": us, "fraction": frac, "misses": [],
               "peer": peer, "copy_us": row.get("same_bytes_copy_us") or 0.0,
               "needed_us": None}
        # Copy-fraction targets at the large rows (x and y of 5x the L2 and more).
        layout = row["spec"]["layout"]
        tokens = int(layout["tokens"])
        heads = int(layout.get("heads", 0) or 1)
        if 4 * tokens * heads * int(layout["dim"]) >= LARGE_BYTES:
            floor = {"fwd": 0.93, "bwd": 0.90}.get(kind)
            if floor and frac < floor:
                out["misses"].append((f"{kind} {floor:.2f} of copy", None))
        if peer is not None and us:
            speedup = peer["peer_us"] / us
            out["speedup"] = speedup
            for name, need in targets_of(row, kind, peer["peer_fraction"]):
                if speedup < need:
                    out["misses"].append((name, frac * need / speedup))
                    needed = peer["peer_us"] / need
                    if out["needed_us"] is None or needed < out["needed_us"]:
                        out["needed_us"] = needed
        rows.append(out)
    return rows


def render(rows, show_all):
    lines = ["| shape | op | Cake us | best peer us | report | speedup | Cake of copy "
             "| peer of copy | missed | of copy needed | needed us | copy us |",
             "|---|---|---:|---:|---|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        if not r["misses"] and not show_all:
            continue
        p = r["peer"]
        needs = [n for _, n in r["misses"] if n is not None]
        lines.append("| {} | {} | {} | {} | {} | {} | {:.3f} | {} | {} | {} | {} | {} |".format(
            r["shape"], r["op"], f"{r['cake_us']:.1f}" if r["cake_us"] else "-",
            f"{p['peer_us']:.1f}" if p else "-",
            p["path"].rsplit("/", 1)[-1] if p else "-",
            f"{r['speedup']:.3f}" if p else "-",
            r["fraction"],
            f"{p['peer_fraction']:.3f}" if p else "-",
            ", ".join(n for n, _ in r["misses"]) or "none",
            f"{max(needs):.2f}" if needs else "-",
            f"{r['needed_us']:.1f}" if r["needed_us"] is not None else "-",
            f"{r['copy_us']:.1f}" if r["copy_us"] else "-"))
    return "\n".join(lines)


def summary(rows):
    with_peer = [r for r in rows if r["peer"] is not None]
    missed = [r for r in rows if r["misses"]]
    beyond = [r for r in missed
              if any(n is not None and n > 1.0 for _, n in r["misses"])]
    out = [f"{len(rows)} rows, {len(with_peer)} with a peer time; "
           f"{len(missed)} miss a target, {len(rows) - len(missed)} meet every target "
           "that applies (rows without a peer time: the copy targets only)."]
    names = sorted({n for r in rows for n, _ in r["misses"]})
    for name in names:
        hit = [r for r in rows if any(n == name for n, _ in r["misses"])]
        out.append(f"  {name}: missed on {len(hit)} rows")
    out.append(f"{len(beyond)} of the {len(missed)} rows would need more than the run's copy "
               "speed to meet their speedup target (of copy needed > 1.00).")
    timed = [r for r in missed if r["needed_us"] is not None and r["copy_us"]]
    if timed:
        below = [r for r in timed if r["needed_us"] < r["copy_us"]]
        out.append(f"{len(below)} of the {len(timed)} rows that miss a speedup target and have a "
                   "same-bytes copy time would need less time than a plain copy of their bytes "
                   "alone (needed us < copy us).")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cake", help="a `cake bench --json` report (the suite run)")
    ap.add_argument("peers", nargs="+", help="`bench/peers.py --json` reports")
    ap.add_argument("--all", action="store_true", help="list every row, not only misses")
    ap.add_argument("--any-flush", action="store_true",
                    help="also take peer times from reports whose flush has no evict-last scrub")
    ap.add_argument("--md", help="also write the table and the summary to this file")
    args = ap.parse_args(argv)
    try:
        cake = load_report(args.cake)
        peers, left_out = latest_peers(args.peers, args.any_flush)
        if not cake.get("rows"):
            print(f"targets.py: {args.cake} has no rows", file=sys.stderr)
            return 2
        rows = check(cake, peers)
    except (OSError, ValueError) as e:
        print(f"targets.py: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError) as e:
        print(f"targets.py: a report lacks a field of bench.proto's rows: {e}", file=sys.stderr)
        return 2
    head = (f"Rows: {args.cake} ({cake.get('date', '?')}, copy {cake.get('copy_gbps', 0):.0f} "
            f"GB/s); Cake and its peers: the newest of {len(args.peers) - len(left_out)} peer "
            "reports per row")
    if left_out:
        head += f" ({len(left_out)} report(s) of a flush without the evict-last scrub left out)"
    head += ".\n\n"
    text = head + render(rows, args.all) + "\n\n" + summary(rows) + "\n"
    print(text, end="")
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
