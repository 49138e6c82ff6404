"""scripts/torch_timing.py, and the timing discipline of the scripts that use it, against a stand-in torch
whose CUDA events read a virtual clock that each timed call advances, and torch_resnet50.py's table of the
hand-written convolutions against cuDNN: no GPU or PyTorch needed.
Run from this folder: python3 -B -m unittest -v test_torch_timing"""
import contextlib
import enum
import io
import os
import importlib
import pathlib
import sys
import tempfile
import time
import types
import unittest

SCRIPTS = pathlib.Path(__file__).resolve().parent.parent


class FakeCuda:
    """The clock is in milliseconds, as torch.cuda.Event.elapsed_time reports; `log` records the order."""

    def __init__(self):
        self.now_ms = 0.0
        self.log = []
        cuda = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing, "events must be created with enable_timing=True"
                self.at = None
                self.waited = False

            def record(self):
                self.at = cuda.now_ms
                cuda.log.append("record")

            def synchronize(self):
                self.waited = True
                cuda.log.append("wait")

            def elapsed_time(self, stop):
                assert self.at is not None and stop.at is not None and stop.waited, "stop event read before it was waited on"
                return stop.at - self.at

        self.Event = Event

    def synchronize(self):
        self.log.append("sync")


def install_fake_torch():
    """A stand-in torch module (and the submodules the scripts import) in sys.modules; returns its cuda."""
    cuda = FakeCuda()
    torch = types.ModuleType("torch")
    torch.cuda = cuda
    torch.bfloat16, torch.float16, torch.float32 = "bfloat16", "float16", "float32"
    nn = types.ModuleType("torch.nn")
    functional = types.ModuleType("torch.nn.functional")
    attention = types.ModuleType("torch.nn.attention")
    attention.SDPBackend = enum.Enum("SDPBackend", "CUDNN_ATTENTION FLASH_ATTENTION EFFICIENT_ATTENTION MATH")
    attention.sdpa_kernel = lambda backend: None
    torch.nn, nn.functional, nn.attention = nn, functional, attention
    sys.modules.update({"torch": torch, "torch.nn": nn, "torch.nn.functional": functional,
                        "torch.nn.attention": attention})
    return cuda


def load(module_name):
    """A fresh import of a script of scripts/ against the stand-in torch."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    for name in (module_name, "torch_timing"):
        sys.modules.pop(name, None)
    return importlib.import_module(module_name)


class Workload:
    """fn for the timers: call number i (from 0) takes durations_ms[i] on the virtual clock."""

    def __init__(self, cuda, durations_ms):
        self.cuda, self.durations_ms, self.calls = cuda, list(durations_ms), 0

    def __call__(self):
        self.cuda.now_ms += self.durations_ms[self.calls]
        self.cuda.log.append("call")
        self.calls += 1


class FakeTorchTest(unittest.TestCase):
    """A test against the stand-in torch (self.cuda its clock, self.timing torch_timing loaded against it); the
    modules as they were are put back after it."""

    def setUp(self):
        self.saved = dict(sys.modules)
        self.cuda = install_fake_torch()
        self.timing = load("torch_timing")

    def tearDown(self):
        sys.modules.clear()
        sys.modules.update(self.saved)


class TorchTiming(FakeTorchTest):

    def test_burst_is_seconds_per_call_between_the_events(self):
        fn = Workload(self.cuda, [1.0, 2.0, 3.0, 6.0])
        self.assertAlmostEqual(self.timing.burst_seconds(fn, 4), 12.0e-3 / 4)
        self.assertEqual(self.cuda.log, ["record", "call", "call", "call", "call", "record", "wait"])
        self.assertAlmostEqual(self.timing.burst_seconds(Workload(self.cuda, [5.0]), 1), 5.0e-3)

    def test_warm_up_calls_then_synchronises(self):
        fn = Workload(self.cuda, [1.0] * 3)
        self.timing.warm_up(fn, 3)
        self.assertEqual(self.cuda.log, ["call", "call", "call", "sync"])

    def test_median_leaves_the_warm_up_out(self):
        # Warm-up calls take 100 ms and must not count; bursts of two calls take 2+2, 4+4, 9+9 ms.
        fn = Workload(self.cuda, [100.0, 100.0] + [2.0, 2.0, 4.0, 4.0, 9.0, 9.0])
        median = self.timing.median_seconds_per_call(fn, warmup=2, bursts=3, calls_per_burst=2)
        self.assertAlmostEqual(median, 4.0e-3)
        self.assertEqual(fn.calls, 8)
        self.assertEqual(self.cuda.log[:3], ["call", "call", "sync"])


class EnergyWindow(FakeTorchTest):
    """energy_per_call against counters made up here, as tests/unit/energy_test.cpp checks roofbench's."""

    @staticmethod
    def steps(start, stop, interval, watts_at):
        """The counter's value at a step every `interval` s: the energy booked up to it (1 ms resolution)."""
        out, joules, t, next_step = [], 1000.0, start, start + interval
        while t < stop:
            joules += watts_at(t) * 1e-3
            t += 1e-3
            if t >= next_step:
                out.append((t, joules))
                next_step += interval
        return out

    def test_steady_bursts_give_their_power_times_the_time_of_a_call(self):
        spans = [(10.0 + 0.05 * (i + 1), 0.05, 10) for i in range(20)]  # 5 ms calls at 700 W: 3.5 J each
        figure, why = self.timing.energy_per_call(self.steps(9.0, 12.0, 0.1, lambda t: 700 if 10 <= t < 11 else 80), spans)
        self.assertIsNone(why)
        self.assertAlmostEqual(figure["joules_per_call"], 3.5, delta=0.02)
        self.assertAlmostEqual(figure["watts"], 700, delta=2)
        self.assertGreater(figure["window_s"], 0.75)

    def test_mostly_idle_or_too_short_samples_give_no_figure(self):
        steps = self.steps(9.0, 12.0, 0.1, lambda t: 700)
        figure, why = self.timing.energy_per_call(steps, [(10.0 + 0.1 * (i + 1), 0.05, 10) for i in range(10)])
        self.assertIsNone(figure)
        self.assertIn("busy", why)
        figure, why = self.timing.energy_per_call(steps, [(10.0 + 0.05 * (i + 1), 0.05, 10) for i in range(4)])
        self.assertIsNone(figure)
        self.assertEqual(self.timing.energy_per_call([], []), (None, "no samples"))

    def fake_nvml(self):
        """The stand-in libnvidia-ml.so.1 CTest builds (tests/support/fake_nvml.cpp): 250 W, a step every 20 ms."""
        path = os.environ.get("ROOFBENCH_FAKE_NVML")
        if not path or not os.path.exists(path):
            self.skipTest("no stand-in NVML (ROOFBENCH_FAKE_NVML; CTest sets it)")
        return path

    def test_the_child_poller_reads_the_counters_steps(self):
        with self.timing.EnergyCounter("GPU-fake", library=self.fake_nvml()) as energy:
            began = time.monotonic()
            time.sleep(0.6)
        self.assertIsNone(energy.why_not)
        self.assertGreaterEqual(len(energy.steps), 20)
        spans = [(began + 0.05 * (i + 1), 0.05, 10) for i in range(12)]  # 5 ms calls
        figure, why = self.timing.energy_per_call(energy.steps, spans)
        self.assertIsNone(why)
        self.assertAlmostEqual(figure["watts"], 250, delta=15)
        self.assertAlmostEqual(figure["joules_per_call"], 250 * 0.005, delta=0.1)

    def test_the_child_poller_says_why_for_an_unknown_gpu_or_a_mig_slice(self):
        with self.timing.EnergyCounter("GPU-other", library=self.fake_nvml()) as energy:
            pass
        self.assertEqual(energy.why_not, "NVML has no device GPU-other")
        os.environ["FAKE_NVML_MIG"] = "1"
        try:
            with self.timing.EnergyCounter("GPU-fake", library=self.fake_nvml()) as energy:
                pass
        finally:
            del os.environ["FAKE_NVML_MIG"]
        self.assertIn("MIG is on", energy.why_not)
        self.assertEqual(energy.steps, [])

    def test_the_counter_says_why_without_nvml(self):
        with self.timing.EnergyCounter("GPU-0", library="libroofbench-no-such-nvml.so") as energy:
            pass
        self.assertEqual(energy.steps, [])
        self.assertIn("cannot load libroofbench-no-such-nvml.so", energy.why_not)


class SmClockSamples(FakeTorchTest):
    """SmClock against a stand-in nvidia-smi on PATH that prints three samples (and one blank line)."""

    def setUp(self):
        super().setUp()
        self.bin = tempfile.TemporaryDirectory()
        smi = pathlib.Path(self.bin.name) / "nvidia-smi"
        smi.write_text("#!/bin/sh\nprintf '1500\\n1600\\n\\n1700\\n'\nexec sleep 5\n")
        smi.chmod(0o755)
        self.path = os.environ["PATH"]

    def tearDown(self):
        os.environ["PATH"] = self.path
        self.bin.cleanup()
        super().tearDown()

    def test_mean_of_the_samples_printed_during_the_block(self):
        os.environ["PATH"] = self.bin.name + os.pathsep + self.path
        with self.timing.SmClock() as clock:
            time.sleep(0.3)  # the stand-in prints before it sleeps
        self.assertAlmostEqual(clock.mean_mhz, 1600.0)

    def test_the_gpu_is_named_by_its_uuid(self):
        props = {0: types.SimpleNamespace(uuid="58a7a3f3-0000-1111-2222-333344445555"), 1: types.SimpleNamespace()}
        fake = types.SimpleNamespace(cuda=types.SimpleNamespace(get_device_properties=props.__getitem__))
        self.assertEqual(self.timing.nvidia_smi_id(fake, 0), "GPU-58a7a3f3-0000-1111-2222-333344445555")
        self.assertEqual(self.timing.nvidia_smi_id(fake, 1), "1")  # no UUID: the ordinal

    def test_none_without_nvidia_smi(self):
        os.environ["PATH"] = self.bin.name + "-missing"
        with self.timing.SmClock() as clock:
            pass
        self.assertIsNone(clock.mean_mhz)


class ScriptsKeepTheirDiscipline(FakeTorchTest):
    """Warm-up calls, calls per burst and bursts of each script, as they were before torch_timing."""

    def bursts(self):
        """The number of calls between each pair of record events, and the calls before the first sync."""
        log, sizes, warm, i = self.cuda.log, [], 0, 0
        while log[i] != "sync":
            warm += log[i] == "call"
            i += 1
        while i < len(log):
            if log[i] == "record":
                j = log.index("record", i + 1)
                sizes.append(log[i + 1:j].count("call"))
                i = j
            i += 1
        return warm, sizes

    def test_fidelity_times_100_single_calls_after_20(self):
        script = load("fidelity_torch")
        fn = Workload(self.cuda, [1.0] * 20 + [float(d) for d in range(1, 101)])
        self.assertAlmostEqual(script.median_event_seconds(fn), 50.5e-3)
        self.assertEqual(self.bursts(), (20, [1] * 100))

    def test_transformer_times_15_bursts_of_20_after_10(self):
        script = load("torch_transformer")
        fn = Workload(self.cuda, [1.0] * (10 + 15 * 20))
        self.assertAlmostEqual(script.per_call_seconds(fn), 1.0e-3)
        self.assertEqual(self.bursts(), (10, [20] * 15))

    def test_resnet_sizes_bursts_from_one_call(self):
        script = load("torch_resnet50")
        # 5 warm-up calls, one 10 ms call that sizes bursts of 0.2 s / 10 ms = 20 calls, then 5 bursts.
        fn = Workload(self.cuda, [1.0] * 5 + [10.0] + [10.0] * 100)
        self.assertAlmostEqual(script.seconds_per_call(fn), 10.0e-3)
        self.assertEqual(self.bursts(), (5, [1] + [20] * 5))
        # A call far longer than min_seconds still gets bursts of 3.
        self.cuda.log.clear()
        fn = Workload(self.cuda, [1.0] * 5 + [500.0] * 10)
        self.assertAlmostEqual(script.seconds_per_call(fn, repeats=3), 500.0e-3)
        self.assertEqual(self.bursts(), (5, [1, 3, 3, 3]))


class ResnetComparison(FakeTorchTest):
    """torch_resnet50.py's table from roofbench's figures alone: each hand-written kernel against cuDNN."""

    def setUp(self):
        super().setUp()
        self.script = load("torch_resnet50")

    def test_each_kernel_is_weighted_by_flops_over_the_shapes_it_ran(self):
        # cuDNN at 400 TFLOP/s everywhere; the wgmma kernel at 200 on every shape but the stem, which it left out;
        # the WMMA kernel at 100 on the stem alone.
        def figure(layer, impl):
            return f"conv_bf16/layer:{layer}/pass:fwd/layout:nhwc/impl:{impl}/n:256"
        figures = {}
        for layer in self.script.LAYERS:
            figures[figure(layer[0], "cudnn")] = {"FLOP/s": 400e12}
            if layer[0] != "conv1_7x7s2_3to64":
                figures[figure(layer[0], "implicit_gemm_wgmma")] = {"FLOP/s": 200e12}
        figures[figure("conv1_7x7s2_3to64", "implicit_gemm")] = {"FLOP/s": 100e12}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.script.print_comparison({"per_shape": {}}, figures)
        last_row = next(line for line in out.getvalue().splitlines() if line.startswith("| all 23"))
        self.assertEqual(last_row.count("(FLOP-weighted)"), 2)
        wmma, wgmma = (cell.split()[0] for cell in last_row.split("|") if "FLOP-weighted" in cell)
        self.assertEqual((wmma, wgmma), ("0.25", "0.50"))
        stem_row = next(line for line in out.getvalue().splitlines() if line.startswith("| conv1_7x7s2_3to64"))
        self.assertTrue(stem_row.rstrip(" |").endswith("| - | -"), stem_row)


if __name__ == "__main__":
    unittest.main()
