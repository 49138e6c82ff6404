"""Builds the report Document: per device its ceilings, plots and one table per plugin; then what could
not be loaded or run."""

import os
from dataclasses import dataclass

from .document import BulletList, Column, Document, Figure, Heading, Paragraph, Table
from .palette import precision_order
from .interactive import roofline_spec, waterfall_spec
from .roofline import point_hover, roofline_of
from .scaling import scaling_blocks
from .units import format_number, format_percent, format_si, format_time
from .waterfall import ladder_groups, waterfall_of

BENCHMARK_COLUMNS = [
    Column("benchmark"), Column("time", numeric=True), Column("rate", numeric=True), Column("noise", numeric=True),
    Column("FLOP/s", numeric=True), Column("B/s", numeric=True), Column("AI", numeric=True),
    Column("% of roof", numeric=True), Column("bound"), Column("gate"),
]
CEILING_COLUMNS = [Column("ceiling"), Column("measured", numeric=True), Column("datasheet", numeric=True),
                   Column("measured / datasheet", numeric=True)]


@dataclass
class DeviceFigures:
    roofline: object
    waterfalls: list


def device_figures(device_results):
    """The device's roofline and waterfalls as data (roofline.Roofline, waterfall.Waterfall)."""
    return DeviceFigures(
        roofline=roofline_of(device_results),
        waterfalls=[waterfall_of(name, rungs, device_results.device.name)
                    for name, rungs in ladder_groups(device_results).items()],
    )


def gate_text(benchmark):
    """Failures in capitals, so they stand out in a column of 'pass'."""
    gate = benchmark.gate
    return gate.upper() if gate in ("fail", "error") else (gate or "—")


def _noise_text(benchmark):
    """The relative noise; over 1%, with what is left of it at a fixed clock beside it, since on a GPU
    under its power limit most of such a spread is the clock moving (docs/results-format.md)."""
    noise = benchmark.counter("noise")
    if noise is None:
        return "—"
    text = format_percent(noise * 100, 2)
    fixed = benchmark.counter("noise_at_fixed_clock")
    if noise > 0.01 and fixed is not None:
        text += f" ({format_percent(fixed * 100, 2)} at a fixed clock)"
    return text + (" NOISY" if benchmark.noisy else "")


def _facts_text(benchmark):
    return "; ".join(f"{key}={value}" for key, value in benchmark.facts.items()) or "—"


def _energy_text(benchmark):
    """--energy's figures: energy per run and the mean power it was drawn at (at the power limit the energy,
    not the kernels alone, sets a run's time)."""
    joules, watts = benchmark.counter("energy_per_run"), benchmark.counter("power")
    if joules is None:
        return "—"
    return format_si(joules, "J") + (f" at {watts:.0f} W" if watts is not None else "")


def _gate_cell(benchmark):
    """A noisy result is not a clean pass: its gate cell says so."""
    gate = gate_text(benchmark)
    return f"{gate}, noisy" if benchmark.noisy and gate == "pass" else gate


def rate_text(benchmark):
    """The headline rate as the console shows it ('1.2 M tokens/s'), for a case that counts items."""
    counter = benchmark.items_counter
    rate = benchmark.counter(counter) if counter else None
    return format_si(rate, counter) if rate is not None else "—"


def benchmark_row(benchmark, cache_name="L2"):
    name = benchmark.short_name
    if benchmark.repetitions > 1:
        name += f" (median of {benchmark.repetitions} runs)"
    return [
        name, format_time(benchmark.median_seconds), rate_text(benchmark), _noise_text(benchmark),
        format_si(benchmark.counter("FLOP/s")), format_si(benchmark.counter("B/s")),
        format_number(benchmark.counter("AI")), format_percent(benchmark.counter("roof_pct")),
        (benchmark.bound or "—") + (f" (data in {cache_name})" if benchmark.cache_resident else "")
        + (f" ({benchmark.roof_note} roof)" if benchmark.roof_note and not benchmark.cache_resident else ""),
        _gate_cell(benchmark),
    ]


def _ratio_text(measured, datasheet):
    return format_percent(100 * measured / datasheet) if measured and datasheet else "—"


def ceilings_table(ceilings):
    rows = [["memory bandwidth", format_si(ceilings.bandwidth_Bps, "B/s"),
             format_si(ceilings.datasheet_bandwidth_Bps, "B/s"),
             _ratio_text(ceilings.bandwidth_Bps, ceilings.datasheet_bandwidth_Bps)]]
    if ceilings.read_bandwidth_Bps:
        rows.append(["read-streaming bandwidth", format_si(ceilings.read_bandwidth_Bps, "B/s"), "—", "—"])
    for precision in sorted(set(ceilings.flops) | set(ceilings.datasheet_flops), key=precision_order):
        measured, datasheet = ceilings.flops.get(precision), ceilings.datasheet_flops.get(precision)
        rows.append([f"{precision} compute", format_si(measured, "FLOP/s"), format_si(datasheet, "FLOP/s"),
                     _ratio_text(measured, datasheet)])
    return Table(CEILING_COLUMNS, rows)


def _files_paragraph(device_results):
    described = [
        f"{os.path.basename(run.path)} ({'suite ' + run.suite if run.suite else 'no suite: a filter'}, {run.date or 'no date'}, host {run.host_name or '?'})"
        for run in device_results.files
    ]
    return Paragraph(f"Device key {device_results.device.key}; from {len(described)} file(s): " + "; ".join(described))


def _add_device_section(document, device_results, figures):
    device = device_results.device
    document.add(Heading(2, f"{device.name} ({device.kind})"))
    document.add(_files_paragraph(device_results))
    for run in device_results.files:
        if not run.complete:
            document.add(Paragraph(f"{os.path.basename(run.path)} is incomplete: the run stopped before its last "
                                   "benchmark (complete is false).", emphasis=True))
    datasheet = device_results.ceilings.datasheet_name
    document.add(Heading(3, "Ceilings" + (f" (datasheet: {datasheet})" if datasheet else "")))
    document.add(ceilings_table(device_results.ceilings))
    roofline = figures.roofline
    document.add(Figure(roofline_spec(roofline, point_hover), tuple(sorted({g.plugin for g in roofline.groups}))))
    for waterfall in figures.waterfalls:
        document.add(Figure(waterfall_spec(waterfall), tuple(sorted({b.rung.benchmark.plugin for b in waterfall.bars}))))
    for plugin, benchmarks in device_results.plugins().items():
        document.add(Heading(3, f"Plugin {plugin}"))
        # Facts (how a point ran, e.g. the algorithm a library chose) get a column where a case has any.
        with_facts = any(b.facts for b in benchmarks)
        # Energy (--energy) likewise, where a benchmark of the plugin has the figure.
        with_energy = any(b.counter("energy_per_run") is not None for b in benchmarks)
        columns = (BENCHMARK_COLUMNS + ([Column("energy / run", numeric=True)] if with_energy else [])
                   + ([Column("facts", folded=True)] if with_facts else []))
        table_rows = [benchmark_row(b, device.cache_name) + ([_energy_text(b)] if with_energy else [])
                      + ([_facts_text(b)] if with_facts else []) for b in benchmarks]
        document.add(Table(columns, table_rows, tag=plugin))
        for block in scaling_blocks(benchmarks, tag=plugin):
            document.add(block)
        noisy = [f"{b.short_name}: {b.quality_reason or 'flagged noisy by the host'}" for b in benchmarks if b.noisy]
        if noisy:
            document.add(Paragraph("Noisy (samples in two clusters, or noise far above the --noise bound): "
                                   "their medians are not clean numbers.", emphasis=True))
            document.add(BulletList(noisy))
        errors = [f"{b.short_name} ({b.gate or 'error'}): {'; '.join(b.error_messages) or 'no message'}"
                  for b in benchmarks if b.errored]
        if errors:
            document.add(Paragraph("Errors:"))
            document.add(BulletList(errors))


def _problem_items(devices, attribute, describe):
    prefix_device = len(devices) > 1
    return [
        (f"{d.device.name}: " if prefix_device else "") + describe(item)
        for d in devices
        for item in getattr(d, attribute)
    ]


def build_summary(devices, figures):
    document = Document("roofbench report")
    for device_results, device_plots in zip(devices, figures):
        _add_device_section(document, device_results, device_plots)
    load_failures = _problem_items(devices, "load_failures",
                                   lambda item: f"{item.get('path', '?')}: {item.get('reason', 'no reason given')}")
    not_run = _problem_items(devices, "not_run",
                             lambda item: f"{item.get('case', '?')}: {item.get('reason', 'no reason given')}")
    document.add(Heading(2, "Load failures"))
    document.add(BulletList(load_failures) if load_failures else Paragraph("None."))
    document.add(Heading(2, "Not run"))
    document.add(BulletList(not_run) if not_run else Paragraph("None."))
    return document
