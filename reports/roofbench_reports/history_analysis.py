"""From the store's records to what the history says: each benchmark's series of run medians, its change
points, and the regressions the newest run carries (a slower change point, a gate that newly fails)."""

import re
from dataclasses import dataclass, field

from .changepoints import ChangePointSettings, find_change_points

_FAILED_GATES = ("fail", "error")


@dataclass
class Series:
    """One benchmark on one device in one mode (hot or cold), over the runs that measured it."""

    benchmark: str
    device_key: str
    device_name: str
    mode: str
    points: list = field(default_factory=list)  # (RunRecord, ResultRecord), oldest first
    change_points: list = field(default_factory=list)  # ChangePoints, indices into timed

    @property
    def key(self):
        return (self.benchmark, self.device_key, self.mode)

    @property
    def title(self):
        mode = f", {self.mode}" if self.mode else ""
        return f"{self.benchmark} ({self.device_name}{mode})"

    def finish(self):
        """Called once every point is in: sets timed (the points with a median time, what change points
        are judged on) and medians (theirs)."""
        self.timed = [(run, result) for run, result in self.points if result.median_s is not None]
        self.medians = [result.median_s for _, result in self.timed]


@dataclass(frozen=True)
class Change:
    """A change point placed in its series: the runs either side of it and its size."""

    series: Series
    point: object  # ChangePoint

    @property
    def run_before(self):
        return self.series.timed[self.point.index - 1][0]

    @property
    def run_after(self):
        return self.series.timed[self.point.index][0]

    @property
    def commit_range(self):
        return f"{self.run_before.label} .. {self.run_after.label}"

    @property
    def runs_since(self):
        return len(self.series.timed) - self.point.index

    @property
    def slower(self):
        return self.point.relative_change > 0


def series_of(runs, results, name_filter=None):
    """Series per (benchmark, device, mode), in the order benchmarks first appear. runs: oldest first;
    results: in the same order (as the store gives them). name_filter: a compiled regular expression
    searched in the benchmark name, or None for all."""
    runs_by_id = {run.id: run for run in runs}
    series = {}
    for result in results:
        if name_filter is not None and not name_filter.search(result.benchmark):
            continue
        run = runs_by_id[result.run_id]
        key = (result.benchmark, run.device_key, run.mode)
        if key not in series:
            series[key] = Series(result.benchmark, run.device_key, run.device_name, run.mode)
        series[key].points.append((run, result))
    for each in series.values():
        each.finish()
    return list(series.values())


def compile_filter(text):
    """The FILTER argument as a regular expression; ValueError with a one-line reason when it is not one."""
    if not text:
        return None
    try:
        return re.compile(text)
    except re.error as error:
        raise ValueError(f"filter {text!r} is not a regular expression: {error}") from None


def detect(series_list, settings=ChangePointSettings()):
    """Fills each series' change points; returns every Change, oldest series order first."""
    changes = []
    for series in series_list:
        series.change_points = find_change_points(series.medians, settings)
        changes += [Change(series, point) for point in series.change_points]
    return changes


@dataclass(frozen=True)
class GateRegression:
    series: Series
    previous_run: object  # RunRecord whose gate passed
    newest_run: object
    gate: str


def regressions_at(newest_run, series_list, threshold):
    """(slower Changes, GateRegressions) that the newest run carries: for each series it measured, the
    last change point when it made the benchmark slower by more than threshold, and a gate that fails
    now and passed in the series' run before."""
    slower, gates = [], []
    for series in series_list:
        runs = [run for run, _ in series.points]
        if not runs or runs[-1].id != newest_run.id:
            continue
        if series.change_points:
            last = Change(series, series.change_points[-1])
            if last.point.relative_change > threshold:
                slower.append(last)
        gate_change = _newly_failed_gate(series)
        if gate_change is not None:
            gates.append(gate_change)
    return slower, gates


def _newly_failed_gate(series):
    if len(series.points) < 2:
        return None
    (previous_run, previous), (newest_run, newest) = series.points[-2], series.points[-1]
    if newest.gate in _FAILED_GATES and previous.gate == "pass":
        return GateRegression(series, previous_run, newest_run, newest.gate)
    return None
