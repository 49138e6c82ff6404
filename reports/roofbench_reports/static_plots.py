"""The report's static figures (roofline.svg, waterfall.svg), drawn with matplotlib: a legend names every
case or precision, so no label is placed by hand and none overprints another."""

import io
import textwrap

import matplotlib

matplotlib.use("Agg")  # no display: files only
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from . import palette  # noqa: E402
from .roofline import MARKER_SHAPES, key_names  # noqa: E402
from .units import format_number, format_si  # noqa: E402

# matplotlib's marker for each of roofline.MARKER_SHAPES.
_MARKERS = dict(zip(MARKER_SHAPES, ("o", "s", "^", "D", "v", "p", "*", "h")))
WIDTH_INCHES = 10.0
ROOFLINE_HEIGHT_INCHES = 5.5
LEGEND_ROW_INCHES = 0.19
LEGEND_COLUMNS = 2
LEGEND_CHARACTERS = 58
WATERFALL_HEIGHT_INCHES = 5.6
RUNG_GAP = 0.8  # between the bars of two rungs, in bar widths
TITLE_CHARACTERS = 130
FONT_SIZE = 8

matplotlib.rcParams.update({"font.size": FONT_SIZE, "svg.hashsalt": "roofbench", "svg.fonttype": "none"})


def _si_axis(axis, unit=""):
    axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: format_si(value, unit)))


def _draw_roofs(ax, model):
    handles = []
    styles = {"memory": ("-", "memory-roof"), "read-streaming": ("--", "read-memory-roof"), "cache": (":", "cache-memory-roof")}
    for bandwidth, kind in model.memory_roofs():
        start, end = model.memory_roof_start(), model.memory_roof_end(bandwidth)
        linestyle, gid = styles[kind]
        handles += ax.plot([start, end], [start * bandwidth, end * bandwidth], color=palette.MEMORY_ROOF,
                           linewidth=2.5 if kind == "memory" else 2, linestyle=linestyle,
                           label=f"{kind} roof {format_si(bandwidth, 'B/s')}", gid=gid)
    for roof in model.roofs:
        start, right = model.compute_roof_span(roof)
        handles += ax.plot([start, right], [roof.flops_per_s] * 2, color=roof.colour, linewidth=2,
                           label=f"{model.roof_label(roof)}", gid="compute-roof")
        if model.bandwidth:
            ax.plot([start], [roof.flops_per_s], "o", color=roof.colour, markeredgecolor=palette.TEXT, markersize=5,
                    gid="ridge")
    return handles


def _draw_points(ax, model):
    handles = []
    if model.grouped:
        names = key_names(model.groups, LEGEND_CHARACTERS)
        for group, name in zip(model.groups, names):
            xs = [p.intensity for p in group.points]
            ys = [p.flops_per_s for p in group.points]
            handles += ax.plot(xs, ys, marker=_MARKERS[group.shape], color=group.colour, markeredgecolor="white",
                               markersize=6, linewidth=1.2 if len(xs) > 1 else 0, label=name, gid="group")
    else:  # one series per precision: the legend names precisions, the tables every benchmark
        by_precision = {}
        for point in model.points:
            by_precision.setdefault(point.benchmark.precision, []).append(point)
        for precision, points in by_precision.items():
            handles.append(ax.scatter([p.intensity for p in points], [p.flops_per_s for p in points], s=10,
                                      color=palette.precision_colour(precision), label=f"{precision or '?'} points",
                                      gid="precision-points"))
    handles += _draw_measured(ax, model)
    for crossing in model.crossings:
        ax.plot([crossing.intensity], [crossing.flops_per_s], marker="|", markersize=12, color=palette.TEXT,
                gid="ridge-crossing")
    if model.crossings:
        handles.append(Line2D([], [], marker="|", markersize=10, linewidth=0, color=palette.TEXT,
                              label="| a sweep crosses its ridge"))
    return handles


def _draw_measured(ax, model):
    """Each point by the hardware's counters, hollow, joined to its modelled point by a dotted line."""
    for m in model.measured:
        ax.plot([m.point.intensity, m.intensity], [m.point.flops_per_s, m.flops_per_s], linestyle=":", linewidth=0.8,
                color=palette.TEXT, gid="measured-link")
        ax.plot([m.intensity], [m.flops_per_s], marker="o", markersize=7, markerfacecolor="none",
                markeredgecolor=m.point.colour, markeredgewidth=1.5, linewidth=0, gid="measured-point")
    if not model.measured:
        return []
    return [Line2D([], [], marker="o", markersize=7, markerfacecolor="none", markeredgecolor=palette.TEXT, linewidth=0,
                   label="○ measured (hardware counters)")]


def _roofline_axes(ax, model):
    roof_handles = _draw_roofs(ax, model)
    point_handles = _draw_points(ax, model)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: format_number(value)))
    _si_axis(ax.yaxis)
    ax.grid(True, which="major", color=palette.GRID, linewidth=0.6)
    unplotted = f"; {model.unplotted} without a plottable FLOP/s or intensity left out" if model.unplotted else ""
    ax.set_title(f"Roofline: {model.device_name} ({len(model.points)} benchmarks{unplotted})", loc="left",
                 fontsize=FONT_SIZE + 2)
    handles = roof_handles + point_handles
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0, -0.12), ncol=LEGEND_COLUMNS, frameon=False,
              fontsize=FONT_SIZE - 0.5)
    return len(handles)


def _stacked(models, draw, height_of):
    """One figure, one panel per model, each panel as tall as its content needs."""
    heights = [height_of(model) for model in models]
    figure = Figure(figsize=(WIDTH_INCHES, sum(heights)), layout="constrained")
    for ax, model in zip(figure.subplots(len(models), 1, squeeze=False, height_ratios=heights)[:, 0], models):
        draw(ax, model)
    return figure


def _roofline_height(model):
    entries = len(model.roofs) + 2 + (len(model.groups) if model.grouped else 6)
    return ROOFLINE_HEIGHT_INCHES + LEGEND_ROW_INCHES * ((entries + LEGEND_COLUMNS - 1) // LEGEND_COLUMNS)


def roofline_figure(models):
    return _stacked(models, _roofline_axes, _roofline_height)


def _bar_positions(waterfall):
    """x of each bar: the bars of one rung side by side, a gap between rungs."""
    per_slot = max(bar.series_index for bar in waterfall.bars) + 1
    return [bar.slot * (per_slot + RUNG_GAP) + bar.series_index for bar in waterfall.bars], per_slot



def _waterfall_axes(ax, waterfall):
    positions, per_slot = _bar_positions(waterfall)
    top = max((bar.rung.rate or 0 for bar in waterfall.bars), default=1) or 1
    for x, bar in zip(positions, waterfall.bars):
        height = bar.rung.rate or 0
        ax.bar([x], [height], width=0.85, color=bar.colour, alpha=bar.opacity, gid="bar")
        over = "\n".join(bar.labels)
        ax.annotate(over, (x, height), xytext=(0, 3), textcoords="offset points", ha="center", va="bottom",
                    fontsize=FONT_SIZE - 1.5, color=palette.WATERFALL_LOSS if bar.negative or not bar.rung.rate else None)
    ax.set_xticks(positions, ["\n".join(bar.foot_lines) for bar in waterfall.bars], fontsize=FONT_SIZE - 1,
                  color=palette.MUTED_TEXT)
    foot_lines = max(len(bar.foot_lines) for bar in waterfall.bars)
    for slot, (title, detail) in enumerate(waterfall.slots):
        centre = slot * (per_slot + RUNG_GAP) + (per_slot - 1) / 2
        ax.annotate(f"{title}\n{detail}".strip(), (centre, 0), xycoords=("data", "axes fraction"),
                    xytext=(0, -12 - 9 * foot_lines), textcoords="offset points", ha="center", va="top", fontweight="bold")
    ax.set_ylim(0, top * 1.45)
    ax.set_ylabel(waterfall.counter)
    _si_axis(ax.yaxis)
    ax.grid(True, axis="y", color=palette.GRID, linewidth=0.6)
    ax.set_axisbelow(True)
    ax.set_title(waterfall.title, loc="left", fontsize=FONT_SIZE + 2, pad=24)
    ax.annotate(textwrap.fill(waterfall.subtitle, TITLE_CHARACTERS), (0, 1), xycoords="axes fraction",
                xytext=(0, 4), textcoords="offset points", va="bottom", color=palette.MUTED_TEXT)


def waterfall_figure(waterfalls):
    return _stacked(waterfalls, _waterfall_axes, lambda _: WATERFALL_HEIGHT_INCHES)


def svg_text(figure):
    stream = io.StringIO()
    figure.savefig(stream, format="svg", metadata={"Date": None})
    return stream.getvalue()
