#!/usr/bin/env python3
"""Where a roofbench run's time went and how noisy it was, from its results JSON (docs/results-format.md):
the wall time of each phase summed over the run, the slowest benchmarks, the gate outcomes, every
benchmark over 100 us whose noise is over 1% beside its noise at a fixed clock, and the highest share of a
roof (every benchmark above 100% of its measured roof named: a roof must bound every case)."""
import json
import sys


def roof_name(benchmark, compute_roofs):
    """The roof a benchmark's share is of: its precision's compute roof where that is what it can attain,
    else its memory roof ("dram copy", "dram read", ...)."""
    r = benchmark.get("roofbench", {})
    compute = compute_roofs.get(r.get("precision"))
    if r.get("flops") and compute and (r.get("attainable_flops") or 0) >= 0.999 * compute:
        return f"{r['precision']} compute"
    return r.get("memory_roof", "")


def main(path):
    with open(path) as f:
        run = json.load(f)
    rows = [b for b in run.get("benchmarks", []) if b.get("run_type") != "aggregate"]
    phases = ("setup", "gate", "warmup", "sampling", "profile", "total")
    sums = dict.fromkeys(phases, 0.0)
    for b in rows:
        for p in phases:
            sums[p] += (b.get("roofbench", {}).get("phases_s") or {}).get(p) or 0.0
    gates = {}
    for b in rows:
        g = b.get("roofbench", {}).get("gate", "?")
        gates[g] = gates.get(g, 0) + 1
    print(f"{path}: {len(rows)} benchmarks, complete={run.get('context', {}).get('roofbench', {}).get('complete')}, "
          f"gates {gates}")
    print("  seconds: " + ", ".join(f"{p} {sums[p]:.1f}" for p in phases))
    slowest = sorted(rows, key=lambda b: -((b.get("roofbench", {}).get("phases_s") or {}).get("total") or 0))[:6]
    for b in slowest:
        ph = b.get("roofbench", {}).get("phases_s") or {}
        print(f"  slow: {b['name']}: " + " ".join(f"{p} {ph.get(p, 0):.2f}" for p in phases))
    for b in rows:
        if b.get("error_occurred"):
            print(f"  FAILED: {b['name']}: {b.get('error_message', '')[:300]}")
    placed = sorted((b for b in rows if b.get("roof_pct") is not None), key=lambda b: -b["roof_pct"])
    if placed:
        print(f"  highest roof share: {placed[0]['roof_pct']:.1f}% ({placed[0]['name']}), "
              f"{sum(b['roof_pct'] > 100 for b in placed)} of {len(placed)} above 100%")
    compute_roofs = (run.get("context", {}).get("roofbench", {}).get("ceilings", {}).get("measured", {})
                     .get("flops", {}))
    for b in placed:
        if b["roof_pct"] > 100:
            print(f"    above its roof: {b['name']}: {b['roof_pct']:.2f}% ({roof_name(b, compute_roofs)})")
    noisy = [b for b in rows if (b.get("time_median") or 0) > 100e-6 and (b.get("noise") or 0) > 0.01]
    over = [b for b in rows if (b.get("time_median") or 0) > 100e-6]
    print(f"  noise over 1%: {len(noisy)} of {len(over)} benchmarks over 100 us")
    for b in noisy:
        fixed = b.get("noise_at_fixed_clock")
        fixed_text = f"{100 * fixed:.2f}%" if fixed is not None else "n/a"
        print(f"    {b['name']}: noise {100 * b['noise']:.2f}%, at fixed clock {fixed_text}, "
              f"clock {b.get('sm_clock_mhz', 0):.0f} MHz, {b.get('samples')} samples")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        try:
            main(p)
        except (OSError, ValueError) as e:
            print(f"{p}: {e}")
