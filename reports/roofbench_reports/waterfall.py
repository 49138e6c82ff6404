"""The waterfall of one ladder: a bar of items/s per rung, in rung order, each labelled with its ratio
to the previous rung (what that one change bought) and to the first (what the whole stack bought)."""

from dataclasses import dataclass

from . import axes, palette
from .labels import text_width, truncate
from .scales import LinearScale, nice_ticks_from_zero
from .svg import figure, group, rect, text, tooltip
from .units import format_si

PLOT_LEFT = 84
PLOT_TOP = 76
PLOT_HEIGHT = 300
MIN_SLOT_WIDTH = 120
MIN_WIDTH = 560
BAR_FRACTION = 0.6
LABEL_FONT_SIZE = 11
LABEL_LINE = 14
# Room above the tallest bar for its three label lines.
_HEADROOM = 1.3


@dataclass(frozen=True)
class Rung:
    benchmark: object
    rate: float  # items/s, None when the rung has no value (errored)

    @property
    def title(self):
        return self.benchmark.case

    @property
    def detail(self):
        """The rest of the short name (the parameters), shown under the case name."""
        return self.benchmark.short_name[len(self.benchmark.case):].lstrip("/")


def rungs_of(benchmarks):
    return [Rung(benchmark, benchmark.counter(benchmark.items_counter) if benchmark.items_counter else None)
            for benchmark in benchmarks]


def ratio_labels(rungs):
    """Per rung: [] for no value, ['baseline'] for the first valued one, else [vs previous, vs first]."""
    labels, first, previous = [], None, None
    for rung in rungs:
        if not rung.rate:
            labels.append([])
            continue
        if first is None:
            labels.append(["baseline"])
            first = rung.rate
        else:
            labels.append([f"×{rung.rate / previous:.2f} vs prev", f"×{rung.rate / first:.2f} vs first"])
        previous = rung.rate
    return labels


def _bar_colour(rung_index, rungs):
    earlier = [r.rate for r in rungs[:rung_index] if r.rate]
    if not earlier:
        return palette.WATERFALL_BASELINE
    return palette.WATERFALL_GAIN if rungs[rung_index].rate >= earlier[-1] else palette.WATERFALL_LOSS


def waterfall_figure(ladder_name, benchmarks, device_name):
    rungs = rungs_of(benchmarks)
    counter = next((b.items_counter for b in benchmarks if b.items_counter), "items/s")
    longest = max(max(len(r.title), len(r.detail)) for r in rungs)
    slot = max(MIN_SLOT_WIDTH, text_width("x" * longest, LABEL_FONT_SIZE) + 16)
    width = max(MIN_WIDTH, PLOT_LEFT + slot * len(rungs) + 30)
    area = axes.PlotArea(PLOT_LEFT, PLOT_TOP, width - PLOT_LEFT - 30, PLOT_HEIGHT)
    slot = area.width / len(rungs)  # a short ladder spreads over the minimum width
    root = figure(width, area.bottom + 60)
    root.attributes["class"] = "waterfall"

    first_name = next((r.title for r in rungs if r.rate), "the first rung")
    axes.draw_title(root, 24, 24, f"Ladder {ladder_name}: {counter} on {device_name}",
                    f"cumulative rungs; labels: ratio to the previous rung and to the first ({first_name})")
    ticks = nice_ticks_from_zero(max((r.rate for r in rungs if r.rate), default=1) * _HEADROOM)
    y_scale = LinearScale(0, ticks[-1], area.bottom, area.top)
    axes.draw_y_ticks(root, area, [(y_scale(v), format_si(v)) for v in ticks])
    axes.draw_frame(root, area)
    axes.draw_axis_titles(root, area, "", counter)

    bars = root.add(group(class_="bars", font_size=LABEL_FONT_SIZE, fill=palette.TEXT))
    for index, (rung, labels) in enumerate(zip(rungs, ratio_labels(rungs))):
        centre = area.left + slot * (index + 0.5)
        bars.add(text(centre, area.bottom + 16, truncate(rung.title, int(slot / 6.6)), text_anchor="middle",
                      font_weight="bold"))
        bars.add(text(centre, area.bottom + 30, truncate(rung.detail, int(slot / 6.6)), text_anchor="middle",
                      fill=palette.MUTED_TEXT))
        if not rung.rate:
            message = "; ".join(rung.benchmark.error_messages) or f"no {counter} counter"
            note = bars.add(text(centre, area.bottom - 8, "no data", text_anchor="middle", fill=palette.WATERFALL_LOSS))
            note.add(tooltip(message))
            continue
        top = y_scale(rung.rate)
        bar = bars.add(rect(centre - slot * BAR_FRACTION / 2, top, slot * BAR_FRACTION, area.bottom - top,
                            fill=_bar_colour(index, rungs), class_="bar"))
        bar.add(tooltip(f"{rung.benchmark.name}: {format_si(rung.rate, counter)}"))
        lines = [format_si(rung.rate)] + labels
        for line_index, content in enumerate(lines):
            bars.add(text(centre, top - 6 - LABEL_LINE * (len(lines) - 1 - line_index), content,
                          text_anchor="middle", font_weight="bold" if line_index == 0 else None))
    return root
