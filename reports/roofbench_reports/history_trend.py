"""What `roofbench-history trend` writes: a Markdown summary (change points with their commit ranges, each
benchmark's latest median and noise) and an HTML page with one Plotly chart per benchmark (run medians
over commits, each run's quartiles as a band, the medians between change points, the change points).

The page embeds plotly.js from Debian's python3-plotly, so it works offline and as a CI artifact."""

import html
import json
import math

import numpy

from .changepoints import series_noise
from .document import Column, Document, Heading, Paragraph, Table
from .history_analysis import Change
from .stats import median
from .units import format_percent, format_time

# Time units a chart's axis may use, largest first: the first one the series' median reaches.
_AXIS_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
CHANGE_COLUMNS = [Column("Benchmark"), Column("Device"), Column("Commits (last before .. first after)"),
                   Column("Before", True), Column("After", True), Column("Change", True), Column("p", True),
                   Column("Run-to-run noise", True), Column("Runs since", True)]
_SERIES_COLUMNS = [Column("Benchmark"), Column("Device"), Column("Runs", True), Column("Latest median", True),
                   Column("Run-to-run noise", True), Column("Change points", True), Column("Latest gate")]


def method_text(settings):
    return (f"Change points: e-divisive means with a permutation test (p <= {settings.significance:g}, up to "
            f"{settings.max_permutations} permutations), on run medians in log space; a change point must also "
            f"move the median by at least {settings.noise_multiple:g} times the run-to-run noise around it and "
            f"by at least {format_percent(100 * settings.min_effect)}, with {settings.min_segment} runs or more "
            "on each side.")


def signed_percent(fraction):
    return f"{100 * fraction:+.1f} %"


def change_row(change):
    point = change.point
    return [change.series.benchmark, change.series.device_name, change.commit_range,
            format_time(point.before_median), format_time(point.after_median),
            signed_percent(point.relative_change), f"{point.p_value:.3g}",
            format_percent(100 * point.noise), str(change.runs_since)]


def _series_row(series):
    timed = series.timed
    noise = series_noise(series.medians, series.change_points)
    latest = timed[-1][1].median_s if timed else None
    return [series.benchmark, series.device_name, str(len(series.points)), format_time(latest),
            format_percent(100 * noise) if noise is not None else "—", str(len(series.change_points)),
            series.points[-1][1].gate or "—"]


def trend_document(runs, series_list, changes, settings, where):
    document = Document(f"roofbench history: {len(series_list)} benchmarks over {len(runs)} runs")
    document.add(Paragraph(f"Store: {where}. Runs from {runs[0].date} to {runs[-1].date}."))
    document.add(Paragraph(method_text(settings)))
    document.add(Heading(2, f"Change points ({len(changes)})"))
    if changes:
        document.add(Table(CHANGE_COLUMNS, [change_row(change) for change in changes]))
    else:
        document.add(Paragraph("None found."))
    document.add(Heading(2, "Benchmarks"))
    document.add(Table(_SERIES_COLUMNS, [_series_row(series) for series in series_list]))
    return document


def _axis_unit(series):
    medians = series.medians
    typical = sorted(medians)[len(medians) // 2]
    return next(((scale, name) for scale, name in _AXIS_UNITS if typical >= scale), _AXIS_UNITS[-1])


def _scaled(values, scale):
    """Values in the axis unit, rounded to 4 decimals (5 significant digits or more: the unit keeps them
    at 1 or above); None stays None."""
    array = numpy.round(numpy.array(values, dtype=float) / scale, 4)  # None becomes NaN
    if not numpy.isnan(array).any():
        return array.tolist()
    return [None if math.isnan(value) else value for value in array.tolist()]


def chart_spec(series, run_numbers):
    """Plotly's data and layout for one series, as plain JSON-ready dicts; "runs" holds each point's
    position in the page's run list (run_numbers: {run id: position}), whose labels the page fills in."""
    scale, unit = _axis_unit(series)
    timed = series.timed
    x = list(range(1, len(timed) + 1))
    results = [result for _, result in timed]
    data = [
        {"x": x, "y": _scaled([result.q3_s for result in results], scale), "mode": "lines", "line": {"width": 0},
         "hoverinfo": "skip", "showlegend": False},
        {"x": x, "y": _scaled([result.q1_s for result in results], scale), "mode": "lines", "line": {"width": 0},
         "fill": "tonexty", "fillcolor": "rgba(31,119,180,0.18)", "name": "quartiles of each run",
         "hoverinfo": "skip"},
        {"x": x, "y": _scaled(series.medians, scale), "mode": "lines+markers", "name": "run median",
         "marker": {"size": 4}, "line": {"width": 1, "color": "#1f77b4"},
         "hovertemplate": f"%{{text}}<br>median %{{y}} {unit}<extra></extra>"},
    ]
    data += _segment_traces(series, scale)
    shapes, annotations = _change_marks(series)
    # The y axis fits the data rather than starting at zero: a 3% step must be visible; its labels say where.
    layout = {"title": {"text": html.escape(series.title), "font": {"size": 14}}, "height": 340,
              "margin": {"l": 60, "r": 20, "t": 40, "b": 80}, "xaxis": {"title": {"text": "run (oldest first)"}},
              "yaxis": {"title": {"text": f"median time ({unit})"}},
              "shapes": shapes, "annotations": annotations, "legend": {"orientation": "h", "y": -0.35}}
    return {"data": data, "layout": layout, "runs": [run_numbers[run.id] for run, _ in timed]}


def _change_marks(series):
    """(shapes, annotations): a dashed line between the runs either side of each change point, labelled
    with its size and commit range."""
    shapes, annotations = [], []
    for point in series.change_points:
        x = point.index + 0.5
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
                       "line": {"dash": "dash", "color": "#d62728"}})
        label = f"{signed_percent(point.relative_change)} ({Change(series, point).commit_range})"
        annotations.append({"x": x, "y": 1, "yref": "paper", "showarrow": False, "xanchor": "left",
                            "yanchor": "top", "font": {"color": "#d62728", "size": 11}, "text": html.escape(label)})
    return shapes, annotations


def _segment_traces(series, scale):
    """The median of each stretch between change points, as a flat line over its runs."""
    values = series.medians
    edges = [0] + [point.index for point in series.change_points] + [len(values)]
    return [{"x": [start + 0.5, end + 0.5], "y": _scaled([median(values[start:end])] * 2, scale),
             "mode": "lines", "line": {"color": "#d62728", "width": 2}, "hoverinfo": "skip",
             "name": "median between change points", "showlegend": number == 0}
            for number, (start, end) in enumerate(zip(edges, edges[1:]))]


_STYLE = """
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; color: #222; margin: 24px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 16px; }
th, td { border: 1px solid #d0d0d0; padding: 3px 8px; }
th { background: #f2f2f2; }
.chart { min-height: 340px; border-bottom: 1px solid #eee; }
"""

# Draws each chart when it scrolls into view: a page of 200 charts of 1,000 runs opens at once.
_DRAW_SCRIPT = """
(function () {
  var page = JSON.parse(document.getElementById('chart-data').textContent);
  function draw(element) {
    var spec = page.charts[element.getAttribute('data-chart')];
    spec.data[2].text = spec.runs.map(function (run, i) { return 'run ' + (i + 1) + ': ' + page.runs[run]; });
    Plotly.newPlot(element, spec.data, spec.layout, {displaylogo: false, responsive: true});
    element.setAttribute('data-drawn', 'yes');
  }
  var elements = document.querySelectorAll('div.chart');
  if (!('IntersectionObserver' in window)) { elements.forEach(draw); return; }
  var observer = new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      if (entry.isIntersecting) { observer.unobserve(entry.target); draw(entry.target); }
    });
  }, {rootMargin: '400px'});
  elements.forEach(function (element) { observer.observe(element); });
})();
"""


def _html_table(columns, rows):
    head = "".join(f"<th>{html.escape(column.title)}</th>" for column in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def trend_page(title, method, runs, changes, series_list, plotly_js):
    """The HTML page: the change points, then one chart per benchmark, changed ones first."""
    ordered = sorted(series_list, key=lambda series: not series.change_points)
    charted = [series for series in ordered if series.timed]
    run_numbers = {run.id: position for position, run in enumerate(runs)}
    page_data = {"runs": [f"{run.label} on {run.host} ({run.date})" for run in runs],
                 "charts": [chart_spec(series, run_numbers) for series in charted]}
    # "</" cannot end the JSON's script element early once escaped.
    chart_json = json.dumps(page_data, separators=(",", ":")).replace("</", "<\\/")
    changes_html = (_html_table(CHANGE_COLUMNS, [change_row(change) for change in changes]) if changes
                    else "<p>No change point found.</p>")
    divs = "\n".join(f'<div class="chart" id="chart-{number}" data-chart="{number}"></div>'
                     for number in range(len(charted)))
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n"
            f"<script>{plotly_js}</script>\n</head>\n<body>\n<h1>{html.escape(title)}</h1>\n"
            f"<p>{html.escape(method)}</p>\n<h2>Change points ({len(changes)})</h2>\n{changes_html}\n"
            f"<h2>Benchmarks ({len(charted)})</h2>\n{divs}\n"
            f"<script type=\"application/json\" id=\"chart-data\">{chart_json}</script>\n"
            f"<script>{_DRAW_SCRIPT}</script>\n</body>\n</html>\n")
