#!/usr/bin/python3
"""Writes tests/data/optim_reference.txt: what PyTorch's optimizers, learning
rate schedulers and clip_grad_norm_ do, for tests/test_optim.cpp and
tests/test_optim_scheduler.cpp. Run with Debian's python3-torch (1.13; the
python3 first on PATH has no torch):

    /usr/bin/python3 scripts/gen_optim_reference.py

The output is committed; tests never need torch. Values are printed with
repr(), so float64 and float32 round-trip exactly. Format, one record a line:

  Optimizer trajectories (SGD, Adam, AdamW; default single-tensor path):
    case <name> optimizer=<sgd|adam|adamw> dtype=<float64|float32> steps=<K>
         sizes=<n0,n1,...> g<i>.<option>=<value> ...
      sizes: how many parameters each group has; options by the keys of
      Tandem's state dicts (lr, momentum, ..., beta1, beta2, ...; booleans 0/1)
    t ...            each parameter's initial value, in order over the groups
    then per step:   each parameter's gradient ("t ..." or "none": no
                     gradient, the parameter is skipped), then each
                     parameter's value after optimizer.step()
    state <n>        then n pairs: "s <param index> <key>" and its tensor
                     (the optimizer's state after the last step)

  clip_grad_norm_:
    clip <name> max_norm=<v> norm_type=<v> n=<count>
    t ...            each gradient before
    t ...            the returned total norm
    t ...            each gradient after

  Schedulers (on SGD with momentum, or Adam for cycling beta1):
    sched <name> <kind> optimizer=<sgd|adam> lrs=<lr0,...> steps=<N> <key=value ...>
      kind: StepLR, MultiStepLR, CosineAnnealingLR, LinearLR, OneCycleLR, or
      LinearLR+CosineAnnealingLR (both built on one optimizer, stepped in turn)
    v <lr per group> <momentum or beta1 per group>   after construction, then
                                                     after each of N steps
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_format import DTYPES, fmt_tensor  # noqa: E402

torch.manual_seed(20261130)
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "optim_reference.txt")
records = []
names = set()


def fmt(v):
    if isinstance(v, bool):
        return str(int(v))
    return repr(float(v)) if isinstance(v, float) else str(v)


# ---------------------------------------------------------------- optimizers

SHAPES = [(3, 4), (5,), (2, 3, 2), (1,)]


def group_options(kind, opts):
    """Tandem's flat option dict of one group (every key present)."""
    if kind == "sgd":
        full = dict(lr=opts["lr"], momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False)
    else:
        full = dict(lr=opts.get("lr", 1e-3), beta1=0.9, beta2=0.999, eps=1e-8,
                    weight_decay=(1e-2 if kind == "adamw" else 0.0), amsgrad=False, maximize=False)
    full.update(opts)
    return full


def torch_group(kind, opts):
    g = dict(opts)
    if kind != "sgd":
        g["betas"] = (g.pop("beta1"), g.pop("beta2"))
    return g


def optim_case(name, kind, dtype, groups, steps=4, skip=()):
    """groups: list of (n_params, options); skip: (step, param) pairs with no gradient."""
    assert name not in names, name
    names.add(name)
    full = [group_options(kind, o) for _, o in groups]
    sizes = [n for n, _ in groups]
    shapes = [SHAPES[i % len(SHAPES)] for i in range(sum(sizes))]
    params = [torch.randn(s, dtype=torch.float64).to(dtype).requires_grad_() for s in shapes]
    pg, k = [], 0
    for (n, _), o in zip(groups, full):
        pg.append(dict(params=params[k:k + n], **torch_group(kind, o)))
        k += n
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[kind]
    opt = cls(pg, lr=full[0]["lr"])
    head = f"case {name} optimizer={kind} dtype={DTYPES[dtype]} steps={steps} sizes={','.join(map(str, sizes))}"
    for i, o in enumerate(full):
        head += "".join(f" g{i}.{key}={fmt(v)}" for key, v in o.items())
    records.append(head)
    records.extend(fmt_tensor(p) for p in params)
    for step in range(steps):
        for i, p in enumerate(params):
            if (step, i) in skip:
                p.grad = None
                records.append("none")
            else:
                scale = 0.5 + i
                p.grad = (torch.randn(p.shape, dtype=torch.float64) * scale).to(dtype)
                records.append(fmt_tensor(p.grad))
        opt.step()
        records.extend(fmt_tensor(p) for p in params)
    state = []
    for i, p in enumerate(params):
        for key, v in opt.state[p].items():
            if v is None:
                continue
            if key == "step":
                assert v.dtype == torch.float32 and v.dim() == 0 and v.device.type == "cpu"
            state.append((i, key, v))
    records.append(f"state {len(state)}")
    for i, key, v in state:
        records.append(f"s {i} {key}")
        records.append(fmt_tensor(v))


for dt in (torch.float64, torch.float32):
    d = "f64" if dt == torch.float64 else "f32"
    optim_case(f"sgd_plain_{d}", "sgd", dt, [(3, dict(lr=0.1))])
    optim_case(f"sgd_momentum_{d}", "sgd", dt, [(3, dict(lr=0.05, momentum=0.9))])
    optim_case(f"sgd_dampening_{d}", "sgd", dt, [(3, dict(lr=0.05, momentum=0.8, dampening=0.5, weight_decay=0.01))])
    optim_case(f"sgd_nesterov_{d}", "sgd", dt, [(3, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4))])
    optim_case(f"sgd_maximize_{d}", "sgd", dt, [(2, dict(lr=0.1, momentum=0.5, maximize=True, weight_decay=0.1))])
    optim_case(f"sgd_groups_{d}", "sgd", dt, [(2, dict(lr=0.1, momentum=0.9)),
                                              (2, dict(lr=0.01, momentum=0.5, nesterov=True, weight_decay=0.1))])
    optim_case(f"sgd_skip_{d}", "sgd", dt, [(3, dict(lr=0.1, momentum=0.9))], skip={(0, 1), (2, 2)})
    optim_case(f"adam_default_{d}", "adam", dt, [(3, dict(lr=1e-3))])
    optim_case(f"adam_options_{d}", "adam", dt, [(3, dict(lr=0.01, beta1=0.8, beta2=0.99, eps=1e-6,
                                                          weight_decay=0.1))])
    optim_case(f"adam_amsgrad_{d}", "adam", dt, [(3, dict(lr=0.01, amsgrad=True))], steps=6)
    optim_case(f"adam_maximize_{d}", "adam", dt, [(2, dict(lr=0.01, maximize=True, weight_decay=0.05))])
    optim_case(f"adam_groups_{d}", "adam", dt, [(2, dict(lr=0.01)), (2, dict(lr=0.001, beta1=0.5, amsgrad=True))])
    optim_case(f"adam_skip_{d}", "adam", dt, [(3, dict(lr=0.01))], steps=5, skip={(0, 0), (1, 2), (3, 0)})
    optim_case(f"adamw_default_{d}", "adamw", dt, [(3, dict(lr=1e-3))])
    optim_case(f"adamw_amsgrad_{d}", "adamw", dt, [(3, dict(lr=0.01, weight_decay=0.1, amsgrad=True))], steps=6)
    optim_case(f"adamw_groups_{d}", "adamw", dt, [(2, dict(lr=0.01, weight_decay=0.0)),
                                                  (1, dict(lr=0.02, beta2=0.9, maximize=True))])
    optim_case(f"sgd_weight_decay_{d}", "sgd", dt, [(2, dict(lr=0.1, weight_decay=0.5))])
    optim_case(f"adam_weight_decay_amsgrad_{d}", "adam", dt, [(2, dict(lr=0.02, weight_decay=0.2, amsgrad=True))],
               steps=5)


# ---------------------------------------------------------------- clip_grad_norm_

def clip_case(name, grads, max_norm, norm_type):
    assert name not in names, name
    names.add(name)
    params = [torch.zeros(g.shape, dtype=g.dtype, requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
    records.append(f"clip {name} max_norm={fmt(max_norm)} norm_type={fmt(norm_type)} n={len(grads)}")
    records.extend(fmt_tensor(g) for g in grads)
    records.append(fmt_tensor(total))
    records.extend(fmt_tensor(p.grad) for p in params)


def grads(dtype):
    return [torch.randn(s, dtype=torch.float64).to(dtype) for s in [(4, 3), (7,), (2, 2, 3)]]


for dt, d in ((torch.float64, "f64"), (torch.float32, "f32")):
    clip_case(f"clip_l2_{d}", grads(dt), 1.0, 2.0)
    clip_case(f"clip_l1_{d}", grads(dt), 2.0, 1.0)
    clip_case(f"clip_inf_{d}", grads(dt), 0.5, math.inf)
    clip_case(f"clip_p3_{d}", grads(dt), 0.75, 3.5)
    clip_case(f"clip_unclipped_{d}", grads(dt), 100.0, 2.0)
clip_case("clip_single_inf_f64", grads(torch.float64)[:1], 0.1, math.inf)


# ---------------------------------------------------------------- schedulers

def sched_case(name, kind, optimizer, lrs, steps, **kw):
    assert name not in names, name
    names.add(name)
    params = [torch.zeros(2, requires_grad=True) for _ in lrs]
    groups = [dict(params=[p], lr=lr) for p, lr in zip(params, lrs)]
    if optimizer == "sgd":
        opt = torch.optim.SGD(groups, lr=lrs[0], momentum=0.9)
    else:
        opt = torch.optim.Adam(groups, lr=lrs[0])
    S = torch.optim.lr_scheduler
    if kind == "StepLR":
        scheds = [S.StepLR(opt, kw["step_size"], kw["gamma"])]
    elif kind == "MultiStepLR":
        scheds = [S.MultiStepLR(opt, kw["milestones"], kw["gamma"])]
    elif kind == "CosineAnnealingLR":
        scheds = [S.CosineAnnealingLR(opt, kw["T_max"], kw["eta_min"])]
    elif kind == "LinearLR":
        scheds = [S.LinearLR(opt, kw["start_factor"], kw["end_factor"], kw["total_iters"])]
    elif kind == "OneCycleLR":
        scheds = [S.OneCycleLR(opt, **kw)]
    elif kind == "LinearLR+CosineAnnealingLR":
        scheds = [S.LinearLR(opt, kw["start_factor"], 1.0, kw["total_iters"]),
                  S.CosineAnnealingLR(opt, kw["T_max"], kw["eta_min"])]
    else:
        raise ValueError(kind)

    def row():
        lr = [g["lr"] for g in opt.param_groups]
        mom = [g["betas"][0] if optimizer == "adam" else g["momentum"] for g in opt.param_groups]
        return "v " + " ".join(repr(float(v)) for v in lr + mom)

    args = " ".join(f"{k}={','.join(map(fmt, v)) if isinstance(v, list) else fmt(v)}" for k, v in kw.items())
    records.append(f"sched {name} {kind} optimizer={optimizer} lrs={','.join(map(fmt, lrs))} steps={steps} {args}")
    records.append(row())
    for _ in range(steps):
        opt.step()
        for s in scheds:
            s.step()
        records.append(row())


sched_case("step", "StepLR", "sgd", [0.1, 0.03], 12, step_size=3, gamma=0.5)
sched_case("multistep", "MultiStepLR", "sgd", [0.1], 12, milestones=[2, 5, 5, 9], gamma=0.1)
sched_case("cosine", "CosineAnnealingLR", "sgd", [0.1, 0.05], 25, T_max=10, eta_min=0.001)
sched_case("linear_warmup", "LinearLR", "sgd", [0.1], 8, start_factor=0.25, end_factor=1.0, total_iters=4)
sched_case("linear_decay", "LinearLR", "adam", [0.01, 0.02], 6, start_factor=1.0, end_factor=0.1, total_iters=5)
sched_case("onecycle_cos", "OneCycleLR", "sgd", [0.1], 20, max_lr=0.1, total_steps=20)
sched_case("onecycle_linear_three_phase", "OneCycleLR", "adam", [0.01, 0.01], 16, max_lr=[0.1, 0.05],
           total_steps=16, pct_start=0.25, anneal_strategy="linear", div_factor=10.0, final_div_factor=100.0,
           three_phase=True)
sched_case("onecycle_epochs_no_momentum", "OneCycleLR", "sgd", [0.1], 12, max_lr=0.2, epochs=3, steps_per_epoch=4,
           cycle_momentum=False)
sched_case("onecycle_momentum_bounds", "OneCycleLR", "sgd", [0.1], 10, max_lr=0.3, total_steps=10, pct_start=0.4,
           base_momentum=0.7, max_momentum=0.9)
sched_case("warmup_then_cosine", "LinearLR+CosineAnnealingLR", "sgd", [0.1], 12, start_factor=0.5,
           total_iters=3, T_max=6, eta_min=0.0)

with open(OUT, "w") as f:
    f.write(f"# generated by scripts/gen_optim_reference.py with torch {torch.__version__}; do not edit\n")
    f.write("\n".join(records) + "\n")
print(f"{len(names)} cases -> {os.path.normpath(OUT)}")
