#!/usr/bin/env python3
"""How bench/peers.py splits the suite over several runs, with no GPU: which
cases --skip-done leaves out, when --budget-s stops, and the argument errors
of both (they come before any CUDA work). Exit 77 (skipped) without PyTorch."""
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch  # noqa: F401  (peers.py needs it to load)
except ImportError:
    print("peers parts test: PyTorch is not installed; skipped")
    sys.exit(77)

ROOT = sys.argv[1]
PEERS = os.path.join(ROOT, "bench", "peers.py")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checks, load_bench_script  # noqa: E402

peers = load_bench_script(ROOT, "peers")
check = Checks("peers parts test")


with tempfile.TemporaryDirectory() as tmp:
    a, b = os.path.join(tmp, "a.json"), os.path.join(tmp, "b.json")
    with open(a, "w") as f:
        json.dump({"rows": [{"shape": "[1024, 1536] bf16w", "op": "fwd"},
                            {"shape": "[1024, 1536] bf16w", "op": "bwd"}]}, f)
    with open(b, "w") as f:
        json.dump({"rows": [{"shape": "gate 260x48x128", "op": "fwd"}]}, f)
    done = peers.done_cases([a, b])
    check("done cases", done == {("[1024, 1536] bf16w", "fwd"), ("[1024, 1536] bf16w", "bwd"),
                                 ("gate 260x48x128", "fwd")}, done)
    check("an op of a done shape is not done", ("[1024, 1536] bf16w", "ckpt") not in done)

    # Argument errors name the flag and the value, and come before any CUDA work.
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        f.write("{not json")
    missing = os.path.join(tmp, "missing.json")
    for args, expect in ((["--budget-s", "0"], "--budget-s: 0.0"),
                         (["--budget-s", "-5"], "--budget-s: -5.0"),
                         (["--skip-done", bad], f"--skip-done {bad}: not a report"),
                         (["--skip-done", f"{a},{missing}"], "No such file")):
        got = subprocess.run([sys.executable, PEERS] + args, capture_output=True, text=True)
        check(f"{args} refused", got.returncode == 2 and expect in got.stderr,
              (got.returncode, got.stderr[-300:]))

# The budget: the first case always runs; later ones by the longest so far.
check("no budget", peers.fits_budget(1e9, [5.0], None))
check("first case", peers.fits_budget(100.0, [], 10.0))
check("fits", peers.fits_budget(40.0, [5.0, 20.0, 8.0], 60.0))
check("would end past it", not peers.fits_budget(41.0, [5.0, 20.0, 8.0], 60.0),
      "the longest case so far (20 s) decides, not the last (8 s)")
check("exactly at it", peers.fits_budget(40.0, [20.0], 60.0))

check.finish()
