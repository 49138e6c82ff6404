#!/usr/bin/env python3
"""Runs the compare recipe of docs/compare.md several times on two builds of one commit and counts the
trials in which roofbench-compare called any change at all (slower or faster). Builds nothing: give it two
roofbench binaries built from the same source.

Each trial: ROUNDS rounds of (base, new), each run its own process writing its own results file, interleaved
on this machine; then roofbench-compare over the ROUNDS files a side. Two builds of one commit must show no
change: the recipe passes when at most one trial in ten calls one.

  scripts/compare_recipe_check.py --base build/bin/roofbench --new build-copy/bin/roofbench
Exit: 0 when the calls stay within --allowed-calls, 1 when not, 2 on bad usage or a run that failed."""

import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

REPORTS = pathlib.Path(__file__).resolve().parent.parent / "reports"
# roofbench-compare's headline (emphasised, **...**, when it fails).
HEADLINE = re.compile(r"^\**(REGRESSION|No regression|CANNOT JUDGE): (\d+) slower, \d+ gate regression\(s\), "
                      r"(\d+) faster, (\d+) unchanged, (\d+) cannot judge", re.M)


def _parser():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, type=pathlib.Path, help="the base build's roofbench binary")
    parser.add_argument("--new", required=True, type=pathlib.Path, help="the new build's roofbench binary")
    parser.add_argument("--trials", type=int, default=10, help="times the whole recipe runs (default 10)")
    parser.add_argument("--rounds", type=int, default=5, help="runs a side per trial (default 5)")
    parser.add_argument("--filter", default="cpu/", help="--benchmark_filter of every run (default cpu/)")
    parser.add_argument("--max-time", default="0.5", help="roofbench's --max-time per benchmark (default 0.5 s)")
    parser.add_argument("--alpha", default="0.05", help="roofbench-compare's --alpha (default 0.05)")
    parser.add_argument("--allowed-calls", type=int, default=1,
                        help="trials that may call a change before the recipe fails (default 1 of 10)")
    parser.add_argument("--keep", type=pathlib.Path, help="keep the results files and comparisons in this folder")
    return parser


def _run_once(binary, folder, arguments):
    """One roofbench process writing its results into folder; the path of its file."""
    command = [str(binary), "--device", "cpu", f"--benchmark_filter={arguments.filter}",
               f"--max-time={arguments.max_time}", "--results-dir", str(folder)]
    completed = subprocess.run(command, capture_output=True, text=True)
    latest = folder / "latest.json"
    # Exit 1 is a run with a failed gate: its file is complete, and compare shows the gate.
    if completed.returncode not in (0, 1) or not latest.exists():
        raise RuntimeError(f"{' '.join(command)} exited {completed.returncode}: {completed.stderr.strip()[-300:]}")
    return latest


def _trial(index, folder, arguments):
    """Runs one trial; (headline counts, comparison text)."""
    sides = {"base": [], "new": []}
    for round_index in range(arguments.rounds):
        for side, binary in (("base", arguments.base), ("new", arguments.new)):
            run_folder = folder / f"trial{index}" / f"{side}{round_index}"
            run_folder.mkdir(parents=True)
            sides[side].append(_run_once(binary, run_folder, arguments))
    command = [sys.executable, str(REPORTS / "roofbench-compare"), str(sides["base"][0]), str(sides["new"][0]),
               "--alpha", arguments.alpha]
    for side in ("base", "new"):
        for path in sides[side][1:]:
            command += [f"--{side}", str(path)]
    completed = subprocess.run(command, capture_output=True, text=True)
    match = HEADLINE.search(completed.stdout)
    if completed.returncode == 2 or not match:
        raise RuntimeError(f"roofbench-compare exited {completed.returncode}: {completed.stderr.strip()}")
    outcome, slower, faster, unchanged, cannot = match.groups()
    (folder / f"trial{index}" / "comparison.md").write_text(completed.stdout, encoding="utf-8")
    return {"outcome": outcome, "exit": completed.returncode, "slower": int(slower), "faster": int(faster),
            "unchanged": int(unchanged), "cannot judge": int(cannot)}


def main(argv=None):
    arguments = _parser().parse_args(argv)
    for binary in (arguments.base, arguments.new):
        if not binary.is_file():
            print(f"compare_recipe_check: {binary}: no such binary (build roofbench first)", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="roofbench-recipe-") as scratch:
        folder = arguments.keep or pathlib.Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        calls = 0
        for index in range(arguments.trials):
            try:
                counts = _trial(index, folder, arguments)
            except RuntimeError as error:
                print(f"compare_recipe_check: trial {index + 1}: {error}", file=sys.stderr)
                return 2
            called = counts["slower"] + counts["faster"]
            calls += called > 0
            print(f"trial {index + 1}: {counts['outcome']} (exit {counts['exit']}): {counts['slower']} slower, "
                  f"{counts['faster']} faster, {counts['unchanged']} unchanged, {counts['cannot judge']} cannot judge",
                  flush=True)
    verdict = "passes" if calls <= arguments.allowed_calls else "FAILS"
    print(f"{calls} of {arguments.trials} trials called a change at alpha {arguments.alpha}: the recipe {verdict} "
          f"(at most {arguments.allowed_calls} allowed)")
    return 0 if calls <= arguments.allowed_calls else 1


if __name__ == "__main__":
    sys.exit(main())
