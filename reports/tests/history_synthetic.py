"""Synthetic results files for the history tests: runs of named benchmarks whose medians the test
chooses, one commit per run, in the results format (FORMAT.md) with only the fields the history reads."""

import datetime
import json
import random

_FIRST_RUN = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def benchmark_entry(name, median_s, noise, gate="pass", tokens=None):
    """One timed benchmark entry; quartiles at +-noise/2 around the median."""
    entry = {
        "name": name, "run_name": name, "run_type": "iteration", "repetitions": 1, "repetition_index": 0,
        "threads": 1, "iterations": 1, "real_time": median_s * 1e6, "cpu_time": median_s * 1e6,
        "time_unit": "us", "error_occurred": gate != "pass", "error_message": "" if gate == "pass" else "gate",
        "time_median": median_s, "time_q1": median_s * (1 - noise / 2), "time_q3": median_s * (1 + noise / 2),
        "noise": noise, "samples": 100, "FLOP/s": 1e9 / median_s,
        "roofbench": {"plugin": name.split("/", 1)[0], "case": name.split("/")[1], "gate": gate,
                      "precision": "bf16", "bound": "compute", "device": "cuda:0"},
    }
    if tokens is not None:
        entry["roofbench"]["item_name"] = "tokens"
        entry["tokens/s"] = tokens / median_s
    return entry


def run_document(number, entries, device="NVIDIA H200", host="runner-1"):
    """Run `number` (1-based): commit c0001..., an hour after the run before."""
    return {
        "context": {
            "date": (_FIRST_RUN + datetime.timedelta(hours=number - 1)).isoformat(),
            "host_name": host, "executable": "roofbench",
            "roofbench": {
                "version": "0.1.0", "suite": "synthetic", "complete": True, "gate": "on", "mode": "hot",
                "commit": f"c{number:04d}{'0' * 35}",
                "device": {"kind": "cuda", "index": 0, "name": device, "key": f"cuda-{device}-0", "driver": "580.65"},
                "ceilings": {"measured": {"bandwidth_Bps": 4.1e12, "flops": {"bf16": 7.5e14}}},
            },
        },
        "benchmarks": entries,
    }


def write_history(folder, medians_by_benchmark, noise_by_benchmark, gates=None, first_number=1):
    """Writes run files run0001.json... into folder; medians_by_benchmark: {name: [median per run]}.
    gates: {(name, run index): gate} for the runs whose gate is not 'pass'. Returns the paths in order."""
    gates = gates or {}
    count = len(next(iter(medians_by_benchmark.values())))
    paths = []
    for index in range(count):
        entries = [benchmark_entry(name, medians[index], noise_by_benchmark[name],
                                   gates.get((name, index), "pass"), tokens=4096)
                   for name, medians in medians_by_benchmark.items()]
        path = folder / f"run{first_number + index:04d}.json"
        path.write_text(json.dumps(run_document(first_number + index, entries)), encoding="utf-8")
        paths.append(path)
    return paths


def noisy_series(count, base_s, noise, seed, step_after=None, step=0.0):
    """count medians around base_s with normal relative noise; times (1 + step) after run step_after."""
    random_source = random.Random(seed)
    return [base_s * (1 + (step if step_after is not None and index >= step_after else 0.0))
            * (1 + random_source.gauss(0, noise)) for index in range(count)]


def transformer_suite_names(count=200):
    """Benchmark names shaped like the transformer suite's: layers x operations x batch sizes."""
    operations = ("qkv_gemm", "attention", "out_proj", "mlp_up", "mlp_down", "layernorm", "softmax", "rope")
    names = []
    layer = 0
    while len(names) < count:
        for operation in operations:
            for batch in (8, 32, 128):
                if len(names) < count:
                    names.append(f"gpt/{operation}/layer:{layer}/batch:{batch}")
        layer += 1
    return names
