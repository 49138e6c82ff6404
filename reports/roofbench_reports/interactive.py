"""The interactive figures of index.html as Plotly figure specs (plain data, JSON on the page): every case
in the legend, every point named on hover, zoom and pan. plotly.js itself comes from the plotly package
and is written into the page, so the page works offline."""

import json
import math

from . import palette
from .roofline import measured_hover
from .units import format_number, format_si

# Plotly's marker symbol for each of roofline.MARKER_SHAPES.
_SYMBOLS = {"circle": "circle", "square": "square", "triangle": "triangle-up", "diamond": "diamond",
            "triangle-down": "triangle-down", "pentagon": "pentagon", "star": "star", "hexagon": "hexagon"}
ROOFLINE_HEIGHT = 640
WATERFALL_HEIGHT = 560
_FONT = {"family": "DejaVu Sans, Helvetica, Arial, sans-serif", "size": 12, "color": palette.TEXT}


def _html_lines(text):
    return text.replace("\n", "<br>")


def _roof_traces(model):
    traces = []
    dashes = {"memory": "solid", "read-streaming": "dash", "cache": "dot"}
    for bandwidth, kind in model.memory_roofs():
        start, end = model.memory_roof_start(), model.memory_roof_end(bandwidth)
        traces.append({"type": "scatter", "mode": "lines", "x": [start, end], "y": [start * bandwidth, end * bandwidth],
                       "name": f"{kind} roof {format_si(bandwidth, 'B/s')}", "hoverinfo": "name",
                       "line": {"color": palette.MEMORY_ROOF, "width": 2.5, "dash": dashes[kind]}})
    for roof in model.roofs:
        start, right = model.compute_roof_span(roof)
        traces.append({"type": "scatter", "mode": "lines+markers" if model.bandwidth else "lines",
                       "x": [start, right], "y": [roof.flops_per_s] * 2, "name": model.roof_label(roof),
                       "hoverinfo": "name", "line": {"color": roof.colour, "width": 2},
                       "marker": {"size": [8, 0], "color": roof.colour, "line": {"color": palette.TEXT, "width": 1}}})
    return traces


def _point_traces(model, point_hover):
    if model.grouped:
        return [{"type": "scatter", "mode": "lines+markers" if len(group.points) > 1 else "markers",
                 "x": [p.intensity for p in group.points], "y": [p.flops_per_s for p in group.points],
                 "name": group.title + (f" ({group.sweep_axis} sweep)" if group.sweep_axis else ""),
                 "meta": group.plugin, "hoverinfo": "text",
                 "hovertext": [_html_lines(point_hover(p)) for p in group.points],
                 "line": {"color": group.colour, "width": 1.5},
                 "marker": {"symbol": _SYMBOLS[group.shape], "color": group.colour, "size": 11,
                            "line": {"color": "white", "width": 1}}}
                for group in model.groups]
    by_series = {}
    for point in model.points:
        by_series.setdefault((point.benchmark.plugin, point.benchmark.precision), []).append(point)
    return [{"type": "scatter", "mode": "markers", "x": [p.intensity for p in points],
             "y": [p.flops_per_s for p in points], "name": f"{plugin} {precision or '?'}", "meta": plugin,
             "hoverinfo": "text", "hovertext": [_html_lines(point_hover(p)) for p in points],
             "marker": {"color": palette.precision_colour(precision), "size": 6}}
            for (plugin, precision), points in by_series.items()]


def _crossing_traces(model):
    by_plugin = {}
    for crossing in model.crossings:
        by_plugin.setdefault(crossing.group.plugin, []).append(crossing)
    return [{"type": "scatter", "mode": "markers", "x": [c.intensity for c in crossings],
             "y": [c.flops_per_s for c in crossings], "name": f"{plugin}: a sweep crosses its ridge", "meta": plugin,
             "hoverinfo": "text", "hovertext": [c.text for c in crossings],
             "marker": {"symbol": "line-ns-open", "size": 16, "color": palette.TEXT, "line": {"width": 2}}}
            for plugin, crossings in by_plugin.items()]


def _measured_traces(model, measured_hover):
    """Per plugin, the points by the hardware's counters (hollow) and a dotted line from each modelled point."""
    by_plugin = {}
    for m in model.measured:
        by_plugin.setdefault(m.point.benchmark.plugin, []).append(m)
    traces = []
    for plugin, measured in by_plugin.items():
        links_x = [x for m in measured for x in (m.point.intensity, m.intensity, None)]
        links_y = [y for m in measured for y in (m.point.flops_per_s, m.flops_per_s, None)]
        traces.append({"type": "scatter", "mode": "lines", "x": links_x, "y": links_y, "meta": plugin, "hoverinfo": "skip",
                       "name": f"{plugin}: modelled to measured", "showlegend": False,
                       "line": {"color": palette.TEXT, "width": 1, "dash": "dot"}})
        traces.append({"type": "scatter", "mode": "markers", "x": [m.intensity for m in measured],
                       "y": [m.flops_per_s for m in measured], "name": f"{plugin}: measured (hardware counters)",
                       "meta": plugin, "hoverinfo": "text", "hovertext": [_html_lines(measured_hover(m)) for m in measured],
                       "marker": {"symbol": "circle-open", "size": 10, "color": [m.point.colour for m in measured],
                                  "line": {"width": 2}}})
    return traces


def _decade_axis(traces, key, formatter):
    """A log axis' ticks at whole decades, labelled as the tables write numbers (1 T, 10 k)."""
    values = [v for trace in traces for v in trace[key] if v and v > 0]
    if not values:
        return {}
    low, high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    decades = [10.0**exponent for exponent in range(low, high + 1)]
    return {"tickvals": decades, "ticktext": [formatter(v) for v in decades]}


def roofline_spec(model, point_hover):
    traces = (_roof_traces(model) + _point_traces(model, point_hover) + _crossing_traces(model)
              + _measured_traces(model, measured_hover))
    unplotted = f"; {model.unplotted} without a plottable FLOP/s or intensity left out" if model.unplotted else ""
    return {
        "data": traces,
        "layout": {
            "title": {"text": f"Roofline: {model.device_name} ({len(model.points)} benchmarks{unplotted})", "x": 0.01},
            "font": _FONT, "height": ROOFLINE_HEIGHT, "hovermode": "closest", "plot_bgcolor": "white",
            "xaxis": {"type": "log", "title": {"text": "arithmetic intensity (FLOP/byte)"}, "gridcolor": palette.GRID,
                      "linecolor": palette.AXIS, "mirror": True, **_decade_axis(traces, "x", format_number)},
            "yaxis": {"type": "log", "title": {"text": "performance (FLOP/s)"}, "gridcolor": palette.GRID,
                      "linecolor": palette.AXIS, "mirror": True, **_decade_axis(traces, "y", format_si)},
            "legend": {"font": {"size": 11}},
        },
    }


def waterfall_spec(waterfall):
    traces = []
    top = max((bar.rung.rate or 0 for bar in waterfall.bars), default=1) or 1
    for series_index, name in enumerate(waterfall.series_names):
        bars = [bar for bar in waterfall.bars if bar.series_index == series_index]
        slots = [waterfall.slots[bar.slot] for bar in bars]
        traces.append({
            "type": "bar", "name": name,
            "x": [[f"<b>{title}</b><br>{detail}" for title, detail in slots], ["<br>".join(bar.foot_lines) for bar in bars]],
            "y": [bar.rung.rate or 0 for bar in bars],
            "text": ["<br>".join(bar.labels) for bar in bars], "textposition": "outside", "cliponaxis": False,
            "hoverinfo": "text", "hovertext": [bar.hover(waterfall.counter) for bar in bars],
            "marker": {"color": [bar.colour for bar in bars], "opacity": bars[0].opacity if bars else 1},
        })
    return {
        "data": traces,
        "layout": {
            "title": {"text": f"{waterfall.title}<br><sub>{waterfall.subtitle}</sub>", "x": 0.01},
            "font": _FONT, "height": WATERFALL_HEIGHT, "showlegend": False, "plot_bgcolor": "white",
            "yaxis": {"title": {"text": waterfall.counter}, "range": [0, top * 1.5], "gridcolor": palette.GRID,
                      "exponentformat": "SI"},
            "xaxis": {"type": "multicategory", "tickfont": {"size": 11}, "tickangle": 0},
            "margin": {"b": 130, "t": 90},
            "bargap": 0.15,
        },
    }


def spec_json(spec):
    """The spec as JSON safe inside a <script> element."""
    return json.dumps(spec, separators=(",", ":")).replace("</", "<\\/")


def plotly_javascript():
    """plotly.js as the installed plotly package ships it."""
    from plotly.offline import get_plotlyjs  # imported here: only the HTML page needs it
    return get_plotlyjs()
