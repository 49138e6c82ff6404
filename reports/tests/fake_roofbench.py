#!/usr/bin/env python3
"""Stands in for the roofbench host in tests: writes a fixture as <results-dir>/latest.json.

--results-from FILE: the fixture to 'produce' (none: write nothing, like a host that crashed early);
--exit-code N: what to exit with. Both are the 'extra args' ctest_bench.py forwards to the host.
"""
import argparse
import shutil
import sys
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--suite", required=True)
parser.add_argument("--results-dir", required=True)
parser.add_argument("--results-from")
parser.add_argument("--exit-code", type=int, default=0)
parser.add_argument("--device", default="the default device")
arguments = parser.parse_args()
print(f"fake roofbench: suite {arguments.suite} on {arguments.device}")
if arguments.results_from:
    shutil.copy(arguments.results_from, Path(arguments.results_dir) / "latest.json")
sys.exit(arguments.exit_code)
