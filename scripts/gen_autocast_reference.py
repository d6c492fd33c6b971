#!/usr/bin/python3
"""Writes tests/data/autocast_reference.txt: what PyTorch's cpu autocast
(torch.autocast("cpu", dtype=torch.bfloat16)) makes of each op Tandem's
autocast table lists, and of a few it does not: the output's dtype, its
values, and for the ops that take weights the gradients of the float32
leaves (a backward outside the region, as it should be run).
tests/test_autocast.cpp runs the same calls inside AutocastGuard(kCPU) and
checks the dtypes exactly and the values within bfloat16's tolerance. Run
with Debian's python3-torch (1.13; the python3 first on PATH has no torch):

    /usr/bin/python3 scripts/gen_autocast_reference.py

The dtypes are PyTorch's autocast's. The values are not its outputs: its
cpu bfloat16 GEMM and convolution here (oneDNN on a CPU without bfloat16
instructions) round partial sums to bfloat16, several units in the last
place away from the float32-accumulated result (0.7109 for 0.7501 in the
first matmul case), where Tandem accumulates in float32 as a GPU does. They
are the exact results of the casts autocast makes: the op in float64 on the
inputs rounded to bfloat16 (for a lower-precision op) or as given, then
rounded to PyTorch's output dtype; the gradients likewise in float64, the
casts passing gradients through as .to() does.

The output is committed; tests never need torch. Format, one record a line:
    case <name> op=<op> inputs=<n> grads=<m>
    t <dtype> <ndim> <sizes...> <values...>   each of the n inputs
    t ...                                     the output
    t ...                                     each of the m gradients, of
                                              sum(output * seed) with seed
                                              the output's shape of 0.5,
                                              -1, 1.5, -2, ...: the leading
                                              float32 inputs'
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_format import fmt_tensor  # noqa: E402

torch.manual_seed(20261204)
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "autocast_reference.txt")
records = []


def randn(*shape, dtype=torch.float32):
    return torch.randn(shape).to(dtype)


def seed_like(t):
    n = t.numel()
    v = torch.tensor([(0.5 * (i + 1)) * (1 if i % 2 == 0 else -1) for i in range(n)], dtype=torch.float32)
    return v.reshape(t.shape)


LOWER = {"matmul", "mm", "bmm", "linear", "conv2d"}


def case(name, op, fn, inputs, grads=0):
    leaves = [t.clone().requires_grad_(i < grads) for i, t in enumerate(inputs)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fn(*leaves)
    # The exact result of autocast's casts, in float64.
    exact_in = []
    for i, t in enumerate(inputs):
        x = t.to(torch.bfloat16) if op in LOWER and t.is_floating_point() and t.dtype != torch.float64 else t
        x = x.double() if x.is_floating_point() else x
        exact_in.append(x.detach().requires_grad_(i < grads))
    exact = fn(*exact_in)
    lines = ["case %s op=%s inputs=%d grads=%d" % (name, op, len(inputs), grads)]
    lines += [fmt_tensor(t) for t in inputs]
    lines.append(fmt_tensor(exact.to(out.dtype)))
    if grads:
        (out.float() * seed_like(out)).sum().backward()
        (exact * seed_like(exact).double()).sum().backward()
        for t, e in zip(leaves[:grads], exact_in[:grads]):
            assert t.grad.dtype == t.dtype, (name, t.grad.dtype)
            lines.append(fmt_tensor(e.grad.to(t.dtype)))
    records.append("\n".join(lines))


labels = torch.tensor([2, 0, 3, 1])
# Lower precision: bfloat16 out; the float32 weights' gradients float32.
case("matmul", "matmul", torch.matmul, [randn(4, 8), randn(8, 3)], grads=2)
case("matmul_batched", "matmul", torch.matmul, [randn(2, 4, 8), randn(8, 3)], grads=2)
case("mm", "mm", torch.mm, [randn(3, 5), randn(5, 2)], grads=2)
case("bmm", "bmm", torch.bmm, [randn(2, 3, 4), randn(2, 4, 5)], grads=2)
case("linear", "linear", F.linear, [randn(4, 6), randn(5, 6), randn(5)], grads=3)
case("conv2d", "conv2d", lambda x, w, b: F.conv2d(x, w, b, padding=1),
     [randn(2, 3, 5, 5), randn(4, 3, 3, 3), randn(4)], grads=3)
# float32 on both devices: a bfloat16 input comes out float32.
case("cross_entropy", "cross_entropy", lambda x, y: F.cross_entropy(x, y),
     [randn(4, 5, dtype=torch.bfloat16), labels])
case("nll_loss", "nll_loss", lambda x, y: F.nll_loss(x, y), [randn(4, 5, dtype=torch.bfloat16), labels])
case("mse_loss", "mse_loss", F.mse_loss, [randn(3, 4, dtype=torch.bfloat16), randn(3, 4, dtype=torch.bfloat16)])
case("l1_loss", "l1_loss", F.l1_loss, [randn(3, 4, dtype=torch.bfloat16), randn(3, 4, dtype=torch.bfloat16)])
case("bce_with_logits", "binary_cross_entropy_with_logits", F.binary_cross_entropy_with_logits,
     [randn(3, 4, dtype=torch.bfloat16), torch.rand(3, 4).to(torch.bfloat16)])
case("prod", "prod", torch.prod, [(torch.rand(6) + 0.5).to(torch.bfloat16)])
# Promote: the widest of the inputs.
case("cat", "cat", lambda a, b: torch.cat([a, b]), [randn(2, 3, dtype=torch.bfloat16), randn(1, 3)])
case("stack", "stack", lambda a, b: torch.stack([a, b]), [randn(2, 3, dtype=torch.bfloat16), randn(2, 3)])
# Not listed for the cpu: the input's dtype.
case("softmax", "softmax", lambda x: torch.softmax(x, 1), [randn(3, 4, dtype=torch.bfloat16)])
case("exp", "exp", torch.exp, [randn(5, dtype=torch.bfloat16)])
case("sum", "sum", torch.sum, [randn(5, dtype=torch.bfloat16)])
case("relu", "relu", torch.relu, [randn(5)])
# A float64 input is never cast.
case("matmul_float64", "matmul", torch.matmul,
     [randn(3, 4, dtype=torch.float64), randn(4, 2, dtype=torch.float64)], grads=2)

with open(OUT, "w") as f:
    f.write("# Generated by scripts/gen_autocast_reference.py (torch %s); do not edit.\n" % torch.__version__)
    f.write("\n".join(records) + "\n")
print("wrote %d cases to %s" % (len(records), OUT))
