#!/usr/bin/env python3
"""ctest_bench.py --roofbench EXE --suite NAME --results-dir DIR [--device D] [extra host args]: runs the
suite, keeps its results in DIR, forwards the host's exit code, and prints headline counters as
<CTestMeasurement> lines for CTest. ROOFBENCH_BENCH_DEVICE in the environment overrides --device."""
import sys

from roofbench_reports.ctest_measurements import main

sys.exit(main())
