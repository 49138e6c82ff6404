"""CUDA-event timing shared by the PyTorch comparison scripts (fidelity_torch.py, torch_resnet50.py,
torch_transformer.py, torch_gpt_ladder.py), so that their figures are taken one way: untimed warm-up calls
and a device synchronisation, then CUDA events on the current stream around bursts of back-to-back calls,
each burst's time divided by its calls, and the median over bursts. Each script keeps its own counts
(warm-up calls, calls per burst, bursts) and, where it needs one, its own warm-up rule.

Import it from a script in this folder (`import torch_timing`); it imports torch."""
import shutil
import statistics
import subprocess

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


def nvidia_smi_id(torch_module, ordinal):
    """The GPU of CUDA ordinal `ordinal` as nvidia-smi -i names it: its UUID. A CUDA ordinal is not NVML's index
    (CUDA_VISIBLE_DEVICES renumbers, and CUDA orders fastest first); falls back to the ordinal where the
    properties carry no UUID."""
    uuid = getattr(torch_module.cuda.get_device_properties(ordinal), "uuid", None)
    return f"GPU-{uuid}" if uuid else str(ordinal)
