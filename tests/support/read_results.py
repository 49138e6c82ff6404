#!/usr/bin/env python3
"""read_results.py RESULTS.json: checks that a roofbench results file is strict JSON (no NaN or
Infinity, valid UTF-8, no key twice in one object) and prints what the end-to-end tests look at, one tab-separated record per line:
  context <key> <value>          suite, complete, gate, commit (when known)
  load_failure <path> <reason>
  benchmark <name> <status> <gate> <label> <the host's figures present, comma-separated> <error message>
  keys <name> <every key of the benchmark's entry, comma-separated>
Exit 1 with the reason on stderr when the file cannot be read."""
import json
import math
import sys

def reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def reject_duplicate_keys(pairs):
    keys = [key for key, _ in pairs]
    duplicates = sorted({key for key in keys if keys.count(key) > 1})
    if duplicates:
        raise ValueError(f"keys written twice in one object: {duplicates}")
    return dict(pairs)


def flat(text):
    return " ".join(str(text).split())


def main(path):
    with open(path, encoding="utf-8") as f:
        results = json.load(f, parse_constant=reject_constant, object_pairs_hook=reject_duplicate_keys)
    run = results["context"]["roofbench"]
    for key in ("suite", "complete", "gate", "commit"):
        if key not in run and key == "commit":  # only a build from a git checkout knows its commit
            continue
        value = run[key]
        print(f"context\t{key}\t{json.dumps(value) if isinstance(value, bool) else value}")
    for failure in run["load_failures"]:
        print(f"load_failure\t{failure['path']}\t{flat(failure['reason'])}")
    for b in results["benchmarks"]:
        # The host's own figures (roofbench.summaries describes each; the plugin's say from_plugin) with a value.
        host_figures = [name for name, s in b["roofbench"]["summaries"].items() if not s.get("from_plugin")]
        present = [c for c in host_figures if isinstance(b.get(c), (int, float)) and math.isfinite(b[c])]
        print("\t".join(["benchmark", b["name"], b["roofbench"]["status"], b["roofbench"]["gate"], flat(b["label"]),
                         ",".join(present), flat(b["error_message"])]))
        print("\t".join(["keys", b["name"], ",".join(b.keys())]))


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"read_results.py: {sys.argv[1]}: {error!r}", file=sys.stderr)
        sys.exit(1)
