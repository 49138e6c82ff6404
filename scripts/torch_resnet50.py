#!/usr/bin/env python3
"""PyTorch's side of the conv plugin's ResNet-50 figures, timed on the same GPU: every one of the 23
distinct ResNet-50 v1.5 convolutions forward at N=32 and 256 (bf16, channels_last, cudnn.benchmark,
CUDA events around back-to-back eager calls after a warm-up), and torchvision's whole ResNet-50 (bf16
autocast, channels_last): inference at N=1/32/256 and a training step (SGD) at N=256.

  torch_resnet50.py [--json OUT.json] [--roofbench RESULTS.json]

Writes the figures as JSON (--json) and, given roofbench's results file from the same GPU, prints a
Markdown table of both side by side (roofbench's cuDNN and hand-written kernels, PyTorch, ratios)."""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F

import torch_timing

# (name as the conv plugin's layer axis, in, out, kernel, stride, input size): REFERENCE.md's order.
LAYERS = [
    ("conv1_7x7s2_3to64", 3, 64, 7, 2, 224),
    ("conv2_1x1_64", 64, 64, 1, 1, 56), ("conv2_3x3_64", 64, 64, 3, 1, 56), ("conv2_1x1_64to256", 64, 256, 1, 1, 56),
    ("conv2_1x1_256to64", 256, 64, 1, 1, 56), ("conv3_1x1_256to128", 256, 128, 1, 1, 56),
    ("conv3_3x3s2_128", 128, 128, 3, 2, 56), ("conv3_1x1s2_256to512", 256, 512, 1, 2, 56),
    ("conv3_1x1_128to512", 128, 512, 1, 1, 28), ("conv3_1x1_512to128", 512, 128, 1, 1, 28),
    ("conv3_3x3_128", 128, 128, 3, 1, 28), ("conv4_1x1_512to256", 512, 256, 1, 1, 28),
    ("conv4_3x3s2_256", 256, 256, 3, 2, 28), ("conv4_1x1s2_512to1024", 512, 1024, 1, 2, 28),
    ("conv4_1x1_256to1024", 256, 1024, 1, 1, 14), ("conv4_1x1_1024to256", 1024, 256, 1, 1, 14),
    ("conv4_3x3_256", 256, 256, 3, 1, 14), ("conv5_1x1_1024to512", 1024, 512, 1, 1, 14),
    ("conv5_3x3s2_512", 512, 512, 3, 2, 14), ("conv5_1x1s2_1024to2048", 1024, 2048, 1, 2, 14),
    ("conv5_1x1_512to2048", 512, 2048, 1, 1, 7), ("conv5_1x1_2048to512", 2048, 512, 1, 1, 7),
    ("conv5_3x3_512", 512, 512, 3, 1, 7),
]
BATCHES = (32, 256)


def flops(layer, n):
    _, cin, cout, k, stride, size = layer
    out = (size + 2 * (k // 2) - k) // stride + 1
    return 2.0 * n * out * out * cout * cin * k * k


def seconds_per_call(fn, min_seconds=0.2, repeats=5):
    """Median over `repeats` bursts of back-to-back calls timed with CUDA events, after a warm-up."""
    torch_timing.warm_up(fn, 5)
    # One timed call sizes the bursts: about `min_seconds` each, and never fewer than 3 calls.
    calls = max(3, int(min_seconds / max(torch_timing.burst_seconds(fn, 1), 1e-6)))
    return statistics.median([torch_timing.burst_seconds(fn, calls) for _ in range(repeats)])


def uniform(*shape, dtype=torch.bfloat16):
    # In [-1, 1) as roofbench fills inputs: a kernel's power draw, and so its clock, depends on the data.
    return (torch.rand(*shape, device="cuda") * 2 - 1).to(dtype)


def per_shape():
    results = {}
    with torch.no_grad():
        for layer in LAYERS:
            name, cin, cout, k, stride, size = layer
            w = uniform(cout, cin, k, k).to(memory_format=torch.channels_last)
            for n in BATCHES:
                x = uniform(n, cin, size, size).to(memory_format=torch.channels_last)
                t = seconds_per_call(lambda: F.conv2d(x, w, None, stride, k // 2))
                results[f"{name}/n:{n}"] = {"seconds": t, "tflops": flops(layer, n) / t / 1e12}
                del x
    return results


def whole_network():
    import torchvision  # only here: the per-shape figures do not need it

    out = {"torchvision": torchvision.__version__}
    model = torchvision.models.resnet50(weights=None).cuda().to(memory_format=torch.channels_last)
    model.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for n in (1, 32, 256):
            x = uniform(n, 3, 224, 224, dtype=torch.float32).to(memory_format=torch.channels_last)
            t = seconds_per_call(lambda: model(x), min_seconds=0.5)
            out[f"inference/n:{n}"] = {"seconds": t, "images_per_s": n / t}
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    n = 256
    x = uniform(n, 3, 224, 224, dtype=torch.float32).to(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (n,), device="cuda")

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), labels)
        loss.backward()
        optimizer.step()

    t = seconds_per_call(step, min_seconds=1.0, repeats=3)
    out[f"train_step/n:{n}"] = {"seconds": t, "images_per_s": n / t}
    return out


def roofbench_figures(path):
    with open(path) as f:
        results = json.load(f)
    figures = {}
    for b in results.get("benchmarks", []):
        rb = b.get("roofbench", {})
        if rb.get("gate") != "pass" or "time_median" not in b:
            continue
        figures[rb.get("case", "") + "/" + "/".join(f"{k}:{v}" for k, v in rb.get("params", {}).items())] = b
    return figures


def fmt(x, digits=0):
    return "-" if x is None else f"{x:,.{digits}f}"


def ratio(a, b):
    return None if a is None or b is None else a / b


def cudnn_text(version):
    """torch.backends.cudnn.version()'s 91900 as "9.19.0" (major * 10000 + minor * 100 + patch since cuDNN 9)."""
    if not isinstance(version, int):
        return str(version)
    return f"{version // 10000}.{version // 100 % 100}.{version % 100}" if version >= 90000 else str(version)


def print_comparison(torch_results, figures):
    def rb(layer, n, impl="cudnn"):
        return figures.get(f"conv_bf16/layer:{layer}/pass:fwd/layout:nhwc/impl:{impl}/n:{n}")

    def tflops(b):
        return None if b is None else b["FLOP/s"] / 1e12

    print(f"PyTorch {torch_results.get('torch', '?')} with cuDNN {cudnn_text(torch_results.get('cudnn'))} on "
          f"{torch_results.get('device', '?')}; roofbench ran "
          + (", ".join(sorted({b.get("roofbench", {}).get("facts", {}).get("implementation", "?")
                               for k, b in figures.items() if "impl:cudnn" in k})) or "no cuDNN case"))
    print()
    print("| layer | N=32 roofbench | N=32 PyTorch | ratio | N=256 roofbench | N=256 PyTorch | ratio | cuDNN algorithm (N=256) "
          "| WMMA N=256 | WMMA / cuDNN | wgmma N=256 | wgmma / cuDNN |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    totals = {n: {"flops": 0.0, "rb": 0.0, "pt": 0.0, "rb_ok": True} for n in BATCHES}
    # FLOP-weighted hand-written / cuDNN at N=256 over the shapes both ran: (seconds of cuDNN, of the kernel).
    hand_totals = {impl: [0.0, 0.0] for impl in ("implicit_gemm", "implicit_gemm_wgmma")}
    for layer in LAYERS:
        name = layer[0]
        row = [name]
        for n in BATCHES:
            r, p = tflops(rb(name, n)), torch_results["per_shape"].get(f"{name}/n:{n}", {}).get("tflops")
            row += [fmt(r), fmt(p), fmt(ratio(r, p), 3)]
            f = flops(layer, n)
            totals[n]["flops"] += f
            totals[n]["pt"] += f / (p * 1e12) if p else float("nan")
            if r:
                totals[n]["rb"] += f / (r * 1e12)
            else:
                totals[n]["rb_ok"] = False
        b256 = rb(name, 256)
        algorithm = "-" if b256 is None else b256.get("roofbench", {}).get("facts", {}).get("algorithm", "-")
        row.append(algorithm)
        for impl, sums in hand_totals.items():
            hand = tflops(rb(name, 256, impl))
            row += [fmt(hand), fmt(ratio(hand, tflops(b256)), 2)]
            if hand and b256 is not None:
                sums[0] += flops(layer, 256) / (tflops(b256) * 1e12)
                sums[1] += flops(layer, 256) / (hand * 1e12)
        print("| " + " | ".join(row) + " |")
    row = ["all 23, once each (total FLOP / total time)"]
    for n in BATCHES:
        t = totals[n]
        r = t["flops"] / t["rb"] / 1e12 if t["rb_ok"] and t["rb"] > 0 else None
        p = t["flops"] / t["pt"] / 1e12
        row += [fmt(r), fmt(p), fmt(ratio(r, p), 3)]
    row.append("")
    for cudnn_s, hand_s in hand_totals.values():
        row += ["", fmt(cudnn_s / hand_s if hand_s > 0 else None, 2) + " (FLOP-weighted)"]
    print("| " + " | ".join(row) + " |")
    print()
    print("| network | roofbench images/s | PyTorch images/s (whole model) |")
    print("|---|---|---|")
    net = torch_results.get("network", {})
    for key, label in (("resnet50/impl:cudnn", "conv forward, cuDNN"), ("resnet50/impl:implicit_gemm", "conv forward, WMMA"),
                       ("resnet50/impl:implicit_gemm_wgmma", "conv forward, wgmma")):
        for n in (1, 32, 256):
            b = figures.get(f"{key}/n:{n}")
            p = net.get(f"inference/n:{n}", {}).get("images_per_s")
            print(f"| {label}, N={n} | {fmt(None if b is None else b.get('images/s'))} | {fmt(p)} (inference) |")
    for n in (32, 256):
        b = figures.get(f"resnet50_train/n:{n}")
        p = net.get(f"train_step/n:{n}", {}).get("images_per_s")
        print(f"| conv fwd + bwd_data + bwd_filter, N={n} | {fmt(None if b is None else b.get('images/s'))} | {fmt(p)} (training step) |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write PyTorch's figures here")
    parser.add_argument("--roofbench", help="roofbench results JSON to compare with")
    parser.add_argument("--load", help="read PyTorch's figures from this JSON instead of timing them")
    args = parser.parse_args()
    if args.load:
        with open(args.load) as f:
            torch_results = json.load(f)
    else:
        torch.backends.cudnn.benchmark = True
        torch_results = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                         "device": torch.cuda.get_device_name(), "per_shape": per_shape()}
        try:
            torch_results["network"] = whole_network()
        except ImportError as e:
            torch_results["network_skipped"] = f"torchvision not available: {e}"
        if args.json:
            with open(args.json, "w") as f:
                json.dump(torch_results, f, indent=1)
    if args.roofbench:
        print_comparison(torch_results, roofbench_figures(args.roofbench))
    else:
        json.dump(torch_results, sys.stdout, indent=1)
        print()
        print(f"PyTorch {torch_results.get('torch', '?')} with cuDNN {cudnn_text(torch_results.get('cudnn'))}", file=sys.stderr)


if __name__ == "__main__":
    main()
