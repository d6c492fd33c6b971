#!/usr/bin/python3
"""Writes tests/data/conv_reference.txt: torch.nn.functional's conv2d,
max_pool2d (with indices), avg_pool2d and adaptive_avg_pool2d over a grid of
options (stride, padding as sizes and as "same"/"valid", dilation, groups
with depthwise, no bias, 1x1 kernels, ceil_mode, count_include_pad,
divisor_override, ties, non-divisible adaptive sizes, unbatched inputs),
with the output and the gradients PyTorch computes, in float64.
tests/test_conv.cpp runs the same op with the same options in Tandem on
every device and checks both. Run with Debian's python3-torch (1.13; the
python3 first on PATH has no torch):

    /usr/bin/python3 scripts/gen_conv_reference.py

The output is committed; tests never need torch. Format, one record a line:
    case <name> op=<conv2d|max_pool2d|avg_pool2d|adaptive_avg_pool2d> <key=value...>   (one line)
    t <dtype> <ndim> <sizes...> <values...>   input
    t ...                                     weight (conv2d)
    t ...                                     bias (conv2d with bias=1)
    t ...                                     the gradient seed
    t ...                                     the output
    t ...                                     indices (max_pool2d)
    t ...                                     d(output)/d(input)
    t ...                                     d(output)/d(weight) (conv2d)
    t ...                                     d(output)/d(bias) (conv2d with bias=1)
The gradients are those of sum(output * seed). Keys: conv2d: stride, padding
(h,w or same or valid), dilation, groups, bias; max_pool2d: kernel, stride,
padding, dilation, ceil_mode; avg_pool2d: kernel, stride, padding,
ceil_mode, count_include_pad, divisor_override (0: none);
adaptive_avg_pool2d: output_size. Pairs are written "h,w". Values are
printed with repr(), so float64 round-trips exactly.
"""
import os
import sys
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_format import DTYPES, fmt_tensor  # noqa: E402

# PyTorch's note that an even kernel with padding="same" pads a copy: deliberate.
warnings.filterwarnings("ignore", message="Using padding='same'")
torch.manual_seed(20241130)
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "conv_reference.txt")
F64 = torch.float64
records = []
names = set()


def pair(v):
    return f"{v[0]},{v[1]}" if isinstance(v, (tuple, list)) else f"{v},{v}"


def randn(*shape):
    return torch.randn(shape, dtype=F64)


def header(name, op, **attrs):
    assert name not in names, name
    names.add(name)
    return f"case {name} op={op} " + " ".join(f"{k}={v}" for k, v in attrs.items())


def conv(name, x, c_out, kernel, stride=1, padding=0, dilation=1, groups=1, bias=True):
    c_in = x.shape[-3]
    kh, kw = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    w = randn(c_out, c_in // groups, kh, kw)
    b = randn(c_out) if bias else None
    xl, wl = x.clone().requires_grad_(), w.clone().requires_grad_()
    bl = b.clone().requires_grad_() if bias else None
    out = F.conv2d(xl, wl, bl, stride=stride, padding=padding, dilation=dilation, groups=groups)
    seed = randn(*out.shape)
    leaves = [xl, wl] + ([bl] if bias else [])
    grads = torch.autograd.grad(out, leaves, seed)
    records.append(header(name, "conv2d", stride=pair(stride),
                          padding=padding if isinstance(padding, str) else pair(padding), dilation=pair(dilation),
                          groups=groups, bias=int(bias)))
    records.extend(fmt_tensor(t) for t in [x, w] + ([b] if bias else []) + [seed, out] + list(grads))


def max_pool(name, x, kernel, stride=None, padding=0, dilation=1, ceil_mode=False):
    xl = x.clone().requires_grad_()
    out, idx = F.max_pool2d(xl, kernel, stride, padding, dilation, ceil_mode=ceil_mode, return_indices=True)
    seed = randn(*out.shape)
    (g,) = torch.autograd.grad(out, [xl], seed)
    records.append(header(name, "max_pool2d", kernel=pair(kernel), stride=pair(stride if stride else kernel),
                          padding=pair(padding), dilation=pair(dilation), ceil_mode=int(ceil_mode)))
    records.extend(fmt_tensor(t) for t in [x, seed, out, idx, g])


def avg_pool(name, x, kernel, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    xl = x.clone().requires_grad_()
    out = F.avg_pool2d(xl, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    seed = randn(*out.shape)
    (g,) = torch.autograd.grad(out, [xl], seed)
    records.append(header(name, "avg_pool2d", kernel=pair(kernel), stride=pair(stride if stride else kernel),
                          padding=pair(padding), ceil_mode=int(ceil_mode), count_include_pad=int(count_include_pad),
                          divisor_override=divisor_override or 0))
    records.extend(fmt_tensor(t) for t in [x, seed, out, g])


def adaptive(name, x, output_size):
    xl = x.clone().requires_grad_()
    out = F.adaptive_avg_pool2d(xl, output_size)
    seed = randn(*out.shape)
    (g,) = torch.autograd.grad(out, [xl], seed)
    records.append(header(name, "adaptive_avg_pool2d", output_size=pair(output_size)))
    records.extend(fmt_tensor(t) for t in [x, seed, out, g])


# ---- conv2d
conv("conv_3x3_pad1", randn(2, 3, 5, 5), 4, 3, padding=1)
conv("conv_3x3_nopad", randn(2, 3, 6, 5), 4, 3)
conv("conv_stride2_pad_1_2_kernel_3x2", randn(2, 3, 7, 6), 5, (3, 2), stride=2, padding=(1, 2))
conv("conv_stride_2_3", randn(1, 2, 9, 10), 3, 3, stride=(2, 3), padding=1)
conv("conv_dilation2", randn(2, 3, 8, 7), 4, 3, dilation=2, padding=2)
conv("conv_dilation_1_3_stride2", randn(2, 2, 9, 11), 3, (2, 3), stride=2, dilation=(1, 3), padding=(0, 1))
conv("conv_groups2", randn(2, 4, 6, 6), 6, 3, padding=1, groups=2)
conv("conv_groups3_stride2", randn(2, 6, 7, 7), 9, (3, 3), stride=2, groups=3)
conv("conv_depthwise", randn(2, 3, 6, 5), 3, 3, padding=1, groups=3)
conv("conv_depthwise_multiplier2", randn(2, 3, 6, 6), 6, 3, padding=1, groups=3, bias=False)
conv("conv_nobias", randn(2, 3, 5, 5), 4, 3, padding=1, bias=False)
conv("conv_unbatched", randn(3, 6, 5), 4, 3, padding=1)
conv("conv_unbatched_groups", randn(4, 5, 5), 2, 2, groups=2, bias=False)
conv("conv_1x1", randn(2, 5, 4, 3), 7, 1)
conv("conv_1x1_groups", randn(2, 6, 4, 4), 4, 1, groups=2)
conv("conv_1x1_stride2", randn(2, 3, 5, 5), 4, 1, stride=2)
conv("conv_1x1_pad1", randn(2, 3, 3, 3), 2, 1, padding=1)
conv("conv_same_3x3", randn(2, 3, 5, 6), 4, 3, padding="same")
conv("conv_same_even_kernel", randn(2, 2, 5, 6), 3, (2, 4), padding="same")
conv("conv_same_dilated", randn(1, 2, 7, 6), 3, (3, 2), padding="same", dilation=(2, 3))
conv("conv_valid", randn(2, 3, 6, 5), 2, 3, padding="valid")
conv("conv_kernel_fills_input", randn(2, 3, 3, 4), 2, (3, 4))
conv("conv_batch5", randn(5, 4, 5, 5), 6, 3, stride=1, padding=1)

# ---- max_pool2d
max_pool("max_k2", randn(2, 3, 6, 6), 2)
max_pool("max_k2_odd_input", randn(2, 2, 7, 5), 2)
max_pool("max_k3_s2_p1", randn(2, 3, 7, 7), 3, 2, 1)
max_pool("max_k3_s1_p1_dil2", randn(2, 2, 8, 8), 3, 1, 1, dilation=2)
max_pool("max_k_2_3_s_1_2", randn(2, 2, 6, 7), (2, 3), (1, 2))
max_pool("max_ceil", randn(2, 2, 6, 6), 3, 2, ceil_mode=True)
max_pool("max_ceil_pad", randn(1, 2, 7, 8), 3, 2, 1, ceil_mode=True)
max_pool("max_ceil_dil", randn(1, 2, 9, 8), 2, 3, 1, dilation=2, ceil_mode=True)
max_pool("max_overlap", randn(2, 2, 5, 5), 3, 1)
max_pool("max_unbatched", randn(3, 6, 5), 2)
# Ties: a few distinct values, so that windows hold equal maxima (the first wins).
max_pool("max_ties", torch.randint(0, 3, (2, 2, 6, 6)).to(F64), 2)
max_pool("max_ties_overlap", torch.randint(0, 2, (1, 2, 6, 6)).to(F64), 3, 1, 1)
max_pool("max_constant", torch.full((1, 1, 4, 4), 0.5, dtype=F64), 2, 1)

# ---- avg_pool2d
avg_pool("avg_k2", randn(2, 3, 6, 6), 2)
avg_pool("avg_k3_s2_p1", randn(2, 2, 7, 7), 3, 2, 1)
avg_pool("avg_k3_s2_p1_nopadcount", randn(2, 2, 7, 7), 3, 2, 1, count_include_pad=False)
avg_pool("avg_ceil", randn(2, 2, 6, 6), 3, 2, ceil_mode=True)
avg_pool("avg_ceil_pad", randn(1, 2, 7, 8), 3, 2, 1, ceil_mode=True)
avg_pool("avg_ceil_pad_nopadcount", randn(1, 2, 7, 8), 3, 2, 1, ceil_mode=True, count_include_pad=False)
avg_pool("avg_divisor", randn(2, 2, 6, 6), 2, divisor_override=3)
avg_pool("avg_divisor_pad", randn(1, 2, 5, 5), 3, 2, 1, divisor_override=7)
avg_pool("avg_k_2_3_s_1_2", randn(2, 2, 6, 7), (2, 3), (1, 2), (1, 1))
avg_pool("avg_unbatched", randn(3, 6, 5), 2)

# ---- adaptive_avg_pool2d
adaptive("adaptive_non_divisible", randn(2, 3, 5, 7), (3, 4))
adaptive("adaptive_divisible", randn(2, 2, 6, 6), (3, 3))
adaptive("adaptive_global", randn(2, 3, 5, 5), (1, 1))
adaptive("adaptive_larger_output", randn(1, 2, 4, 4), (6, 5))
adaptive("adaptive_7x7_to_3x3", randn(2, 2, 7, 7), (3, 3))
adaptive("adaptive_unbatched", randn(3, 5, 6), (2, 4))

with open(OUT, "w") as f:
    f.write(f"# generated by scripts/gen_conv_reference.py with torch {torch.__version__}; do not edit\n")
    f.write("\n".join(records) + "\n")
print(f"{len(names)} cases -> {OUT}")
