#!/usr/bin/python3
"""Writes tests/data/nn_loss_reference.txt: the losses of torch.nn.functional
(cross_entropy with class indices and with class probabilities, nll_loss,
mse_loss, l1_loss, binary_cross_entropy_with_logits) over a grid of options
(reductions, class weights, ignore_index, label_smoothing, pos_weight) and
shapes ((C), (N, C), (N, C, d1), (N, C, d1, d2), broadcast targets), with
the output and the gradients PyTorch computes, in float64.
tests/test_nn_loss.cpp calls the same loss with the same options in Tandem
on every device and checks both. Run with Debian's python3-torch (1.13; the
python3 first on PATH has no torch):

    /usr/bin/python3 scripts/gen_nn_loss_reference.py

The output is committed; tests never need torch. Format, one record a line:
    case <name> loss=<ce|nll|mse|l1|bce> reduction=<none|mean|sum>
         ignore_index=<int> label_smoothing=<float> weight=<0|1>
         pos_weight=<0|1> target_grad=<0|1> seed=<0|1>        (one line)
    t <dtype> <ndim> <sizes...> <values...>   input
    t ...                                     target
    t ...                                     weight, when weight=1
    t ...                                     pos_weight, when pos_weight=1
    t ...                                     the gradient seed, when seed=1
    t ...                                     the output
    t ...                                     d(output)/d(input)
    t ...                                     d(output)/d(target), when target_grad=1
An output with dims gets a seed: the gradients are those of sum(output * seed).
Values are printed with repr(), so float64 round-trips exactly. l1 inputs
never equal their targets (|x| is not differentiable at 0).
"""
import os
import sys
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_format import DTYPES, fmt_tensor  # noqa: E402

# The broadcast mse/l1 cases are deliberate.
warnings.filterwarnings("ignore", message="Using a target size")
torch.manual_seed(20240917)
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "nn_loss_reference.txt")
F64 = torch.float64
records = []
names = set()


def randn(*shape):
    return torch.randn(shape, dtype=F64)


def uniform(lo, hi, *shape):
    return torch.rand(shape, dtype=F64) * (hi - lo) + lo


def case(name, loss, input, target, reduction, weight=None, pos_weight=None, ignore_index=-100,
         label_smoothing=0.0):
    assert name not in names, name
    names.add(name)
    target_grad = target.is_floating_point()
    x = input.detach().clone().requires_grad_(True)
    t = target.detach().clone().requires_grad_(target_grad)
    if loss == "ce":
        out = F.cross_entropy(x, t, weight=weight, ignore_index=ignore_index, reduction=reduction,
                              label_smoothing=label_smoothing)
    elif loss == "nll":
        out = F.nll_loss(x, t, weight=weight, ignore_index=ignore_index, reduction=reduction)
    elif loss == "mse":
        out = F.mse_loss(x, t, reduction=reduction)
    elif loss == "l1":
        out = F.l1_loss(x, t, reduction=reduction)
    elif loss == "bce":
        out = F.binary_cross_entropy_with_logits(x, t, weight=weight, pos_weight=pos_weight, reduction=reduction)
    else:
        raise ValueError(loss)
    seed = randn(*out.shape) if out.dim() > 0 else None
    leaves = [x, t] if target_grad else [x]
    grads = torch.autograd.grad(out, leaves, seed)
    records.append(f"case {name} loss={loss} reduction={reduction} ignore_index={ignore_index} "
                   f"label_smoothing={label_smoothing!r} weight={int(weight is not None)} "
                   f"pos_weight={int(pos_weight is not None)} target_grad={int(target_grad)} "
                   f"seed={int(seed is not None)}")
    records.append(fmt_tensor(x))
    records.append(fmt_tensor(t))
    if weight is not None:
        records.append(fmt_tensor(weight))
    if pos_weight is not None:
        records.append(fmt_tensor(pos_weight))
    if seed is not None:
        records.append(fmt_tensor(seed))
    records.append(fmt_tensor(out))
    records.extend(fmt_tensor(g) for g in grads)


REDUCTIONS = ["none", "mean", "sum"]
# name: (input shape, class-index target shape)
CLASS_SHAPES = {
    "C": ((4,), ()),
    "NC": ((5, 4), (5,)),
    "NCd": ((3, 4, 2), (3, 2)),
    "NCdd": ((2, 3, 2, 2), (2, 2, 2)),
}


def class_targets(shape, n_classes, ignore):
    """Class indices of shape; ignore: None (no target ignored), or the
    ignore_index some targets take (about a third of them, never all)."""
    t = torch.randint(0, n_classes, shape, dtype=torch.int64)
    if ignore is not None and t.numel() > 1:
        flat = t.view(-1)
        flat[torch.arange(0, flat.numel(), 3)] = ignore
    return t


# ---- class-index targets: cross_entropy and nll_loss
for loss in ["ce", "nll"]:
    for sname, (ishape, tshape) in CLASS_SHAPES.items():
        n_classes = ishape[0] if len(ishape) == 1 else ishape[1]
        ignores = {"noign": (-100, None)}
        if len(ishape) > 1:
            ignores["ign100"] = (-100, -100)  # the default ignore_index, present
            ignores["ign1"] = (1, 1)  # a real class, ignored
        smoothings = [0.0, 0.2] if loss == "ce" else [0.0]
        for iname, (ignore_index, present) in ignores.items():
            for weighted in [False, True]:
                for ls in smoothings:
                    for reduction in REDUCTIONS:
                        x = randn(*ishape)
                        if loss == "nll":
                            x = x.log_softmax(0 if len(ishape) == 1 else 1)
                        t = class_targets(tshape, n_classes, present)
                        w = uniform(0.5, 2.0, n_classes) if weighted else None
                        name = f"{loss}_{sname}_{iname}_{'w' if weighted else 'nw'}_ls{ls}_{reduction}"
                        case(name, loss, x, t, reduction, weight=w, ignore_index=ignore_index, label_smoothing=ls)

# label_smoothing at its upper end: the target is uniform
for weighted in [False, True]:
    for reduction in REDUCTIONS:
        w = uniform(0.5, 2.0, 4) if weighted else None
        case(f"ce_NC_ls1_{'w' if weighted else 'nw'}_{reduction}", "ce", randn(5, 4),
             class_targets((5,), 4, -100), reduction, weight=w, label_smoothing=1.0)

# every target ignored: the mean is 0/0 = NaN, the gradient 0
for weighted in [False, True]:
    for ls in [0.0, 0.2]:
        for reduction in REDUCTIONS:
            w = uniform(0.5, 2.0, 4) if weighted else None
            case(f"ce_NC_allign_{'w' if weighted else 'nw'}_ls{ls}_{reduction}", "ce", randn(3, 4),
                 torch.full((3,), -100, dtype=torch.int64), reduction, weight=w, label_smoothing=ls)

# an ignored target whose class 0 logit is -inf: still 0, not NaN
for ls in [0.0, 0.2]:
    x = randn(3, 4)
    x[1, 0] = -float("inf")
    case(f"ce_NC_ignored_neginf_ls{ls}_mean", "ce", x, torch.tensor([2, -100, 3]), "mean", label_smoothing=ls)

# an empty batch: mean is NaN, sum 0
for reduction in REDUCTIONS:
    case(f"ce_empty_{reduction}", "ce", randn(0, 4), torch.zeros(0, dtype=torch.int64), reduction)

# ---- class-probability targets
for sname, (ishape, _) in CLASS_SHAPES.items():
    class_dim = 0 if len(ishape) == 1 else 1
    n_classes = ishape[class_dim]
    for weighted in [False, True]:
        for ls in [0.0, 0.3]:
            for reduction in REDUCTIONS:
                x = randn(*ishape)
                t = randn(*ishape).softmax(class_dim)
                w = uniform(0.5, 2.0, n_classes) if weighted else None
                name = f"ceprob_{sname}_{'w' if weighted else 'nw'}_ls{ls}_{reduction}"
                case(name, "ce", x, t, reduction, weight=w, label_smoothing=ls)

# ---- mse_loss and l1_loss: same shapes, broadcast targets, 0-dim
POINTWISE_SHAPES = {"NC": ((5, 4), (5, 4)), "N": ((7,), (7,)), "scalar": ((), ()), "NCd": ((2, 3, 4), (2, 3, 4)),
                    "bcast": ((5, 4), (4,)), "bcastcol": ((3, 1), (3,))}
for loss in ["mse", "l1"]:
    for sname, (ishape, tshape) in POINTWISE_SHAPES.items():
        for reduction in REDUCTIONS:
            case(f"{loss}_{sname}_{reduction}", loss, randn(*ishape), randn(*tshape), reduction)

# ---- binary_cross_entropy_with_logits
BCE_SHAPES = {"NC": (5, 4), "NCd": (3, 2, 2), "N": (6,), "scalar": ()}
for sname, shape in BCE_SHAPES.items():
    last = shape[-1] if shape else 1
    weights = {"nw": None, "wfull": (shape,), "wlast": ((last,) if shape else ())}
    for wname, wshape in weights.items():
        for pname in ["npw", "pw"]:
            for reduction in REDUCTIONS:
                x = randn(*shape) * 3
                t = torch.rand(shape, dtype=F64)
                if t.numel() > 2:
                    t.view(-1)[0] = 0.0  # hard labels too
                    t.view(-1)[1] = 1.0
                w = None if wshape is None else uniform(0.5, 2.0, *(wshape[0] if wname == "wfull" else wshape))
                pw = uniform(0.5, 3.0, *((last,) if shape else ())) if pname == "pw" else None
                case(f"bce_{sname}_{wname}_{pname}_{reduction}", "bce", x, t, reduction, weight=w, pos_weight=pw)

# logits where a naive log(sigmoid(x)) fails, and x = 0 exactly
for pname in ["npw", "pw"]:
    x = torch.tensor([0.0, -800.0, 800.0, -35.0, 35.0, 1e-8], dtype=F64)
    t = torch.tensor([0.3, 1.0, 0.0, 0.5, 0.5, 1.0], dtype=F64)
    pw = uniform(0.5, 3.0, 6) if pname == "pw" else None
    for reduction in REDUCTIONS:
        case(f"bce_extreme_{pname}_{reduction}", "bce", x, t, reduction, pos_weight=pw)

with open(OUT, "w") as f:
    f.write(f"# generated by scripts/gen_nn_loss_reference.py with torch {torch.__version__}; do not edit\n")
    for r in records:
        f.write(r + "\n")
print(f"wrote {len(names)} cases to {os.path.normpath(OUT)}")
