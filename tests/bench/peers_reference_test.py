#!/usr/bin/env python3
"""Checks of bench/peers.py that need no GPU: its FP32-statistics reference
(what the peers run) against FP64 autograd, its budget check (which decides
whether a peer counts), and its spec text (what Cake is planned from), which
`cake validate` must accept. Exit 77 (skipped) without PyTorch."""
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("peers reference test: PyTorch is not installed; skipped")
    sys.exit(77)

ROOT = sys.argv[1]
CAKE = os.environ["CAKE"]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Checks, load_bench_script  # noqa: E402

peers = load_bench_script(ROOT, "peers")
peers.DEVICE = "cpu"
check = Checks("peers reference test")


def cases(filter_text):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "c.json")
        subprocess.run([CAKE, "bench", "--filter", filter_text, "--cases-out", path], check=True,
                       stdout=subprocess.DEVNULL)
        with open(path) as f:
            return [peers.Case(r) for r in json.load(f)["rows"]]


def shrink(case, tokens):
    """The same layout with fewer tokens, for the CPU."""
    case.tokens = tokens
    case.elems = (tokens - 1) * case.token_stride + (case.heads - 1) * case.head_stride + case.dim
    return case


def autograd_fp64(case, inp):
    """y, rstd, dx, dw, dz of the op in FP64 by autograd, from BF16 inputs."""
    x = inp["h_in"] if case.residual else inp["x"]
    xd = x.double().clone().requires_grad_()
    wd = inp["w"].double().clone().requires_grad_()
    zd = inp["z"].double().clone().requires_grad_() if case.gate else None
    rstd = torch.rsqrt(xd.square().mean(-1, keepdim=True) + case.eps)
    y = xd * rstd * wd
    if zd is not None:
        y = y * torch.nn.functional.silu(zd)
    y.backward(inp["dy"].double())
    dx = xd.grad + (inp["dh_in"].double() if case.residual_grad_in else 0)
    return y.detach(), rstd.squeeze(-1).detach(), dx, wd.grad, zd.grad if zd is not None else None


# The reference the peers run is the op: within budget of FP64 autograd.
for case in cases("[4096, 24, 256] strided ckpt|[16384, 4096] residual ckpt|gate 260x48x128 ckpt"):
    case = shrink(case, 33)
    inp = peers.make_inputs(case, seed=3)
    x = inp["x"]
    y, rstd, *h = peers.ref_forward(x, inp["w"], case.eps, inp.get("z"), inp.get("residual"))
    xh = h[0] if case.residual else x
    dx, dw, *dz = peers.ref_backward(xh, inp["w"], rstd, inp["dy"], inp.get("z"), inp.get("dh_in"))
    y64, rstd64, dx64, dw64, dz64 = autograd_fp64(case, inp)
    worst = lambda a, b, t: float(((a.double() - b).abs() / (t + t * b.abs())).max())  # noqa: E731
    check(f"{case.shape} y", worst(y, y64, 1e-2) <= 1, worst(y, y64, 1e-2))
    check(f"{case.shape} rstd", worst(rstd, rstd64, 1e-5) <= 1, worst(rstd, rstd64, 1e-5))
    check(f"{case.shape} dx", worst(dx, dx64, 1e-2) <= 1, worst(dx, dx64, 1e-2))
    check(f"{case.shape} dw", worst(dw, dw64, 1e-4) <= 1, worst(dw, dw64, 1e-4))
    if case.gate:
        check(f"{case.shape} dz", worst(dz[0], dz64, 1e-2) <= 1, worst(dz[0], dz64, 1e-2))
    # The harness's own check agrees, and catches what is wrong.
    out = {"y": y, "rstd": rstd, "dx": dx, "dw": dw}
    if case.residual:
        out["h"] = h[0]
    if case.gate:
        out["dz"] = dz[0]
    v = peers.violations(case, inp, out)
    check(f"{case.shape} violations within", max(v.values()) <= 1, v)
    bad = dict(out, dw=out["dw"] * 1.01)
    check(f"{case.shape} dw off by 1%", peers.violations(case, inp, bad)["dw"] > 1)
    nan = dict(out, y=out["y"].clone())
    nan["y"][0, 0, 0] = float("nan")
    check(f"{case.shape} NaN", peers.violations(case, inp, nan)["y"] == float("inf"))

# Every case's spec text is a spec the cake tool accepts, with the same layout.
with tempfile.TemporaryDirectory() as tmp:
    for case in cases("[65536, 24, 256] strided|[16384, 4096] residual|gate 1031|[1024, 1536] fp32w"):
        path = os.path.join(tmp, "spec.textproto")
        with open(path, "w") as f:
            f.write(case.spec_text())
        got = subprocess.run([CAKE, "validate", path], capture_output=True, text=True)
        check(f"spec text {case.shape} {case.op}", got.returncode == 0, got.stdout + got.stderr)

# A peer that failed to compile or capture is reported, never the best peer.
bad = peers.Impl("torch.compile default")
bad.note = "failed: RuntimeError: no kernel"
bad.worst = {"run": float("inf")}
ok = peers.Impl("eager")
ok.rounds, ok.spans, ok.worst = [[10.0, 12.0]], [(10.0, 2, 0, 7), (12.0, 2, 0, 7)], {"y": 0.3}
cake = peers.Impl("cake")
cake.rounds, cake.spans, cake.worst = [[5.0]], [(5.0, 1, 0, 9)], {"y": 0.2}
row = {"bytes": 1e6, "impls": [peers.impl_json(i, True) for i in (cake, cake, ok, bad)]}
peers.summarize(row, 4000.0)
check("failed peer", not row["impls"][3]["within_budget"] and row["best_peer"] == "eager"
      and abs(row["speedup"] - 11.0 / 5.0) < 1e-12, row)
try:
    json.dumps(row, allow_nan=False)
except ValueError as e:
    check("report is strict JSON", False, e)

check.finish()
