#!/usr/bin/env python3
"""The same kernels timed by several timers on one machine, back to back: micro/add_fp32_vec16 and
micro/add_fp32_scalar at 1M, 4M and 16M elements, and micro/copy of 16M floats (64 MiB).

  roofbench graph        roofbench --graph on: events around a replayed graph of runs (time_median)
  roofbench CUPTI        the same run's --kernel-time: the kernels' own time per run (kernel_time)
  event vs CUPTI         roofbench graph over roofbench CUPTI, minus 1, in %
  roofbench graph cold   roofbench --graph on --cold (the flush and the events inside the graph)
  do_bench               triton.testing.do_bench (defaults: the mean, an L2 flush and an event pair per call)
  do_bench_cudagraph     triton.testing.do_bench_cudagraph (defaults: the mean of 10 replays of one graph)
  torch.profiler CUPTI   the median kernel duration torch.profiler (CUPTI) records in a graph replay

The Python timers call the kernels through the shim libroofbench_add_shim.so (built by CMake from the same
kernel source as the micro plugin; kernels/cuda_elementwise/add_shim.cu) with torch tensors' data pointers and
the current stream. docs/method.md says what each timer does per launch. Prints the table as Markdown and
writes it (and the raw figures as JSON) where --out says. Needs a GPU, torch and triton."""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile

SIZES = [1 << 20, 1 << 22, 1 << 24]
COPY_FLOATS = 1 << 24
ROWS = [(v, n) for v in ("vec16", "scalar") for n in SIZES] + [("copy", COPY_FLOATS)]
COLUMNS = ["roofbench graph", "roofbench CUPTI", "event vs CUPTI", "roofbench graph cold", "do_bench",
           "do_bench_cudagraph", "torch.profiler CUPTI"]


def benchmark_name(variant, n):
    if variant == "copy":
        return f"micro/copy/bytes:{4 * n}/"
    return f"micro/add_fp32_{variant}/n:{n}/"


def run_roofbench(roofbench, flags, timeout):
    """{benchmark name: its results entry} of one roofbench run over every row's benchmark."""
    pattern = "^(" + "|".join(benchmark_name(v, n) for v, n in ROWS) + ")"
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


def python_timers(shim_path, rows):
    """{(variant, n): {column: seconds}} from triton's timers and torch.profiler over the shim's launches."""
    import torch
    import triton.testing

    shim = ctypes.CDLL(shim_path)
    for name in ("roofbench_add_fp32_vec16", "roofbench_add_fp32_scalar"):
        getattr(shim, name).argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_size_t, ctypes.c_void_p]
    shim.roofbench_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    figures = {}
    for variant, n in rows:
        a, b = (torch.rand(n, device="cuda") * 2 - 1 for _ in range(2))
        c = torch.empty_like(a)
        if variant == "copy":
            def fn():
                stream = torch.cuda.current_stream().cuda_stream
                if shim.roofbench_copy(c.data_ptr(), a.data_ptr(), 4 * n, stream):
                    raise RuntimeError("copy failed")
        else:
            launch = getattr(shim, f"roofbench_add_fp32_{variant}")

            def fn():
                if launch(a.data_ptr(), b.data_ptr(), c.data_ptr(), n, torch.cuda.current_stream().cuda_stream):
                    raise RuntimeError("launch failed")
        fn()
        torch.cuda.synchronize()
        if variant != "copy" and not torch.allclose(c, a + b):
            raise RuntimeError(f"the shim's {variant} add is wrong at n={n}")
        figures[(variant, n)] = {
            "do_bench": 1e-3 * triton.testing.do_bench(fn),
            "do_bench_cudagraph": 1e-3 * triton.testing.do_bench_cudagraph(fn),
            "torch.profiler CUPTI": profiled_kernel_seconds(torch, fn),
        }
    return figures


def profiled_kernel_seconds(torch, fn, launches=200):
    """The median duration of the GPU activities (kernels, memcpys) CUPTI records in one replay of a graph
    of `launches` calls, captured on a side stream as do_bench_cudagraph captures."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(launches):
                fn()
        torch.cuda.synchronize()
        graph.replay()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
            graph.replay()
            torch.cuda.synchronize()
    durations = [e.time_range.elapsed_us() for e in profile.events()
                 if e.device_type == torch.autograd.DeviceType.CUDA and ("add" in e.name or "emcpy" in e.name)]
    return 1e-6 * statistics.median(durations) if durations else float("nan")


def table(rows, hot, cold, python):
    """The Markdown table: one row per kernel and size, one column per timer (microseconds)."""
    def us(seconds):
        return "-" if seconds is None or seconds != seconds else f"{seconds * 1e6:.3f}"

    lines = ["| kernel | elements | " + " | ".join(COLUMNS) + " |", "|---|---:|" + "---:|" * len(COLUMNS)]
    for variant, n in rows:
        name = benchmark_name(variant, n)
        h, c, p = hot.get(name, {}), cold.get(name, {}), python.get((variant, n), {})
        event, kernel = h.get("time_median"), h.get("kernel_time")
        ratio = f"{100 * (event / kernel - 1):+.1f}%" if event and kernel else "-"
        cells = [us(event), us(kernel), ratio, us(c.get("time_median")), us(p.get("do_bench")),
                 us(p.get("do_bench_cudagraph")), us(p.get("torch.profiler CUPTI"))]
        lines.append(f"| {name.split('/')[1]} | {n >> 20}M | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\nTimes in microseconds per launch.\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--roofbench", required=True)
    parser.add_argument("--shim", required=True, help="libroofbench_add_shim.so")
    parser.add_argument("--out", default=".", help="folder for like_for_like.md and like_for_like.json")
    parser.add_argument("--max-time", default="0.5", help="roofbench's --max-time")
    args = parser.parse_args()
    common = ["--max-time", args.max_time]
    hot = run_roofbench(args.roofbench, common + ["--kernel-time"], 100)
    cold = run_roofbench(args.roofbench, common + ["--cold"], 100)
    python = python_timers(args.shim, ROWS)
    text = table(ROWS, hot, cold, python)
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "like_for_like.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "like_for_like.json"), "w") as f:
        json.dump({"roofbench_graph": hot, "roofbench_graph_cold": cold,
                   "python": {f"{v}/{n}": p for (v, n), p in python.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
