#!/usr/bin/env python3
"""doc_links.py ROOT: every relative Markdown link in the tracked README and docs pages names a file that exists.
Prints file: target for each one that does not and exits 1; 0 when all resolve."""
import pathlib
import re
import subprocess
import sys

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def markdown_pages(root):
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "*.md"], capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        return sorted(root.rglob("*.md"))
    return [root / line for line in listed.stdout.splitlines()]


def broken_links(root):
    for page in markdown_pages(root):
        for match in LINK.finditer(page.read_text(encoding="utf-8")):
            target = match.group(1)
            if "://" not in target and not target.startswith("mailto:") and not (page.parent / target).exists():
                yield f"{page.relative_to(root)}: {target}"


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    broken = list(broken_links(root))
    for line in broken:
        print(f"broken link: {line}")
    print(f"{len(broken)} broken links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
