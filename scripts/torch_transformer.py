#!/usr/bin/env python3
"""PyTorch's side of the transformer plugin's targets, timed on the same GPU in the same run as roofbench:
scaled_dot_product_attention per backend (cuDNN, flash, memory-efficient, math) at the prefill shapes,
decode attention eager and replayed in a CUDA graph, and GPT-2 small's two linear layers at several token
counts (hot), and at one token cold (L2 flushed before each timed call, as roofbench's --cold does).
CUDA events after a warm-up; each figure is the median over samples of `runs` back-to-back calls, divided
by `runs`; heavy calls are also timed "sustained", after 0.3 s of calls (the clock under the power limit,
as roofbench's warm-up leaves it). FLOPs are counted as roofbench counts them (causal: the unmasked pairs only). Records the CUDA
kernels PyTorch launches for the linear layers at 1 and 8192 tokens, and the cuDNN it is built with.
Prints one JSON object; --quick times fewer shapes, --targets exactly the shapes of the plugin's targets."""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_timing

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}


def per_call_seconds(fn, runs=20, samples=15, warmup=10):
    return torch_timing.median_seconds_per_call(fn, warmup=warmup, bursts=samples, calls_per_burst=runs)


def sustained_seconds(fn, runs=20, samples=15, warm_seconds=0.3):
    """per_call_seconds after `warm_seconds` of back-to-back calls: at the clock the GPU holds under its
    power limit, as roofbench's warm-up (at least 0.25 s, until settled) leaves it. The short warm-up of
    per_call_seconds (10 calls, then 300 timed: ~15 ms for a 50 us call) times a heavy kernel at boost clock."""
    start = time.perf_counter()
    while time.perf_counter() - start < warm_seconds:
        torch_timing.warm_up(fn, runs)
    return per_call_seconds(fn, runs=runs, samples=samples, warmup=0)


def graphed(fn, calls=20):
    """fn captured `calls` times in one CUDA graph; returns a replay whose time divides by `calls`."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph, calls


def graph_seconds(fn, calls=20):
    graph, n = graphed(fn, calls)
    return per_call_seconds(graph.replay, runs=1) / n


def visible_pairs(q_len, kv_len, causal):
    if not causal:
        return q_len * kv_len
    offset = kv_len - q_len
    return sum(min(max(row + offset + 1, 0), kv_len) for row in range(q_len))


def attention_flops(b, h, q_len, kv_len, d, causal):
    return 4.0 * b * h * d * visible_pairs(q_len, kv_len, causal)


def uniform(shape, lo, hi, dtype):
    return (torch.rand(shape, device="cuda") * (hi - lo) + lo).to(dtype)


def prefill(shapes, dtype, out):
    for b, h, t, d in shapes:
        q, k = (uniform((b, h, t, d), -2, 2, dtype) for _ in range(2))
        v = uniform((b, h, t, d), -1, 1, dtype)
        for causal in (True, False):
            flops = attention_flops(b, h, t, t, d, causal)
            for name, backend in BACKENDS.items():
                if name == "math" and b * h * t * t > 96 * 1024 * 1024:
                    continue  # the T x T scores of the larger shapes take seconds per call
                key = f"prefill/{name}/{b}x{h}x{t}x{d}/{'causal' if causal else 'full'}/{str(dtype)[6:]}"
                try:
                    with sdpa_kernel([backend]):
                        s = per_call_seconds(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                             runs=5 if name == "math" else 20)
                    out[key] = {"seconds": s, "TFLOPs": flops / s / 1e12}
                    if name in ("cudnn", "flash"):
                        with sdpa_kernel([backend]):
                            s = sustained_seconds(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                        out[key].update({"sustained_seconds": s, "sustained_TFLOPs": flops / s / 1e12})
                except RuntimeError as e:
                    out[key] = {"error": str(e).splitlines()[0][:200]}


def decode(shapes, out):
    for b, kv in shapes:
        q = uniform((b, 12, 1, 64), -2, 2, torch.bfloat16)
        k = uniform((b, 12, kv, 64), -2, 2, torch.bfloat16)
        v = uniform((b, 12, kv, 64), -1, 1, torch.bfloat16)
        cache_bytes = 2.0 * 2 * b * 12 * kv * 64
        for name in ("default", "cudnn", "flash", "efficient"):
            key = f"decode/{name}/B{b}/KV{kv}"
            call = lambda: F.scaled_dot_product_attention(q, k, v)
            try:
                if name == "default":
                    eager = per_call_seconds(call)
                    replay = graph_seconds(call)
                else:
                    with sdpa_kernel([BACKENDS[name]]):
                        eager = per_call_seconds(call)
                        replay = graph_seconds(call)
                out[key] = {"eager_seconds": eager, "graph_seconds": replay,
                            "graph_TBps": cache_bytes / replay / 1e12, "eager_TBps": cache_bytes / eager / 1e12}
            except RuntimeError as e:
                out[key] = {"error": str(e).splitlines()[0][:200]}


def cold_seconds(fn, samples=30):
    """The median over `samples` of one call timed alone after L2 is flushed (a buffer of twice the L2
    written), the flush outside the events: a GPU still busy flushing hides the host's launch cost."""
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    flush = torch.empty(2 * max(l2, 1 << 20), dtype=torch.uint8, device="cuda")
    times = []
    for i in range(samples + 3):
        flush.fill_(i & 0xFF)
        seconds = torch_timing.burst_seconds(fn)
        if i >= 3:
            times.append(seconds)
    return statistics.median(times)


def cuda_kernels(fn):
    """The names of the CUDA kernels one call of fn launches (torch.profiler), or the profiler's error."""
    try:
        from torch.profiler import ProfilerActivity, profile
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        return sorted({e.key for e in prof.key_averages() if e.device_time_total > 0})
    except Exception as e:  # the profiler's failure is recorded, not fatal to the timings
        return [f"profiler failed: {str(e).splitlines()[0][:200]}"]


def linear(tokens_list, out):
    for fan_in, fan_out in ((768, 3072), (3072, 768)):
        w = uniform((fan_out, fan_in), -1, 1, torch.bfloat16)
        weight_bytes = 2.0 * fan_in * fan_out
        for tokens in tokens_list:
            x = uniform((tokens, fan_in), -1, 1, torch.bfloat16)
            y = torch.empty((tokens, fan_out), device="cuda", dtype=torch.bfloat16)
            call = lambda: torch.matmul(x, w.t(), out=y)
            eager = per_call_seconds(call)
            replay = graph_seconds(call)
            flops = 2.0 * tokens * fan_in * fan_out
            entry = {"eager_seconds": eager, "graph_seconds": replay, "eager_TFLOPs": flops / eager / 1e12,
                     "graph_TFLOPs": flops / replay / 1e12}
            if tokens >= 1024:
                sustained = sustained_seconds(call)
                entry.update({"sustained_eager_seconds": sustained, "sustained_eager_TFLOPs": flops / sustained / 1e12})
            if tokens in (1, 8192):
                entry["kernels"] = cuda_kernels(call)
            if tokens == 1:
                graph, _ = graphed(call, calls=1)
                cold = cold_seconds(graph.replay)
                entry.update({"cold_graph_seconds": cold, "cold_graph_weight_TBps": weight_bytes / cold / 1e12})
            out[f"linear/{fan_in}x{fan_out}/tokens{tokens}"] = entry


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--targets", action="store_true",
                        help="only the target shapes: prefill at the three named shapes, decode B1 KV1024, "
                             "B64 KV1024 and B256 KV4096, linear hot at 1 to 8192 tokens and cold at 1")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    out = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "device": torch.cuda.get_device_name()}
    print(f"torch {out['torch']}, cuDNN {out['cudnn']}, {out['device']}", file=sys.stderr)
    shapes = [(8, 12, 1024, 64), (2, 12, 4096, 64), (4, 16, 4096, 128)]
    if not (args.quick or args.targets):
        shapes = [(64, 12, 128, 64), (16, 12, 512, 64)] + shapes[:1] + [(4, 12, 2048, 64)] + shapes[1:2] + \
                 [(1, 12, 8192, 64)] + shapes[2:]
    prefill(shapes, torch.bfloat16, out)
    if not (args.quick or args.targets):
        prefill([(8, 12, 1024, 64)], torch.float16, out)
    if args.targets:
        decode([(1, 1024), (64, 1024), (256, 4096)], out)
    else:
        batches = [1, 64, 256] if args.quick else [1, 8, 32, 64, 128, 256]
        kvs = [1024, 4096] if args.quick else [1024, 4096, 16384]
        decode([(b, kv) for b in batches for kv in kvs], out)
    linear([1, 16, 128, 1024, 8192] if args.quick else [1 << i for i in range(14)], out)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
