#!/usr/bin/env python3
"""The peer harness of BENCH.md: Cake against torch.compile and eager PyTorch.

One process, on the GPU machine where PyTorch is installed. For each case
(shape and op, taken from `cake bench --cases-out` so that both tools run the
same suite):

  * Cake through its C API (libcake.so, ctypes) on PyTorch tensors:
    cake_launch on PyTorch's current stream, captured with torch.cuda.graph,
    and an independent A/A copy (own buffers, own graph);
  * the explicit FP32-statistics reference compiled with torch.compile, modes
    `default` and `max-autotune-no-cudagraphs` (forward and backward compiled
    separately, dw in FP32 or cast inside the compiled backward), and the same
    functions in eager PyTorch, each captured with torch.cuda.graph.

Every implementation's outputs are checked once against an FP64 reference
with the budget of DESIGN.md; a peer outside it is shown, marked, and does not
count as the best peer. Then all of them are timed in the same interleaved
rounds (the order rotates each round), L2 flushed before every replay (scrubbed
of lines kept with the evict-last policy, bench/l2_flush.h, then written), each
replay's span from CUPTI activity records (libcake_spans.so; CUDA events where
CUPTI is unavailable, and the output says so), the kernel set of every replay
checked. Same table and JSON (bench.proto field names) as `cake bench`.

  python3 bench/peers.py --bin build/bin --lib build/lib --json peers.json \\
      [--filter TEXT] [--ops fwd,bwd] [--part K/N] [--cake-json cake.json] \\
      [--budget-s S] [--skip-done earlier.json,...]

--cake-json: a `cake bench` report of the same run; rows present in both are
printed side by side with the A/A floor, since Cake's figure should not depend
on the harness.

The whole suite with both compile modes takes longer than one run may (5-25 s
of compiling per function and shape): --budget-s stops before the first case
that would end past S seconds (judged by the longest case so far) and still
prints the table and writes the report, and --skip-done leaves out the cases
of earlier reports, so that runs one after another cover the suite.
"""
import argparse
import ctypes
import datetime
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_io import load_report  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("default", "max-autotune-no-cudagraphs")
DEVICE = "cuda"  # the harness's checks also run on "cpu", for its own tests


# ----------------------------------------------------------------- libraries

class CakeBindings(ctypes.Structure):
    """struct cake_bindings of include/cake/c_api.h."""
    _fields_ = [(name, ctypes.c_void_p) for name in (
        "x", "residual", "h", "w", "y", "rstd", "z", "dy", "dh_in", "dx", "dz", "dw",
        "workspace")] + [("workspace_bytes", ctypes.c_int64)]


class Cake:
    """libcake.so through ctypes."""

    def __init__(self, lib_dir):
        self.lib = ctypes.CDLL(os.path.join(lib_dir, "libcake.so"))
        lib = self.lib
        lib.cake_last_error.restype = ctypes.c_char_p
        lib.cake_plan_create.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
        lib.cake_plan_destroy.argtypes = [ctypes.c_void_p]
        lib.cake_plan_workspace_bytes.argtypes = [ctypes.c_void_p]
        lib.cake_plan_workspace_bytes.restype = ctypes.c_int64
        lib.cake_launch.argtypes = [ctypes.c_void_p, ctypes.POINTER(CakeBindings), ctypes.c_void_p]

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what}: {self.lib.cake_last_error().decode()} (status {status})")

    def plan(self, spec_text):
        plan = ctypes.c_void_p()
        self.check(self.lib.cake_plan_create(spec_text.encode(), ctypes.byref(plan)),
                   "cake_plan_create")
        return plan

    def launch(self, plan, bindings, stream):
        self.check(self.lib.cake_launch(plan, ctypes.byref(bindings), stream), "cake_launch")


class Timer:
    """CUPTI spans through libcake_spans.so, else CUDA events."""

    def __init__(self, lib_dir, force_events):
        self.why = "CUDA events asked for (--timer events)"
        self.on = False  # whether CUPTI spans are on
        spans = ctypes.CDLL(os.path.join(lib_dir, "libcake_spans.so"))
        spans.cake_spans_end.argtypes = [
            ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_uint64),
            ctypes.c_char_p, ctypes.c_size_t]
        spans.cake_spans_scrub_l2.argtypes = [
            ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p,
            ctypes.c_char_p, ctypes.c_size_t]
        self.spans = spans
        if not force_events:
            why = ctypes.create_string_buffer(512)
            if spans.cake_spans_open(why, 512):
                self.on = True
            else:
                self.why = why.value.decode()
        self.start = torch.cuda.Event(enable_timing=True)
        self.stop = torch.cuda.Event(enable_timing=True)
        props = torch.cuda.get_device_properties(0)
        l2 = getattr(props, "L2_cache_size", 60 << 20)
        # Whole 128-byte lines, as cake_spans_scrub_l2 needs.
        self.flush = torch.empty((max(2 * l2, 64 << 20) + 127) // 128 * 128, dtype=torch.uint8,
                                 device=DEVICE)
        self.flushes = 0

    @property
    def cupti(self):
        return self.on

    def span(self, graph=None, work=None):
        """(us, kernels, memops, set hash) of one replay of `graph` (or one
        call of `work`) with L2 cold."""
        work = work or graph.replay
        self.flushes += 1
        value = self.flushes % 251
        # A plain write leaves the lines a kernel kept with the evict-last
        # policy in L2 (bench/l2_flush.h): scrub them out first, as `cake
        # bench` does.
        why = ctypes.create_string_buffer(512)
        if not self.spans.cake_spans_scrub_l2(self.flush.data_ptr(), self.flush.numel(),
                                              value * 0x01010101,
                                              torch.cuda.current_stream().cuda_stream, why, 512):
            raise RuntimeError(why.value.decode())
        self.flush.fill_(value)
        torch.cuda.synchronize()
        if not self.on:
            self.start.record()
            work()
            self.stop.record()
            self.stop.synchronize()
            return self.start.elapsed_time(self.stop) * 1000.0, -1, -1, 0
        self.spans.cake_spans_begin()
        work()
        torch.cuda.synchronize()
        us, kernels, memops, h = (ctypes.c_double(), ctypes.c_int(), ctypes.c_int(),
                                  ctypes.c_uint64())
        why = ctypes.create_string_buffer(512)
        if not self.spans.cake_spans_end(ctypes.byref(us), ctypes.byref(kernels),
                                         ctypes.byref(memops), ctypes.byref(h), why, 512):
            raise RuntimeError("CUPTI span: " + why.value.decode())
        return us.value, kernels.value, memops.value, h.value


# ---------------------------------------------------------------------- cases

class Case:
    """One row: the shape and op, and the layout of its tensors."""

    def __init__(self, row):
        self.row = row
        self.shape, self.op, spec = row["shape"], row["op"], row["spec"]
        self.spec = spec
        lay = spec["layout"]
        self.tokens = int(lay.get("tokens", 0))
        self.heads = max(int(lay.get("heads", 0)), 1)
        self.dim = int(lay["dim"])
        self.head_stride = int(lay.get("head_stride", 0)) or self.dim
        self.token_stride = int(lay.get("token_stride", 0)) or self.heads * self.head_stride
        self.gate = spec.get("op") == "RMSNORM_SILU_GATE"
        self.residual = bool(spec.get("residual", False))
        self.residual_grad_in = bool(spec.get("residual_grad_in", False))
        self.w_dtype = torch.float32 if spec.get("weight_dtype") == "FP32" else torch.bfloat16
        self.dw_dtype = torch.bfloat16 if spec.get("dw_dtype") == "BF16" else torch.float32
        self.phases = spec.get("phases", [])
        self.eps = float(spec.get("eps", 1e-6))
        self.forward = "FORWARD" in self.phases or "RECOMPUTE" in self.phases
        self.backward = "BACKWARD" in self.phases
        self.elems = (self.tokens - 1) * self.token_stride + (self.heads - 1) * self.head_stride \
            + self.dim

    def spec_text(self):
        """The spec as text proto, for cake_plan_create."""
        s, lay = self.spec, self.spec["layout"]
        lines = [f'name: "{s.get("name", "")}"', f'op: {s["op"]}',
                 "layout { " + " ".join(f"{k}: {v}" for k, v in lay.items()) + " }"]
        for key in ("weight_dtype", "dw_dtype"):
            if key in s:
                lines.append(f"{key}: {s[key]}")
        for key in ("residual", "residual_grad_in", "deterministic", "accumulate_dw"):
            if s.get(key):
                lines.append(f"{key}: true")
        if "eps" in s:
            lines.append(f"eps: {s['eps']!r}")
        lines += [f"phases: {p}" for p in self.phases]
        return "\n".join(lines) + "\n"

    def act(self, storage=None):
        """A BF16 activation [T, heads, D] in the spec's layout."""
        if storage is None:
            storage = torch.empty(self.elems, dtype=torch.bfloat16, device=DEVICE)
        return storage.as_strided((self.tokens, self.heads, self.dim),
                                  (self.token_stride, self.head_stride, 1))


def uniform(shape, gen, scale, offset=0.0, dtype=torch.bfloat16):
    t = torch.rand(shape, generator=gen, device=DEVICE, dtype=torch.float32)
    return ((t * 2 - 1) * scale + offset).to(dtype)


def make_inputs(case, seed):
    """Inputs shared by every implementation of a case, in the spec's layout."""
    gen = torch.Generator(device=DEVICE)
    gen.manual_seed(seed)
    inp = {}

    def act(scale):
        storage = uniform((case.elems,), gen, scale)
        return case.act(storage)

    inp["x"] = act(2.0)
    inp["w"] = uniform((case.dim,), gen, 0.5, 1.0, case.w_dtype)
    if case.gate:
        inp["z"] = act(3.0)
    if case.residual:
        inp["residual"] = act(1.0)
    if case.backward:
        inp["dy"] = act(1.0)
        if case.residual_grad_in:
            inp["dh_in"] = act(0.5)
    # What a backward alone reads: the forward's rstd (and h), from FP64.
    xin = inp["x"]
    if case.residual:
        inp["h_in"] = case.act()
        inp["h_in"].copy_(xin + inp["residual"])
        xin = inp["h_in"]
    inp["rstd_in"] = torch.empty((case.tokens, case.heads), dtype=torch.float32, device=DEVICE)
    for rows in row_chunks(case):
        xd = xin[rows].double()
        inp["rstd_in"][rows] = torch.rsqrt(xd.square().mean(-1) + case.eps).float()
    return inp


def row_chunks(case, elems=1 << 24):
    step = max(1, elems // (case.heads * case.dim))
    for t in range(0, case.tokens, step):
        yield slice(t, min(t + step, case.tokens))


# ---------------------------------------------------------------- references

def ref_forward(x, w, eps, z=None, residual=None):
    """The explicit FP32-statistics reference that the peers run."""
    h = None
    if residual is not None:
        h = x + residual
        x = h
    xf = x.float()
    rstd = torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
    y = xf * rstd * w.float()
    if z is not None:
        zf = z.float()
        y = y * (zf * torch.sigmoid(zf))
    out = (y.to(torch.bfloat16), rstd.squeeze(-1))
    return out + (h,) if residual is not None else out


def ref_backward(x, w, rstd, dy, z=None, dh_in=None, dw_dtype=torch.float32):
    xf, dyf, wf = x.float(), dy.float(), w.float()
    r = rstd.unsqueeze(-1)
    xhat = xf * r
    dz = None
    if z is not None:
        zf = z.float()
        s = torch.sigmoid(zf)
        dz = (dyf * xhat * wf * s * (1 + zf * (1 - s))).to(torch.bfloat16)
        dyf = dyf * (zf * s)
    g = dyf * wf
    dx = r * (g - xhat * (g * xhat).mean(-1, keepdim=True))
    if dh_in is not None:
        dx = dx + dh_in.float()
    dw = (dyf * xhat).sum((0, 1)).to(dw_dtype)
    out = (dx.to(torch.bfloat16), dw)
    return out + (dz,) if z is not None else out


def violations(case, inp, out):
    """Worst |out - ref| as a multiple of its budget (DESIGN.md), per output,
    against FP64, row chunk by row chunk."""
    worst = {}

    def note(name, got, ref, atol, rtol):
        err = (got.double() - ref).abs() / (atol + rtol * ref.abs())
        err = torch.where(torch.isfinite(got.double()), err, torch.full_like(err, math.inf))
        worst[name] = max(worst.get(name, 0.0), float(err.max()) if err.numel() else 0.0)

    dw_ref = torch.zeros(case.dim, dtype=torch.float64, device=DEVICE)
    wd = inp["w"].double()
    for rows in row_chunks(case):
        if case.residual:
            hd = (inp["x"][rows].double() + inp["residual"][rows].double())
            xd = inp["h_in"][rows].double()  # normalized as rounded
        else:
            xd = inp["x"][rows].double()
        rstd = torch.rsqrt(xd.square().mean(-1, keepdim=True) + case.eps)
        xhat = xd * rstd
        silu = ds = None
        if case.gate:
            zd = inp["z"][rows].double()
            sig = torch.sigmoid(zd)
            silu, ds = zd * sig, sig * (1 + zd * (1 - sig))
        if case.forward:
            y = xhat * wd * (silu if silu is not None else 1)
            note("y", out["y"][rows], y, 1e-2, 1e-2)
            note("rstd", out["rstd"][rows], rstd.squeeze(-1), 0.0, 1e-5)
            if case.residual:
                note("h", out["h"][rows], hd, 1e-2, 1e-2)
        if case.backward:
            dyd = inp["dy"][rows].double()
            if case.gate:
                note("dz", out["dz"][rows], dyd * xhat * wd * ds, 1e-2, 1e-2)
                dyd = dyd * silu
            g = dyd * wd
            dx = rstd * (g - xhat * (g * xhat).mean(-1, keepdim=True))
            if case.residual_grad_in:
                dx = dx + inp["dh_in"][rows].double()
            note("dx", out["dx"][rows], dx, 1e-2, 1e-2)
            dw_ref += (dyd * xhat).sum((0, 1))
    if case.backward:
        extra = 2.0 ** -8 if case.dw_dtype == torch.bfloat16 else 0.0
        note("dw", out["dw"], dw_ref, 1e-4, 1e-4 + extra)
    return worst


# ----------------------------------------------------------- implementations

class Impl:
    """One implementation of a case: a captured CUDA graph and its outputs."""

    def __init__(self, name):
        self.name, self.graph, self.outputs = name, None, {}
        self.spans, self.rounds, self.worst, self.note = [], [], {}, ""

    def capture(self, fn, warmup=3):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.outputs = fn()
        torch.cuda.synchronize()


def cake_impl(name, cake, plan, case, inp):
    """Cake's plan launched eagerly on PyTorch's stream inside the capture."""
    impl = Impl(name)
    out = {"y": case.act(), "dx": case.act(), "dw": torch.empty(case.dim, dtype=case.dw_dtype,
                                                                  device=DEVICE)}
    out["rstd"] = inp["rstd_in"].clone()  # a backward alone reads it
    if case.residual:
        out["h"] = inp["h_in"].clone() if not case.forward else case.act()
    if case.gate:
        out["dz"] = case.act()
    ws_bytes = cake.lib.cake_plan_workspace_bytes(plan)
    workspace = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device=DEVICE)
    ptr = lambda t: t.data_ptr() if t is not None else None  # noqa: E731
    b = CakeBindings(x=ptr(inp["x"]), residual=ptr(inp.get("residual")), h=ptr(out.get("h")),
                     w=ptr(inp["w"]), y=ptr(out["y"]), rstd=ptr(out["rstd"]), z=ptr(inp.get("z")),
                     dy=ptr(inp.get("dy")), dh_in=ptr(inp.get("dh_in")), dx=ptr(out["dx"]),
                     dz=ptr(out.get("dz")), dw=ptr(out["dw"]), workspace=ptr(workspace),
                     workspace_bytes=ws_bytes)
    impl.keep = (b, workspace)

    def run():
        cake.launch(plan, b, torch.cuda.current_stream().cuda_stream)
        return out

    impl.capture(run)
    return impl


def torch_impl(name, case, inp, fwd, bwd):
    """The reference functions (compiled or eager) for the case's phases."""
    impl = Impl(name)
    x, w, z = inp["x"], inp["w"], inp.get("z")
    res, dy, dh_in = inp.get("residual"), inp.get("dy"), inp.get("dh_in")

    def forward():
        got = fwd(x, w, case.eps, z, res)
        return dict(zip(("y", "rstd", "h"), got))

    def backward(xh, rstd):
        got = bwd(xh, w, rstd, dy, z, dh_in, case.dw_dtype)
        return dict(zip(("dx", "dw", "dz"), got))

    def run():
        out = {}
        for phase in case.phases:
            if phase in ("FORWARD", "RECOMPUTE"):
                out.update(forward())
            else:
                rstd = out.get("rstd", inp["rstd_in"])
                xh = out.get("h", inp["h_in"]) if case.residual else x
                out.update(backward(xh, rstd))
        return out

    started = time.time()
    impl.capture(run)
    impl.note = f"warm-up and capture {time.time() - started:.1f} s"
    return impl


def configure_dynamo():
    cfg = torch._dynamo.config
    for key in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                "accumulated_recompile_limit"):
        if hasattr(cfg, key):
            setattr(cfg, key, 100000)


# ------------------------------------------------------------------- running

def median(v):
    s = sorted(v)
    n = len(s)
    return 0.0 if n == 0 else (s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2]))


def impl_json(impl, cupti):
    samples = [us for r in impl.rounds for us in r]
    first = impl.spans[0] if impl.spans else (0, -1, -1, 0)
    stable = all(s[1:] == first[1:] for s in impl.spans)
    worst = max(impl.worst.values()) if impl.worst else 0.0
    note = impl.note
    if not stable:
        note = (note + "; " if note else "") + "the kernel set changed between replays"
    if worst > 1 and impl.graph is not None:
        worst_name = max(impl.worst, key=impl.worst.get)
        note = (note + "; " if note else "") + f"{worst_name} {worst:.2f}x its budget"
    worst = worst if math.isfinite(worst) else 1e300  # JSON has no infinity
    return {"name": impl.name, "samples_us": samples, "median_us": median(samples),
            "round_median_us": [median(r) for r in impl.rounds],
            "kernels_per_replay": first[1] if cupti else -1,
            "memops_per_replay": first[2] if cupti else -1,
            "kernel_set_stable": stable, "worst_budget": worst, "within_budget": worst <= 1,
            "note": note}


def summarize(row, copy_gbps):
    impls = row["impls"]
    cake, aa = impls[0]["median_us"], impls[1]["median_us"]
    row["cake_us"] = cake
    row["aa_floor"] = abs(1 - cake / aa) if aa > 0 else 0.0
    row["copy_fraction"] = row["bytes"] / (cake * 1e-6) / (copy_gbps * 1e9) if cake > 0 else 0.0
    best = None
    for p in impls[2:]:
        if p["within_budget"] and p["kernel_set_stable"] and p["median_us"] > 0:
            if best is None or p["median_us"] < best["median_us"]:
                best = p
    row["best_peer"] = best["name"] if best else ""
    row["best_peer_us"] = best["median_us"] if best else 0.0
    row["speedup"] = best["median_us"] / cake if best and cake > 0 else 0.0


def format_table(report):
    m = report["machine"]
    out = [f"{report['tool']}, {m['gpu']}, driver {m['driver']}, CUDA {m['cuda_runtime']}; "
           f"{report['timer']} spans, L2 flushed ({report['l2_flush_bytes'] >> 20} MB written by "
           f"{report.get('l2_flush', 'memset')}) before each replay;",
           f"median of {report['rounds']} rounds x {report['replays_per_round']} replays after "
           f"{report['warmup']} warm-up; copy {report['copy_gbps']:.0f} GB/s (read + write)"]
    out += [f"deviation: {d}" for d in report["deviations"]]
    out.append(f"{'shape':<30} {'op':<9} {'cake us':>10} {'peer us':>10}  {'best peer':<40} "
               f"{'speedup':>8} {'A/A':>7} {'of copy':>7}  notes")
    for row in report["rows"]:
        notes = "; ".join(f"{p['name']}: {p['note']}" for p in row["impls"]
                          if not p["within_budget"] or not p["kernel_set_stable"])
        peer = bool(row["best_peer"])
        out.append(f"{row['shape']:<30} {row['op']:<9} {row['cake_us']:>10.1f} "
                   f"{(format(row['best_peer_us'], '.1f') if peer else '-'):>10}  "
                   f"{(row['best_peer'] if peer else '-'):<40} "
                   f"{(format(row['speedup'], '.2f') + 'x' if peer else '-'):>8} "
                   f"{row['aa_floor']:>7.3f} {row['copy_fraction']:>7.3f}  {notes}")
    return "\n".join(out) + "\n"


def machine():
    props = torch.cuda.get_device_properties(0)
    m = {"gpu": props.name, "sm_count": props.multi_processor_count,
         "l2_bytes": getattr(props, "L2_cache_size", 0),
         "compute_capability": f"{props.major}.{props.minor}", "driver": "",
         "cuda_runtime": torch.version.cuda or "", "sm_clock_mhz": 0, "sm_clock_max_mhz": 0,
         "mem_clock_mhz": 0}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm,"
                            "clocks.mem", "--format=csv,noheader,nounits", "-i", "0"],
                           capture_output=True, text=True, timeout=30).stdout.strip()
        driver, sm, sm_max, mem = [f.strip() for f in q.split(",")]
        m.update(driver=driver, sm_clock_mhz=int(sm), sm_clock_max_mhz=int(sm_max),
                 mem_clock_mhz=int(mem))
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    return m


def copy_bandwidth(timer, nbytes=4 << 30, reps=20):
    """A device-to-device cudaMemcpyAsync as in `cake bench`; not captured:
    a graph's memcpy node ran on a copy engine at about 0.6 of this on the
    H200."""
    src = torch.ones(nbytes, dtype=torch.uint8, device=DEVICE)
    dst = torch.empty_like(src)
    spans = [timer.span(work=lambda: dst.copy_(src))[0] for _ in range(reps + 3)][3:]
    del src, dst
    torch.cuda.empty_cache()
    return 2.0 * nbytes / (median(spans) * 1e-6) / 1e9


def list_cases(args):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cases.json")
        cmd = [os.path.join(args.bin, "cake"), "bench", "--cases-out", path, "--mode", args.mode]
        for flag in ("ops", "filter", "part"):
            if getattr(args, flag):
                cmd += [f"--{flag}", getattr(args, flag)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            return [Case(r) for r in json.load(f)["rows"]]


def done_cases(paths):
    """The (shape, op) pairs of the rows of the reports at `paths`."""
    done = set()
    for path in paths:
        done.update((r["shape"], r["op"]) for r in load_report(path)["rows"])
    return done


def fits_budget(elapsed, durations, budget):
    """Whether one more case fits in `budget` seconds after `elapsed`: the first
    case always runs; later ones are judged by the longest case so far."""
    return budget is None or not durations or elapsed + max(durations) <= budget


class Progress:
    def __init__(self, total):
        self.total, self.start, self.tty = total, time.time(), sys.stderr.isatty()

    def update(self, done, what):
        elapsed = time.time() - self.start
        left = elapsed / done * (self.total - done) if done else 0
        if self.tty:
            filled = done * 30 // max(self.total, 1)
            sys.stderr.write(f"\r[{'#' * filled}{' ' * (30 - filled)}] {done}/{self.total} "
                             f"{what:<40} {left:4.0f} s left ")
            if done == self.total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(f"[{done}/{self.total}] {what} ({elapsed:.0f} s, about "
                             f"{left:.0f} s left)\n")
        sys.stderr.flush()


def run_case(case, args, cake, timer, compiled):
    torch.manual_seed(args.seed)
    inp = make_inputs(case, args.seed)
    plan = cake.plan(case.spec_text())
    impls = []
    try:
        impls.append(cake_impl("cake", cake, plan, case, inp))
        impls.append(cake_impl("cake A/A", cake, plan, case, inp))
        peers = [("eager", ref_forward, ref_backward)]
        peers += [(f"torch.compile {mode}",) + compiled[mode] for mode in args.modes]
        failed = []
        for name, fwd, bwd in peers:
            # A peer that cannot compile or capture this case is shown, marked,
            # and the run goes on.
            try:
                impls.append(torch_impl(name, case, inp, fwd, bwd))
            except Exception as e:  # noqa: BLE001 (any failure of the peer's stack)
                torch.cuda.synchronize()
                bad = Impl(name)
                bad.note = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
                bad.worst = {"run": math.inf}
                failed.append(bad)
        for impl in impls:
            impl.graph.replay()
            torch.cuda.synchronize()
            impl.worst = violations(case, inp, impl.outputs)
        for _ in range(args.warmup):
            for impl in impls:
                timer.span(impl.graph)
        for r in range(args.rounds):
            order = impls[r % len(impls):] + impls[:r % len(impls)]
            for impl in order:
                spans = [timer.span(impl.graph) for _ in range(args.replays)]
                impl.spans += spans
                impl.rounds.append([s[0] for s in spans])
        row = {k: case.row[k] for k in ("shape", "op", "spec", "bytes")}
        row["impls"] = [impl_json(i, timer.cupti) for i in impls + failed]
        return row
    finally:
        cake.lib.cake_plan_destroy(plan)
        del impls, inp
        torch.cuda.empty_cache()


def compare_with_cake_bench(report, path):
    """Cake's time here against `cake bench`'s report at `path`: bench/compare.py's pairing
    and A/A verdict, the harness as the candidate."""
    spec = importlib.util.spec_from_file_location(
        "compare", os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare.py"))
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    harness = {(r["shape"], r["op"]): r for r in report["rows"]}
    pairs, _ = compare.compare(compare.load_rows(path), harness)
    lines = [f"Cake's time from the harness and from cake bench ({os.path.basename(path)}):",
             f"{'shape':<30} {'op':<9} {'harness us':>11} {'cake bench':>11} {'diff':>7} "
             f"{'A/A':>7}  verdict"]
    for p in pairs:
        lines.append(f"{p['shape']:<30} {p['op']:<9} {p['cand_us']:>11.1f} "
                     f"{p['base_us']:>11.1f} {abs(1 - p['ratio']):>7.3f} {p['floor']:>7.3f}  "
                     f"{'agree' if p['verdict'] == 'same' else 'differ by more than the A/A floor'}")
    return "\n".join(lines) + "\n"


def main():
    start = time.time()  # --budget-s counts from here
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "bin"),
                    help="folder of the cake binary (default build/bin)")
    ap.add_argument("--lib", default=os.path.join(REPO, "build", "lib"),
                    help="folder of libcake.so and libcake_spans.so (default build/lib)")
    ap.add_argument("--ops", help="fwd,bwd,ckpt,ckpt.cast (default all)")
    ap.add_argument("--filter", help="keep cases whose 'shape op' contains TEXT (A|B: either)")
    ap.add_argument("--part", help="K/N: the K-th of N slices of the cases")
    ap.add_argument("--mode", default="det", choices=("det", "nondet"),
                    help="Cake's backward mode (default det)")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="torch.compile modes (default: both of BENCH.md)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--replays", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timer", default="cupti", choices=("cupti", "events"))
    ap.add_argument("--json", help="write the report here")
    ap.add_argument("--cake-json", help="a cake bench report to compare Cake's times with")
    ap.add_argument("--budget-s", type=float,
                    help="stop before a case that would end past this many seconds from the "
                         "start")
    ap.add_argument("--skip-done", help="reports (comma-separated) whose cases are left out")
    args = ap.parse_args()
    if args.budget_s is not None and args.budget_s <= 0:
        ap.error(f"--budget-s: {args.budget_s} is not a positive number of seconds")
    done = set()
    if args.skip_done:
        try:
            done = done_cases([p for p in args.skip_done.split(",") if p])
        except (OSError, ValueError, KeyError, TypeError) as e:
            ap.error(f"--skip-done {args.skip_done}: not a report ({type(e).__name__}: {e})")
    args.modes = [m for m in args.modes.split(",") if m]
    for m in args.modes:
        if m not in MODES:
            ap.error(f"--modes: {m!r} is not one of {', '.join(MODES)}")
    if not torch.cuda.is_available():
        print("peers.py: no CUDA device", file=sys.stderr)
        return 3

    cases = list_cases(args)
    kept = [c for c in cases if (c.shape, c.op) not in done]
    skipped, cases = len(cases) - len(kept), kept
    cake = Cake(args.lib)
    timer = Timer(args.lib, args.timer == "events")
    configure_dynamo()
    compiled = {m: (torch.compile(ref_forward, mode=m, dynamic=False),
                    torch.compile(ref_backward, mode=m, dynamic=False)) for m in args.modes}
    report = {"tool": "bench/peers.py",
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "machine": machine(), "timer": "cupti" if timer.cupti else "cuda-events",
              "deviations": [], "copy_bytes": 4 << 30, "l2_flush_bytes": timer.flush.numel(),
              "l2_flush": "evict-last scrub + kernel",
              "warmup": args.warmup, "rounds": args.rounds, "replays_per_round": args.replays,
              "deterministic": args.mode == "det", "rows": []}
    if not timer.cupti:
        report["deviations"].append("spans from CUDA events around each replay (they include "
                                    "the graph launch latency), not CUPTI: " + timer.why)
    if args.part:
        report["deviations"].append(f"part {args.part} of the cases")
    if tuple(args.modes) != MODES:
        report["deviations"].append("torch.compile modes: " + ", ".join(args.modes))
    if skipped:
        report["deviations"].append(f"{skipped} case(s) left out: in {args.skip_done}")
    report["machine"]["driver"] = report["machine"]["driver"] or "unknown"
    report["copy_gbps"] = copy_bandwidth(timer)
    progress = Progress(len(cases))
    print(f"peers.py: {len(cases)} case(s), torch {torch.__version__}, modes "
          f"{', '.join(args.modes)}", file=sys.stderr)
    durations = []
    for i, case in enumerate(cases):
        if not fits_budget(time.time() - start, durations, args.budget_s):
            left = cases[i:]
            report["deviations"].append(
                f"stopped by --budget-s {args.budget_s:g} after {i} of {len(cases)} case(s); "
                f"left: " + "; ".join(f"{c.shape} {c.op}" for c in left))
            print(f"peers.py: --budget-s {args.budget_s:g}: {len(left)} case(s) left for a "
                  f"later run (--skip-done {args.json or 'REPORT'})", file=sys.stderr)
            break
        case_start = time.time()
        row = run_case(case, args, cake, timer, compiled)
        durations.append(time.time() - case_start)
        summarize(row, report["copy_gbps"])
        report["rows"].append(row)
        progress.update(i + 1, f"{case.shape} {case.op}")
        if args.json:  # a partial report survives a run cut short
            write_json(report, args.json)
    print(format_table(report), end="")
    if args.cake_json:
        print(compare_with_cake_bench(report, args.cake_json), end="")
    if args.json:
        write_json(report, args.json)
        print(f"wrote {args.json}")
    return 0


def write_json(report, path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
