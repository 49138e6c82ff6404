"""Reads roofbench results JSON (docs/results-format.md) into a small model, merging files and
repetitions.

Everything that reads results goes through here, so the format's rules (null for non-finite values,
repetitions as separate entries, Google Benchmark aggregates) are handled in one place.
"""

import json
import math
import os
from dataclasses import dataclass, field

from .stats import median, quantile

_SECONDS_PER_TIME_UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
# The host may also write what Google Benchmark itself appends: mean/median/stddev rows computed over
# repetitions. They are derived data; the repetitions themselves are kept instead.
_AGGREGATE_RUN_TYPE = "aggregate"
_FAILED_GATES = ("fail", "error")


class ResultsError(Exception):
    """The input is not a usable roofbench results file; the message is one line for the user."""


def finite_number(value):
    """The value as a float when it is a finite number; None for null, strings, booleans, NaN."""
    if type(value) is float:  # the common case first: a history's add reads millions of them
        return value if math.isfinite(value) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class Device:
    key: str
    kind: str
    name: str
    # The cache a hot run's data can stay in, as the results give its level (device.llc_level: 3 is "L3");
    # else a GPU's is its L2, and a CPU's is called what it is: its last-level cache.
    cache_level: str = ""

    @property
    def cache_name(self):
        if self.cache_level:
            return self.cache_level
        return "L2" if self.kind == "cuda" else "last-level cache"


@dataclass(frozen=True)
class Ceilings:
    """Roofs of one device: bandwidth in bytes/s and FLOP/s per precision, measured and datasheet."""

    bandwidth_Bps: float = None
    # A read-streaming ceiling, when measured: the roof of cases whose bytes are (nearly) all reads.
    read_bandwidth_Bps: float = None
    flops: dict = field(default_factory=dict)
    datasheet_name: str = ""
    datasheet_bandwidth_Bps: float = None
    datasheet_flops: dict = field(default_factory=dict)

    @staticmethod
    def from_json(ceilings):
        measured = _object(ceilings.get("measured"))
        datasheet = _object(ceilings.get("datasheet"))
        return Ceilings(
            bandwidth_Bps=finite_number(measured.get("bandwidth_Bps")),
            read_bandwidth_Bps=finite_number(measured.get("read_bandwidth_Bps")),
            flops=_finite_values(measured.get("flops")),
            datasheet_name=str(datasheet.get("name") or ""),
            datasheet_bandwidth_Bps=finite_number(datasheet.get("bandwidth_Bps")),
            datasheet_flops=_finite_values(datasheet.get("flops")),
        )


def _cache_name(level):
    return f"L{level}" if isinstance(level, int) and not isinstance(level, bool) and level > 0 else ""


def _object(value):
    return value if isinstance(value, dict) else {}


def _list(value):
    return value if isinstance(value, list) else []


def _finite_values(mapping):
    numbers = {key: finite_number(value) for key, value in _object(mapping).items()}
    return {key: value for key, value in numbers.items() if value is not None}


@dataclass
class RunFile:
    """One results file as written by one host run."""

    path: str
    device: Device
    ceilings: Ceilings
    suite: str
    date: str
    host_name: str
    complete: bool
    load_failures: list
    not_run: list
    entries: list  # the benchmark objects, aggregates left out
    mode: str = ""  # hot or cold
    gate_mode: str = ""  # on or off
    version: str = ""
    commit: str = ""  # the source commit roofbench was built from, when the host writes it
    driver: str = ""  # the GPU driver's version, when the file records it
    source: str = ""  # another framework's figures ("pytorch"), or "" for roofbench's own
    framework: str = ""  # that framework's version as the file records it, e.g. "PyTorch 2.11, CUDA 13.0"

    @property
    def title(self):
        """How a person names this run: date, host and commit when known, else the file name."""
        parts = []
        if self.date:
            parts.append(self.date.replace("T", " ")[:16] + (" UTC" if self.date.endswith(("Z", "+00:00")) else ""))
        if self.host_name:
            parts.append(f"on {self.host_name}")
        if self.commit:
            parts.append(f"commit {self.commit[:12]}")
        return " ".join(parts) if parts else os.path.basename(self.path)


def load_run_file(path):
    try:
        with open(path, encoding="utf-8") as stream:
            document = json.load(stream)
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ResultsError(f"{path}: cannot read: {error}") from None
    except json.JSONDecodeError as error:
        raise ResultsError(f"{path}: not JSON ({error})") from None
    return parse_run(document, path)


def parse_run(document, path="<results>"):
    context = _object(document.get("context")) if isinstance(document, dict) else {}
    roofbench = context.get("roofbench")
    if not isinstance(roofbench, dict):
        raise ResultsError(f"{path}: not a roofbench results file (no context.roofbench)")
    benchmarks = document.get("benchmarks")
    if not isinstance(benchmarks, list):
        raise ResultsError(f"{path}: not a roofbench results file (no benchmarks list)")
    device = _object(roofbench.get("device"))
    ceilings = Ceilings.from_json(_object(roofbench.get("ceilings")))
    _check_ceilings(ceilings, path)
    entries = [entry for entry in benchmarks
               if isinstance(entry, dict) and entry.get("run_type") != _AGGREGATE_RUN_TYPE]
    for index, entry in enumerate(entries):
        _check_entry(entry, index, path)
    return RunFile(
        path=str(path),
        device=Device(
            key=str(device.get("key") or "unknown-device"),
            kind=str(device.get("kind") or "?"),
            name=str(device.get("name") or "unknown device"),
            cache_level=_cache_name(device.get("llc_level")),
        ),
        ceilings=ceilings,
        suite=str(roofbench.get("suite") or ""),
        date=str(context.get("date") or ""),
        host_name=str(context.get("host_name") or ""),
        complete=roofbench.get("complete") is True,
        load_failures=[_object(item) for item in _list(roofbench.get("load_failures"))],
        not_run=[_object(item) for item in _list(roofbench.get("not_run"))],
        entries=entries,
        mode=str(roofbench.get("mode") or ""),
        gate_mode=str(roofbench.get("gate") or ""),
        version=str(roofbench.get("version") or ""),
        commit=str(roofbench.get("commit") or roofbench.get("git_commit") or ""),
        driver=str(_object(roofbench.get("device")).get("driver") or context.get("driver") or ""),
        source=str(roofbench.get("source") or context.get("source") or ""),
        framework=_framework_text(context),
    )


def _framework_text(context):
    """The version of the framework that measured a file it marks as another source's (PyTorch's scripts
    write context.pytorch = {version, cuda})."""
    pytorch = _object(context.get("pytorch"))
    if not pytorch:
        return ""
    text = f"PyTorch {pytorch.get('version') or '?'}"
    return text + (f", CUDA {pytorch['cuda']}" if pytorch.get("cuda") else "")


# A zettaFLOP/s or zettabyte/s: a thousand times any device's; a ceiling beyond it is a corrupt file.
MAX_PLAUSIBLE_RATE = 1e21


def _check_ceilings(ceilings, path):
    rates = {"bandwidth_Bps": ceilings.bandwidth_Bps, "read_bandwidth_Bps": ceilings.read_bandwidth_Bps,
             "datasheet bandwidth_Bps": ceilings.datasheet_bandwidth_Bps}
    rates.update((f"flops.{precision}", value) for precision, value in ceilings.flops.items())
    rates.update((f"datasheet flops.{precision}", value) for precision, value in ceilings.datasheet_flops.items())
    for name, value in rates.items():
        if value is not None and not 0 <= value <= MAX_PLAUSIBLE_RATE:
            raise ResultsError(f"{path}: ceiling {name} is {value:g}, outside 0 to {MAX_PLAUSIBLE_RATE:g}")


def _check_entry(entry, index, path):
    """Refuses an entry a report or a comparison would misread: no name, or a run that did not error
    yet has a missing, zero or negative time (it would read as infinitely fast)."""
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ResultsError(f"{path}: benchmark entry {index} has no name")
    if entry.get("error_occurred") is True:
        return  # Google Benchmark writes zero times for a run that errored before it was timed
    for key in ("real_time", "time_median"):
        if key not in entry and key == "time_median":
            continue
        value = finite_number(entry.get(key))
        if value is None or value <= 0:
            shown = "missing" if entry.get(key) is None else f"{entry.get(key)!r}"
            raise ResultsError(f"{path}: {name}: {key} is {shown}, not a positive time")


def entry_median_seconds(entry):
    """Median time of one run: time_median when written, else real_time in its time unit."""
    seconds = finite_number(entry.get("time_median"))
    if seconds is not None:
        return seconds
    real_time = finite_number(entry.get("real_time"))
    scale = _SECONDS_PER_TIME_UNIT.get(entry.get("time_unit", "ns"))
    # Google Benchmark writes zero times for a run that errored before it was timed.
    if real_time is None or real_time <= 0 or scale is None:
        return None
    return real_time * scale


def ranks_label(entry):
    """The GPUs one run used as the host writes them (roofbench.device, 'cuda:0,1'), when they are several;
    '' for a run on one device."""
    label = str(_object(entry.get("roofbench")).get("device") or "")
    return label if "," in label else ""


def _median_or_none(values):
    values = [value for value in values if value is not None]
    return median(values) if values else None


class Benchmark:
    """Every run of one benchmark name on one device: one entry, or several repetitions / files.

    A run on several GPUs (a data-parallel step, an all-reduce) is its own benchmark per set of GPUs:
    k = 1 and k = 2 runs of one case measure different things, and their median would be neither. Its name
    then ends in the GPUs, ' [cuda:0,1]'; base_name is the name the host gave it."""

    def __init__(self, base_name, ranks_label=""):
        self.base_name = base_name
        self.ranks_label = ranks_label
        self.name = f"{base_name} [{ranks_label}]" if ranks_label else base_name
        self.entries = []
        self.entry_files = []  # per entry: the index of the results file it came from

    def _info(self, key, default=""):
        for entry in self.entries:
            value = _object(entry.get("roofbench")).get(key)
            if value not in (None, ""):
                return value
        return default

    @property
    def plugin(self):
        return str(self._info("plugin") or self.name.split("/", 1)[0])

    def _without_plugin(self, name):
        prefix = self.plugin + "/"
        return name[len(prefix):] if name.startswith(prefix) else name

    @property
    def short_name(self):
        """The name without its plugin prefix: what a table inside the plugin's section shows."""
        return self._without_plugin(self.name)

    @property
    def base_short_name(self):
        """short_name without the GPUs: the same for every k of a multi-GPU case."""
        return self._without_plugin(self.base_name)

    @property
    def device_label(self):
        """The device(s) the host ran it on, as it writes them: 'cpu', 'cuda:0', 'cuda:0,1'."""
        return str(self._info("device"))

    @property
    def case(self):
        return str(self._info("case") or self.base_short_name.split("/", 1)[0])

    @property
    def point(self):
        """Where the case ran: its parameters as the name gives them, and the GPUs when several
        ('batch:64', 'cuda:0,1'); '' for a case without either."""
        parameters = self.base_short_name[len(self.case):].lstrip("/")
        return ", ".join(part for part in (parameters, self.ranks_label) if part)

    @property
    def rank_count(self):
        """How many ranks (GPUs) the runs used: the GPUs roofbench.device lists, else the case's 'ranks'
        counter, else one."""
        if self.ranks_label:
            return len(self.ranks_label.partition(":")[2].split(","))
        ranks = self.counter("ranks")
        return int(ranks) if ranks is not None and ranks >= 1 else 1

    @property
    def precision(self):
        return str(self._info("precision"))

    @property
    def bound(self):
        return str(self._info("bound"))

    @property
    def cache_resident(self):
        """Hot, with its data in the GPU's L2: the DRAM roof does not bound it."""
        return self._info("cache_resident") is True

    @property
    def ladder(self):
        return str(self._info("ladder"))

    @property
    def item_name(self):
        return str(self._info("item_name"))

    @property
    def summaries(self):
        """What each figure of the entries is, as the host describes it (roofbench.summaries): name ->
        {unit, description, from_plugin when the case reported it}; the first entry's description wins."""
        described = {}
        for entry in self.entries:
            for name, summary in _object(_object(entry.get("roofbench")).get("summaries")).items():
                if isinstance(summary, dict):
                    described.setdefault(str(name), summary)
        return described

    def figure_names(self, unit=None, from_plugin=None):
        """The names of the figures the host describes, in its order, those of one unit and/or source only."""
        return [name for name, summary in self.summaries.items()
                if (unit is None or summary.get("unit") == unit)
                and (from_plugin is None or (summary.get("from_plugin") is True) == from_plugin)]

    @property
    def items_counter(self):
        """Name of the items/s counter ('tokens/s'), or '' when the case reports no items: the case's figure
        in items per second as the summaries describe it (renamed 'case.tokens/s' where the host's name
        was taken), else '<item_name>/s' for files without summaries."""
        if not self.item_name:
            return ""
        described = self.figure_names(unit=f"{self.item_name}/s", from_plugin=True)
        return described[0] if described else f"{self.item_name}/s"

    @property
    def gate(self):
        """The worst gate over all runs: one failed repetition fails the benchmark."""
        gates = [str(_object(entry.get("roofbench")).get("gate") or "") for entry in self.entries]
        for worst in _FAILED_GATES:
            if worst in gates:
                return worst
        return next((gate for gate in gates if gate), "")

    @property
    def noisy(self):
        """Flagged by the host as noisy on any run: samples in two clusters, or noise far above the
        --noise bound (roofbench.quality, else the label word or roofbench.status)."""
        for entry in self.entries:
            info = _object(entry.get("roofbench"))
            if info.get("quality") == "noisy" or info.get("status") == "noisy":
                return True
            if "noisy" in str(entry.get("label") or "").split():
                return True
        return False

    @property
    def quality_reason(self):
        return str(self._info("quality_reason"))

    @property
    def timing(self):
        """How the runs were timed: stream, graph (CUDA graph replay) or cpu."""
        return str(self._info("timing"))

    def _strings(self, key):
        mapping = self._info(key, {})
        return {str(k): str(v) for k, v in mapping.items()} if isinstance(mapping, dict) else {}

    @property
    def facts(self):
        """The case's string facts (e.g. the algorithm a library chose), from its first run."""
        return self._strings("facts")

    @property
    def params(self):
        return self._strings("params")

    @property
    def sweep_axis(self):
        """The axis the case sweeps, when the host names it (roofbench.sweep_axis)."""
        return str(self._info("sweep_axis"))

    @property
    def read_dominated(self):
        return self._info("read_dominated") is True

    @property
    def memory_roof(self):
        """The memory roof the host placed the benchmark under: "dram copy", "dram read", "dram mixed 67%
        read" or "cache"; for results that do not name it, the read roof or the copy roof by read_dominated."""
        named = self._info("memory_roof")
        if isinstance(named, str) and named:
            return named
        return "dram read" if self.read_dominated else "dram copy"

    @property
    def memory_roof_Bps(self):
        """That roof's B/s, None where the results do not say."""
        return finite_number(self._info("memory_roof_Bps", None))

    @property
    def roof_note(self):
        """The memory roof in a few words where it is not the copy roof: "read", "mixed 67% read", "cache"."""
        roof = self.memory_roof
        return "" if roof == "dram copy" else roof.removeprefix("dram ")

    def fast_edge_ratios(self):
        """Per run: its 5th-percentile sample over its median. Interference (preemption, a flushed
        cache) only adds time, so a run whose fast samples lie far below its median was slowed for
        most of it by something that need not repeat: contention for memory bandwidth, say."""
        ratios = []
        for entry in self.entries:
            samples = sorted(v for v in map(finite_number, _list(_object(entry.get("roofbench")).get("samples_s")))
                             if v is not None and v > 0)
            if len(samples) >= 5:
                ratios.append(quantile(samples, 0.05) / quantile(samples, 0.5))
        return ratios

    def run_medians(self):
        """Median time of each independent run that was timed: one per results file, the median of its
        repetitions. Repetitions inside one process share its placement, clocks and neighbours, so they
        are not independent runs: a change of load between two processes would read as a change of code."""
        per_file = {}
        for file_index, entry in zip(self.entry_files, self.entries):
            seconds = entry_median_seconds(entry)
            if seconds is not None:
                per_file.setdefault(file_index, []).append(seconds)
        return [median(times) for times in per_file.values()]

    @property
    def errored(self):
        return any(entry.get("error_occurred") is True for entry in self.entries)

    @property
    def error_messages(self):
        messages = []
        for entry in self.entries:
            message = str(entry.get("error_message") or "")
            if entry.get("error_occurred") is True and message not in messages:
                messages.append(message)
        return messages

    @property
    def repetitions(self):
        return len(self.entries)

    def counter(self, name):
        """Median of a counter over the runs that have a finite value for it; None when none has."""
        return _median_or_none(finite_number(entry.get(name)) for entry in self.entries)

    @property
    def median_seconds(self):
        return _median_or_none(entry_median_seconds(entry) for entry in self.entries)

    def timing_samples(self):
        """What a statistical test should compare: per-repetition medians when repeated, else the
        per-sample times of the single run (the samples of one run are not independent of each other
        across runs, so they are not pooled)."""
        if len(self.entries) > 1:
            return [seconds for seconds in map(entry_median_seconds, self.entries) if seconds is not None]
        samples = _list(_object(self.entries[0].get("roofbench")).get("samples_s")) if self.entries else []
        return [value for value in map(finite_number, samples) if value is not None]


@dataclass
class DeviceResults:
    """Everything measured on one device, merged over the input files."""

    device: Device
    ceilings: Ceilings
    files: list = field(default_factory=list)
    benchmarks: dict = field(default_factory=dict)  # name -> Benchmark, in first-seen order

    def add(self, run):
        self.files.append(run)
        for entry in run.entries:
            benchmark = Benchmark(str(entry.get("run_name") or entry["name"]), ranks_label(entry))
            merged = self.benchmarks.setdefault(benchmark.name, benchmark)
            merged.entries.append(entry)
            merged.entry_files.append(len(self.files) - 1)

    @property
    def load_failures(self):
        return _unique(item for run in self.files for item in run.load_failures)

    @property
    def not_run(self):
        return _unique(item for run in self.files for item in run.not_run)

    def plugins(self):
        """Benchmarks grouped by plugin: {plugin: [Benchmark, ...]} in first-seen order."""
        groups = {}
        for benchmark in self.benchmarks.values():
            groups.setdefault(benchmark.plugin, []).append(benchmark)
        return groups

    def ladders(self):
        """{ladder title: [Benchmark, ...]}: rungs are compared at equal parameters, so a ladder measured
        at several points of its axes (cpu matmuls at n = 256 and 1024) gives one waterfall per point,
        titled "name (axis:value, ...)". Rungs keep the order the plugin declared its cases in, which
        is the order of the results file (naive, blocked, BLAS; R0, R1)."""
        groups = {}
        for benchmark in self.benchmarks.values():
            if benchmark.ladder:
                point = benchmark.point
                title = f"{benchmark.ladder} ({point})" if point else benchmark.ladder
                groups.setdefault(title, []).append(benchmark)
        return groups


def _unique(items):
    seen, result = set(), []
    for item in items:
        key = json.dumps(item, sort_keys=True)
        if key not in seen:
            seen.add(key)
            result.append(item)
    return result


def group_by_device(runs):
    """Merges runs per device key; the first file of a device supplies its ceilings."""
    devices = {}
    for run in runs:
        if run.device.key not in devices:
            devices[run.device.key] = DeviceResults(run.device, run.ceilings)
        devices[run.device.key].add(run)
    return list(devices.values())
