"""A report as a list of plain blocks, so that one builder feeds both the Markdown and the HTML output.

Block text is plain text: each renderer does its own escaping.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Paragraph:
    text: str
    emphasis: bool = False  # warnings the reader must not miss


@dataclass(frozen=True)
class Column:
    title: str
    numeric: bool = False  # right-aligned
    folded: bool = False  # long cells (a library's choices per shape) fold on the HTML page


@dataclass(frozen=True)
class Table:
    columns: list
    rows: list  # lists of cell strings, one per column
    tag: str = ""  # the plugin the rows belong to: the HTML page's plugin filter hides it with them


@dataclass(frozen=True)
class BulletList:
    items: list


@dataclass(frozen=True)
class Figure:
    """An interactive plot (a Plotly figure spec); Markdown cannot show it, so only the HTML page does, and
    the static SVG files beside summary.md carry the same figures."""

    spec: dict
    plugins: tuple = ()  # the plugins its traces show, for the page's plugin filter
    caption: str = ""


@dataclass(frozen=True)
class Details:
    """Blocks folded under a one-line summary (unchanged rows of a comparison): a reader opens them."""

    summary: str
    blocks: list


@dataclass
class Document:
    title: str
    blocks: list = field(default_factory=list)

    def add(self, block):
        self.blocks.append(block)
        return block
