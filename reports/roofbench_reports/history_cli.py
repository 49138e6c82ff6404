"""roofbench-history: results over time. `add` records results files in a store (an SQLite file, or a
PostgreSQL server by URL), `trend` writes each benchmark's medians over commits with their change points,
`check` fails a CI job when the newest run sits after a regression, `export` writes the newest run for
Bencher or github-action-benchmark. Exit codes: 0 fine, 1 a regression (check), 2 bad input."""

import argparse
import datetime
import json
import os
import sys

from .changepoints import ChangePointSettings
from .document import BulletList, Document, Paragraph, Table
from .history_analysis import compile_filter, detect, regressions_at, series_of
from .history_export import FORMATS, export_document
from .history_store import StoreError, check_timed, file_fingerprint, open_store
from .history_trend import (CHANGE_COLUMNS, change_row, method_text, signed_percent, trend_document,
                            trend_page)
from .markdown import render_markdown
from .results import DeviceResults, ResultsError, load_run_file
from .units import format_percent, format_time

EXIT_FINE, EXIT_REGRESSION, EXIT_BAD_INPUT = 0, 1, 2
# Where the host writes its results by default, so the store sits with them.
DEFAULT_STORE = os.path.join("roofbench-results", "history.sqlite")


class UsageError(Exception):
    """Bad input the user can fix; the message is one line."""


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (the usage itself is in --help)."""

    def error(self, message):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message} (see --help)\n")


def _fraction(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction in [0, 1)")
    return value


def _positive(kind):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text} is not positive")
        return value
    return parse


def _store_options():
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--db", default=DEFAULT_STORE, metavar="STORE",
                         help=f"an SQLite file or a postgresql:// URL (default {DEFAULT_STORE})")
    return options


def _method_options():
    defaults = ChangePointSettings()
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("filter", nargs="?", default="",
                         help="a regular expression: only benchmarks whose name it matches")
    options.add_argument("--significance", type=_fraction, default=defaults.significance,
                         help=f"largest p-value of the permutation test (default {defaults.significance:g})")
    options.add_argument("--permutations", type=_positive(int), default=defaults.max_permutations,
                         help=f"most permutations per test (default {defaults.max_permutations})")
    options.add_argument("--noise-multiple", type=_positive(float), default=defaults.noise_multiple,
                         help="a change must move the median by this many run-to-run noise spreads "
                              f"(default {defaults.noise_multiple:g})")
    options.add_argument("--min-effect", type=_fraction, default=defaults.min_effect,
                         help=f"and by at least this fraction (default {defaults.min_effect:g})")
    options.add_argument("--min-segment", type=_positive(int), default=defaults.min_segment,
                         help=f"runs on each side of a change point, at least (default {defaults.min_segment})")
    return options


def _parser():
    parser = _OneLineParser(prog="roofbench-history", description=__doc__.strip().splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    store, method = _store_options(), _method_options()
    add = commands.add_parser("add", parents=[store], help="record results files (a file already recorded is "
                                                           "not recorded twice)")
    add.add_argument("files", nargs="+", metavar="FILE", help="roofbench results JSON")
    trend = commands.add_parser("trend", parents=[store, method], help="medians over commits and change points, "
                                                                       "as Markdown and an HTML page")
    trend.add_argument("--output", default="roofbench-trend", metavar="DIR",
                       help="folder for trend.md and trend.html (default roofbench-trend)")
    check = commands.add_parser("check", parents=[store, method], help="exit 1 when the newest run sits after a "
                                                                       "regression")
    check.add_argument("--threshold", type=_fraction, default=0.02,
                       help="smallest slowdown at a change point that fails the check (default 0.02 = 2%%)")
    export = commands.add_parser("export", parents=[store], help="the newest run (or --run) for a CI dashboard")
    export.add_argument("--format", required=True, choices=FORMATS)
    export.add_argument("--run", type=_positive(int), metavar="ID", help="the run's id (as add prints it)")
    export.add_argument("--output", metavar="FILE", help="write here instead of to standard output")
    return parser


def _settings(arguments):
    return ChangePointSettings(significance=arguments.significance, max_permutations=arguments.permutations,
                               noise_multiple=arguments.noise_multiple, min_effect=arguments.min_effect,
                               min_segment=arguments.min_segment)


def _add(arguments):
    store = open_store(arguments.db, create=True)
    bad = 0
    for path in arguments.files:
        try:
            run = load_run_file(path)
            check_timed(run)
            fingerprint = file_fingerprint(path)
        except ResultsError as error:
            print(f"roofbench-history: {error}", file=sys.stderr)
            bad += 1
            continue
        results = DeviceResults(run.device, run.ceilings)
        results.add(run)
        added_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        run_id = store.add_run(run, fingerprint, results.benchmarks.values(), added_at)
        if run_id is None:
            print(f"{path}: already recorded in {store.where}; not added again")
        else:
            print(f"{path}: recorded as run {run_id} ({len(results.benchmarks)} benchmarks, {run.title})")
    store.close()
    return EXIT_BAD_INPUT if bad else EXIT_FINE


def _analysed(arguments):
    """(runs, series, changes) of the store, filtered and with change points found."""
    name_filter = compile_filter(arguments.filter)
    store = open_store(arguments.db)
    runs, results = store.runs(), store.results()
    store.close()
    if not runs:
        raise UsageError(f"{arguments.db}: no runs recorded yet (roofbench-history add FILE...)")
    series_list = series_of(runs, results, name_filter)
    if not series_list:
        raise UsageError(f"filter {arguments.filter!r} matches no benchmark in {arguments.db}")
    return runs, series_list, detect(series_list, _settings(arguments))


def _plotly_js():
    try:
        from plotly.offline import get_plotlyjs  # Debian's python3-plotly
    except ImportError:
        raise UsageError("the trend page needs Plotly (apt-get install python3-plotly)") from None
    return get_plotlyjs()


def _trend(arguments):
    plotly_js = _plotly_js()
    runs, series_list, changes = _analysed(arguments)
    settings = _settings(arguments)
    document = trend_document(runs, series_list, changes, settings, arguments.db)
    try:
        os.makedirs(arguments.output, exist_ok=True)
        markdown_path = os.path.join(arguments.output, "trend.md")
        page_path = os.path.join(arguments.output, "trend.html")
        with open(markdown_path, "w", encoding="utf-8") as stream:
            stream.write(render_markdown(document))
        with open(page_path, "w", encoding="utf-8") as stream:
            stream.write(trend_page(document.title, method_text(settings), runs, changes, series_list,
                                          plotly_js))
    except OSError as error:
        raise UsageError(f"{arguments.output}: cannot write the trend: {error.strerror}") from None
    print(f"{len(changes)} change points in {len(series_list)} benchmarks over {len(runs)} runs; "
          f"wrote {markdown_path} and {page_path}")
    return EXIT_FINE


def _regression_lines(slower, gates):
    lines = []
    for change in slower:
        point = change.point
        lines.append(f"REGRESSION {change.series.benchmark} on {change.series.device_name}: "
                     f"{signed_percent(point.relative_change)} ({format_time(point.before_median)} -> "
                     f"{format_time(point.after_median)}) between {change.commit_range}; "
                     f"evidence: p = {point.p_value:.3g} over {point.permutations} permutations, run-to-run "
                     f"noise {format_percent(100 * point.noise)}, {change.runs_since} runs since")
    for gate in gates:
        lines.append(f"GATE {gate.series.benchmark} on {gate.series.device_name}: {gate.gate} in "
                     f"{gate.newest_run.label}, passed in {gate.previous_run.label}")
    return lines


def _check(arguments):
    runs, series_list, changes = _analysed(arguments)
    newest = runs[-1]
    slower, gates = regressions_at(newest, series_list, arguments.threshold)
    document = Document(f"roofbench-history check: newest run {newest.label} ({newest.date}, {newest.host})")
    document.add(Paragraph(f"{len(changes)} change points in {len(series_list)} benchmarks over {len(runs)} "
                           f"runs. {method_text(_settings(arguments))}"))
    if changes:
        document.add(Table(CHANGE_COLUMNS, [change_row(change) for change in changes]))
    lines = _regression_lines(slower, gates)
    if lines:
        document.add(BulletList(lines))
        document.add(Paragraph(f"{len(lines)} regressions in the newest run (slower by more than "
                               f"{format_percent(100 * arguments.threshold)} at a change point, or a gate "
                               "that newly fails)", emphasis=True))
    else:
        document.add(Paragraph("No regression in the newest run.", emphasis=True))
    print(render_markdown(document), end="")
    return EXIT_REGRESSION if lines else EXIT_FINE


def _export(arguments):
    store = open_store(arguments.db)
    runs = store.runs()
    if not runs:
        raise UsageError(f"{arguments.db}: no runs recorded yet (roofbench-history add FILE...)")
    chosen = next((run for run in runs if run.id == arguments.run), None) if arguments.run else runs[-1]
    if chosen is None:
        raise UsageError(f"{arguments.db}: no run with id {arguments.run}")
    document = export_document(arguments.format, chosen, store.results([chosen.id]))
    store.close()
    text = json.dumps(document, indent=1, ensure_ascii=False) + "\n"
    if not arguments.output:
        sys.stdout.write(text)
        return EXIT_FINE
    try:
        with open(arguments.output, "w", encoding="utf-8") as stream:
            stream.write(text)
    except OSError as error:
        raise UsageError(f"{arguments.output}: cannot write: {error.strerror}") from None
    print(f"wrote run {chosen.id} ({chosen.label}) as {arguments.format} JSON to {arguments.output}")
    return EXIT_FINE


_COMMANDS = {"add": _add, "trend": _trend, "check": _check, "export": _export}


def main(argv=None):
    parser = _parser()
    try:
        arguments = parser.parse_args(argv)
    except SystemExit as exit_request:  # argparse exits 2 on bad usage already; keep its code
        return exit_request.code
    try:
        return _COMMANDS[arguments.command](arguments)
    except (UsageError, StoreError, ValueError) as error:
        print(f"roofbench-history: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # the reader of our output went away (| head): nothing left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FINE
