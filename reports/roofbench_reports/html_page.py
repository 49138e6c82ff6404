"""Renders a Document as one self-contained HTML page: inline CSS, the figures as Plotly specs and
plotly.js itself inline, nothing fetched, so the file can be mailed, archived as a CI artifact, and opened
offline."""

from html import escape

from .document import BulletList, Details, Figure, Heading, Paragraph, Table
from .interactive import plotly_javascript, spec_json
from . import palette

_STYLE = f"""
body {{ font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; color: {palette.TEXT}; margin: 24px; }}
h1 {{ font-size: 24px; }}
h2 {{ font-size: 20px; border-bottom: 1px solid #ccc; padding-bottom: 4px; margin-top: 32px; }}
h3 {{ font-size: 16px; }}
table {{ border-collapse: collapse; font-size: 13px; margin: 8px 0 16px; }}
th, td {{ border: 1px solid #d0d0d0; padding: 3px 8px; }}
th {{ background: #f2f2f2; }}
tr:nth-child(even) td {{ background: #fafafa; }}
td.numeric, th.numeric {{ text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }}
p.warning {{ color: {palette.WATERFALL_LOSS}; font-weight: bold; }}
figure {{ margin: 12px 0 24px; }}
figure div.plot {{ width: 100%; border: 1px solid #e0e0e0; }}
td details summary {{ cursor: pointer; }}
fieldset.plugin-filter {{ font-size: 13px; border: 1px solid #d0d0d0; margin: 8px 0 16px; }}
fieldset.plugin-filter label {{ margin-right: 16px; }}
"""

# Draws every figure from its spec, then shows only the checked plugins' traces (a trace's meta names its
# plugin), waterfalls and tables. The page's address can preset the choice (index.html#plugins=micro,gpt),
# which is also how the browser test drives it.
_PAGE_SCRIPT = """
(function () {
  var plots = Array.prototype.slice.call(document.querySelectorAll('div.plot'));
  plots.forEach(function (plot) {
    var spec = JSON.parse(document.getElementById(plot.getAttribute('data-spec')).textContent);
    Plotly.newPlot(plot, spec.data, spec.layout, {responsive: true, displaylogo: false});
  });
  var boxes = Array.prototype.slice.call(document.querySelectorAll('fieldset.plugin-filter input'));
  function apply() {
    var shown = {};
    boxes.forEach(function (box) { shown[box.value] = box.checked; });
    document.querySelectorAll('[data-plugin]').forEach(function (element) {
      element.style.display = shown[element.getAttribute('data-plugin')] === false ? 'none' : '';
    });
    plots.forEach(function (plot) {
      var visible = plot.data.map(function (trace) { return !trace.meta || shown[trace.meta] !== false; });
      Plotly.restyle(plot, {visible: visible});
    });
  }
  var preset = /plugins=([^&]*)/.exec(window.location.hash);
  if (preset) {
    var wanted = decodeURIComponent(preset[1]).split(',');
    boxes.forEach(function (box) { box.checked = wanted.indexOf(box.value) >= 0; });
  }
  boxes.forEach(function (box) { box.addEventListener('change', apply); });
  apply();
})();
"""


def _plugin_filter(plugins):
    if not plugins:
        return ""
    boxes = "".join(f'<label><input type="checkbox" value="{escape(p)}" checked> {escape(p)}</label>'
                    for p in plugins)
    return f'<fieldset class="plugin-filter"><legend>plugins shown</legend>{boxes}</fieldset>'



# A folded cell shows this much of its text until opened.
FOLDED_PREVIEW_CHARS = 60


def _folded(content):
    """A long cell as <details>: its first words as the summary, the whole text, one part a line, inside."""
    if len(content) <= FOLDED_PREVIEW_CHARS:
        return escape(content)
    parts = "<br>".join(escape(part) for part in content.split("; "))
    return f"<details><summary>{escape(content[:FOLDED_PREVIEW_CHARS])}…</summary>{parts}</details>"


def _table(table):
    def cell(tag, content, column):
        text = _folded(content) if column.folded and tag == "td" else escape(content)
        return f'<{tag} class="numeric">{text}</{tag}>' if column.numeric else f"<{tag}>{text}</{tag}>"

    header = "".join(cell("th", column.title, column) for column in table.columns)
    rows = "".join(
        "<tr>" + "".join(cell("td", value, column) for value, column in zip(row, table.columns)) + "</tr>"
        for row in table.rows
    )
    tag = f' data-plugin="{escape(table.tag)}"' if table.tag else ""
    return f"<table{tag}><thead><tr>{header}</tr></thead><tbody>{rows}</tbody></table>"


def _figure(block, number):
    spec_id = f"figure-spec-{number}"
    plugins = " ".join(block.plugins)
    # A figure of one plugin hides with it; one of several stays and hides their traces.
    tag = f' data-plugin="{escape(block.plugins[0])}"' if len(block.plugins) == 1 else ""
    caption = f"<figcaption>{escape(block.caption)}</figcaption>" if block.caption else ""
    return (f'<figure{tag} data-plugins="{escape(plugins)}"><div class="plot" data-spec="{spec_id}"></div>{caption}'
            f'<script type="application/json" id="{spec_id}">{spec_json(block.spec)}</script></figure>')


def _block(block, number=0):
    if isinstance(block, Heading):
        level = min(block.level, 6)
        return f"<h{level}>{escape(block.text)}</h{level}>"
    if isinstance(block, Paragraph):
        return f'<p class="warning">{escape(block.text)}</p>' if block.emphasis else f"<p>{escape(block.text)}</p>"
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, BulletList):
        return "<ul>" + "".join(f"<li>{escape(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Figure):
        return _figure(block, number)
    if isinstance(block, Details):
        inner = "".join(map(_block, block.blocks))
        return f"<details><summary>{escape(block.summary)}</summary>{inner}</details>"
    raise TypeError(f"no HTML for {type(block).__name__}")


def _plugins(blocks):
    plugins = []
    for block in blocks:
        if isinstance(block, Table) and block.tag and block.tag not in plugins:
            plugins.append(block.tag)
    return plugins


def render_html(document):
    body = "\n".join(_block(block, number) for number, block in enumerate(document.blocks))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{escape(document.title)}</title>\n<style>{_STYLE}</style>\n</head>\n"
        f"<body>\n<h1>{escape(document.title)}</h1>\n{_plugin_filter(_plugins(document.blocks))}\n{body}\n"
        f"<script>{plotly_javascript()}</script>\n<script>{_PAGE_SCRIPT}</script>\n</body>\n</html>\n"
    )
