#!/usr/bin/env python3
"""One line per size: roofbench's graph-mode time per launch beside Nsight Compute's duration of the same
kernel launched alone (--graph-profiling node) and of a whole graph of NODES launches divided by NODES
(--graph-profiling graph). Arguments: roofbench results JSON, ncu node CSV, ncu graph CSV, NODES.
On an H200 (ncu with CUDA 13.0), ncu timed each isolated add launch at 3.7-5.3 us against 2.3 us per launch
in graph replay, and its graph mode inflated every kernel about 30x, so neither is the graph's per-launch
time; `roofbench --profile` (CUPTI inside the replayed graph) is the comparison that agrees (2.5 vs 2.4 us)."""
import csv
import json
import statistics
import sys

UNIT = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3, "second": 1.0}


def durations(path):
    """{name: [seconds]} from an ncu --csv file holding gpu__time_duration.sum."""
    by_name = {}
    try:
        with open(path) as f:
            lines = [line for line in f if line.startswith('"')]
    except OSError:
        return by_name
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        try:
            value = float(row["Metric Value"].replace(",", "")) * UNIT.get(row.get("Metric Unit", ""), 1e-9)
        except (KeyError, ValueError):
            continue
        by_name.setdefault(row.get("Kernel Name", "?"), []).append(value)
    return by_name


def main(results, node_csv, graph_csv, nodes):
    with open(results) as f:
        bench = [b for b in json.load(f)["benchmarks"] if b.get("run_type") != "aggregate"][0]
    ours = bench["time_median"]
    line = f"{bench['name']}: roofbench graph mode {ours * 1e6:.3f} us per launch ({bench.get('runs_per_sample')} per graph)"
    node = {k: v for k, v in durations(node_csv).items() if "add_vec16" in k}
    for name, values in node.items():
        med = statistics.median(values)
        line += f"; ncu per kernel {med * 1e6:.3f} us (median of {len(values)}, roofbench/ncu {ours / med:.3f})"
    print(line)
    for name, values in durations(graph_csv).items():
        med = statistics.median(values)
        kind = "kernel" if "kernel" in name.lower() else "graph?"
        extra = f", / {nodes} = {med / nodes * 1e6:.3f} us per launch (roofbench/ncu {ours / (med / nodes):.3f})" \
            if kind == "graph?" else ""
        print(f"  ncu --graph-profiling graph: '{name[:60]}' x{len(values)}: median {med * 1e6:.3f} us{extra}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
