#!/usr/bin/env python3
"""roofbench --counters against Nsight Compute on the same kernels: for each benchmark below, roofbench's
per-kernel DRAM bytes and FLOPs (CUPTI's Range Profiler, in process) beside ncu's for launches of the same
kernels (ncu --clock-control none: the GPU's clocks are never locked or changed), with the % difference.
Both sides count the same metrics with the same weights: the list is read from core/src/kernel_counters.cpp.
Kernels are matched by their base name (ncu and the demangler print parameters differently); a kernel's
per-launch figures are averaged over its launches on both sides, then weighted by roofbench's launches per run.
Both run with --graph off (a GPT rung still replays its own graph under ncu, whose kernels ncu profiles one by
one). roofbench counts one run from clean caches (docs/method.md, "The hardware's counters"). ncu reads the
DRAM counters alone, in one pass, so nothing is replayed and no memory restored between passes (a restore
leaves dirty lines in the L2 that the kernel then writes back): for a case of one launch with
--cache-control all, a flush before each launch, as roofbench's clean; in a run of several launches, where a
later kernel finds what the earlier ones left, with --cache-control none (ncu's first profiled kernel then
finds what the previous run left where roofbench's finds a clean cache). The FLOPs, which the caches do not
change, come from a second, flushed, profile. Cases that time a library's algorithms at setup take the
heuristic's first in both processes (ROOFBENCH_ALGORITHM_CHOICE=first), so that both run the same kernels.
Usage: counters_vs_ncu.py ROOFBENCH OUTDIR [NAME_REGEX]
       counters_vs_ncu.py --table OUTDIR [NAME_REGEX]   (the table again from an earlier run's files)
  (environment: NCU=ncu, COUNTERS=auto|kernel|run: roofbench's --counters mode; REPEAT=N: both sides again in
   N-1 more processes each, and a line per benchmark with every process's DRAM writes per run, to set the
   spread of one tool across processes beside the gap between the tools)
Roughly 10-20 s a benchmark on an H200."""
import csv
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# Micro add, copy and GEMMs (micro/copy_kernel: micro/copy's cudaMemcpyAsync is no kernel the counters see), transformer
# decode/prefill/GEMV/GEMM, a conv and a GPT rung. ncu profiles the launches of RUNS runs of a one-launch case
# and of one run of a case of several launches (a GPT step is hundreds): the first its kernel filter matches in
# roofbench's "samples" NVTX range.
BENCHMARKS = [
    "micro/add_fp32_vec16/n:268435456",
    "micro/copy_kernel/bytes:1073741824",
    "micro/matmul_cublas_fp32/mnk:4096x4096x4096",
    "micro/matmul_cublas_bf16/mnk:4096x4096x4096",
    "micro/matmul_tiled_fp32/mnk:4096x4096x4096",
    "transformer/attention_decode_bf16/impl:split_kv/batch:64/kv:4096",
    "transformer/attention_prefill_bf16/impl:fused/mask:causal/heads:16x128/t:4096",
    "transformer/linear_bf16/layer:3072x768/tokens:1/impl:gemv",
    "transformer/linear_bf16/layer:3072x768/tokens:1024/impl:cublaslt",
    "conv/conv_bf16/layer:conv3_1x1_256to128/pass:fwd/layout:nhwc/impl:cudnn/n:256",
    "gpt/R3_batch_sweep/batch:64",
]
# The same kernels at sizes whose data is about the L2's (40-80 MB), where ncu counts 2-3 MB more writes than
# roofbench (docs/method.md, "The hardware's counters"): a few percent of these kernels' bytes. They set the
# gap and each tool's spread across processes, not the agreement (select them with COUNTERS_NCU_ONLY and run
# them with REPEAT=3: REPEAT repeats every row selected).
NEAR_L2 = [
    "micro/matmul_tiled_fp32/mnk:2048x2048x2048",
    "transformer/attention_prefill_bf16/impl:fused/mask:causal/heads:12x64/t:1024",
    "conv/conv_bf16/layer:conv3_1x1_256to128/pass:fwd/layout:nhwc/impl:cudnn/n:32",
]
RUNS = 3


def metrics():
    """[(metric, field, weight)] as the pass collects them."""
    with open(os.path.join(HERE, "..", "core", "src", "kernel_counters.cpp")) as f:
        text = f.read()
    return [(m, fld, float(w)) for m, fld, w in re.findall(r'\{"([a-z0-9_.]+)", F::(\w+), (\d+)\}', text)]


def base_name(name):
    """The kernel's identifier alone: no return type, namespace, template arguments or parameters."""
    # The demangler writes an anonymous namespace "(anonymous namespace)", ncu "<unnamed>" (its CSV "unnamed>").
    name = re.sub(r"\(anonymous namespace\)|<?unnamed>", "anonymous", name)
    depth, cut = 0, len(name)
    for i, c in enumerate(name):
        depth += c == "<"
        depth -= c == ">"
        if c == "(" and depth == 0:
            cut = i
            break
    words = re.sub(r"<.*>", "", name[:cut]).split("::")[-1].split()
    return words[-1] if words else name


KEYS = ("dram", "written", "flops")  # DRAM bytes read and written, of them written, FLOPs


def figures(values, fields):
    """{dram, written, flops} from {metric: value}."""
    dram = sum(values.get(m, 0) for m, f, _ in fields if f in ("dram_read", "dram_write"))
    written = sum(values.get(m, 0) for m, f, _ in fields if f == "dram_write")
    flops = sum(w * values.get(m, 0) for m, f, w in fields if f.startswith("flops"))
    return {"dram": dram, "written": written, "flops": flops}


def roofbench_kernels(latest_json):
    """{base name: (per-launch {dram, written, flops}, launches per run)} from a --counters results file, or why
    not."""
    try:
        with open(latest_json) as f:
            entry = [b for b in json.load(f)["benchmarks"] if b.get("run_type") != "aggregate"][0]
    except (OSError, IndexError, KeyError, ValueError) as e:
        return f"no results ({e})"
    counters = entry.get("roofbench", {}).get("counters", {})
    if counters.get("error") or not counters.get("kernels"):
        return counters.get("error", "no counters")
    by_base = {}
    for k in counters["kernels"]:
        d, w, f, n = by_base.get(base_name(k["name"]), (0.0, 0.0, 0.0, 0.0))
        by_base[base_name(k["name"])] = (d + k["dram_read"] + k["dram_write"], w + k["dram_write"], f + k["flops"],
                                         n + k["launches_per_run"])
    return {b: ({"dram": d / n, "written": w / n, "flops": f / n}, n) for b, (d, w, f, n) in by_base.items() if n > 0}


def ncu_kernels(csv_path, fields):
    """{base name: per-launch {dram, written, flops}} averaged over the launches of an `ncu --csv --print-units
    base` file (or of the files of a list)."""
    if isinstance(csv_path, list):
        parts = [ncu_kernels(path, fields) for path in csv_path]
        return {b: {k: sum(p.get(b, {}).get(k, 0.0) for p in parts) for k in KEYS} for b in set().union(*parts)}
    launches = {}
    if not os.path.exists(csv_path):
        return {}
    with open(csv_path) as f:
        for row in csv.DictReader(line for line in f if line.startswith('"')):
            try:
                value = float(row["Metric Value"].replace(",", ""))
            except (KeyError, ValueError):
                continue
            launches.setdefault((row.get("ID"), base_name(row.get("Kernel Name", "?"))), {})[row["Metric Name"]] = value
    per_base = {}
    for (_, base), values in launches.items():
        per_base.setdefault(base, []).append(figures(values, fields))
    return {b: {k: statistics.mean(x[k] for x in xs) for k in KEYS} for b, xs in per_base.items()}


def per_run(ours, theirs):
    """Both sides' {dram, written, flops} per run over the kernels both saw, weighted by roofbench's launches per
    run."""
    shared = [b for b in ours if b in theirs]
    rb = {k: sum(ours[b][0][k] * ours[b][1] for b in shared) for k in KEYS}
    nc = {k: sum(theirs[b][k] * ours[b][1] for b in shared) for k in KEYS}
    return rb, nc, len(shared)


def run_roofbench(roofbench, bench, outdir):
    results = os.path.join(outdir, "results")
    counters = "--counters=" + os.environ.get("COUNTERS", "auto")
    subprocess.run([roofbench, f"--benchmark_filter=^{re.escape(bench)}$", counters, "--graph", "off", "--gate", "off",
                    "--max-time", "0.3", "--results-dir", results], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=300, check=False)
    return roofbench_kernels(os.path.join(results, "latest.json"))


def ncu_profile(roofbench, bench, names, count, metric_names, cache, path):
    command = [os.environ.get("NCU", "ncu"), "--clock-control", "none", "--cache-control", cache,
               "--nvtx", "--nvtx-include", "samples/",  # the timed samples only: no setup, gate or warm-up
               "--metrics", ",".join(metric_names), "--csv", "--print-units", "base",
               "-k", "regex:" + "|".join(re.escape(n) for n in names), "--launch-count", str(count),
               roofbench, f"--benchmark_filter=^{re.escape(bench)}$", "--graph", "off", "--gate", "off", "--max-time", "0.3",
               "--no-results"]
    with open(path, "w") as out:
        try:
            subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=300, check=False)
        except subprocess.TimeoutExpired:
            print(f"{bench}: ncu ran past 300 s; the launches it profiled are compared", file=sys.stderr)


def launches_per_run(ours):
    return round(sum(launches for _, launches in ours.values()))


def ncu_files(outdir):
    """The ncu files of a benchmark: its DRAM counts and its FLOPs (an older run of one launch: one file of both)."""
    both = os.path.join(outdir, "ncu.csv")
    if os.path.exists(both) and not os.path.exists(os.path.join(outdir, "ncu-dram.csv")):
        return [both]
    return [os.path.join(outdir, "ncu-dram.csv"), os.path.join(outdir, "ncu-flops.csv")]


def run_ncu(roofbench, bench, ours, fields, outdir):
    """The DRAM counters alone fit one ncu pass, so nothing is replayed and no memory restored between passes:
    flushed before each launch of a one-launch case, unflushed over a run of several. The FLOPs, which the
    caches do not change, come from a second, flushed, profile."""
    names = sorted(ours)
    dram_path, flops_path = os.path.join(outdir, "ncu-dram.csv"), os.path.join(outdir, "ncu-flops.csv")
    several = launches_per_run(ours) > 1
    count = launches_per_run(ours) if several else RUNS
    dram = [m for m, f, _ in fields if f in ("dram_read", "dram_write")]
    flops = [m for m, f, _ in fields if f.startswith("flops")]
    ncu_profile(roofbench, bench, names, count, dram, "none" if several else "all", dram_path)
    ncu_profile(roofbench, bench, names, count, flops, "all", flops_path)
    return ncu_kernels([dram_path, flops_path], fields)


def repeated_writes(roofbench, bench, fields, where, repeat):
    """Both sides' DRAM writes per run in `repeat` - 1 more processes each (their files in where/repeatK)."""
    ours_written, theirs_written = [], []
    for k in range(1, repeat):
        again = os.path.join(where, f"repeat{k}")
        os.makedirs(again, exist_ok=True)
        ours = run_roofbench(roofbench, bench, again)
        if isinstance(ours, str):
            continue
        rb, nc, _ = per_run(ours, run_ncu(roofbench, bench, ours, fields, again))
        ours_written.append(rb["written"])
        theirs_written.append(nc["written"])
    return ours_written, theirs_written


def writes_line(ours_written, theirs_written):
    """'  written by process, MB: roofbench 7.63 7.71, ncu 10.38 10.12'"""
    def mb(values):
        return " ".join(f"{v / 1e6:.2f}" for v in values)
    return f"  written by process, MB: roofbench {mb(ours_written)}, ncu {mb(theirs_written)}"


def percent(ours, theirs):
    return f"{100 * (ours - theirs) / theirs:+.2f}%" if theirs else ("0" if not ours else "n/a")


def main(roofbench, outdir, only=None):
    """roofbench None: the table again from the files of an earlier run in outdir."""
    # Cases time cuBLASLt's and cuDNN's algorithms at setup, and under ncu those timings change: both processes
    # take the heuristic's first, so that they run the same kernels (docs/user-guide.md).
    os.environ.setdefault("ROOFBENCH_ALGORITHM_CHOICE", "first")
    fields = metrics()
    print(f"{'benchmark':<72} {'DRAM B roofbench':>16} {'DRAM B ncu':>16} {'diff':>8} {'of them written, MB':>20} "
          f"{'FLOP roofbench':>15} {'FLOP ncu':>15} {'diff':>8}")
    headed = False
    for i, bench in enumerate(BENCHMARKS + NEAR_L2):
        if only and not re.search(only, bench):
            continue
        if i >= len(BENCHMARKS) and not headed:
            print("near the L2 (the spread of the writes left in it, not the agreement):")
            headed = True
        compare(roofbench, bench, os.path.join(outdir, folder_of(bench)), fields)


def folder_of(bench):
    """A benchmark's folder under OUTDIR: its name, every run of other characters one underscore."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", bench)


def compare(roofbench, bench, where, fields):
    """One benchmark's row (and, with REPEAT, its writes line); roofbench None: from the files in where."""
    os.makedirs(where, exist_ok=True)
    ours = run_roofbench(roofbench, bench, where) if roofbench else roofbench_kernels(
        os.path.join(where, "results", "latest.json"))
    if isinstance(ours, str):
        print(f"{bench:<72} no counters: {ours}")
        return
    theirs = (run_ncu(roofbench, bench, ours, fields, where) if roofbench
              else ncu_kernels(ncu_files(where), fields))
    rb, nc, shared = per_run(ours, theirs)
    written = f"{rb['written'] / 1e6:.2f} / {nc['written'] / 1e6:.2f}"
    print(f"{bench:<72} {rb['dram']:>16.4g} {nc['dram']:>16.4g} {percent(rb['dram'], nc['dram']):>8} {written:>20} "
          f"{rb['flops']:>15.4g} {nc['flops']:>15.4g} {percent(rb['flops'], nc['flops']):>8}"
          f"  ({shared} of {len(ours)} kernels matched)")
    repeat = int(os.environ.get("REPEAT", "1"))
    if roofbench and repeat > 1:
        more_ours, more_theirs = repeated_writes(roofbench, bench, fields, where, repeat)
        print(writes_line([rb["written"]] + more_ours, [nc["written"]] + more_theirs))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--table":  # counters_vs_ncu.py --table OUTDIR [NAME_REGEX]
        main(None, sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
