#!/usr/bin/python3
"""Writes tests/data/autograd_reference.txt: composite expressions (an MLP
layer with a cross-entropy, a layer norm, attention, a second derivative, ...),
their inputs, and the outputs and input gradients PyTorch computes for them.
tests/test_autograd_reference.cpp writes each expression again in Tandem, runs
it on every device, and checks the forward value and every gradient. Run with
Debian's python3-torch (1.13; the python3 first on PATH has no torch):

    /usr/bin/python3 scripts/gen_autograd_reference.py

The output is committed; tests never need torch. Format, one record a line:
    case <name> <n_inputs> requires_grad=<0|1,...> seed=<0|1>
    t <dtype> <ndim> <sizes...> <values...>   the inputs, in order
    t ...                                     the gradient seed, when seed=1
    t ...                                     the output
    t ...                                     d(output)/d(input), one line per
                                              input with requires_grad 1
An output with dims gets a seed: the gradients are those of sum(output * seed).
Values are printed with repr(), so float64 and float32 round-trip exactly.
Inputs avoid the points where an expression is not differentiable (ties in a
max, |x| at 0, clamp bounds).
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_format import DTYPES, fmt_tensor  # noqa: E402

torch.manual_seed(20240611)
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "autograd_reference.txt")
F64, F32 = torch.float64, torch.float32
records = []
names = set()


def case(name, fn, inputs, requires_grad):
    """Records fn(*inputs), the seed, and the gradient of each input whose
    requires_grad flag is set. fn must return one floating tensor."""
    assert name not in names, name
    names.add(name)
    assert len(inputs) == len(requires_grad)
    xs = [x.detach().clone().requires_grad_(bool(rg)) for x, rg in zip(inputs, requires_grad)]
    out = fn(*xs)
    seed = None
    if out.dim() > 0:
        seed = randn(tuple(out.shape), out.dtype)
    leaves = [x for x, rg in zip(xs, requires_grad) if rg]
    grads = torch.autograd.grad(out, leaves, seed)
    for x, g in zip(leaves, grads):
        assert g.dtype == x.dtype and g.shape == x.shape
    records.append(f"case {name} {len(inputs)} requires_grad={','.join(str(int(r)) for r in requires_grad)} "
                   f"seed={int(seed is not None)}")
    records.extend(fmt_tensor(x) for x in xs)
    if seed is not None:
        records.append(fmt_tensor(seed))
    records.append(fmt_tensor(out))
    records.extend(fmt_tensor(g) for g in grads)


def randn(shape, dtype=F64):
    return torch.randn(shape, dtype=F64).to(dtype)


def uniform(shape, lo, hi, dtype=F64):
    return (torch.rand(shape, dtype=F64) * (hi - lo) + lo).to(dtype)


def idx(values):
    return torch.tensor(values, dtype=torch.int64)


def away_from(x, points, margin=1e-2):
    """Asserts that no element of x is within margin of a kink in points."""
    for p in points:
        assert (x - p).abs().min() > margin, f"an input is {margin} or closer to the kink at {p}"
    return x


# ---- layers and losses

def mlp_gelu_cross_entropy(x, w, b, target):
    # x: (N, C_in), w: (C_in, C), b: (C,), target: (N,) class ids
    h = torch.nn.functional.gelu(x @ w + b)
    logp = torch.log_softmax(h, 1)
    return -logp.gather(1, target.unsqueeze(1)).mean()


case("mlp_gelu_cross_entropy", mlp_gelu_cross_entropy,
     [randn((4, 5)), randn((5, 6)), randn((6,)), idx([0, 5, 2, 5])], [1, 1, 1, 0])


def cross_entropy_logsumexp(z, target):
    return (torch.logsumexp(z, [1]) - z.gather(1, target.unsqueeze(1)).squeeze(1)).mean()


case("cross_entropy_logsumexp", cross_entropy_logsumexp, [randn((5, 7)), idx([3, 0, 6, 3, 1])], [1, 0])


def layer_norm(x, w, b):
    # x: (B, T, C), normalised over C
    mu = x.mean([-1], keepdim=True)
    var = torch.var(x, [-1], correction=0, keepdim=True)
    return (x - mu) / torch.sqrt(var + 1e-5) * w + b


case("layer_norm", layer_norm, [randn((3, 4, 6)), randn((6,)), randn((6,))], [1, 1, 1])


def attention(q, k, v):
    # q, k, v: (B, H, T, D)
    d = q.shape[-1]
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), -1) @ v


case("attention", attention, [randn((2, 2, 3, 4)), randn((2, 2, 3, 4)), randn((2, 2, 3, 4))], [1, 1, 1])


def attention_causal_f32(q, k, v, mask):
    # q, k, v: (B, T, D); mask: (T, T), true above the diagonal
    scores = torch.bmm(q, k.transpose(1, 2)) * (1.0 / math.sqrt(q.shape[-1]))
    return torch.bmm(torch.softmax(scores.masked_fill(mask, float("-inf")), -1), v)


case("attention_causal_f32", attention_causal_f32,
     [randn((2, 4, 8), F32), randn((2, 4, 8), F32), randn((2, 4, 8), F32),
      torch.ones(4, 4, dtype=torch.bool).triu(1)], [1, 1, 1, 0])


def residual_block(x, w, b, gamma, c):
    # x: (B, T, C); gamma: (1, 1, C) and c: (T, 1) broadcast against it
    return x + gamma * torch.nn.functional.silu(torch.matmul(x, w) + b) + c


case("residual_block", residual_block,
     [randn((2, 3, 4)), randn((4, 4)), randn((4,)), randn((1, 1, 4)), randn((3, 1))], [1, 1, 1, 1, 1])


def mlp_tanh_mse_f32(x, w1, b1, w2, b2, y):
    p = torch.tanh(x.mm(w1) + b1).mm(w2) + b2
    return ((p - y) ** 2).mean()


case("mlp_tanh_mse_f32", mlp_tanh_mse_f32,
     [randn((8, 6), F32), randn((6, 5), F32), randn((5,), F32), randn((5, 3), F32), randn((3,), F32),
      randn((8, 3), F32)], [1, 1, 1, 1, 1, 0])


def huber_clamp_where_loss(pred, target):
    d = pred - target
    a = d.abs()
    huber = torch.where(a < 1, 0.5 * d * d, a - 0.5)
    clipped = torch.clamp(pred, -0.5, 0.8)
    return huber.mean() + 0.1 * (clipped ** 2).sum() + torch.maximum(pred, target).sum() * 0.01 + \
        pred.clamp(min=0.25).sum() * 0.2


pred, target = randn((6, 3)), randn((6, 3))
away_from((pred - target).abs(), [0, 1])
away_from(pred, [-0.5, 0.8, 0.25])
away_from(pred - target, [0])
case("huber_clamp_where_loss", huber_clamp_where_loss, [pred, target], [1, 0])


def regularizer_lse_norm_std(w):
    return (torch.logsumexp(w, [0, 1]) + 0.1 * torch.linalg.vector_norm(w, 2) +
            0.05 * torch.linalg.vector_norm(w, 1, [1]).sum() + 0.5 * w.std([0]).sum() + w.var([1]).mean() +
            torch.linalg.vector_norm(w, 3, [0], keepdim=True).sum())


case("regularizer_lse_norm_std", regularizer_lse_norm_std, [away_from(randn((4, 5)), [0])], [1])


def l2_normalize_cosine(a, b):
    an = a / torch.linalg.vector_norm(a, 2, [1], keepdim=True)
    bn = b / torch.linalg.vector_norm(b, 2, [1], keepdim=True)
    return (an * bn).sum(1)


case("l2_normalize_cosine", l2_normalize_cosine, [randn((4, 6)), randn((4, 6))], [1, 1])


def masked_softmax(x, mask):
    # mask true = left out; every row keeps at least one entry
    return torch.softmax(x.masked_fill(mask, -1e9), -1) + torch.where(mask, 0.0, x).sum(1, keepdim=True) * 0.1


case("masked_softmax", masked_softmax,
     [randn((3, 5)), torch.tensor([[0, 1, 0, 0, 1], [1, 1, 0, 1, 1], [0, 0, 0, 0, 0]], dtype=torch.bool)],
     [1, 0])


def activations(x):
    g = torch.nn.functional.gelu(x, approximate="tanh")
    return g * torch.sigmoid(x) + torch.nn.functional.silu(x) / (1 + x * x) + torch.log1p(torch.exp(x)) - \
        torch.erf(x) * torch.relu(x)


case("activations", activations, [away_from(randn((2, 5)), [0])], [1])


# ---- reductions

def var_std_multi_dim(x):
    return x.var([0, 2], keepdim=True) * x.std([1]).unsqueeze(1) + x.mean([0, 1])


case("var_std_multi_dim", var_std_multi_dim, [randn((3, 4, 5))], [1])


def prod_max_amax(x):
    # x: (3, 4, 5), values in [0.5, 1.5] without ties
    return (x.prod(1).sum() + x.max(2)[0].exp().sum() + (x.amax([0, 2]) ** 2).sum() + x.max() +
            x.min(0, keepdim=True)[0].sum() * 0.5 + x.amin([1]).sum() * 0.25)


x = uniform((3, 4, 5), 0.5, 1.5)
assert x.unique().numel() == x.numel(), "ties in a max"
case("prod_max_amax", prod_max_amax, [x], [1])


def pow_erf_maximum(a, b):
    # a: (3, 4) positive, b: (4,) broadcast
    return torch.pow(a, b) + torch.erf(a * b) + torch.maximum(a, b) - torch.minimum(a, b) * 0.5 + \
        a.pow(2.5) + a.rsqrt()


a, b = uniform((3, 4), 0.5, 2.0), uniform((4,), 0.3, 1.8)
away_from(a - b, [0])
case("pow_erf_maximum", pow_erf_maximum, [a, b], [1, 1])


# ---- views, joins and indexing

def views_chain(x, s):
    # x: (2, 3, 4), s: (2, 1, 1)
    y = x.permute(2, 0, 1).reshape(4, 6).t()  # (6, 4), not contiguous
    z = y[1:6:2].narrow(1, 1, 2)  # (3, 2)
    u = z.unsqueeze(0).expand(2, 3, 2) * s  # (2, 3, 2)
    w = x.contiguous().view(6, 4).transpose(0, 1).select(1, 2)  # (4,)
    f = x.flatten(1).squeeze()  # (2, 12)
    return torch.cat([u.reshape(2, 6).sin(), f[:, ::2] * w.sum(), x.unsqueeze(2).select(3, 3).squeeze(2)], 1)


case("views_chain", views_chain, [randn((2, 3, 4)), randn((2, 1, 1))], [1, 1])


def cat_split_stack_chunk(a, b, c):
    x = torch.cat([a, b], 1)  # (2, 8)
    p = x.split([3, 3, 2], 1)
    q = x.chunk(2, 1)  # (2, 4) each
    r = x.split(3, 1)  # (2, 3), (2, 3), (2, 2)
    s = torch.stack([p[0] * p[1], q[1][:, :3].exp(), r[1].tanh()], 0)  # (3, 2, 3); x[:, 7] unused
    return torch.cat([s.reshape(-1), c.tanh(), torch.stack([c, c * c], 1).reshape(-1)], 0)


case("cat_split_stack_chunk", cat_split_stack_chunk, [randn((2, 3)), randn((2, 5)), randn((4,))], [1, 1, 1])


def embedding_lookup(table, ids, cols):
    # table: (V, E); ids: (N,) with repeats; cols: (N, 2) with repeats
    e = table.index_select(0, ids)  # (N, E)
    g = e.gather(1, cols)  # (N, 2)
    return (g ** 2).sum(1) + torch.sigmoid(e).sum(1) + table.index_select(1, idx([3, 0, 3])).sum()


case("embedding_lookup", embedding_lookup,
     [randn((6, 4)), idx([1, 3, 1, 5, 1]), idx([[0, 3], [2, 2], [1, 3], [3, 0], [0, 0]])], [1, 0, 0])


def scatter_add_bag(base, src, bag):
    # base: (B, E), src: (N, E), bag: (N,) which row of base each src row joins
    index = bag.unsqueeze(1).expand(src.shape[0], src.shape[1])
    return torch.scatter_add(base, 0, index, src).tanh()


case("scatter_add_bag", scatter_add_bag, [randn((3, 4)), randn((5, 4)), idx([0, 2, 0, 1, 2])], [1, 1, 0])


def matmul_forms(a, b, c, d, v):
    # a: (2, 3, 4), b: (4, 5), c: (5,), d: (2, 5, 3), v: (4,)
    r1 = torch.matmul(a, b)  # (2, 3, 5)
    r2 = torch.matmul(r1, c)  # (2, 3)
    r3 = torch.bmm(r1, d)  # (2, 3, 3)
    r4 = a[0].mm(b)  # (3, 5)
    r5 = torch.matmul(v, a.transpose(1, 2))  # (2, 3)
    return r2.sum() + (r3 * r3).mean() + r4.tanh().sum() + (r5 * r2).sum()


case("matmul_forms", matmul_forms,
     [randn((2, 3, 4)), randn((4, 5)), randn((5,)), randn((2, 5, 3)), randn((4,))], [1, 1, 1, 1, 1])


def dtype_roundtrip_f32(x, w):
    # x: float32 (3, 4), w: float64 (4,); computed in float64, returned in float32
    return (x.to(F64) * w).tanh().sum(1).to(F32) * x[:, 0]


case("dtype_roundtrip_f32", dtype_roundtrip_f32, [randn((3, 4), F32), randn((4,))], [1, 1])


# ---- second derivatives: d/dx of (dy/dx . v), through autograd.grad(create_graph=True)

def second_order_elementwise(x, v):
    y = (x.sin() * x.exp() + 0.1 * x.pow(3) + x.tanh() + torch.sigmoid(x) * x).sum()
    (g,) = torch.autograd.grad(y, [x], create_graph=True)
    return (g * v).sum()


case("second_order_elementwise", second_order_elementwise, [randn((5,)), randn((5,))], [1, 1])


def second_order_softmax_matmul(x, w, v):
    z = x.mm(w)
    y = (torch.logsumexp(z, [1]) + torch.nn.functional.gelu(x).sum(1) * 0.5 + torch.softmax(z, 1)[:, 0]).sum()
    (g,) = torch.autograd.grad(y, [x], create_graph=True)
    return (g * v).sum()


case("second_order_softmax_matmul", second_order_softmax_matmul, [randn((3, 4)), randn((4, 5)), randn((3, 4))],
     [1, 1, 0])


def second_order_norm_views(x, v):
    # x: (3, 4)
    t = x.t().reshape(2, 6)
    y = (torch.linalg.vector_norm(t, 2, [1]).sum() + t.var([1]).sum() +
         t.index_select(1, idx([0, 5, 0])).pow(3).sum() + x.prod(1).sum())
    (g,) = torch.autograd.grad(y, [x], create_graph=True)
    return (g * v).sum()


case("second_order_norm_views", second_order_norm_views, [uniform((3, 4), 0.5, 1.5), randn((3, 4))], [1, 1])



# ---- the parameterised activations (last, so that the cases above keep
# their random draws): first derivatives, and a second through each.
def activations_with_params(x):
    F = torch.nn.functional
    return (F.leaky_relu(x, 0.2) * 1.5 + torch._C._nn.elu(x, 0.7, 1.5, 2.0) * x +
            F.softplus(x, 2.0, 3.0) * F.softplus(-x))


case("activations_with_params", activations_with_params, [uniform((3, 4), -3.0, 3.0)], [1])


def second_order_activations_with_params(x, v):
    F = torch.nn.functional
    y = (F.leaky_relu(x, 0.2) * x + F.elu(x, 0.7) * torch._C._nn.elu(x, 1.0, 1.5, 2.0) +
         F.softplus(x, 2.0, 3.0) * F.softplus(x)).sum()
    (g,) = torch.autograd.grad(y, [x], create_graph=True)
    return (g * v).sum()


case("second_order_activations_with_params", second_order_activations_with_params,
     [uniform((3, 4), -3.0, 3.0), randn((3, 4))], [1, 1])

os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w") as f:
    f.write(f"# generated by scripts/gen_autograd_reference.py with torch {torch.__version__}; do not edit\n")
    f.write("\n".join(records) + "\n")
print(f"wrote {len(names)} cases to {os.path.normpath(OUT)}")
