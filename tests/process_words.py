#!/usr/bin/env python3
"""Fails when a tracked file speaks of how the project was developed rather than of the product.

Greps every file `git ls-files` names (comments, docs, scripts and test data alike) for
development-process words: numbered or relative sessions, work periods, issue numbers, GPU-machine
runs and device calls, "tried and dropped", "keeper until", branch names under wip/, the case-study
notes folder, and "the seed" as a name of the case study (which is cited by its title). Each hit is
printed as file:line: text; the exit status is 1 on a hit, 0 on none, and 77 (CTest's skip) when the
source tree is not a git checkout. The product class Session (core/src/session.*) is not a hit: only
lower-case "session" after a process determiner or before a number is.

Usage: process_words.py [SOURCE_DIR]
"""

import pathlib
import re
import subprocess
import sys

SKIP = 77

PROCESS_WORDS = [
    (r"\bsession\s+#?\d+", re.IGNORECASE),
    (r"\b(?:[Tt]his|[Nn]ext|[Ll]ast|[Pp]revious)\s+session\b", 0),
    (r"\b[Tt]he\s+session's", 0),
    (r"\bwork\s+periods?\b", re.IGNORECASE),
    (r"\bissues?\s+#?\d+", re.IGNORECASE),
    (r"\bGPU-machine\s+runs?\b", re.IGNORECASE),
    (r"\bdevice\s+calls?\b", re.IGNORECASE),
    (r"\b(?:in|from)\s+one\s+call\b", re.IGNORECASE),
    (r"\bsame\s+(?:device\s+)?call\b", re.IGNORECASE),
    (r"\btried\s+and\s+dropped\b", re.IGNORECASE),
    (r"\bkeeper\s+until\b", re.IGNORECASE),
    (r"\bshared/seeds\b", re.IGNORECASE),
    (r"\bwip/[\w.-]+", re.IGNORECASE),
    # "the seed" names the case study; a random generator's seed ("the seed of", "the seed = 7") is fine.
    (r"\bthe\s+seed(?:'s\b|\b(?!\s*(?:of|for|value|passed|given|=|\d)))", re.IGNORECASE),
]
PATTERNS = [re.compile(text, flags) for text, flags in PROCESS_WORDS]


def tracked_files(source_dir):
    """(the tracked files' paths, None), or (None, why) when git cannot list them."""
    try:
        listing = subprocess.run(["git", "-C", str(source_dir), "ls-files", "-z"],
                                 capture_output=True, check=False)
    except OSError as error:
        return None, f"git cannot be run ({error.strerror})"
    if listing.returncode != 0:
        return None, f"{source_dir} is not a git checkout, so there is no list of tracked files to grep"
    return [name for name in listing.stdout.decode("utf-8", "replace").split("\0") if name], None


def hits_in(path, shown_name):
    """file:line: text for each line of path holding a process word; binary files have none."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if b"\0" in data:
        return []
    found = []
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        if any(pattern.search(line) for pattern in PATTERNS):
            found.append(f"{shown_name}:{number}: {line.strip()[:160]}")
    return found


def main(argv):
    source_dir = pathlib.Path(argv[1] if len(argv) > 1 else ".").resolve()
    names, why_not = tracked_files(source_dir)
    if names is None:
        print(f"skipped: {why_not}")
        return SKIP
    this_script = pathlib.Path(__file__).resolve()
    hits = []
    for name in names:
        path = source_dir / name
        if path.resolve() != this_script and path.is_file():
            hits.extend(hits_in(path, name))
    for hit in hits:
        print(hit)
    if hits:
        print(f"{len(hits)} line(s) speak of the development process; say what and why instead")
        return 1
    print(f"no development-process words in {len(names)} tracked files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
