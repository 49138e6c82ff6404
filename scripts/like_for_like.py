#!/usr/bin/env python3
"""The same kernels timed by several timers on one machine, back to back: micro/add_fp32_vec16 and
micro/add_fp32_scalar at 1M, 4M and 16M elements, micro/copy of 16M floats (64 MiB), the transformer's GEMV
at one token (768x3072 and 3072x768), its split-KV decode at batch 8 and 4096 keys, and cuDNN's forward of
ResNet-50's conv2 3x3 convolution at batch 32.

  roofbench graph        roofbench --graph on: events around a replayed graph of runs (time_median)
  roofbench CUPTI        the same run's --kernel-time: the kernels' own time per run (kernel_time)
  event vs CUPTI         roofbench graph over roofbench CUPTI, minus 1, in %
  roofbench cold         roofbench --graph on --cold (by rotation where the case rotates, else by flush)
  cold CUPTI             the cold run's --kernel-time
  cold mode              how the cold run was timed: rotate or flush (the fact cold_mode)
  do_bench               triton.testing.do_bench (defaults: the mean, an L2 flush and an event pair per call)
  do_bench_cudagraph     triton.testing.do_bench_cudagraph (defaults: the mean of 10 replays of a 20 ms graph)
  cudagraph 1 ms         do_bench_cudagraph with rep=1: a graph of about 1 ms of calls, the size roofbench uses
  torch.profiler CUPTI   the GPU time per call torch.profiler (CUPTI) records in a graph replay of many calls
  graph events           events around a replay of that graph, untraced, over its calls
  graph events traced    events around the replay torch.profiler traced, over its calls: beside the two columns
                         before it, whether tracing the kernels slows them

The Python timers call the add, copy, GEMV and decode kernels through the shims libroofbench_add_shim.so
(kernels/cuda_elementwise/add_shim.cu) and libroofbench_transformer_shim.so (plugins/transformer/
timing_shim.cpp), built from the same sources as the plugins, with torch tensors' data pointers and the
current stream; each shim call's output is checked against torch first. The convolution's Python timers time
torch's own cuDNN call (torch.backends.cudnn.benchmark on), whose algorithm may differ from the one roofbench's
case chose (its fact `algorithm`). docs/method.md says what each timer does per launch. Prints the table as
Markdown and writes it (and the raw figures as JSON) where --out says. Needs a GPU, torch and triton."""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    kernel: str      # the table's first column
    size: str        # its second
    benchmark: str   # the roofbench benchmark's name, ending in "/"
    python: str      # which Python launcher times it (python_launcher)


def add_row(variant, n):
    return Row(f"add_fp32_{variant}", f"{n >> 20}M", f"micro/add_fp32_{variant}/n:{n}/", f"add_{variant}:{n}")


SIZES = [1 << 20, 1 << 22, 1 << 24]
COPY_FLOATS = 1 << 24
ROWS = ([add_row(v, n) for v in ("vec16", "scalar") for n in SIZES] +
        [Row("copy", "16M", f"micro/copy/bytes:{4 * COPY_FLOATS}/", f"copy:{COPY_FLOATS}"),
         Row("gemv", "768x3072", "transformer/linear_bf16/layer:768x3072/tokens:1/impl:gemv/", "gemv:768x3072"),
         Row("gemv", "3072x768", "transformer/linear_bf16/layer:3072x768/tokens:1/impl:gemv/", "gemv:3072x768"),
         Row("split_kv decode", "b8 kv4096", "transformer/attention_decode_bf16/impl:split_kv/batch:8/kv:4096/",
             "decode:8x4096"),
         Row("conv2_3x3_64 fwd", "n32", "conv/conv_bf16/layer:conv2_3x3_64/pass:fwd/layout:nhwc/impl:cudnn/n:32/",
             "conv:32")])
COLUMNS = ["roofbench graph", "roofbench CUPTI", "event vs CUPTI", "roofbench cold", "cold CUPTI", "cold mode",
           "do_bench", "do_bench_cudagraph", "cudagraph 1 ms", "torch.profiler CUPTI", "graph events",
           "graph events traced"]


def run_roofbench(roofbench, flags, timeout):
    """{benchmark name: its results entry} of one roofbench run over every row's benchmark."""
    pattern = "^(" + "|".join(row.benchmark for row in ROWS) + ")"
    with tempfile.TemporaryDirectory() as folder:
        cmd = [roofbench, f"--benchmark_filter={pattern}", "--graph", "on", "--results-dir", folder] + flags
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        try:
            with open(os.path.join(folder, "latest.json")) as f:
                entries = json.load(f)["benchmarks"]
        except (OSError, ValueError, KeyError):
            return {}
    return {e["name"].rstrip("/") + "/": e for e in entries if e.get("run_type") != "aggregate"}


def fact(entry, name):
    return (entry or {}).get("roofbench", {}).get("facts", {}).get(name)


def kernel_version(entry, prefix, default):
    """The version in the case's `kernel` fact ("split_kv_v3" -> "v3", "gemv_v1: ..." -> "v1")."""
    kernel = fact(entry, "kernel") or ""
    return kernel.split(":")[0][len(prefix):] if kernel.startswith(prefix) else default


class Shims:
    """The two shims, their C signatures declared."""

    def __init__(self, add_path, transformer_path):
        self.made = []  # (destroy, handle) of what the shims made, released by release()
        self.add = ctypes.CDLL(add_path)
        for name in ("roofbench_add_fp32_vec16", "roofbench_add_fp32_scalar"):
            getattr(self.add, name).argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_size_t, ctypes.c_void_p]
        self.add.roofbench_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        self.transformer = ctypes.CDLL(transformer_path)
        t, i64, p = self.transformer, ctypes.c_int64, ctypes.c_void_p
        t.roofbench_gemv_bf16.argtypes = [ctypes.c_char_p, p, p, p, i64, i64, i64, p, p]
        t.roofbench_split_kv_create.argtypes = [ctypes.c_char_p, i64, i64, i64, ctypes.c_int]
        t.roofbench_split_kv_create.restype = p
        t.roofbench_split_kv_destroy.argtypes = [p]
        t.roofbench_split_kv_workspace_bytes.argtypes = [p]
        t.roofbench_split_kv_workspace_bytes.restype = ctypes.c_size_t
        t.roofbench_split_kv_zero.argtypes = [p, p, p]
        t.roofbench_split_kv_decode_bf16.argtypes = [p] * 7

    def release(self):
        for destroy, handle in self.made:
            destroy(handle)
        self.made.clear()


def checked(ok, what):
    """Raises unless the shim call returned 0."""
    if ok != 0:
        raise RuntimeError(f"{what} failed (its reason is on stderr)")


def stream(torch):
    return torch.cuda.current_stream().cuda_stream


def elementwise_launcher(torch, shims, kind, n):
    a, b = (torch.rand(n, device="cuda") * 2 - 1 for _ in range(2))
    c = torch.empty_like(a)
    if kind == "copy":
        return (lambda: checked(shims.add.roofbench_copy(c.data_ptr(), a.data_ptr(), 4 * n, stream(torch)), "copy"),
                lambda: torch.equal(c, a))
    launch = getattr(shims.add, f"roofbench_add_fp32_{kind[4:]}")
    return (lambda: checked(launch(a.data_ptr(), b.data_ptr(), c.data_ptr(), n, stream(torch)), kind),
            lambda: torch.allclose(c, a + b))


def gemv_launcher(torch, shims, layer, version):
    features_in, features_out = (int(v) for v in layer.split("x"))
    w = (torch.rand(features_out, features_in, device="cuda") * 2 - 1).to(torch.bfloat16)
    x = (torch.rand(1, features_in, device="cuda") * 2 - 1).to(torch.bfloat16)
    y = torch.empty(1, features_out, device="cuda", dtype=torch.bfloat16)
    chain = torch.zeros(32, device="cuda", dtype=torch.int64)  # a chained version's counts (256 bytes, zeroed once)
    torch.cuda.synchronize()  # the zeros and the inputs are in place before a launch that does not wait for them
    name = version.encode()
    return (lambda: checked(shims.transformer.roofbench_gemv_bf16(
                name, w.data_ptr(), x.data_ptr(), y.data_ptr(), features_in, features_out, 1, chain.data_ptr(),
                stream(torch)), "gemv"),
            lambda: torch.allclose(y.float(), x.float() @ w.float().T, rtol=2e-2, atol=2e-2))


def decode_launcher(torch, shims, batch, kv_len, version):
    heads, sms = 12, torch.cuda.get_device_properties(0).multi_processor_count
    q = (torch.rand(batch, heads, 1, 64, device="cuda") * 2 - 1).to(torch.bfloat16)
    k, v = ((torch.rand(batch, heads, kv_len, 64, device="cuda") * 2 - 1).to(torch.bfloat16) for _ in range(2))
    o = torch.empty_like(q)
    t = shims.transformer
    decode = t.roofbench_split_kv_create(version.encode(), batch, heads, kv_len, sms)
    if not decode:
        raise RuntimeError("split_kv_create failed (its reason is on stderr)")
    shims.made.append((t.roofbench_split_kv_destroy, decode))
    workspace = torch.empty(max(1, t.roofbench_split_kv_workspace_bytes(decode)), dtype=torch.uint8, device="cuda")
    checked(t.roofbench_split_kv_zero(decode, workspace.data_ptr(), stream(torch)), "split_kv_zero")
    return (lambda: checked(t.roofbench_split_kv_decode_bf16(
                decode, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), workspace.data_ptr(), stream(torch)),
                "split_kv_decode"),
            lambda: torch.allclose(o.float(), torch.nn.functional.scaled_dot_product_attention(q, k, v).float(),
                                   rtol=2e-2, atol=2e-2))


def conv_launcher(torch, batch):
    """ResNet-50's conv2 3x3 (64 to 64 channels, 56x56, padding 1), bf16 NHWC, through torch's cuDNN call."""
    torch.backends.cudnn.benchmark = True
    x = (torch.rand(batch, 64, 56, 56, device="cuda") * 2 - 1).to(torch.bfloat16, memory_format=torch.channels_last)
    w = (torch.rand(64, 64, 3, 3, device="cuda") * 2 - 1).to(torch.bfloat16, memory_format=torch.channels_last)
    return (lambda: torch.nn.functional.conv2d(x, w, padding=1)), (lambda: True)


def python_launcher(torch, shims, row, hot_entry):
    """(fn, check): one call of the row's kernel on the current stream, and whether its last output is right."""
    kind, _, size = row.python.partition(":")
    if kind in ("copy", "add_vec16", "add_scalar"):
        return elementwise_launcher(torch, shims, kind, int(size))
    if kind == "gemv":
        return gemv_launcher(torch, shims, size, kernel_version(hot_entry, "gemv_", "v1"))
    if kind == "decode":
        batch, kv_len = (int(v) for v in size.split("x"))
        return decode_launcher(torch, shims, batch, kv_len, kernel_version(hot_entry, "split_kv_", "v3"))
    return conv_launcher(torch, int(size))


def python_versions():
    """The torch and triton the Python columns ran on: what their timers do differs between versions."""
    import torch
    import triton
    return f"torch {torch.__version__}, triton {triton.__version__}"


def python_timers(shims, rows, hot):
    """{row: {column: seconds}} from triton's timers and torch.profiler over each row's launches."""
    import torch
    import triton.testing

    figures = {}
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for row in rows:
            fn, correct = python_launcher(torch, shims, row, hot.get(row.benchmark))
            fn()
            torch.cuda.synchronize()
            if not correct():
                raise RuntimeError(f"the shim's {row.kernel} {row.size} is wrong")
            figures[row] = {
                "do_bench": 1e-3 * triton.testing.do_bench(fn),
                "do_bench_cudagraph": 1e-3 * triton.testing.do_bench_cudagraph(fn),
                "cudagraph 1 ms": 1e-3 * triton.testing.do_bench_cudagraph(fn, rep=1),
                **profiled_seconds_per_call(torch, fn),
            }
    return figures


def profiled_seconds_per_call(torch, fn, launches=200):
    """Over the calls of one graph of `launches` calls: the GPU time (kernels, memcpys, memsets)
    torch.profiler's CUPTI records in one replay (the kernels alone, no launch and no gap between them), and
    the time between events around a replay, untraced and traced (the traced replay's events are recorded on
    the stream, not GPU activities, so they add no record)."""
    fn()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches):
            fn()
    torch.cuda.synchronize()
    graph.replay()
    untraced = timed_replay(torch, graph)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        traced = timed_replay(torch, graph)
    total_us = sum(e.time_range.elapsed_us() for e in profile.events()
                   if e.device_type == torch.autograd.DeviceType.CUDA)
    return {"torch.profiler CUPTI": 1e-6 * total_us / launches if total_us else float("nan"),
            "graph events": untraced / launches, "graph events traced": traced / launches}


def timed_replay(torch, graph):
    """Seconds between two events recorded on the current stream around one replay of `graph`."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return 1e-3 * start.elapsed_time(end)


def table(rows, hot, cold, python, versions=""):
    """The Markdown table: one row per kernel and size, one column per timer (microseconds); `versions` names
    the torch and triton of the Python columns."""
    def us(seconds):
        return "-" if seconds is None or seconds != seconds else f"{seconds * 1e6:.3f}"

    lines = ["| kernel | size | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---:|" * len(COLUMNS)]
    for row in rows:
        h, c, p = hot.get(row.benchmark, {}), cold.get(row.benchmark, {}), python.get(row, {})
        event, kernel = h.get("time_median"), h.get("kernel_time")
        ratio = f"{100 * (event / kernel - 1):+.1f}%" if event and kernel else "-"
        cells = [us(event), us(kernel), ratio, us(c.get("time_median")), us(c.get("kernel_time")),
                 fact(c, "cold_mode") or "-", us(p.get("do_bench")), us(p.get("do_bench_cudagraph")),
                 us(p.get("cudagraph 1 ms")), us(p.get("torch.profiler CUPTI")), us(p.get("graph events")),
                 us(p.get("graph events traced"))]
        lines.append(f"| {row.kernel} | {row.size} | " + " | ".join(cells) + " |")
    footer = "Times in microseconds per launch" + (f"; the Python columns on {versions}." if versions else ".")
    return "\n".join(lines) + "\n\n" + footer + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--roofbench", required=True)
    parser.add_argument("--shim", required=True, help="libroofbench_add_shim.so")
    parser.add_argument("--transformer-shim", required=True, help="libroofbench_transformer_shim.so")
    parser.add_argument("--out", default=".", help="folder for like_for_like.md and like_for_like.json")
    parser.add_argument("--max-time", default="0.5", help="roofbench's --max-time")
    args = parser.parse_args()
    common = ["--max-time", args.max_time, "--kernel-time"]
    hot = run_roofbench(args.roofbench, common, 200)
    cold = run_roofbench(args.roofbench, common + ["--cold"], 200)
    shims = Shims(args.shim, args.transformer_shim)
    python = python_timers(shims, ROWS, hot)
    shims.release()
    text = table(ROWS, hot, cold, python, python_versions())
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "like_for_like.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "like_for_like.json"), "w") as f:
        json.dump({"roofbench_graph": hot, "roofbench_graph_cold": cold,
                   "python": {f"{r.kernel} {r.size}": p for r, p in python.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
