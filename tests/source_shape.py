#!/usr/bin/env python3
"""Checks two rules of the source tree's shape, so that they hold without anyone having to remember them.

  functions   no function in the given folders is longer than --max-lines (universal-ctags gives each
              function's first and last line; a lambda counts as part of the function around it)
  plugins     no file of one plugin includes a file of another: what two plugins share lives in kernels/
              or in the public API (include/)

Usage: source_shape.py functions SOURCE_DIR --max-lines N FOLDER...
       source_shape.py plugins SOURCE_DIR
Prints one line per breach (file:line: what) and exits 1 on any, 0 on none; 77 (CTest's skip) when
universal-ctags is missing for the function check.
"""

import argparse
import pathlib
import re
import shutil
import subprocess
import sys

SKIP = 77
SOURCE_SUFFIXES = {".c", ".cc", ".cpp", ".cu", ".cuh", ".h", ".hpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def function_spans(files):
    """(length, file, first line, name) of every function ctags finds in `files`."""
    out = subprocess.run(["ctags", "--fields=+ne", "--c++-kinds=f", "--language-force=C++", "-o", "-", *map(str, files)],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split("\t")
        fields = dict(p.split(":", 1) for p in parts[3:] if ":" in p)
        if "line" in fields and "end" in fields:
            first, last = int(fields["line"]), int(fields["end"])
            yield last - first + 1, parts[1], first, parts[0]


def check_functions(root, max_lines, folders):
    if not shutil.which("ctags"):
        print("universal-ctags is not installed: function lengths not checked")
        return SKIP
    files = [p for folder in folders for p in sorted((root / folder).rglob("*")) if p.suffix in SOURCE_SUFFIXES]
    spans = sorted(function_spans(files), reverse=True)
    breaches = [s for s in spans if s[0] > max_lines]
    for length, path, first, name in breaches:
        print(f"{pathlib.Path(path).relative_to(root)}:{first}: {name} is {length} lines (at most {max_lines})")
    if spans:
        length, path, first, name = spans[0]
        print(f"longest: {name} ({pathlib.Path(path).relative_to(root)}:{first}), {length} lines "
              f"of {len(spans)} functions")
    return 1 if breaches else 0


def plugin_of(path, plugins_dir):
    try:
        return path.resolve().relative_to(plugins_dir.resolve()).parts[0]
    except (ValueError, IndexError):
        return None


def check_plugins(root):
    plugins_dir = root / "plugins"
    headers = {}
    for p in plugins_dir.rglob("*"):
        if p.suffix in SOURCE_SUFFIXES:
            headers.setdefault(p.name, set()).add(plugin_of(p, plugins_dir))
    shared = {p.name for folder in ("include", "kernels", "core") if (root / folder).is_dir()
              for p in (root / folder).rglob("*") if p.suffix in SOURCE_SUFFIXES}
    breaches = 0
    for source in sorted(plugins_dir.rglob("*")):
        if source.suffix not in SOURCE_SUFFIXES:
            continue
        own = plugin_of(source, plugins_dir)
        for number, line in enumerate(source.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = (source.parent / match.group(1))
            owners = {plugin_of(target, plugins_dir)} if target.exists() else (
                set() if pathlib.Path(match.group(1)).name in shared else headers.get(pathlib.Path(match.group(1)).name, set()))
            others = sorted(o for o in owners if o and o != own)
            if others and own not in owners:
                print(f"{source.relative_to(root)}:{number}: includes {match.group(1)} of plugins/{others[0]}")
                breaches += 1
    return 1 if breaches else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("check", choices=["functions", "plugins"])
    parser.add_argument("root", type=pathlib.Path)
    parser.add_argument("--max-lines", type=int, default=60)
    parser.add_argument("folders", nargs="*")
    args = parser.parse_intermixed_args()
    root = args.root.resolve()
    if args.check == "functions":
        return check_functions(root, args.max_lines, args.folders or ["core"])
    return check_plugins(root)


if __name__ == "__main__":
    sys.exit(main())
