#!/usr/bin/python3
"""draw_roofline.py [RESULTS.json] [-o PNG]: the README's roofline picture from a roofbench results file
(default: the H200 micro suite's reference run, written to docs/roofline.png).

One point per benchmark that counts FLOPs (arithmetic intensity against achieved FLOP/s), coloured by
precision (named when there are a dozen or fewer), under the roofs the file records for its first device:
the memory roof up to each precision's compute roof. Needs matplotlib (Debian: apt-get install python3-matplotlib)."""

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "reports"))
from roofbench_reports.palette import precision_order  # noqa: E402
from roofbench_reports.results import ResultsError, group_by_device, load_run_file  # noqa: E402

DEFAULT_RESULTS = ROOT / "results" / "reference" / "h200" / "2026-12-04-micro.json"
DEFAULT_OUTPUT = ROOT / "docs" / "roofline.png"
TERA = 1e12
MOST_NAMED_POINTS = 12


def plotted_points(device):
    """(name, precision, AI, FLOP/s) of each benchmark that has both figures."""
    points = []
    for benchmark in device.benchmarks.values():
        intensity, rate = benchmark.counter("AI"), benchmark.counter("FLOP/s")
        if intensity and rate:
            points.append((benchmark.short_name, benchmark.precision, intensity, rate))
    return points


def draw(device, output):
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot

    points = plotted_points(device)
    bandwidth = device.ceilings.bandwidth_Bps
    precisions = sorted({precision for _, precision, _, _ in points}, key=precision_order)
    colours = dict(zip(precisions, pyplot.get_cmap("tab10").colors))
    lowest = min(intensity for _, _, intensity, _ in points) / 4
    highest = max(intensity for _, _, intensity, _ in points) * 4
    figure, axes = pyplot.subplots(figsize=(8, 4.5), dpi=120)
    roofs = {}  # peak FLOP/s -> the precisions that share it (bf16 and fp16 usually do)
    for precision in precisions:
        if device.ceilings.flops.get(precision):
            roofs.setdefault(device.ceilings.flops[precision], []).append(precision)
    right = highest * 2
    if bandwidth and roofs:
        top_ridge = max(roofs) / bandwidth
        axes.plot([lowest, top_ridge], [lowest * bandwidth / TERA, max(roofs) / TERA], color="grey", linewidth=1.2)
        label_at = lowest * 12  # above the slope, left of the points that sit on it
        axes.annotate(f"memory roof {bandwidth / TERA:.2f} TB/s", (label_at, label_at * bandwidth / TERA),
                      rotation=33, fontsize=8, color="grey", xytext=(-4, 4), textcoords="offset points",
                      ha="right", va="bottom")
    below = None  # the roof just under this one: within 10% of it, this one's label goes below its line
    for peak, sharing in sorted(roofs.items()):
        ridge = peak / bandwidth if bandwidth else lowest
        colour = colours[sharing[0]]
        axes.plot([ridge, right], [peak / TERA, peak / TERA], color=colour, linewidth=1.2, alpha=0.7)
        crowded = below is not None and peak < below * 1.1
        axes.annotate(f"{' / '.join(sharing)} roof", (ridge, peak / TERA), xytext=(-4, 3 if not crowded else 12),
                      textcoords="offset points", ha="right", va="bottom", fontsize=8, color=colour)
        below = peak
    middle = (lowest * highest) ** 0.5
    named = len(points) <= MOST_NAMED_POINTS  # beyond that, names overprint: a legend of precisions instead
    for name, precision, intensity, rate in points:
        axes.scatter(intensity, rate / TERA, color=colours[precision], zorder=3, s=18 if named else 12)
        if named:
            left = intensity > middle  # labels face the middle, away from the plot's edges
            axes.annotate(name, (intensity, rate / TERA), textcoords="offset points", xytext=(-5 if left else 5, -11),
                          ha="right" if left else "left", fontsize=7)
    if not named:
        for precision in precisions:
            axes.scatter([], [], color=colours[precision], label=f"{precision} benchmarks")
        axes.legend(loc="lower right", fontsize=8)
    axes.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP per byte)",
             ylabel="achieved TFLOP/s", title=f"{device.device.name}: roofs and benchmarks of {pathlib.Path(device.files[0].path).name}")
    if roofs:
        axes.set_ylim(top=max(roofs) / TERA * 3)  # room for the highest roof's label
    axes.grid(True, which="major", alpha=0.3)
    figure.tight_layout()
    figure.savefig(output, metadata={"Software": None})


def main(argv=None):
    parser = argparse.ArgumentParser(prog="draw_roofline.py", description=__doc__.strip().splitlines()[0])
    parser.add_argument("results", nargs="?", default=str(DEFAULT_RESULTS), help="a roofbench results file")
    parser.add_argument("-o", "--output", default=str(DEFAULT_OUTPUT), help="the PNG to write")
    arguments = parser.parse_args(argv)
    try:
        device = group_by_device([load_run_file(arguments.results)])[0]
    except ResultsError as error:
        print(f"draw_roofline.py: {error}", file=sys.stderr)
        return 2
    if not plotted_points(device):
        print(f"draw_roofline.py: {arguments.results}: no benchmark with FLOP/s and AI to plot", file=sys.stderr)
        return 2
    try:
        draw(device, arguments.output)
    except ImportError:
        print("draw_roofline.py: needs matplotlib (apt-get install python3-matplotlib)", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"draw_roofline.py: cannot write {arguments.output}: {error.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
