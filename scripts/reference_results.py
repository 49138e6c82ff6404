#!/usr/bin/env python3
"""reference_results.py [FILES or FOLDERS...] [-o PAGE | --check PAGE]: docs/reference-results.md from the
reference results files (default: the folder results/reference)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "reports"))
from roofbench_reports.reference import main  # noqa: E402

sys.exit(main())
