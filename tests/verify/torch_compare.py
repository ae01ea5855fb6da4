#!/usr/bin/env python3
"""A minimal PyTorch load_inline harness, for BENCHMARKS.md's comparison
only (not a kb dependency; run on the GPU machine): for a few of our
optimised candidates, compile the kernel with torch.utils.cpp_extension.
load_inline, check it against a PyTorch float64 reference on each shape
with two seeds, and time it with CUDA events (warm-up, 50 runs, median),
as the Python harnesses do. Prints one JSON line per candidate with the
time each stage took.

    python3 tests/verify/torch_compare.py [OUT.jsonl]
"""
import json
import os
import sys
import tempfile
import time

import torch
from torch.utils.cpp_extension import load_inline

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def src(path):
    with open(os.path.join(TOP, path)) as f:
        return f.read()


CASES = [
    {
        "task": "gelu",
        "file": "corpus/tasks/gelu/candidates/vec4.cu",
        "launcher": """
void launch(torch::Tensor x, torch::Tensor y) {
    int n = x.numel();
    gelu_vec4<<<(n + 2047) / 2048, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
}""",
        "shapes": [(1 << 26,), (1000003,), (7,)],
        "make": lambda s, g: (torch.randn(s, generator=g, device="cuda"),),
        "out": lambda s: torch.empty(s, device="cuda"),
        "ref": lambda x: torch.nn.functional.gelu(x.double()),
        "tol": (1e-6, 1e-5),
    },
    {
        "task": "softmax",
        "file": "corpus/tasks/softmax/candidates/block_row.cu",
        "launcher": """
void launch(torch::Tensor x, torch::Tensor y) {
    int m = x.size(0), n = x.size(1);
    softmax_block<<<m, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), m, n);
}""",
        "shapes": [(16384, 4096), (1000, 1001), (3, 5)],
        "make": lambda s, g: (torch.randn(s, generator=g, device="cuda"),),
        "out": lambda s: torch.empty(s, device="cuda"),
        "ref": lambda x: torch.softmax(x.double(), dim=1),
        "tol": (1e-7, 1e-4),
    },
    {
        "task": "transpose",
        "file": "corpus/tasks/transpose/candidates/smem_tile.cu",
        "launcher": """
void launch(torch::Tensor x, torch::Tensor y) {
    int m = x.size(0), n = x.size(1);
    dim3 grid((n + 31) / 32, (m + 31) / 32), block(32, 8);
    transpose_tile<<<grid, block>>>(x.data_ptr<float>(), y.data_ptr<float>(), m, n);
}""",
        "shapes": [(8192, 8192), (1001, 999), (3, 5)],
        "make": lambda s, g: (torch.randn(s, generator=g, device="cuda"),),
        "out": lambda s: torch.empty((s[1], s[0]), device="cuda"),
        "ref": lambda x: x.double().t(),
        "tol": (0, 0),
    },
]


def run(case, k):
    t0 = time.perf_counter()
    body = src(case["file"]) + "\n#include <torch/extension.h>\n" + case["launcher"]
    build = tempfile.mkdtemp(prefix="kbcmp")
    mod = load_inline(name="kbcmp_%s_%d_%d" % (case["task"], os.getpid(), k),
                      cpp_sources="void launch(torch::Tensor x, torch::Tensor y);",
                      cuda_sources=body, functions=["launch"],
                      extra_cuda_cflags=["-O3", "-arch=sm_90"],
                      build_directory=build, verbose=False)
    t1 = time.perf_counter()
    ok = True
    for shape in case["shapes"]:
        for seed in (1, 2):
            g = torch.Generator(device="cuda").manual_seed(seed)
            (x,) = case["make"](shape, g)
            y = case["out"](shape).fill_(float("nan"))
            mod.launch(x, y)
            torch.cuda.synchronize()
            r = case["ref"](x)
            atol, rtol = case["tol"]
            ok = ok and bool(torch.allclose(y.double(), r, atol=atol, rtol=rtol))
    t2 = time.perf_counter()
    (x,) = case["make"](case["shapes"][0], torch.Generator(device="cuda").manual_seed(3))
    y = case["out"](case["shapes"][0])
    flush = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        mod.launch(x, y)
    ts = []
    for _ in range(50):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        mod.launch(x, y)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    t3 = time.perf_counter()
    return {"task": case["task"], "candidate": case["file"], "correct": ok,
            "median_ms": ts[len(ts) // 2], "compile_s": t1 - t0,
            "check_s": t2 - t1, "time_s": t3 - t2, "total_s": t3 - t0}


def main():
    out = open(sys.argv[1], "a") if len(sys.argv) > 1 else None
    t0 = time.perf_counter()
    torch.zeros(1, device="cuda")
    print(json.dumps({"torch": torch.__version__, "cuda_init_s": time.perf_counter() - t0}))
    for k, case in enumerate(CASES):
        r = run(case, k)
        line = json.dumps(r)
        print(line, flush=True)
        if out:
            out.write(line + "\n")


if __name__ == "__main__":
    main()
