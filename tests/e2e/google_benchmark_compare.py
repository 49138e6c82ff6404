#!/usr/bin/env python3
"""google_benchmark_compare.py ROOFBENCH PLUGIN_DIR BENCHMARK COMPARE_PY: runs BENCHMARK with --benchmark_out
and checks that Google Benchmark's compare.py, given that file twice, shows its time as the file's figure
(a whole number of the file's time unit, never "0" for a sub-microsecond time). Exit 77: no compare.py."""
import json
import os
import re
import subprocess
import sys
import tempfile


def main(roofbench, plugin_dir, benchmark, compare_py):
    if not os.path.isfile(compare_py):
        print(f"{compare_py} not found (Debian's libbenchmark-tools): skipped")
        return 77
    with tempfile.TemporaryDirectory() as scratch:
        out_file = os.path.join(scratch, "run.json")
        subprocess.run([roofbench, "--device", "cpu", "--max-time", "0.05", "--no-results", "--plugin-dir", plugin_dir,
                        f"--benchmark_filter=^{re.escape(benchmark)}/", f"--benchmark_out={out_file}",
                        "--benchmark_out_format=json"], check=True, stdout=subprocess.DEVNULL)
        with open(out_file, encoding="utf-8") as f:
            entry = json.load(f)["benchmarks"][0]
        compare_command = [sys.executable, compare_py, "--no-color", "benchmarks", out_file, out_file]
        compared = subprocess.run(compare_command, check=True, capture_output=True, text=True).stdout
    row = next((line for line in compared.splitlines() if line.startswith(entry["name"])), None)
    if row is None:
        print(f"compare.py shows no row for {entry['name']}:\n{compared}")
        return 1
    # name, time change, cpu change, time old, time new, cpu old, cpu new
    time_old = float(row.split()[3])
    print(f"{entry['name']}: {entry['real_time']} {entry['time_unit']} in the file; compare.py: {row}")
    if time_old < 1 or abs(time_old - round(entry["real_time"])) > 1:
        print(f"compare.py shows {time_old}, the file says {entry['real_time']} {entry['time_unit']}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
