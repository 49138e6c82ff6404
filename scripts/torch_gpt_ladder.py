#!/usr/bin/env python3
"""The case study's PyTorch ladder (seeds/case-study-making-a-transformer-fast) on roofbench's GPT, on the
same GPU, under the same discipline, written in roofbench's results format so that roofbench-report draws
both ladders in one waterfall and roofbench-compare puts them side by side.

The model is plugins/gpt/model.hpp's: width 512, 6 blocks, 8 heads, RoPE on adjacent channel pairs, exact
GELU MLP, LayerNorms with biases, the embedding tied to the output head, AdamW (lr 1e-3, weight decay 0.01
on every parameter), context 128, the 28-token character vocabulary, trained on the texts under
/usr/share/common-licenses (sorted, concatenated; symbolic links skipped), as roofbench trains it.

Rungs (the case study's, plus PyTorch's strongest configuration found, CUDA-graph replay):
  R0_eager                      eager, TF32 matmuls                 batch 64
  R1_compile                    torch.compile (default)             batch 64
  R1_compile_reduce_overhead    torch.compile(mode="reduce-overhead")
  R2_bf16                       R1 + torch.autocast(bf16)           batch 64
  R2_bf16_reduce_overhead       the same, reduce-overhead
  R3_batch                      R2 at batch 512
  R3_batch_reduce_overhead      the same, reduce-overhead
  R4_checkpoint                 R3 with each block checkpointed     batch 512
  fp32_control                  R1 (fp32) at batch 512, beside the ladder
With --attention, also the attention alone, forward + backward, per scaled_dot_product_attention backend
(cuDNN, flash, memory-efficient) at batch 64 and 512, replayed from a CUDA graph, beside roofbench's
gpt/lab_attention_bf16: the model's q, k, v views of one [B, T, 3, H, hd] bf16 tensor, causal, entries
torch/attention_sdpa_<backend>, FLOPs counted as the lab counts them, timed after 10 untimed replays (no
settling rule: no compilation, and the graph's kernels are fixed). The lab's kernels also add the bias and
rotate q and k; PyTorch's RoPE runs outside its attention.
Discipline: the corpus staged on the GPU and a fresh batch drawn there every step (inside the timed window,
as roofbench's step draws its own); warm-up in chunks until two chunk times in a row agree within 2%
(compilation, autotuning, allocator growth and clocks settle); CUDA events around each timed sample; peak
memory from torch.cuda.max_memory_allocated over the rung's whole life (model, optimiser, warm-up, samples);
the mean SM clock over the timed samples (sm_clock_mhz, from nvidia-smi), as roofbench records its own;
energy_per_run and power over a window of the samples, as roofbench's --energy computes them, from NVML's
counter polled in a child process (torch_timing.EnergyCounter), so that no thread of this one competes for
the GIL with the launch-bound rungs. After the samples, the host's time to enqueue one step on an idle GPU
(fact host_ms_per_step_from_idle; torch_timing.host_seconds_per_call says why it is an upper bound): where it
comes near the step's device time the host's launch rate may be what the figure measures, as eager's is
(R0_eager on the H200 machines: 392k to 731k tokens/s from one machine to another, 575 launches a step).
--trained-steps N trains N untimed steps first, as roofbench's gated rungs are timed after their 300-step
learning run (on the H200, R3 with reduce-overhead: 2.579M tokens/s after 300 against 2.575M
without; the warm-up itself trains at least 30 steps, three chunks of 10).

Usage (where PyTorch and a GPU are):
  scripts/torch_gpt_ladder.py -o torch-gpt.json [--ceilings-from roofbench-results/latest.json]
      [--rungs R0_eager,R2_bf16_reduce_overhead] [--deadline-s 200] [--attention]
  roofbench-report roofbench-results/latest.json torch-gpt.json -o report/   # both ladders, one waterfall
The rungs run in the order given (default: the ladder's); one that would start after the deadline is listed
as not run. The file is rewritten after every rung, so an interrupted run keeps what it measured.
"""

import argparse
import datetime
import json
import math
import os
import pathlib
import socket
import statistics
import sys
import time

CONTEXT = 128
CHANNELS = 512
LAYERS = 6
HEADS = 8
VOCAB = 28
ROPE_BASE = 10000.0
INIT_STD = 0.02
CORPUS = "/usr/share/common-licenses"

ATTENTION_BACKENDS = ("cudnn", "flash", "efficient")
ATTENTION_BATCHES = (64, 512)  # the lab's: R2's and R3's

# name: (compile mode or None for eager, bf16 autocast, batch, checkpoint, on the waterfall's ladder). The
# reduce-overhead rungs are on it too, as a series of their own (benchmark_entry's "series"): the figure the
# ratios are taken against.
RUNGS = {
    "R0_eager": (None, False, 64, False, True),
    "R1_compile": ("default", False, 64, False, True),
    "R1_compile_reduce_overhead": ("reduce-overhead", False, 64, False, True),
    "R2_bf16": ("default", True, 64, False, True),
    "R2_bf16_reduce_overhead": ("reduce-overhead", True, 64, False, True),
    "R3_batch": ("default", True, 512, False, True),
    "R3_batch_reduce_overhead": ("reduce-overhead", True, 512, False, True),
    "R4_checkpoint": ("default", True, 512, True, True),
    "fp32_control": ("default", False, 512, False, False),
}


def token_table():
    """bytes.translate table of model.hpp's vocabulary: letters case-folded to 0..25, whitespace 26, else 27."""
    table = bytearray([27] * 256)
    for offset in range(26):
        table[ord("a") + offset] = offset
        table[ord("A") + offset] = offset
    for space in b" \n\t\r\v\f":
        table[space] = 26
    return bytes(table)


def load_corpus(path=CORPUS):
    """The training text as roofbench's corpus.cpp builds it, tokenised."""
    root = pathlib.Path(path)
    files = [root] if root.is_file() else sorted(
        p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    return b"".join(p.read_bytes() for p in files).translate(token_table())


def step_flops(batch):
    """plugins/gpt/cuda/training_gates.hpp's count: 3 x the forward's matmuls, the full T x T attention."""
    n = batch * CONTEXT
    c, v, t, hd = CHANNELS, VOCAB, CONTEXT, CHANNELS // HEADS
    forward = n * (LAYERS * 2 * (3 * c * c + c * c + 4 * c * c + 4 * c * c) + 2 * c * v) \
        + LAYERS * 2 * 2 * batch * HEADS * t * t * hd
    return 3 * forward


def attention_flops(batch):
    """gpt/lab_attention_bf16's count: the causal pairs T (T + 1) / 2 per head, 4 hd FLOPs each forward,
    the backward twice the forward."""
    return 3 * 4.0 * batch * HEADS * CONTEXT * (CONTEXT + 1) / 2 * (CHANNELS // HEADS)


def quantile(values, q):
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def benchmark_entry(name, precision, batch, samples_s, peak_bytes, reserved_bytes, facts, on_ladder, flops=None,
                    series=""):
    """One roofbench results entry (docs/results-format.md) for a rung (flops: a training step's, unless given):
    per-step sample times in seconds; series: the waterfall's series within PyTorch's bars ('' for the
    seed's rungs)."""
    median = statistics.median(samples_s)
    tokens = batch * CONTEXT
    flops = step_flops(batch) if flops is None else flops
    run_name = f"torch/{name}/batch:{batch}"
    return {
        "name": run_name, "run_name": run_name, "run_type": "iteration",
        "repetitions": 1, "repetition_index": 0, "threads": 1, "iterations": len(samples_s),
        "real_time": median * 1e3, "cpu_time": median * 1e3, "time_unit": "ms",
        "label": f"precision={precision} source=pytorch",
        "error_occurred": False, "error_message": "",
        "FLOP/s": flops / median, "tokens/s": tokens / median,
        "time_median": median, "time_q1": quantile(samples_s, 0.25), "time_q3": quantile(samples_s, 0.75),
        "noise": (quantile(samples_s, 0.75) - quantile(samples_s, 0.25)) / median,
        "samples": len(samples_s), "peak_mem": peak_bytes,
        "roofbench": {
            "plugin": "torch", "case": name, "params": {"batch": str(batch)}, "precision": precision,
            "bound": "", "gate": "off", "ladder": "gpt" if on_ladder else "", "device": "cuda:0",
            "flops": flops, "bytes": 0, "items": tokens, "item_name": "tokens", "samples_s": samples_s,
            "memory": {"allocated": peak_bytes, "peak": peak_bytes, "reserved": reserved_bytes},
            "facts": dict(facts, source="pytorch"), "source": "pytorch", "series": series,
        },
    }


def add_energy(entry, energy, spans):
    """roofbench's --energy figures (energy_per_run in J, power in W, energy_window_s, energy_busy_fraction) on a
    PyTorch entry, from the counter polled beside its samples, or why not (roofbench.energy_note), as roofbench's
    own entries say it."""
    import torch_timing
    figure, why = torch_timing.energy_per_call(energy.steps, spans) if energy.why_not is None else (None, energy.why_not)
    if figure is None:
        entry["roofbench"]["energy_note"] = why
        return
    entry["energy_per_run"] = figure["joules_per_call"]
    entry["power"] = figure["watts"]
    entry["energy_window_s"] = figure["window_s"]
    entry["energy_busy_fraction"] = figure["busy_fraction"]


def results_document(device, entries, not_run, ceilings=None, complete=True, extra_context=None):
    """A roofbench results file holding PyTorch's figures, marked "source": "pytorch" in its context (and in
    every entry's roofbench block), on the same device key as roofbench's own file of that GPU."""
    context = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host_name": socket.gethostname(), "executable": os.path.abspath(sys.argv[0]),
        "num_cpus": os.cpu_count() or 1, "mhz_per_cpu": 0, "library_build_type": "release",
        "source": "pytorch",
        "roofbench": {
            "version": "torch_gpt_ladder", "abi_version": 0, "suite": "torch_gpt_ladder",
            "complete": complete, "gate": "off", "mode": "hot", "source": "pytorch",
            "device": device, "ceilings": ceilings or {}, "plugins": [], "load_failures": [],
            "not_run": not_run,
        },
    }
    context.update(extra_context or {})
    return {"context": context, "benchmarks": entries}


def write_atomically(path, document):
    path = pathlib.Path(path)
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(document, indent=1))
    temporary.replace(path)


# ------------------------------------------------------------------------------------------------------
# What needs PyTorch (imported in main only, so that the tests can use the writer without it).

def build_model(torch, checkpoint):
    nn, F = torch.nn, torch.nn.functional
    from torch.utils.checkpoint import checkpoint as checkpointed

    hd = CHANNELS // HEADS

    def rope(x, cos, sin):  # x [B, T, H, hd]; adjacent pairs (2i, 2i+1)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(CHANNELS), nn.LayerNorm(CHANNELS)
            self.qkv = nn.Linear(CHANNELS, 3 * CHANNELS)
            self.attn_proj = nn.Linear(CHANNELS, CHANNELS)
            self.fc = nn.Linear(CHANNELS, 4 * CHANNELS)
            self.fc_proj = nn.Linear(4 * CHANNELS, CHANNELS)

        def forward(self, x, cos, sin):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, hd).unbind(2)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               is_causal=True)
            x = x + self.attn_proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.fc_proj(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(VOCAB, CHANNELS)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.lnf = nn.LayerNorm(CHANNELS)
            position = torch.arange(CONTEXT, dtype=torch.float64)[:, None]
            angle = position * ROPE_BASE ** (-2.0 * torch.arange(hd // 2, dtype=torch.float64) / hd)
            self.register_buffer("cos", angle.cos().float()[None, :, None, :], persistent=False)
            self.register_buffer("sin", angle.sin().float()[None, :, None, :], persistent=False)
            for name, p in self.named_parameters():  # model.hpp's InitKind: normal, zero, one
                if name.endswith("weight") and p.dim() == 2:
                    nn.init.normal_(p, 0.0, INIT_STD)  # wte and every linear weight
                elif name.endswith("bias"):
                    nn.init.zeros_(p)  # nn.Linear's own default is uniform

        def forward(self, tokens):
            x = self.wte(tokens)
            for block in self.blocks:
                if checkpoint:
                    x = checkpointed(block, x, self.cos, self.sin, use_reentrant=False)
                else:
                    x = block(x, self.cos, self.sin)
            return self.lnf(x) @ self.wte.weight.t()

    torch.manual_seed(0)
    return GPT().cuda()


def run_rung(torch, corpus, name, warmup_chunk, samples, steps_per_sample, max_warmup_s, trained_steps=0):
    import torch_timing  # beside this script; it imports torch, which the reports' tests of this file lack

    mode, bf16, batch, checkpoint, on_ladder = RUNGS[name]
    F = torch.nn.functional
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = build_model(torch, checkpoint)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    forward = model if mode is None else torch.compile(model, mode=mode)
    generator = torch.Generator(device="cuda")
    generator.manual_seed(1)
    offsets = torch.arange(CONTEXT + 1, device="cuda")
    high = corpus.numel() - CONTEXT - 1
    mark_step = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)

    def step():
        starts = torch.randint(0, high, (batch, 1), device="cuda", generator=generator)
        window = corpus[starts + offsets].long()  # a fresh batch every step, drawn on the device
        inputs, targets = window[:, :-1], window[:, 1:]
        if mode == "reduce-overhead" and mark_step:
            mark_step()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            logits = forward(inputs)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB).float(), targets.reshape(-1))
        loss.backward()
        optimizer.step()

    def timed(steps):
        return torch_timing.burst_seconds(step, steps)

    if trained_steps:  # as roofbench's gated rungs are timed after their 300-step learning run
        timed(trained_steps)
    gpu = torch_timing.nvidia_smi_id(torch, torch.cuda.current_device())
    per_step, spans = [], []
    # The energy poller starts before the warm-up: its start would otherwise leave the GPU idle just before
    # the samples (its window ignores the counter's steps before them).
    with torch_timing.EnergyCounter(gpu) as energy:
        began = time.monotonic()  # the warm-up's own allowance (--max-warmup-s), after any training
        chunks = []
        while True:
            chunks.append(timed(warmup_chunk))
            settled = len(chunks) >= 3 and all(abs(chunks[-i] - chunks[-i - 1]) <= 0.02 * chunks[-i - 1]
                                               for i in (1, 2))
            if settled or time.monotonic() - began > max_warmup_s:
                break
        warmup_s = time.monotonic() - began
        with torch_timing.SmClock(gpu) as clock:
            for _ in range(samples):
                per_step.append(timed(steps_per_sample))
                spans.append((time.monotonic(), per_step[-1] * steps_per_sample, steps_per_sample))
    peak = torch.cuda.max_memory_allocated()
    reserved = torch.cuda.max_memory_reserved()
    # After the samples and the peak: these steps are not timed, and eager's launch-bound rungs differ by host.
    host_s = torch_timing.host_seconds_per_call(step)
    facts = {"compile": mode or "eager", "autocast": "bf16" if bf16 else "off (TF32 matmuls)",
             "checkpoint": "per block" if checkpoint else "off", "settled": "yes" if settled else "no",
             "warmup_s": f"{warmup_s:.1f}", "trained_steps_before_timing": str(trained_steps),
             "host_ms_per_step_from_idle": f"{host_s * 1e3:.2f}"}
    entry = benchmark_entry(name, "bf16" if bf16 else "tf32", batch, per_step, peak, reserved, facts, on_ladder,
                            series="reduce-overhead" if mode == "reduce-overhead" else "")
    if clock.mean_mhz is not None:
        entry["sm_clock_mhz"] = clock.mean_mhz
    add_energy(entry, energy, spans)
    del model, optimizer, forward
    torch._dynamo.reset()
    torch.cuda.empty_cache()
    return entry


def run_attention(torch, backend, batch, samples, calls_per_graph=8, warmup_replays=10):
    """scaled_dot_product_attention's forward + backward on `backend` alone, replayed from a CUDA graph of
    `calls_per_graph` calls (eager, batch 64 measured PyTorch's dispatch: 300 us a call, 20-37% noise), the
    time per call the replay's over its calls. The calls take four input sets in turn, so that at batch 64
    (24 MB of qkv) none finds its inputs in L2 from the call before."""
    import torch_timing
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
              "efficient": SDPBackend.EFFICIENT_ATTENTION}[backend]
    F = torch.nn.functional
    hd = CHANNELS // HEADS
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    # dout as the model's arrives (through y.transpose(1, 2).reshape(b, t, c)) and as the lab's is stored:
    # [B, H, T, hd] views of [B, T, H, hd] memory, the output's strides.
    sets = [(torch.randn(batch, CONTEXT, 3, HEADS, hd, device="cuda", dtype=torch.bfloat16, requires_grad=True),
             torch.randn(batch, CONTEXT, HEADS, hd, device="cuda", dtype=torch.bfloat16).transpose(1, 2))
            for _ in range(4)]

    def call(i):
        qkv, dout = sets[i % len(sets)]
        q, k, v = (part.transpose(1, 2) for part in qkv.unbind(2))  # [B, H, T, hd] views, as the model's
        return torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), qkv, dout)

    with sdpa_kernel(chosen):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the warm-up capture needs: workspaces, cuDNN plans
            for i in range(len(sets)):
                call(i)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(calls_per_graph):
                call(i)
    torch_timing.warm_up(graph.replay, warmup_replays)
    per_call = [torch_timing.burst_seconds(graph.replay) / calls_per_graph for _ in range(samples)]
    facts = {"backend": backend, "layout": "q, k, v views of one [B, T, 3, H, hd] tensor", "causal": "yes",
             "timing": f"CUDA graph of {calls_per_graph} calls",
             "includes": "scaled_dot_product_attention forward + backward (no bias, no RoPE)"}
    entry = benchmark_entry(f"attention_sdpa_{backend}", "bf16", batch, per_call, torch.cuda.max_memory_allocated(),
                            torch.cuda.max_memory_reserved(), facts, False, flops=attention_flops(batch))
    entry["roofbench"]["timing"] = "graph"
    del graph, sets
    torch.cuda.empty_cache()
    return entry


def device_description(torch):
    props = torch.cuda.get_device_properties(0)
    uuid = str(getattr(props, "uuid", "")).replace("GPU-", "").replace("-", "")
    return {"kind": "cuda", "index": 0, "name": props.name, "key": f"cuda-{props.name}-{uuid}"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", default="torch-gpt-ladder.json")
    parser.add_argument("--rungs", default=",".join(RUNGS), help="comma-separated, in the order to run")
    parser.add_argument("--ceilings-from", help="a roofbench results file of the same GPU: its ceilings and device "
                        "key are copied, so that the reports put both files on one device")
    parser.add_argument("--corpus", default=os.environ.get("ROOFBENCH_GPT_CORPUS") or CORPUS)
    parser.add_argument("--deadline-s", type=float, default=200, help="start no rung after this many seconds")
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--steps-per-sample", type=int, default=10)
    parser.add_argument("--warmup-chunk", type=int, default=10)
    parser.add_argument("--max-warmup-s", type=float, default=90)
    parser.add_argument("--trained-steps", type=int, default=0, help="train this many steps before the warm-up, "
                        "so that the rungs are timed on trained weights as roofbench's gated rungs are (after "
                        "their 300-step learning run)")
    parser.add_argument("--attention", action="store_true", help="also the attention alone per SDPA backend "
                        "(after the rungs, within the deadline)")
    args = parser.parse_args(argv)
    if args.trained_steps < 0:
        parser.error("--trained-steps takes a count of steps, 0 or more")
    names = [name for name in args.rungs.split(",") if name]
    unknown = [name for name in names if name not in RUNGS]
    if unknown:
        parser.error(f"unknown rungs {unknown}; known: {', '.join(RUNGS)}")

    import torch  # noqa: E402 (only where the script runs for real)

    torch.backends.cuda.matmul.allow_tf32 = True  # the case study's set_float32_matmul_precision('high')
    torch.backends.cudnn.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    ceilings = {}
    device = device_description(torch)
    if args.ceilings_from:
        theirs = json.loads(pathlib.Path(args.ceilings_from).read_text())["context"]["roofbench"]
        ceilings = theirs.get("ceilings", {})
        if theirs.get("device", {}).get("name") == device["name"]:
            device = theirs["device"]
        else:
            print(f"warning: {args.ceilings_from} is of {theirs.get('device')}, not of {device['name']}",
                  file=sys.stderr)
    corpus = torch.frombuffer(bytearray(load_corpus(args.corpus)), dtype=torch.uint8).cuda()
    extra = {"pytorch": {"version": torch.__version__, "cuda": torch.version.cuda}}
    started = time.monotonic()
    entries, not_run = [], []
    for index, name in enumerate(names):
        elapsed = time.monotonic() - started
        if elapsed > args.deadline_s:
            not_run += [{"case": f"torch/{skipped}", "reason": f"the script's deadline ({args.deadline_s:.0f} s) passed"}
                        for skipped in names[index:]]
            break
        try:
            entry = run_rung(torch, corpus, name, args.warmup_chunk, args.samples, args.steps_per_sample,
                             args.max_warmup_s, args.trained_steps)
        except torch.cuda.OutOfMemoryError as error:
            not_run.append({"case": f"torch/{name}", "reason": f"out of memory: {error}"})
            torch.cuda.empty_cache()
            continue
        entries.append(entry)
        print(f"{name:28s} {entry['tokens/s'] / 1e6:7.3f}M tokens/s  {entry['peak_mem'] / 2**30:6.2f} GiB  "
              f"noise {entry['noise']:.3f}  ({entry['roofbench']['facts']['warmup_s']} s warm-up, host "
              f"{entry['roofbench']['facts']['host_ms_per_step_from_idle']} ms a step from idle)", flush=True)
        write_atomically(args.output, results_document(device, entries, not_run, ceilings, False, extra))
    for backend in ATTENTION_BACKENDS if args.attention else ():
        for batch in ATTENTION_BATCHES:
            case = f"torch/attention_sdpa_{backend}/batch:{batch}"
            if time.monotonic() - started > args.deadline_s:
                not_run.append({"case": case, "reason": f"the script's deadline ({args.deadline_s:.0f} s) passed"})
                continue
            try:
                entry = run_attention(torch, backend, batch, args.samples)
            except RuntimeError as error:  # out of memory, or a backend this build or GPU lacks
                not_run.append({"case": case, "reason": f"{type(error).__name__}: {str(error)[:200]}"})
                print(f"{case:40s} not run: {not_run[-1]['reason']}", flush=True)
                continue
            entries.append(entry)
            print(f"{case:40s} {entry['real_time'] * 1e3:8.1f} us  {entry['tokens/s'] / 1e6:7.1f}M tokens/s  "
                  f"noise {entry['noise']:.3f}", flush=True)
            write_atomically(args.output, results_document(device, entries, not_run, ceilings, False, extra))
    write_atomically(args.output, results_document(device, entries, not_run, ceilings, True, extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
