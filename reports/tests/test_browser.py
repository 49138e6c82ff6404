"""Renders index.html in headless Chromium and checks the screenshot really shows the plots: Plotly drew
them from the page's own plotly.js, with nothing fetched.

Set ROOFBENCH_CHROMIUM to use another browser binary, ROOFBENCH_KEEP_SCREENSHOT to a folder to keep
the PNG for a human to look at.
"""

import os
import pathlib
import shutil
import subprocess
import tempfile
import unittest

from roofbench_reports import palette, report_cli

from . import png
from .helpers import GPU_RUN, TemporaryFolder

WINDOW = (1400, 2400)
CHROMIUM = os.environ.get("ROOFBENCH_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
# Enough pixels for a line or a few markers, far more than stray anti-aliasing produces.
MIN_PIXELS = 40


def hex_to_rgb(colour):
    return bytes.fromhex(colour.lstrip("#"))


def screenshot(page, folder, fragment=""):
    target = folder / f"page{len(list(folder.glob('page*.png')))}.png"
    with tempfile.TemporaryDirectory(prefix="roofbench-chromium-") as profile:
        command = [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={target}",
            page.as_uri() + fragment,
        ]
        completed = subprocess.run(command, capture_output=True, text=True, timeout=180)
    if not target.exists():
        raise AssertionError(f"chromium wrote no screenshot (exit {completed.returncode}): {completed.stderr[-2000:]}")
    return target


@unittest.skipUnless(CHROMIUM, "chromium is not installed (apt-get install chromium)")
class BrowserRenderingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        folder = TemporaryFolder(cls.addClassCleanup)
        report_dir = folder.path / "report"
        report_cli.write_report([str(GPU_RUN)], str(report_dir))
        path = screenshot(report_dir / "index.html", folder.path)
        # The plugin filter, preset from the address: only gpt's points, key entries and tables.
        cls.gpt_only = png.decode(screenshot(report_dir / "index.html", folder.path, "#plugins=gpt").read_bytes())
        keep = os.environ.get("ROOFBENCH_KEEP_SCREENSHOT")
        if keep:
            pathlib.Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, pathlib.Path(keep) / "index.png")
            (pathlib.Path(keep) / "index-gpt.png").write_bytes(
                screenshot(report_dir / "index.html", folder.path, "#plugins=gpt").read_bytes())
        cls.image = png.decode(path.read_bytes())

    def test_screenshot_has_the_window_size(self):
        self.assertEqual((self.image.width, self.image.height), WINDOW)

    def test_page_is_not_blank(self):
        white = self.image.count_colour(b"\xff\xff\xff")
        self.assertLess(white, 0.97 * self.image.width * self.image.height)

    def test_memory_roof_is_drawn(self):
        self.assertGreater(self.image.count_colour(hex_to_rgb(palette.MEMORY_ROOF)), MIN_PIXELS)

    def test_points_of_every_precision_are_drawn(self):
        for precision in ("fp32", "tf32", "bf16", "fp16", "fp8"):  # the precisions in the GPU fixture
            with self.subTest(precision):
                colour = hex_to_rgb(palette.precision_colour(precision))
                self.assertGreater(self.image.count_colour(colour), MIN_PIXELS)

    def test_the_plugin_filter_hides_the_other_plugins_points(self):
        # fp16 and fp8 points are all micro's: filtered to gpt, only the fp8 roof and the greyed legend
        # entries keep something of those colours.
        for precision in ("fp16", "fp8"):
            with self.subTest(precision):
                colour = hex_to_rgb(palette.precision_colour(precision))
                self.assertLess(self.gpt_only.count_colour(colour), self.image.count_colour(colour) - MIN_PIXELS)
        # gpt's own stay.
        self.assertGreater(self.gpt_only.count_colour(hex_to_rgb(palette.WATERFALL_BASELINE)), 1000)

    def test_waterfall_baseline_bar_is_drawn(self):
        self.assertGreater(self.image.count_colour(hex_to_rgb(palette.WATERFALL_BASELINE)), 1000)


if __name__ == "__main__":
    unittest.main()
