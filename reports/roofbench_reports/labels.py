"""Places text so that labels stay readable in crowded plots: boxes are estimated from the text length,
and each label takes the first candidate position that collides with nothing already placed."""

from dataclasses import dataclass

# Average advance of DejaVu Sans / Helvetica digits and lower-case letters, as a fraction of the font
# size. Slightly generous, so estimated boxes err on the side of not overlapping.
_CHARACTER_WIDTH = 0.6
_ASCENT = 0.8
_DESCENT = 0.25


@dataclass(frozen=True)
class Box:
    left: float
    top: float
    right: float
    bottom: float

    def overlaps(self, other):
        return self.left < other.right and other.left < self.right and self.top < other.bottom and other.top < self.bottom

    def inside(self, other):
        return other.left <= self.left and self.right <= other.right and other.top <= self.top and self.bottom <= other.bottom


def text_width(content, font_size):
    return len(content) * font_size * _CHARACTER_WIDTH


def text_box(x, y, content, font_size, anchor="start"):
    """Box of text drawn at (x, y) = baseline point with SVG's text-anchor."""
    width = text_width(content, font_size)
    left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
    return Box(left, y - _ASCENT * font_size, left + width, y + _DESCENT * font_size)


def truncate(content, max_characters):
    return content if len(content) <= max_characters else content[: max(1, max_characters - 1)] + "…"


def truncate_middle(content, max_characters):
    """Keeps both ends: benchmark names differ in their last parameters as often as in their first."""
    if len(content) <= max_characters:
        return content
    head = (max_characters - 1) // 2
    return content[:head] + "…" + content[len(content) - (max_characters - 1 - head):]


@dataclass(frozen=True)
class Placement:
    x: float
    y: float
    anchor: str


def around_point(radius, font_size):
    """Candidate (dx, dy, anchor) offsets of a label around a marker, best first."""
    near = _ring(radius + 2, font_size)
    # A second, wider ring before giving up: in dense clusters the near spots are all taken.
    return near + _ring(2 * radius + 6, font_size)


def _ring(gap, font_size):
    middle = font_size * 0.35  # baseline offset that centres the text vertically on the marker
    return [
        (gap, middle, "start"),
        (-gap, middle, "end"),
        (0, -gap - 1, "middle"),
        (0, gap + font_size * _ASCENT, "middle"),
        (gap * 0.8, -gap * 0.8, "start"),
        (gap * 0.8, gap * 0.8 + font_size * _ASCENT, "start"),
        (-gap * 0.8, -gap * 0.8, "end"),
        (-gap * 0.8, gap * 0.8 + font_size * _ASCENT, "end"),
    ]


class LabelPlacer:
    """Taken areas are kept in a grid of square cells, so that testing a candidate looks only at the
    boxes in the cells it covers: placing n labels costs about n, not n^2 (10,000 points in well under
    a second rather than minutes)."""

    CELL = 32.0

    def __init__(self, bounds):
        self.bounds = bounds
        self.occupied = []
        self._cells = {}

    def _cells_of(self, box):
        cell = self.CELL
        for column in range(int(box.left // cell), int(box.right // cell) + 1):
            for row in range(int(box.top // cell), int(box.bottom // cell) + 1):
                yield column, row

    def reserve(self, box):
        """Marks an area (a marker, a drawn label) as taken."""
        index = len(self.occupied)
        self.occupied.append(box)
        for key in self._cells_of(box):
            self._cells.setdefault(key, []).append(index)

    def overlaps(self, box):
        """How many taken areas the box overlaps."""
        seen = set()
        for key in self._cells_of(box):
            seen.update(self._cells.get(key, ()))
        return sum(box.overlaps(self.occupied[index]) for index in seen)

    def place(self, x, y, content, font_size, candidates):
        """The first candidate inside the bounds that overlaps nothing; else the least crowded one."""
        best, best_overlaps = None, None
        for dx, dy, anchor in candidates:
            box = text_box(x + dx, y + dy, content, font_size, anchor)
            if not box.inside(self.bounds):
                continue
            overlaps = self.overlaps(box)
            if best is None or overlaps < best_overlaps:
                best, best_overlaps = (Placement(x + dx, y + dy, anchor), box), overlaps
            if overlaps == 0:
                break
        if best is None:  # nothing fits inside: keep the first choice rather than lose the label
            dx, dy, anchor = candidates[0]
            best = Placement(x + dx, y + dy, anchor), text_box(x + dx, y + dy, content, font_size, anchor)
        self.reserve(best[1])
        return best[0]


def spread(positions, min_gap, lowest, highest):
    """Moves sorted-order 1-D positions apart by at least min_gap, staying within [lowest, highest]
    where possible; returns them in the input order. Used for labels stacked along one axis."""
    order = sorted(range(len(positions)), key=positions.__getitem__)
    placed = [positions[index] for index in order]
    for i in range(len(placed)):
        placed[i] = max(placed[i], lowest if i == 0 else placed[i - 1] + min_gap)
    overflow = placed[-1] - highest if placed else 0
    if overflow > 0:  # pushed past the end: slide everything back, keeping the gaps
        for i in range(len(placed) - 1, -1, -1):
            limit = highest if i == len(placed) - 1 else placed[i + 1] - min_gap
            placed[i] = min(placed[i], limit)
    result = [0.0] * len(positions)
    for rank, index in enumerate(order):
        result[index] = placed[rank]
    return result
