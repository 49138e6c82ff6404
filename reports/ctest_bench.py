#!/usr/bin/env python3
"""ctest_bench.py --roofbench EXE --suite NAME [extra host args]: runs the suite, forwards the host's
exit code, and prints headline counters as <CTestMeasurement> lines for CTest."""
import sys

from roofbench_reports.ctest_measurements import main

sys.exit(main())
