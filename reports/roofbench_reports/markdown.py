"""Renders a Document as GitHub-flavoured Markdown (summary.md, pull-request comments)."""

import re

from .document import BulletList, Details, Figure, Heading, Paragraph, Table

_ESCAPED = str.maketrans({"|": "\\|", "*": "\\*", "`": "\\`", "\n": " "})
# Only '<' that could open an HTML tag needs escaping; 'p < 0.05' stays readable as plain text.
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


def escape(text):
    return _TAG_START.sub("&lt;", str(text).translate(_ESCAPED))


def _table(table):
    header = "| " + " | ".join(escape(column.title) for column in table.columns) + " |"
    rule = "|" + "|".join("---:" if column.numeric else ":---" for column in table.columns) + "|"
    rows = ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in table.rows]
    return "\n".join([header, rule] + rows)


def _block(block):
    if isinstance(block, Heading):
        return "#" * block.level + " " + escape(block.text)
    if isinstance(block, Paragraph):
        return f"**{escape(block.text)}**" if block.emphasis else escape(block.text)
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, BulletList):
        return "\n".join(f"- {escape(item)}" for item in block.items)
    if isinstance(block, Figure):
        return None
    if isinstance(block, Details):
        # GitHub folds this; the blank lines let Markdown inside it render.
        inner = "\n\n".join(text for text in map(_block, block.blocks) if text is not None)
        return f"<details><summary>{escape(block.summary)}</summary>\n\n{inner}\n\n</details>"
    raise TypeError(f"no Markdown for {type(block).__name__}")


def render_markdown(document, preamble=()):
    """preamble: blocks shown under the title that only make sense in this format."""
    parts = [f"# {escape(document.title)}"]
    parts += [text for text in map(_block, list(preamble) + document.blocks) if text is not None]
    return "\n\n".join(parts) + "\n"
