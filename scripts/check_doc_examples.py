#!/usr/bin/env python3
"""check_doc_examples.py PAGE...: every C++ code block of the pages whose first line names a source file
(`// examples/scale/scale.cpp...`) must be that file's code: each of its lines, trailing comment and
indentation aside, a line of the file. Prints PAGE:LINE for each line that is not and exits 1; 0 when all
are; 2 when a page or a named file cannot be read."""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```(?:cpp|cuda|c\+\+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
NAMED_FILE = re.compile(r"^// ((?:examples|plugins|core)/[\w./-]+\w)")


def normalised(line):
    """The code of a line: without a trailing // comment, its whitespace collapsed."""
    return " ".join(line.split("//", 1)[0].split())


def stale_lines(page_path):
    """(line number in the page, text) of each line of a named block that its file does not hold."""
    text = page_path.read_text(encoding="utf-8")
    stale = []
    for block in BLOCK.finditer(text):
        lines = block.group(1).splitlines()
        named = NAMED_FILE.match(lines[0]) if lines else None
        if not named:
            continue
        source = (ROOT / named.group(1)).read_text(encoding="utf-8")
        known = {normalised(line) for line in source.splitlines()}
        first_line = text.count("\n", 0, block.start(1)) + 1
        stale += [(first_line + offset, line) for offset, line in enumerate(lines)
                  if offset and normalised(line) and normalised(line) not in known]
    return stale


def main(pages):
    if not pages:
        print("usage: check_doc_examples.py PAGE...", file=sys.stderr)
        return 2
    found = False
    for page in pages:
        try:
            for number, line in stale_lines(pathlib.Path(page)):
                print(f"{page}:{number}: not in the file the block names: {line.strip()}")
                found = True
        except OSError as error:
            print(f"check_doc_examples.py: cannot read {error.filename}: {error.strerror}", file=sys.stderr)
            return 2
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
