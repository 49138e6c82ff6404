"""roofbench-report RESULTS.json... -o DIR: writes summary.md, roofline.svg, waterfall.svg (when a ladder
exists) and a self-contained index.html into DIR.

Several files are merged per device. Exit codes: 0 written; 2 bad input (an unreadable file, an entry
without a name, a time that is missing, zero or negative, an impossible ceiling) or a folder that cannot
be written, with one line naming the file and the cause."""

import argparse
import os
import sys

from .document import Paragraph
from .html_page import render_html
from .markdown import render_markdown
from .results import ResultsError, group_by_device, load_run_file
from .summary import build_summary, device_figures


def _static_figures():
    """static_plots (matplotlib), once plotly is known to be there too; else a ResultsError saying what to install."""
    try:
        import plotly  # noqa: F401  (the page's plotly.js)

        from . import static_plots
    except ImportError as error:
        raise ResultsError(f"cannot draw the figures with {sys.executable} ({error}): "
                           "apt-get install python3-matplotlib python3-plotly") from None
    return static_plots

EXIT_BAD_INPUT = 2


def write_report(paths, output_dir):
    """Writes the report files and returns their paths."""
    devices = group_by_device([load_run_file(path) for path in paths])
    static_plots = _static_figures()
    figures = [device_figures(device) for device in devices]
    document = build_summary(devices, figures)
    waterfalls = [waterfall for plots in figures for waterfall in plots.waterfalls]
    outputs = {
        "summary.md": render_markdown(document, preamble=[Paragraph(
            "Plots: roofline.svg" + (", waterfall.svg" if waterfalls else "")
            + "; everything on one page: index.html.")]),
        "roofline.svg": static_plots.svg_text(static_plots.roofline_figure([plots.roofline for plots in figures])),
        "index.html": render_html(document),
    }
    if waterfalls:
        outputs["waterfall.svg"] = static_plots.svg_text(static_plots.waterfall_figure(waterfalls))
    os.makedirs(output_dir, exist_ok=True)
    written = []
    for name, content in outputs.items():
        path = os.path.join(output_dir, name)
        with open(path, "w", encoding="utf-8") as stream:
            stream.write(content)
        written.append(path)
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(prog="roofbench-report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="roofbench results JSON files (several: merged per device)")
    parser.add_argument("-o", "--output-dir", required=True, help="folder for the report files")
    arguments = parser.parse_args(argv)
    try:
        written = write_report(arguments.results, arguments.output_dir)
    except ResultsError as error:
        print(f"roofbench-report: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as error:
        print(f"roofbench-report: cannot write the report: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for path in written:
        print(path)
    return 0
