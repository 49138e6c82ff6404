"""roofbench-compare BASE.json NEW.json [--base FILE]... [--new FILE]...: a Markdown comparison for a
pull-request comment, judged on independent runs.

Each results file is one run (one process; its repetitions are folded into one median): a benchmark is
judged only with 3 or more files a side, or on a change beyond 2x. Run base and new as separate processes,
interleaved, on one machine (docs/compare.md).

Exit codes:
  0  no regression, and at least one benchmark was judged
  1  a benchmark got slower, a gate that passed now fails, a benchmark of the base is missing from the
     new run or the new run is incomplete (the last two unless allowed)
  2  bad input: an unreadable file, a time that is missing, zero or negative, runs that measured
     different things (devices, hot/cold, gates on/off), or bad arguments
  3  cannot judge: no benchmark could be judged either way (too few runs, too noisy)"""

import argparse
import sys

from .compare import (NO_REGRESSION, NOTHING_JUDGED, REGRESSION, RunProblems, compare_benchmarks,
                      comparison_document, comparison_outcome)
from .markdown import render_markdown
from .results import DeviceResults, ResultsError, load_run_file

EXIT_SAME, EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_CANNOT_JUDGE = 0, 1, 2, 3
_EXIT_CODES = {NO_REGRESSION: EXIT_SAME, REGRESSION: EXIT_REGRESSION, NOTHING_JUDGED: EXIT_CANNOT_JUDGE}


def _fraction(text):
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction in [0, 1)")
    return value


def _parser():
    parser = argparse.ArgumentParser(prog="roofbench-compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base", help="results JSON of the baseline (--base adds more runs of it)")
    parser.add_argument("new", help="results JSON to judge against it (--new adds more runs of it)")
    parser.add_argument("--base", dest="more_base", action="append", default=[], metavar="FILE",
                        help="another run of the baseline, from its own process (repeatable)")
    parser.add_argument("--new", dest="more_new", action="append", default=[], metavar="FILE",
                        help="another run of the new side, from its own process (repeatable)")
    parser.add_argument("--threshold", type=_fraction, default=0.05,
                        help="smallest relative change of the median that counts (default 0.05 = 5%%)")
    parser.add_argument("--alpha", type=_fraction, default=0.05,
                        help="chance of any false call over the whole comparison (default 0.05)")
    parser.add_argument("--allow-removed", action="store_true",
                        help="benchmarks of the base missing from the new run do not fail the comparison")
    parser.add_argument("--allow-incomplete", action="store_true",
                        help="a new run that stopped early (complete: false) does not fail the comparison")
    parser.add_argument("--allow-device-mismatch", action="store_true",
                        help="compare results from different devices (context.roofbench.device.key)")
    parser.add_argument("--allow-mode-mismatch", action="store_true",
                        help="compare runs with different modes (hot/cold, gates on/off)")
    parser.add_argument("--ignore-fact", dest="ignored_facts", action="append", default=[], metavar="NAME",
                        help="a case fact (e.g. algorithm, matmul_algorithms) whose difference is noted but "
                             "does not make a row not comparable (repeatable)")
    return parser


def _side(paths):
    """All runs of one side merged into one DeviceResults; they must share one device."""
    runs = [load_run_file(path) for path in paths]
    keys = sorted({run.device.key for run in runs})
    if len(keys) > 1:
        raise ResultsError(f"{', '.join(paths)}: runs of one side come from different devices ({', '.join(keys)})")
    side = DeviceResults(runs[0].device, runs[0].ceilings)
    for run in runs:
        side.add(run)
    return side


def _mode_problem(base, new):
    for what, attribute in (("mode", "mode"), ("gates", "gate_mode")):
        values = {side: sorted({getattr(run, attribute) for run in results.files if getattr(run, attribute)})
                  for side, results in (("base", base), ("new", new))}
        if values["base"] and values["new"] and values["base"] != values["new"]:
            return f"different {what} ({'/'.join(values['base'])} vs {'/'.join(values['new'])})"
    return ""


def main(argv=None):
    parser = _parser()
    try:
        arguments = parser.parse_args(argv)
    except SystemExit as exit_request:  # argparse exits 2 on bad usage already; keep its code
        return exit_request.code
    try:
        base = _side([arguments.base] + arguments.more_base)
        new = _side([arguments.new] + arguments.more_new)
    except ResultsError as error:
        print(f"roofbench-compare: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if base.device.key != new.device.key and not arguments.allow_device_mismatch:
        print(f"roofbench-compare: different devices ({base.device.key} vs {new.device.key}); "
              "pass --allow-device-mismatch to compare anyway", file=sys.stderr)
        return EXIT_BAD_INPUT
    mode_problem = _mode_problem(base, new)
    if mode_problem and not arguments.allow_mode_mismatch:
        print(f"roofbench-compare: {mode_problem}; pass --allow-mode-mismatch to compare anyway", file=sys.stderr)
        return EXIT_BAD_INPUT
    comparisons, added, removed = compare_benchmarks(base.benchmarks, new.benchmarks, arguments.threshold,
                                                     arguments.alpha, frozenset(arguments.ignored_facts))
    problems = RunProblems(removed=removed,
                           incomplete_new=[run.title for run in new.files if not run.complete],
                           incomplete_base=[run.title for run in base.files if not run.complete],
                           allow_removed=arguments.allow_removed, allow_incomplete=arguments.allow_incomplete)
    document = comparison_document(comparisons, added, problems, base.files, new.files, arguments.threshold,
                                   arguments.alpha)
    print(render_markdown(document), end="")
    return _EXIT_CODES[comparison_outcome(comparisons, problems)]
