#!/usr/bin/python3
"""Writes tests/data/nn_norm_reference.txt: batch norm (nn.BatchNorm1d on
(N, C) and (N, C, L) inputs, nn.BatchNorm2d), layer norm (F.layer_norm over
one and two trailing dims) and embedding (F.embedding) in float64, with the
outputs, the gradients and, for batch norm, the running statistics PyTorch
computes. tests/test_nn_norm.cpp runs the same layers in Tandem on every
device and checks each tensor. Run with Debian's python3-torch (1.13; the
python3 first on PATH has no torch):

    /usr/bin/python3 scripts/gen_nn_norm_reference.py

The output is committed; tests never need torch. Format, one record a line:
    case <name> op=<bn1d|bn2d|ln|emb> <key>=<value>... tensors=<name>,<name>,...
    t <dtype> <ndim> <sizes...> <values...>     one line per name in tensors=
Keys:
  bn:  training=<0|1> momentum=<float|none> eps=<float> affine=<0|1>
       track=<0|1> steps=<n> batches=<num_batches_tracked after>
       tensors: input0..input{steps-1} (the batches, in order), weight and
       bias (affine), running_mean and running_var (the initial ones, track),
       seed, output (of the last step), grad_input, grad_weight and
       grad_bias (affine; of sum(output * seed) at the last step),
       running_mean_after and running_var_after (track).
  ln:  shape=<d1,d2,...> eps=<float> affine=<0|1>
       tensors: input, weight and bias (affine), seed, output, grad_input,
       grad_weight and grad_bias (affine).
  emb: padding_idx=<int|none> scale_grad_by_freq=<0|1> max_norm=<float|none>
       tensors: weight, indices, seed, output, grad_weight, and with
       max_norm weight_after (the table after the in-place rescale).
Values are printed with repr(), so float64 round-trips exactly.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_format import DTYPES, fmt_tensor  # noqa: E402

torch.manual_seed(20241130)
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "nn_norm_reference.txt")
F64 = torch.float64
records = []
names = set()


def randn(*shape, mean=0.0, std=1.0):
    return torch.randn(shape, dtype=F64) * std + mean


def emit(name, op, attrs, tensors):
    assert name not in names, name
    names.add(name)
    words = [f"{k}={v}" for k, v in attrs.items()]
    records.append(" ".join(["case", name, f"op={op}"] + words + ["tensors=" + ",".join(k for k, _ in tensors)]))
    records.extend(fmt_tensor(t) for _, t in tensors)


def opt(v):
    return "none" if v is None else repr(v)


# ---------------------------------------------------------------- batch norm
def batch_norm_case(name, shape, training=True, momentum=0.1, eps=1e-5, affine=True, track=True, steps=1):
    C = shape[1]
    op = "bn2d" if len(shape) == 4 else "bn1d"
    cls = nn.BatchNorm2d if op == "bn2d" else nn.BatchNorm1d
    m = cls(C, eps=eps, momentum=momentum, affine=affine, track_running_stats=track).to(F64)
    tensors = []
    inputs = [randn(*shape, mean=1.5, std=2.0) for _ in range(steps)]
    tensors += [(f"input{i}", x) for i, x in enumerate(inputs)]
    with torch.no_grad():
        if affine:
            m.weight.copy_(randn(C, mean=1.0, std=0.5))
            m.bias.copy_(randn(C))
            tensors += [("weight", m.weight), ("bias", m.bias)]
        if track:
            m.running_mean.copy_(randn(C))
            m.running_var.copy_(torch.rand(C, dtype=F64) + 0.5)
            tensors += [("running_mean", m.running_mean.clone()), ("running_var", m.running_var.clone())]
    m.train(training)
    for i, x in enumerate(inputs):
        leaf = x.clone().requires_grad_(True)
        out = m(leaf)
    seed = randn(*out.shape)
    wanted = [leaf] + ([m.weight, m.bias] if affine else [])
    grads = torch.autograd.grad(out, wanted, seed)
    tensors += [("seed", seed), ("output", out), ("grad_input", grads[0])]
    if affine:
        tensors += [("grad_weight", grads[1]), ("grad_bias", grads[2])]
    if track:
        tensors += [("running_mean_after", m.running_mean), ("running_var_after", m.running_var)]
    batches = int(m.num_batches_tracked) if track else 0
    emit(name, op, {"training": int(training), "momentum": opt(momentum), "eps": repr(eps), "affine": int(affine),
                    "track": int(track), "steps": steps, "batches": batches}, tensors)


batch_norm_case("bn1d_2d_train", (6, 3), steps=2)
batch_norm_case("bn1d_2d_eval", (5, 4), training=False)
batch_norm_case("bn1d_3d_train", (4, 3, 5), steps=2)
batch_norm_case("bn1d_3d_eval", (3, 2, 4), training=False)
batch_norm_case("bn2d_train", (2, 3, 4, 5), steps=2)  # planes of 20 values: the per-channel walk
batch_norm_case("bn2d_train_short_planes", (4, 2, 2, 3), steps=2)  # planes of 6: the row walk
batch_norm_case("bn2d_eval", (2, 3, 4, 5), training=False)
batch_norm_case("bn2d_eval_short_planes", (3, 2, 2, 2), training=False)
batch_norm_case("bn1d_2d_no_affine", (5, 3), affine=False, steps=2)
batch_norm_case("bn2d_no_affine", (2, 3, 4, 4), affine=False)
batch_norm_case("bn2d_no_affine_eval", (2, 3, 4, 4), training=False, affine=False)
batch_norm_case("bn1d_2d_untracked", (5, 3), track=False)
batch_norm_case("bn2d_untracked_eval", (2, 2, 3, 3), training=False, track=False)  # batch statistics in eval too
batch_norm_case("bn1d_2d_momentum_none", (4, 3), momentum=None, steps=3)  # a cumulative average
batch_norm_case("bn2d_momentum_eps", (3, 2, 4, 4), momentum=0.3, eps=1e-3, steps=2)
batch_norm_case("bn1d_2d_two_rows", (2, 3))  # the smallest batch that trains


# ---------------------------------------------------------------- layer norm
def layer_norm_case(name, shape, k, affine=True, eps=1e-5):
    ns = list(shape[len(shape) - k:])
    x = randn(*shape, mean=-0.5, std=3.0).requires_grad_(True)
    tensors = [("input", x)]
    wanted = [x]
    w = b = None
    if affine:
        w = randn(*ns, mean=1.0, std=0.5).requires_grad_(True)
        b = randn(*ns).requires_grad_(True)
        tensors += [("weight", w), ("bias", b)]
        wanted += [w, b]
    out = F.layer_norm(x, ns, w, b, eps)
    seed = randn(*out.shape)
    grads = torch.autograd.grad(out, wanted, seed)
    tensors += [("seed", seed), ("output", out), ("grad_input", grads[0])]
    if affine:
        tensors += [("grad_weight", grads[1]), ("grad_bias", grads[2])]
    emit(name, "ln", {"shape": ",".join(str(s) for s in ns), "eps": repr(eps), "affine": int(affine)}, tensors)


layer_norm_case("ln_last_dim", (4, 6), 1)
layer_norm_case("ln_last_dim_no_affine", (4, 6), 1, affine=False)
layer_norm_case("ln_two_dims", (2, 3, 4, 5), 2)
layer_norm_case("ln_two_dims_no_affine", (3, 4, 5), 2, affine=False)
layer_norm_case("ln_whole_input", (3, 4), 2)  # no leading dims: one row
layer_norm_case("ln_eps", (5, 3), 1, eps=0.1)


# ---------------------------------------------------------------- embedding
def embedding_case(name, num, dim, indices, padding_idx=None, scale_grad_by_freq=False, max_norm=None):
    w = randn(num, dim, std=1.5)
    idx = torch.tensor(indices, dtype=torch.int64)
    tensors = [("weight", w.clone()), ("indices", idx)]
    leaf = w.clone().requires_grad_(True)
    out = F.embedding(idx, leaf, padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq, max_norm=max_norm)
    seed = randn(*out.shape)
    (grad,) = torch.autograd.grad(out, [leaf], seed)
    tensors += [("seed", seed), ("output", out), ("grad_weight", grad)]
    if max_norm is not None:
        tensors.append(("weight_after", leaf))
    emit(name, "emb", {"padding_idx": opt(padding_idx), "scale_grad_by_freq": int(scale_grad_by_freq),
                       "max_norm": opt(max_norm)}, tensors)


embedding_case("emb_1d", 10, 3, [4, 1, 9, 0])
embedding_case("emb_repeats", 10, 3, [[1, 2, 4, 5], [4, 3, 2, 9]])  # rows 2 and 4 sum two gradient rows
embedding_case("emb_padding", 10, 3, [[0, 2, 0, 5], [4, 3, 2, 0]], padding_idx=0)
embedding_case("emb_padding_negative", 6, 4, [[5, 1], [5, 5], [2, 1]], padding_idx=-1)  # row 5
embedding_case("emb_scale_grad_by_freq", 7, 2, [1, 3, 1, 1, 6, 3], scale_grad_by_freq=True)
embedding_case("emb_scale_padding", 7, 2, [[1, 3, 1], [0, 0, 3]], padding_idx=0, scale_grad_by_freq=True)
embedding_case("emb_max_norm", 8, 3, [[1, 2], [6, 1]], max_norm=1.0)
embedding_case("emb_scalar_index", 5, 4, 3)

with open(OUT, "w") as f:
    f.write("# written by scripts/gen_nn_norm_reference.py (torch " + torch.__version__ + "); do not edit\n")
    f.write("\n".join(records) + "\n")
print(f"{len(names)} cases -> {os.path.normpath(OUT)}")
