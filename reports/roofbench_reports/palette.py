"""Colours shared by the plots, the HTML page and the tests that look for them in a screenshot."""

TEXT = "#222222"
MUTED_TEXT = "#555555"
GRID = "#e3e3e3"
AXIS = "#444444"

# Tableau-10 hues, ordered from wide to narrow formats, so neighbouring precisions stay distinguishable.
PRECISION_COLOURS = {
    "fp64": "#9467bd",
    "fp32": "#1f77b4",
    "tf32": "#17becf",
    "bf16": "#ff7f0e",
    "fp16": "#d62728",
    "fp8": "#2ca02c",
}
UNKNOWN_PRECISION = "#7f7f7f"
# Brown is used by nothing else, so the memory roof stands apart from every precision's compute roof.
MEMORY_ROOF = "#8c564b"

WATERFALL_BASELINE = "#7f7f7f"
WATERFALL_GAIN = "#1f77b4"
WATERFALL_LOSS = "#d62728"


def precision_colour(precision):
    return PRECISION_COLOURS.get(precision, UNKNOWN_PRECISION)


def precision_order(precision):
    """Sort key: known precisions widest first, unknown ones after, alphabetically."""
    names = list(PRECISION_COLOURS)
    return (names.index(precision), "") if precision in names else (len(names), precision)
