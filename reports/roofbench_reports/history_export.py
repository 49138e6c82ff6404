"""One recorded run in the formats CI dashboards read:

- Bencher's Metric Format (BMF, `bencher run --adapter json --file ...`): {benchmark: {measure: {value,
  lower_value, upper_value}}}, with the built-in measures `latency` in nanoseconds (the run's median,
  its quartiles as the bounds) and `throughput` in items per second where the case counts items.
- github-action-benchmark's custom format (`tool: customSmallerIsBetter`): a list of {name, unit, value,
  range, extra}, the median in nanoseconds.

Benchmarks without a time (an error before timing) have nothing to export and are left out."""

from .units import format_percent

FORMATS = ("bencher", "github-action-benchmark")
_NANOSECONDS = 1e9


def _nanoseconds(seconds):
    return None if seconds is None else seconds * _NANOSECONDS


def _throughput(result):
    rates = [value for name, value in sorted(result.counters.items())
             if name.endswith("/s") and name not in ("FLOP/s", "B/s")]
    return rates[0] if rates else None


def bencher_metrics(results):
    document = {}
    for result in results:
        if result.median_s is None:
            continue
        latency = {"value": _nanoseconds(result.median_s)}
        if result.q1_s is not None and result.q3_s is not None:
            latency.update(lower_value=_nanoseconds(result.q1_s), upper_value=_nanoseconds(result.q3_s))
        measures = {"latency": latency}
        throughput = _throughput(result)
        if throughput is not None:
            measures["throughput"] = {"value": throughput}
        document[result.benchmark] = measures
    return document


def _extra(run, result):
    parts = [f"commit {run.commit}" if run.commit else f"date {run.date}", f"host {run.host}",
             f"device {run.device_name}", f"runs {result.run_count}", f"gate {result.gate or 'n/a'}"]
    if result.noise is not None:
        parts.append(f"noise {format_percent(100 * result.noise)}")
    if result.q1_s is not None and result.q3_s is not None:
        parts.append(f"quartiles {result.q1_s * _NANOSECONDS:.6g}..{result.q3_s * _NANOSECONDS:.6g} ns")
    return "; ".join(parts)


def github_action_benchmark(run, results):
    entries = []
    for result in results:
        if result.median_s is None:
            continue
        entry = {"name": result.benchmark, "unit": "ns", "value": _nanoseconds(result.median_s)}
        if result.q1_s is not None and result.q3_s is not None:
            entry["range"] = f"± {(result.q3_s - result.q1_s) / 2 * _NANOSECONDS:.4g}"
        entry["extra"] = _extra(run, result)
        entries.append(entry)
    return entries


def export_document(format_name, run, results):
    ordered = sorted(results, key=lambda result: result.benchmark)
    if format_name == "bencher":
        return bencher_metrics(ordered)
    return github_action_benchmark(run, ordered)
