"""Frames, ticks, grid lines and titles shared by the roofline and the waterfall."""

from dataclasses import dataclass

from . import palette
from .labels import Box
from .svg import group, line, rect, text

TICK_LENGTH = 5
MINOR_TICK_LENGTH = 3
TICK_FONT_SIZE = 11
TITLE_FONT_SIZE = 15
AXIS_TITLE_FONT_SIZE = 12


@dataclass(frozen=True)
class PlotArea:
    left: float
    top: float
    width: float
    height: float

    @property
    def right(self):
        return self.left + self.width

    @property
    def bottom(self):
        return self.top + self.height

    def box(self):
        return Box(self.left, self.top, self.right, self.bottom)


def draw_frame(parent, area):
    parent.add(rect(area.left, area.top, area.width, area.height, fill="none", stroke=palette.AXIS,
                    stroke_width=1, class_="frame"))


def draw_y_ticks(parent, area, ticks, minor_pixels=(), grid=True):
    """ticks: [(pixel y, label)]; labels right-aligned left of the frame."""
    axis = parent.add(group(class_="y-axis", font_size=TICK_FONT_SIZE, fill=palette.TEXT))
    for y in minor_pixels:
        axis.add(line(area.left - MINOR_TICK_LENGTH, y, area.left, y, stroke=palette.AXIS, stroke_width=0.8))
    for y, label in ticks:
        if grid:
            axis.add(line(area.left, y, area.right, y, stroke=palette.GRID, stroke_width=1))
        axis.add(line(area.left - TICK_LENGTH, y, area.left, y, stroke=palette.AXIS, stroke_width=1))
        axis.add(text(area.left - TICK_LENGTH - 3, y + TICK_FONT_SIZE * 0.35, label, text_anchor="end"))


def draw_x_ticks(parent, area, ticks, minor_pixels=(), grid=True):
    """ticks: [(pixel x, label)]; labels centred under the frame."""
    axis = parent.add(group(class_="x-axis", font_size=TICK_FONT_SIZE, fill=palette.TEXT))
    for x in minor_pixels:
        axis.add(line(x, area.bottom, x, area.bottom + MINOR_TICK_LENGTH, stroke=palette.AXIS, stroke_width=0.8))
    for x, label in ticks:
        if grid:
            axis.add(line(x, area.top, x, area.bottom, stroke=palette.GRID, stroke_width=1))
        axis.add(line(x, area.bottom, x, area.bottom + TICK_LENGTH, stroke=palette.AXIS, stroke_width=1))
        axis.add(text(x, area.bottom + TICK_LENGTH + TICK_FONT_SIZE + 2, label, text_anchor="middle"))


def draw_axis_titles(parent, area, x_title, y_title, y_title_offset=62):
    titles = parent.add(group(class_="axis-titles", font_size=AXIS_TITLE_FONT_SIZE, fill=palette.TEXT))
    if x_title:
        titles.add(text(area.left + area.width / 2, area.bottom + 40, x_title, text_anchor="middle",
                        class_="x-title"))
    x, y = area.left - y_title_offset, area.top + area.height / 2
    titles.add(text(x, y, y_title, text_anchor="middle", transform=f"rotate(-90 {x:.1f} {y:.1f})",
                    class_="y-title"))


def draw_title(parent, x, y, content, subtitle=""):
    parent.add(text(x, y, content, font_size=TITLE_FONT_SIZE, font_weight="bold", fill=palette.TEXT,
                    class_="title"))
    if subtitle:
        parent.add(text(x, y + 18, subtitle, font_size=AXIS_TITLE_FONT_SIZE, fill=palette.MUTED_TEXT))
