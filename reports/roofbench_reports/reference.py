"""The reference-results page (docs/reference-results.md) from a set of results files: one table per file,
headed by its date, commit, device and driver, with each benchmark's time, rate, % of roof and gate.
Files another framework measured (PyTorch's, "source": "pytorch") follow roofbench's of the same device,
and a ladder both measured gets one more table with the series side by side, rungs matched as the report's
waterfall matches them."""

import argparse
import os
import sys

from .document import Column, Document, Heading, Paragraph, Table
from .markdown import render_markdown
from .results import DeviceResults, ResultsError, group_by_device, load_run_file
from .summary import gate_text
from .units import format_percent, format_si, format_time
from .waterfall import OTHER_SOURCES, ladder_groups, series_name, split_series

DEFAULT_INPUT = "results/reference"
DEFAULT_PAGE = "docs/reference-results.md"
REGENERATE_COMMAND = f"scripts/reference_results.py {DEFAULT_INPUT} -o {DEFAULT_PAGE}"
EXIT_OK, EXIT_DIFFERS, EXIT_BAD_INPUT = 0, 1, 2
NOT_RECORDED = "not recorded"
COLUMNS = [Column("benchmark"), Column("time", numeric=True), Column("rate", numeric=True),
           Column("% of roof", numeric=True), Column("gate")]


def results_paths(inputs):
    """The JSON files the inputs name: files as given, folders searched for *.json, each sorted by path."""
    paths = []
    for item in inputs:
        if os.path.isdir(item):
            found = [os.path.join(folder, name) for folder, _, names in os.walk(item)
                     for name in names if name.endswith(".json")]
            paths += sorted(found)
        elif os.path.isfile(item):
            paths.append(item)
        else:
            raise ResultsError(f"{item}: no such file or folder")
    return paths


def _source_order(run):
    return (run.source != "", run.date, run.path)


def rate_text(benchmark):
    """The rate the console shows: items/s when the case counts items, else FLOP/s, else B/s."""
    for counter in (benchmark.items_counter, "FLOP/s", "B/s"):
        value = benchmark.counter(counter) if counter else None
        if value is not None:
            return format_si(value, counter)
    return "—"


def benchmark_row(benchmark):
    name = benchmark.name + (f" (median of {benchmark.repetitions} runs)" if benchmark.repetitions > 1 else "")
    if benchmark.errored:
        return [name, "—", "—", "—", gate_text(benchmark) if benchmark.gate else "error"]
    return [name, format_time(benchmark.median_seconds), rate_text(benchmark),
            format_percent(benchmark.counter("roof_pct")), gate_text(benchmark)]


def _measured_by(run):
    if not run.source:
        return f"roofbench {run.version}".strip()
    return run.framework or OTHER_SOURCES.get(run.source, run.source)


def _date_text(run):
    return run.date.replace("T", " ")[:16] + " UTC" if run.date else NOT_RECORDED


def run_blocks(run):
    """The heading, the line that says where the figures come from, and the table of one results file."""
    device = DeviceResults(run.device, run.ceilings)
    device.add(run)
    what = f"suite {run.suite}" if run.suite else "a filter"
    facts = [f"date {_date_text(run)}", f"commit {run.commit or NOT_RECORDED}", f"device {run.device.name}",
             f"driver {run.driver or NOT_RECORDED}", f"measured by {_measured_by(run)}", f"file {run.path}"]
    return [
        Heading(2, f"{run.device.name}: {what}, {_measured_by(run)}"),
        Paragraph("; ".join(facts) + ("" if run.complete else "; the run stopped early")),
        Table(COLUMNS, [benchmark_row(benchmark) for benchmark in device.benchmarks.values()]),
    ]


def ladder_blocks(device):
    """Per ladder measured by more than one series on this device (roofbench's rungs and PyTorch's): one table
    of items/s per rung, a column per series, rungs matched as the report's waterfall matches them, and
    roofbench's rate over the best other series' at that rung."""
    blocks = []
    for title, benchmarks in ladder_groups(device).items():
        series = split_series(benchmarks)
        if len(series) < 2 or series[0][0] != "":
            continue
        keys = list(dict.fromkeys(rung.key for _, rungs in series for rung in rungs))
        rates = [_fastest_per_key(rungs) for _, rungs in series]
        rows = [[key] + [_rung_text(by_key.get(key)) for by_key in rates] + [_ratio_text(key, rates)]
                for key in keys]
        columns = ([Column("rung")] + [Column(series_name(name), numeric=True) for name, _ in series]
                   + [Column("roofbench / best other", numeric=True)])
        blocks += [Heading(3, f"{device.device.name}: the {title} ladder, every series"),
                   Paragraph("Each cell: the rung's rate, what ran and, where recorded, its mean SM clock over the "
                             "samples. At the power limit a step that does more work a second draws the clock down, "
                             "so the series' clocks differ; the ratio is of the rates as measured."),
                   Table(columns, rows)]
    return blocks


def _fastest_per_key(rungs):
    """{rung key: its fastest rung}: a series without named configurations may hold several rungs of one
    number (PyTorch's R1_compile and R1_compile_reduce_overhead), and the strongest is the one to beat."""
    fastest = {}
    for rung in rungs:
        if rung.rate and (rung.key not in fastest or rung.rate > fastest[rung.key].rate):
            fastest[rung.key] = rung
    return fastest


def _rung_text(rung):
    """The rung's rate, what ran, and its mean SM clock where recorded: at a power limit the rate follows the clock
    the limit leaves, so a ratio between series is read beside their clocks."""
    if rung is None:
        return "—"
    clock = rung.benchmark.counter("sm_clock_mhz")
    parts = [part for part in (rung.title, rung.detail) if part] + ([f"{clock:.0f} MHz"] if clock else [])
    return f"{format_si(rung.rate, rung.benchmark.items_counter)} ({', '.join(parts)})"


def _ratio_text(key, rates):
    own = rates[0].get(key)
    others = [by_key[key].rate for by_key in rates[1:] if key in by_key]
    return f"{own.rate / max(others):.2f}x" if own and others else "—"


def reference_document(runs, inputs):
    document = Document("Reference results")
    document.add(Paragraph(f"Generated from the results files under {', '.join(inputs)}; do not edit. "
                           f"Regenerate: {REGENERATE_COMMAND}"))
    if not runs:
        document.add(Paragraph("No results files yet."))
    for device in sorted(group_by_device(runs), key=lambda device: (device.device.name, device.device.key)):
        for run in sorted(device.files, key=_source_order):
            document.blocks += run_blocks(run)
        document.blocks += ladder_blocks(device)
    return document


def reference_page(inputs):
    runs = [load_run_file(path) for path in results_paths(inputs)]
    return render_markdown(reference_document(runs, inputs))


def _read(path):
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read()
    except FileNotFoundError:
        return None


def main(argv=None):
    parser = argparse.ArgumentParser(prog="reference_results.py", description=__doc__.strip().splitlines()[0])
    parser.add_argument("inputs", nargs="*", default=[DEFAULT_INPUT],
                        help=f"results files or folders of them (default {DEFAULT_INPUT})")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("-o", "--output", help="write the page here (default: standard output)")
    target.add_argument("--check", metavar="PAGE",
                        help="exit 1 when PAGE differs from what the files give, writing nothing")
    arguments = parser.parse_args(argv)
    try:
        page = reference_page(arguments.inputs)
        if arguments.check:
            if _read(arguments.check) != page:
                print(f"reference_results.py: {arguments.check} differs from the page made from {', '.join(arguments.inputs)} "
                      f"give; regenerate: {REGENERATE_COMMAND}", file=sys.stderr)
                return EXIT_DIFFERS
            return EXIT_OK
        if arguments.output:
            with open(arguments.output, "w", encoding="utf-8") as stream:
                stream.write(page)
        else:
            sys.stdout.write(page)
    except ResultsError as error:
        print(f"reference_results.py: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (OSError, UnicodeDecodeError) as error:
        print(f"reference_results.py: cannot read or write {error.filename or 'a file'}: "
              f"{getattr(error, 'strerror', None) or error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK
