"""The roofline plot of one device: log-log FLOP/s over arithmetic intensity, the measured memory and
compute roofs, ridge points, and every benchmark as a numbered point with a key below the plot.

Points carry a number rather than their name: with dozens of benchmarks, names overlap into
unreadable clutter, while short numbers fit beside their points and the key spells out the names.
"""

import math
from dataclasses import dataclass

from . import axes, palette
from .labels import Box, LabelPlacer, around_point, spread, text_box, truncate_middle
from .scales import LogScale
from .svg import circle, figure, group, line, polyline, text, tooltip
from .units import format_number, format_percent, format_si

PLOT = axes.PlotArea(left=84, top=64, width=640, height=440)
LEGEND_LEFT = PLOT.right + 28
WIDTH = 960
POINT_RADIUS = 5
RIDGE_RADIUS = 4
LABEL_FONT_SIZE = 10
ROOF_LABEL_FONT_SIZE = 11
KEY_COLUMNS = 3
KEY_ROW_HEIGHT = 16
# Ceilings closer than this share one line and one label (bf16 and fp16 usually have the same roof).
_SAME_ROOF_TOLERANCE = 0.01
# Room (in decades) around the ridges, so each compute roof shows a visible flat part.
_RIDGE_MARGIN = 1.0


@dataclass(frozen=True)
class Point:
    index: int
    benchmark: object
    intensity: float
    flops_per_s: float

    @property
    def colour(self):
        return palette.precision_colour(self.benchmark.precision)


@dataclass(frozen=True)
class Roof:
    precisions: tuple
    flops_per_s: float

    @property
    def name(self):
        return ", ".join(self.precisions)

    @property
    def colour(self):
        return palette.precision_colour(self.precisions[0])

    def ridge(self, bandwidth):
        """Arithmetic intensity where this roof meets the memory roof."""
        return self.flops_per_s / bandwidth


def plottable_points(device_results):
    """Benchmarks with a positive FLOP/s and AI, numbered from 1 in report order."""
    candidates = [b for benchmarks in device_results.plugins().values() for b in benchmarks]
    points = []
    for benchmark in candidates:
        intensity, rate = benchmark.counter("AI"), benchmark.counter("FLOP/s")
        if intensity and rate and intensity > 0 and rate > 0:
            points.append(Point(len(points) + 1, benchmark, intensity, rate))
    return points


def compute_roofs(ceilings):
    """One roof per distinct measured ceiling, highest first; equal ceilings merged."""
    roofs = []
    for precision in sorted(ceilings.flops, key=palette.precision_order):
        value = ceilings.flops[precision]
        if value <= 0:
            continue
        same = next((r for r in roofs if abs(r.flops_per_s - value) <= _SAME_ROOF_TOLERANCE * value), None)
        if same:
            roofs[roofs.index(same)] = Roof(same.precisions + (precision,), same.flops_per_s)
        else:
            roofs.append(Roof((precision,), value))
    return sorted(roofs, key=lambda roof: -roof.flops_per_s)


def _scales(points, roofs, bandwidth):
    intensities = [p.intensity for p in points]
    rates = [p.flops_per_s for p in points]
    if bandwidth:
        ridges = [roof.ridge(bandwidth) for roof in roofs] or [1.0]
        intensities += [min(ridges) / 10**_RIDGE_MARGIN, max(ridges) * 10**_RIDGE_MARGIN]
    # Headroom above the highest roof keeps its label inside the frame.
    rates += [roof.flops_per_s * 1.6 for roof in roofs]
    x_scale = LogScale.covering(intensities, PLOT.left, PLOT.right)
    y_scale = LogScale.covering(rates, PLOT.bottom, PLOT.top)
    return x_scale, y_scale


def _draw_axes(root, x_scale, y_scale):
    axes.draw_y_ticks(root, PLOT, [(y_scale(v), format_si(v)) for v in y_scale.decades()],
                      minor_pixels=[y_scale(v) for v in y_scale.minor_ticks()])
    axes.draw_x_ticks(root, PLOT, [(x_scale(v), format_number(v)) for v in x_scale.decades()],
                      minor_pixels=[x_scale(v) for v in x_scale.minor_ticks()])
    axes.draw_frame(root, PLOT)
    axes.draw_axis_titles(root, PLOT, "arithmetic intensity (FLOP/byte)", "performance (FLOP/s)")


def _memory_roof_segment(x_scale, y_scale, bandwidth, roofs):
    """Ends (in data units) of the visible part of the bandwidth slope, up to the highest ridge."""
    start = max(x_scale.lowest, y_scale.lowest / bandwidth)
    end = max(roof.ridge(bandwidth) for roof in roofs) if roofs else min(x_scale.highest, y_scale.highest / bandwidth)
    return (start, end) if start < end else None


def _draw_memory_roof(root, placer, x_scale, y_scale, bandwidth, roofs):
    segment = _memory_roof_segment(x_scale, y_scale, bandwidth, roofs)
    if not segment:
        return
    (x0, x1) = segment
    ends = [(x_scale(x0), y_scale(x0 * bandwidth)), (x_scale(x1), y_scale(x1 * bandwidth))]
    roof = root.add(polyline(ends, stroke=palette.MEMORY_ROOF, stroke_width=2.5, class_="memory-roof"))
    roof.add(tooltip(f"memory roof: {format_si(bandwidth, 'B/s')}"))
    (px0, py0), (px1, py1) = ends
    angle = math.atan2(py1 - py0, px1 - px0)
    label = f"memory {format_si(bandwidth, 'B/s')}"
    # Along the slope and above it (points sit below their roofs), a short way in from the lower end.
    normal = (math.sin(angle) * 9, -math.cos(angle) * 9)
    x, y = px0 + 0.1 * (px1 - px0) + normal[0], py0 + 0.1 * (py1 - py0) + normal[1]
    root.add(text(x, y, label, font_size=ROOF_LABEL_FONT_SIZE, fill=palette.MEMORY_ROOF,
                  transform=f"rotate({math.degrees(angle):.1f} {x:.1f} {y:.1f})", class_="roof-label"))
    _reserve_rotated_text(placer, x, y, angle, label, ROOF_LABEL_FONT_SIZE)


def _reserve_rotated_text(placer, x, y, angle, label, font_size):
    """Covers slanted text with small square boxes along its baseline, which keeps other labels off
    it without reserving the whole (mostly empty) bounding rectangle."""
    step = font_size * 0.6
    for position in range(len(label)):
        cx = x + math.cos(angle) * step * (position + 0.5) + math.sin(angle) * font_size * 0.35
        cy = y + math.sin(angle) * step * (position + 0.5) - math.cos(angle) * font_size * 0.35
        placer.reserve(Box(cx - step / 2, cy - font_size / 2, cx + step / 2, cy + font_size / 2))


def _roof_label_placement(start, baseline, label, point_boxes):
    """Right end of the roof, or its left end (just past the ridge) when fewer points hide there."""
    ends = [(PLOT.right - 4, "end"), (start + 10, "start")]
    crowding = [sum(text_box(x, baseline, label, ROOF_LABEL_FONT_SIZE, anchor).overlaps(box) for box in point_boxes)
                for x, anchor in ends]
    return ends[crowding.index(min(crowding))]


def _draw_compute_roofs(root, placer, x_scale, y_scale, bandwidth, roofs, point_boxes):
    # A label sits just above its roof; when the next roof up is too close for that, it goes under its
    # own line instead. spread() then separates whatever still collides.
    line_ys = [y_scale(roof.flops_per_s) for roof in roofs]  # roofs are sorted highest first
    wanted = [
        y - 4 if index == 0 or y - line_ys[index - 1] > ROOF_LABEL_FONT_SIZE + 4 else y + ROOF_LABEL_FONT_SIZE + 2
        for index, y in enumerate(line_ys)
    ]
    label_baselines = spread(wanted, ROOF_LABEL_FONT_SIZE + 1, PLOT.top + ROOF_LABEL_FONT_SIZE + 2, PLOT.bottom - 2)
    for roof, y, baseline in zip(roofs, line_ys, label_baselines):
        start = x_scale(max(roof.ridge(bandwidth), x_scale.lowest)) if bandwidth else PLOT.left
        drawn = root.add(line(start, y, PLOT.right, y, stroke=roof.colour, stroke_width=2, class_="compute-roof"))
        drawn.add(tooltip(f"{roof.name} roof: {format_si(roof.flops_per_s, 'FLOP/s')}"))
        label = f"{roof.name} {format_si(roof.flops_per_s, 'FLOP/s')}"
        x, anchor = _roof_label_placement(start, baseline, label, point_boxes)
        root.add(text(x, baseline, label, font_size=ROOF_LABEL_FONT_SIZE, fill=roof.colour, text_anchor=anchor,
                      font_weight="bold", class_="roof-label"))
        placer.reserve(text_box(x, baseline, label, ROOF_LABEL_FONT_SIZE, anchor))


def _ridge_label_candidates():
    # Up and to the left of a ridge lies the empty space above the memory roof: try there first.
    offsets = around_point(RIDGE_RADIUS + 2, LABEL_FONT_SIZE)[:8]
    return [offsets[6], offsets[1], offsets[2], offsets[5], offsets[3], offsets[0], offsets[4], offsets[7]]


def _draw_ridges(root, placer, x_scale, y_scale, bandwidth, roofs):
    ridges = root.add(group(class_="ridges"))
    placed = []
    for roof in roofs:
        intensity = roof.ridge(bandwidth)
        if not x_scale.contains(intensity):
            continue
        x, y = x_scale(intensity), y_scale(roof.flops_per_s)
        dot = ridges.add(circle(x, y, RIDGE_RADIUS, fill=roof.colour, stroke=palette.TEXT, stroke_width=1,
                                class_="ridge"))
        dot.add(tooltip(f"ridge {roof.name}: {format_number(intensity)} FLOP/byte"))
        placer.reserve(_marker_box(x, y, RIDGE_RADIUS))
        placed.append((x, y, f"ridge {roof.name}: {format_number(intensity)} FLOP/B"))
    for x, y, label in placed:
        where = placer.place(x, y, label, LABEL_FONT_SIZE, _ridge_label_candidates())
        ridges.add(text(where.x, where.y, label, font_size=LABEL_FONT_SIZE, fill=palette.TEXT,
                        text_anchor=where.anchor, class_="ridge-label"))


def _marker_box(x, y, radius):
    return Box(x - radius, y - radius, x + radius, y + radius)


def _point_tooltip(point):
    benchmark = point.benchmark
    return (f"{point.index}: {benchmark.name}\n{benchmark.precision or 'precision ?'}, "
            f"{format_si(point.flops_per_s, 'FLOP/s')}, AI {format_number(point.intensity)} FLOP/B, "
            f"{format_percent(benchmark.counter('roof_pct'))} of roof")


def _point_positions(x_scale, y_scale, points):
    return [(x_scale(p.intensity), y_scale(p.flops_per_s)) for p in points]


def _draw_points(root, placer, positions, points):
    layer = root.add(group(class_="points"))
    # Every marker is reserved before any label is placed, so no label hides a later point.
    for x, y in positions:
        placer.reserve(_marker_box(x, y, POINT_RADIUS))
    for point, (x, y) in zip(points, positions):
        marker = layer.add(circle(x, y, POINT_RADIUS, fill=point.colour, stroke="white", stroke_width=1,
                                  class_="point"))
        marker.add(tooltip(_point_tooltip(point)))
    labels = root.add(group(class_="point-labels", font_size=LABEL_FONT_SIZE, fill=palette.TEXT))
    for point, (x, y) in zip(points, positions):
        where = placer.place(x, y, str(point.index), LABEL_FONT_SIZE, around_point(POINT_RADIUS, LABEL_FONT_SIZE))
        labels.add(text(where.x, where.y, str(point.index), text_anchor=where.anchor))


def _draw_legend(root, precisions, has_memory_roof, has_compute_roofs):
    legend = root.add(group(class_="legend", font_size=11, fill=palette.TEXT))
    y = PLOT.top + 6
    legend.add(text(LEGEND_LEFT, y, "precision", font_weight="bold"))
    for precision in precisions:
        y += 18
        legend.add(circle(LEGEND_LEFT + 6, y - 4, POINT_RADIUS, fill=palette.precision_colour(precision)))
        legend.add(text(LEGEND_LEFT + 18, y, precision or "unknown"))
    y += 30
    legend.add(text(LEGEND_LEFT, y, "lines", font_weight="bold"))
    if has_memory_roof:
        y += 18
        legend.add(line(LEGEND_LEFT, y - 4, LEGEND_LEFT + 22, y - 4, stroke=palette.MEMORY_ROOF, stroke_width=2.5))
        legend.add(text(LEGEND_LEFT + 30, y, "memory roof (measured)"))
    if has_compute_roofs:
        y += 18
        legend.add(line(LEGEND_LEFT, y - 4, LEGEND_LEFT + 22, y - 4, stroke=palette.AXIS, stroke_width=2))
        legend.add(text(LEGEND_LEFT + 30, y, "compute roof (measured),"))
        y += 14
        legend.add(text(LEGEND_LEFT + 30, y, "coloured by precision"))
        y += 18
        legend.add(circle(LEGEND_LEFT + 11, y - 4, RIDGE_RADIUS, fill="white", stroke=palette.TEXT, stroke_width=1))
        legend.add(text(LEGEND_LEFT + 30, y, "ridge point"))
    y += 30
    legend.add(text(LEGEND_LEFT, y, "numbered points:", fill=palette.MUTED_TEXT))
    legend.add(text(LEGEND_LEFT, y + 14, "see the key below", fill=palette.MUTED_TEXT))


def _key_height(point_count, has_note):
    rows = math.ceil(point_count / KEY_COLUMNS)
    return 28 + rows * KEY_ROW_HEIGHT + (KEY_ROW_HEIGHT if has_note else 0)


def _draw_key(root, top, points, unplotted_count):
    key = root.add(group(class_="key", font_size=11, fill=palette.TEXT))
    key.add(text(PLOT.left - 60, top, "key", font_weight="bold"))
    column_width = (WIDTH - PLOT.left + 60) / KEY_COLUMNS
    max_characters = int((column_width - 44) / (11 * 0.6))
    rows = math.ceil(len(points) / KEY_COLUMNS)
    for position, point in enumerate(points):
        # Column-major, so numbers read downwards like a printed index.
        column, row = divmod(position, rows)
        x = PLOT.left - 60 + column * column_width
        y = top + 20 + row * KEY_ROW_HEIGHT
        key.add(circle(x + 4, y - 4, 4, fill=point.colour))
        key.add(text(x + 30, y, str(point.index), text_anchor="end", font_weight="bold"))
        entry = key.add(text(x + 36, y, truncate_middle(point.benchmark.name, max_characters)))
        entry.add(tooltip(point.benchmark.name))
    if unplotted_count:
        key.add(text(PLOT.left - 60, top + 20 + rows * KEY_ROW_HEIGHT, f"{unplotted_count} benchmark(s) without "
                     "FLOP/s or arithmetic intensity (errored, or no FLOPs counted) are not plotted.",
                     fill=palette.MUTED_TEXT))


def roofline_figure(device_results):
    """The roofline of one device as a standalone SVG root element."""
    ceilings = device_results.ceilings
    bandwidth = ceilings.bandwidth_Bps
    points = plottable_points(device_results)
    roofs = compute_roofs(ceilings)
    unplotted = len(device_results.benchmarks) - len(points)
    key_top = PLOT.bottom + 72
    root = figure(WIDTH, key_top + _key_height(len(points), unplotted > 0))
    root.attributes["class"] = "roofline"

    device = device_results.device
    axes.draw_title(root, PLOT.left - 60, 24, f"Roofline: {device.name}",
                    f"{device.kind} · {len(points)} benchmark(s) · roofs are the ceilings measured at run time")
    x_scale, y_scale = _scales(points, roofs, bandwidth)
    _draw_axes(root, x_scale, y_scale)
    placer = LabelPlacer(PLOT.box())
    if bandwidth:
        _draw_memory_roof(root, placer, x_scale, y_scale, bandwidth, roofs)
    positions = _point_positions(x_scale, y_scale, points)
    _draw_compute_roofs(root, placer, x_scale, y_scale, bandwidth, roofs,
                        [_marker_box(x, y, POINT_RADIUS) for x, y in positions])
    if bandwidth:
        _draw_ridges(root, placer, x_scale, y_scale, bandwidth, roofs)
    _draw_points(root, placer, positions, points)

    precisions = sorted({p.benchmark.precision for p in points} | {r.precisions[0] for r in roofs},
                        key=palette.precision_order)
    _draw_legend(root, precisions, bool(bandwidth), bool(roofs))
    _draw_key(root, key_top, points, unplotted)
    return root
