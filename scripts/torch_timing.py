"""CUDA-event timing shared by the PyTorch comparison scripts (fidelity_torch.py, torch_resnet50.py,
torch_transformer.py, torch_gpt_ladder.py), so that their figures are taken one way: untimed warm-up calls
and a device synchronisation, then CUDA events on the current stream around bursts of back-to-back calls,
each burst's time divided by its calls, and the median over bursts. Each script keeps its own counts
(warm-up calls, calls per burst, bursts) and, where it needs one, its own warm-up rule.

Import it from a script in this folder (`import torch_timing`); it imports torch."""
import statistics

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
