"""CUDA-event timing shared by the PyTorch comparison scripts (fidelity_torch.py, torch_resnet50.py,
torch_transformer.py, torch_gpt_ladder.py), so that their figures are taken one way: untimed warm-up calls
and a device synchronisation, then CUDA events on the current stream around bursts of back-to-back calls,
each burst's time divided by its calls, and the median over bursts. Each script keeps its own counts
(warm-up calls, calls per burst, bursts) and, where it needs one, its own warm-up rule.

Import it from a script in this folder (`import torch_timing`); it imports torch."""
import shutil
import statistics
import subprocess
import sys

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
# it measures (with it in-process, PyTorch's launch-bound b64 rungs measured a third slower than the session
# before, though they also swing between machines: session 9). Arguments: the library, the
# GPU's UUID, the period in seconds. Prints "ok" or "error: why", then "t joules" at each new value.
_ENERGY_POLLER = r"""
import ctypes, sys, time
library, device, period = sys.argv[1], sys.argv[2], float(sys.argv[3])
def fail(why):
    print("error: " + why, flush=True)
    sys.exit(0)
try:
    nvml = ctypes.CDLL(library)
except OSError as e:
    fail(f"cannot load {library} (it comes with the NVIDIA driver): {e}")
if nvml.nvmlInit_v2() != 0:
    fail("nvmlInit failed")
handle, mj = ctypes.c_void_p(), ctypes.c_ulonglong()
if nvml.nvmlDeviceGetHandleByUUID(device.encode(), ctypes.byref(handle)) != 0:
    fail(f"NVML has no device {device}")
if nvml.nvmlDeviceGetTotalEnergyConsumption(handle, ctypes.byref(mj)) != 0:
    fail(f"NVML's energy counter of {device} cannot be read")
print("ok", flush=True)
previous = mj.value
while True:
    before = time.monotonic()
    if nvml.nvmlDeviceGetTotalEnergyConsumption(handle, ctypes.byref(mj)) == 0 and mj.value != previous:
        print(f"{0.5 * (before + time.monotonic())!r} {mj.value * 1e-3!r}", flush=True)
        previous = mj.value
    time.sleep(period)
"""


class EnergyCounter:
    """NVML's energy counter of one GPU (nvmlDeviceGetTotalEnergyConsumption: mJ since the driver loaded), polled
    every 0.5 ms while a with-block runs, as roofbench's --energy polls it: the H200's counter steps only about
    every 100 ms, so the moments it steps are what a window can be cut at. The polling runs in a child process
    (time.monotonic() is the system's monotonic clock, the same in both). Afterwards `steps` holds
    (time.monotonic(), joules) at each first read of a new value; where NVML or the GPU is not there, `steps`
    is empty and `why_not` says why. `device` is an NVML UUID ("GPU-...", nvidia_smi_id's form)."""

    def __init__(self, device, library="libnvidia-ml.so.1", period_s=0.0005):
        self.device = device
        self.steps = []
        self.why_not = None
        self._arguments = [library, str(device), str(period_s)]
        self._process = None

    def __enter__(self):
        self._process = subprocess.Popen([sys.executable, "-c", _ENERGY_POLLER] + self._arguments,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        first = self._process.stdout.readline().strip()  # polling has begun, or it says why not
        if first != "ok":
            self.why_not = first.removeprefix("error: ") or "the energy poller ended without a word"
        return self

    def __exit__(self, *exc):
        self._process.terminate()
        out, _ = self._process.communicate()
        if self.why_not is None:
            for line in out.splitlines():
                t, joules = line.split()
                self.steps.append((float(t), float(joules)))
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
