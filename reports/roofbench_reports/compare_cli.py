"""roofbench-compare BASE.json NEW.json: a Markdown table for a pull-request comment; exit 1 when a
benchmark got slower beyond the threshold or a gate that passed now fails, 2 on bad input."""

import argparse
import sys

from .compare import compare_benchmarks, comparison_document
from .markdown import render_markdown
from .results import ResultsError, group_by_device, load_run_file

EXIT_SAME, EXIT_REGRESSION, EXIT_BAD_INPUT = 0, 1, 2


def _fraction(text):
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a fraction in [0, 1)")
    return value


def _parser():
    parser = argparse.ArgumentParser(prog="roofbench-compare", description=__doc__.strip().splitlines()[0])
    parser.add_argument("base", help="results JSON of the baseline")
    parser.add_argument("new", help="results JSON to judge against it")
    parser.add_argument("--threshold", type=_fraction, default=0.05,
                        help="smallest relative change of the median that counts (default 0.05 = 5%%)")
    parser.add_argument("--alpha", type=_fraction, default=0.05,
                        help="significance level of the Mann-Whitney U test (default 0.05)")
    parser.add_argument("--allow-device-mismatch", action="store_true",
                        help="compare results from different devices (context.roofbench.device.key)")
    return parser


def _single_device(path):
    devices = group_by_device([load_run_file(path)])
    return devices[0]


def main(argv=None):
    parser = _parser()
    try:
        arguments = parser.parse_args(argv)
    except SystemExit as exit_request:  # argparse exits 2 on bad usage already; keep its code
        return exit_request.code
    try:
        base, new = _single_device(arguments.base), _single_device(arguments.new)
    except ResultsError as error:
        print(f"roofbench-compare: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if base.device.key != new.device.key and not arguments.allow_device_mismatch:
        print(f"roofbench-compare: different devices ({base.device.key} vs {new.device.key}); "
              "pass --allow-device-mismatch to compare anyway", file=sys.stderr)
        return EXIT_BAD_INPUT
    comparisons, added, removed = compare_benchmarks(base.benchmarks, new.benchmarks, arguments.threshold,
                                                     arguments.alpha)
    document = comparison_document(comparisons, added, removed, arguments.base, arguments.new,
                                   arguments.threshold, arguments.alpha)
    print(render_markdown(document), end="")
    return EXIT_REGRESSION if any(c.regressed for c in comparisons) else EXIT_SAME
