"""Runs the roofbench host for one suite and prints its headline numbers as CTest measurements, so that
CTest/CDash can track them over time (ctest_bench.py is the command-line entry point)."""

import argparse
import os
import subprocess
import sys
from xml.sax.saxutils import escape

from .results import ResultsError, group_by_device, load_run_file

LATEST_RESULTS = "latest.json"
# The host's headline figures (declared so in core/src/summaries.cpp; tests/cmake/headline_check.cmake
# holds the two equal); the items/s counter (tokens/s, ...) is added per benchmark when it has one.
HEADLINE_COUNTERS = ("FLOP/s", "B/s", "roof_pct", "time_median")


def headline_values(benchmark):
    """[(counter name, value)] of the headline counters that have a value (medians over repetitions)."""
    names = list(HEADLINE_COUNTERS) + ([benchmark.items_counter] if benchmark.items_counter else [])
    values = [(name, benchmark.counter(name)) for name in names]
    return [(name, value) for name, value in values if value is not None]


def measurement_line(benchmark_name, counter, value):
    # Always double quotes: CTest looks for name="..." literally.
    name = escape(f"{benchmark_name} {counter}", {'"': "&quot;"})
    return f'<CTestMeasurement type="numeric/double" name="{name}">{float(value)!r}</CTestMeasurement>'


def measurement_lines(results_path):
    return [
        measurement_line(benchmark.name, counter, value)
        for device in group_by_device([load_run_file(results_path)])
        for benchmark in device.benchmarks.values()
        for counter, value in headline_values(benchmark)
    ]


# CTest's SKIP_RETURN_CODE for the bench tests (tests/CMakeLists.txt).
SKIPPED = 77
# Chooses the device at ctest time, over the --device the build was configured with.
DEVICE_VARIABLE = "ROOFBENCH_BENCH_DEVICE"


def parse_arguments(argv):
    parser = argparse.ArgumentParser(
        prog="ctest_bench.py", description="Run a roofbench suite and print its results as CTest measurements.",
        allow_abbrev=False)  # everything unknown goes to the host untouched, even '--s'-like prefixes
    parser.add_argument("--roofbench", required=True, help="the roofbench host executable")
    parser.add_argument("--suite", required=True, help="suite to run")
    parser.add_argument("--results-dir", required=True,
                        help="where the host writes the suite's results (kept: one file per run and latest.json)")
    parser.add_argument("--device", default="",
                        help=f"the host's --device (empty: the host's default, the first GPU else the CPU); "
                             f"the environment variable {DEVICE_VARIABLE} overrides it")
    return parser.parse_known_args(argv)


def host_command(arguments, extra):
    command = [arguments.roofbench, "--suite", arguments.suite, "--results-dir", arguments.results_dir]
    device = os.environ.get(DEVICE_VARIABLE) or arguments.device
    return command + (["--device", device] if device else []) + extra


def main(argv=None):
    arguments, extra = parse_arguments(argv)
    latest = os.path.join(arguments.results_dir, LATEST_RESULTS)
    try:
        os.makedirs(arguments.results_dir, exist_ok=True)
        if os.path.exists(latest):
            os.remove(latest)  # an earlier run's figures must not pass for this run's
    except OSError as error:
        print(f"ctest_bench.py: cannot prepare {arguments.results_dir}: {error}", file=sys.stderr)
        return 1
    command = host_command(arguments, extra)
    try:
        run = subprocess.run(command, stderr=subprocess.PIPE, text=True)
    except OSError as error:
        print(f"ctest_bench.py: cannot run {arguments.roofbench}: {error}", file=sys.stderr)
        return 1
    sys.stdout.flush()
    sys.stderr.write(run.stderr)
    exit_code = run.returncode
    if exit_code == 2 and "matches no benchmark that can run here" in run.stderr:
        print(f"ctest_bench.py: nothing in suite {arguments.suite} runs on this device: skipped", file=sys.stderr)
        return SKIPPED
    try:
        lines = measurement_lines(latest)
    except ResultsError as error:
        print(f"ctest_bench.py: no results to report: {error}", file=sys.stderr)
        # A host that says it succeeded but wrote nothing readable has still failed.
        return exit_code or 1
    print("\n".join(lines))
    print(f"ctest_bench.py: results kept in {arguments.results_dir}", file=sys.stderr)
    return exit_code
