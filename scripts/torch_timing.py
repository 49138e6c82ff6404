"""CUDA-event timing shared by the PyTorch comparison scripts (fidelity_torch.py, torch_resnet50.py,
torch_transformer.py, torch_gpt_ladder.py), so that their figures are taken one way: untimed warm-up calls
and a device synchronisation, then CUDA events on the current stream around bursts of back-to-back calls,
each burst's time divided by its calls, and the median over bursts. Each script keeps its own counts
(warm-up calls, calls per burst, bursts) and, where it needs one, its own warm-up rule.

Import it from a script in this folder (`import torch_timing`); it imports torch."""
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import torch


def warm_up(fn, calls):
    """`calls` untimed calls, then a device synchronisation so that none of them runs into a timing."""
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()


def burst_seconds(fn, calls=1):
    """Seconds per call of `calls` back-to-back calls between two CUDA events (the stop event waited on)."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1e-3 / calls


def median_seconds_per_call(fn, warmup, bursts, calls_per_burst=1):
    """warm_up(fn, warmup), then the median of `bursts` burst_seconds(fn, calls_per_burst)."""
    warm_up(fn, warmup)
    return statistics.median([burst_seconds(fn, calls_per_burst) for _ in range(bursts)])


def host_seconds_per_call(fn, calls=5):
    """The median over `calls` of the host's seconds to enqueue one call of fn on an idle GPU (synchronised
    before each, not waited on inside). Only from idle is the host's own cost seen: back to back, a full
    launch queue makes the host wait for the GPU too. It is an upper bound on the host's cost per call when
    calls run back to back (caches and allocator cold after the synchronisation), so it says that the host
    could bound a figure (it is near the call's device time), not that it does."""
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    torch.cuda.synchronize()
    return statistics.median(times)


class SmClock:
    """The GPU's SM clock while a with-block runs: nvidia-smi sampling every 100 ms beside it, `mean_mhz` the
    mean of its samples afterwards (None where nvidia-smi is missing or printed nothing). roofbench's entries
    carry the same figure (sm_clock_mhz), and at the power limit the clock moves a step's time as much as its
    kernels do, so two figures are only compared together with their clocks."""

    def __init__(self, device=0):
        self.device = device  # what nvidia-smi -i takes: NVML's index, or better the GPU's UUID ("GPU-...")
        self.mean_mhz = None
        self._process = None

    def __enter__(self):
        smi = shutil.which("nvidia-smi")
        if smi:
            self._process = subprocess.Popen(
                [smi, "-i", str(self.device), "--query-gpu=clocks.sm", "--format=csv,noheader,nounits",
                 "-lms", "100"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return self

    def __exit__(self, *exc):
        if self._process is None:
            return False
        self._process.terminate()
        out, _ = self._process.communicate()
        samples = [float(line) for line in out.split() if line.replace(".", "", 1).isdigit()]
        self.mean_mhz = statistics.mean(samples) if samples else None
        return False


# roofbench's --energy (core/src/energy.hpp), the same window over the same kind of counter: the first step
# used is this far into the samples, and a window shorter, or kept busy for less, gives no figure.
ENERGY_COUNTER_LAG_S = 0.1
ENERGY_MIN_WINDOW_S = 0.2
ENERGY_MIN_BUSY_FRACTION = 0.8


# The poller EnergyCounter runs in a process of its own, so that it never takes the GIL from the process
# it measures, whose launch-bound b64 rungs a thread would slow. (An in-process poller was suspected of
# their low figures; they measure as low with this child process, so the machines' hosts, not
# the poller, set those.) Arguments: the library, the GPU's UUID, the
# period in seconds and a file, into which it writes "ok" or "error: why", then "t joules" at each new
# value (a file, not a pipe: a pipe nobody reads until the end would fill and stop the polling).
_ENERGY_POLLER = r"""
import ctypes, sys, time
library, device, period, path = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
out = open(path, "w", buffering=1)
def fail(why):
    out.write("error: " + why + "\n")
    sys.exit(0)
try:
    nvml = ctypes.CDLL(library)
except OSError as e:
    fail(f"cannot load {library} (it comes with the NVIDIA driver): {e}")
if nvml.nvmlInit_v2() != 0:
    fail("nvmlInit failed")
handle, mj, mig, pending = ctypes.c_void_p(), ctypes.c_ulonglong(), ctypes.c_uint(), ctypes.c_uint()
if nvml.nvmlDeviceGetHandleByUUID(device.encode(), ctypes.byref(handle)) != 0:
    fail(f"NVML has no device {device}")
get_mig = getattr(nvml, "nvmlDeviceGetMigMode", None)
if get_mig and get_mig(handle, ctypes.byref(mig), ctypes.byref(pending)) == 0 and mig.value == 1:
    fail(f"MIG is on for {device}: NVML's energy counter is the whole board's")
if nvml.nvmlDeviceGetTotalEnergyConsumption(handle, ctypes.byref(mj)) != 0:
    fail(f"NVML's energy counter of {device} cannot be read")
out.write("ok\n")
previous = mj.value
while True:
    before = time.monotonic()
    if nvml.nvmlDeviceGetTotalEnergyConsumption(handle, ctypes.byref(mj)) == 0 and mj.value != previous:
        out.write(f"{0.5 * (before + time.monotonic())!r} {mj.value * 1e-3!r}\n")
        previous = mj.value
    time.sleep(period)
"""


class EnergyCounter:
    """NVML's energy counter of one GPU (nvmlDeviceGetTotalEnergyConsumption: mJ since the driver loaded), polled
    every 0.5 ms while a with-block runs, as roofbench's --energy polls it: the H200's counter steps only about
    every 100 ms, so the moments it steps are what a window can be cut at. The polling runs in a child process
    (time.monotonic() is the system's monotonic clock, the same in both). Afterwards `steps` holds
    (time.monotonic(), joules) at each first read of a new value; where NVML or the GPU is not there, or the
    poller failed, `steps` is empty and `why_not` says why. `device` is an NVML UUID ("GPU-...", nvidia_smi_id's
    form). Enter it before the warm-up: starting the poller takes a moment the GPU would otherwise idle
    through just before the samples."""

    START_TIMEOUT_S = 20

    def __init__(self, device, library="libnvidia-ml.so.1", period_s=0.0005):
        self.device = device
        self.steps = []
        self.why_not = None
        self._arguments = [library, str(device), str(period_s)]
        self._process = None
        self._file = None

    def _lines(self):
        with open(self._file.name) as f:
            return f.read().splitlines()

    def __enter__(self):
        self._file = tempfile.NamedTemporaryFile(prefix="roofbench-energy-", suffix=".txt", delete=False)
        self._file.close()
        self._process = subprocess.Popen([sys.executable, "-c", _ENERGY_POLLER] + self._arguments + [self._file.name],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        began = time.monotonic()
        while True:  # until polling has begun, or it says why not
            lines = self._lines()
            if lines and (lines[0] == "ok" or lines[0].startswith("error: ")):
                break
            if self._process.poll() is not None or time.monotonic() - began > self.START_TIMEOUT_S:
                break
            time.sleep(0.01)
        if lines and lines[0] != "ok":
            self.why_not = lines[0].removeprefix("error: ")
        elif not lines and self._process.poll() is None:
            self.why_not = f"the energy poller did not start within {self.START_TIMEOUT_S} s"
        elif not lines:
            self.why_not = "the energy poller ended without a word"
        return self

    def __exit__(self, *exc):
        self._process.terminate()
        _, err = self._process.communicate()
        lines = self._lines()
        os.unlink(self._file.name)
        if self.why_not is not None:
            return False
        if self._process.returncode not in (-signal.SIGTERM, 0):
            last = (err or "").strip().splitlines()[-1:] or ["no message"]
            self.why_not = f"the energy poller failed (exit {self._process.returncode}): {last[0]}"
            return False
        for line in lines[1:]:
            fields = line.split()
            if len(fields) == 2:  # a line cut short by the end of the polling is left out
                self.steps.append((float(fields[0]), float(fields[1])))
        return False


def energy_per_call(steps, spans):
    """The energy of a window of the samples over the calls inside it, as roofbench's energy_per_run computes it:
    steps as EnergyCounter gives them, spans (time.monotonic() when a burst's wait returned, its device seconds,
    its calls). Returns ({joules_per_call, watts, window_s, busy_fraction}, None), or (None, why)."""
    if not spans:
        return None, "no samples"
    began, ended = spans[0][0] - spans[0][1], spans[-1][0]
    first = next((s for s in steps if s[0] >= began + ENERGY_COUNTER_LAG_S), None)
    last = next((s for s in reversed(steps) if s[0] <= ended), None)
    if first is None or last is None or last[0] <= first[0]:
        return None, f"the energy counter stepped {len(steps)} times in {ended - began:.3f} s of samples: too few for a window"
    t0, t1 = first[0], last[0]
    window = t1 - t0
    if window < ENERGY_MIN_WINDOW_S:
        return None, f"the energy window ({window:.3f} s) is shorter than {ENERGY_MIN_WINDOW_S} s"
    calls = busy = 0.0
    for end, seconds, count in spans:
        if seconds <= 0 or count <= 0:
            continue
        inside = max(0.0, min(end, t1) - max(end - seconds, t0))
        busy += inside
        calls += count * inside / seconds
    joules = last[1] - first[1]
    if busy / window < ENERGY_MIN_BUSY_FRACTION or calls <= 0:
        return None, f"the samples kept the device busy for {100 * busy / window:.0f}% of the energy window"
    if joules <= 0:
        return None, "the energy counter did not advance over the window"
    return {"joules_per_call": joules / calls, "watts": joules / window, "window_s": window,
            "busy_fraction": busy / window}, None


def nvidia_smi_id(torch_module, ordinal):
    """The GPU of CUDA ordinal `ordinal` as nvidia-smi -i names it: its UUID. A CUDA ordinal is not NVML's index
    (CUDA_VISIBLE_DEVICES renumbers, and CUDA orders fastest first); falls back to the ordinal where the
    properties carry no UUID."""
    uuid = getattr(torch_module.cuda.get_device_properties(ordinal), "uuid", None)
    return f"GPU-{uuid}" if uuid else str(ordinal)
