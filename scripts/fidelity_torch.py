#!/usr/bin/env python3
"""Times the operations roofbench's fidelity targets name with another tool (PyTorch, CUDA events) on the
same GPU, so roofbench's figures can be checked against it: a bf16 8192^3 matmul and a 1 GiB device copy.
Prints one JSON object: {"matmul_bf16_8192": seconds, "copy_1GiB": seconds} (medians)."""
import json
import sys

import torch

import torch_timing


def median_event_seconds(fn):
    """20 warm-up calls, then the median of 100 calls timed one by one."""
    return torch_timing.median_seconds_per_call(fn, warmup=20, bursts=100)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    n = 8192
    # Uniform in [-1, 1) as roofbench fills inputs: a GEMM's power draw, and so its clock, depends on the data.
    a = (torch.rand(n, n, device="cuda") * 2 - 1).to(torch.bfloat16)
    b = (torch.rand(n, n, device="cuda") * 2 - 1).to(torch.bfloat16)
    out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    matmul = median_event_seconds(lambda: torch.matmul(a, b, out=out))
    src = torch.rand(1 << 28, device="cuda") * 2 - 1  # 1 GiB of fp32
    dst = torch.empty_like(src)
    copy = median_event_seconds(lambda: dst.copy_(src))
    result = {"matmul_bf16_8192": matmul, "copy_1GiB": copy,
              "matmul_bf16_8192_tflops": 2 * n**3 / matmul / 1e12,
              "copy_1GiB_TBps": 2 * (1 << 30) / copy / 1e12, "torch": torch.__version__}
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
