#!/usr/bin/python3
"""Writes tests/data/reference.txt: inputs and PyTorch's outputs for the ops
that tests/test_reference.cpp checks. Run with Debian's python3-torch:

    /usr/bin/python3 scripts/gen_reference.py

The output is committed; tests never need torch. Format, one record a line:
    case <name> <op> <n_inputs> <n_outputs> [key=value ...]
    t <dtype> <ndim> <sizes...> <values...>   (inputs, then outputs)
Values are printed with repr(), so float64 round-trips exactly.
"""
import os
import torch

torch.manual_seed(1234)
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "reference.txt")

DTYPES = {
    torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
    torch.bfloat16: "bfloat16", torch.int64: "int64", torch.int32: "int32",
    torch.uint8: "uint8", torch.bool: "bool",
}
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
records = []


def fmt_tensor(t):
    t = t.detach().contiguous()
    vals = t.reshape(-1).tolist() if t.dtype != torch.bool else [int(v) for v in t.reshape(-1).tolist()]
    sizes = list(t.shape)
    return " ".join(["t", DTYPES[t.dtype], str(len(sizes))] + [str(s) for s in sizes] + [repr(float(v)) if isinstance(v, float) else str(v) for v in vals])


def case(name, op, inputs, outputs, **attrs):
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    head = f"case {name} {op} {len(inputs)} {len(outputs)}"
    for k, v in attrs.items():
        if isinstance(v, (list, tuple)):
            v = ",".join(str(x) for x in v) if v else "none"
        head += f" {k}={v}"
    records.append(head)
    records.extend(fmt_tensor(t) for t in inputs)
    records.extend(fmt_tensor(t) for t in outputs)


def ref(f, *xs):
    """f(*xs) in torch; where torch's CPU lacks a float16/bfloat16 kernel,
    f in float32 rounded to the input dtype (what torch's CUDA kernels do)."""
    try:
        return f(*xs)
    except RuntimeError:
        dt = next(x.dtype for x in xs if x.dtype in (torch.float16, torch.bfloat16))
        r = f(*[x.float() if x.dtype == dt else x for x in xs])
        if isinstance(r, tuple):  # (values, indices)
            return r[0].to(dt), r[1]
        return r.to(dt) if r.dtype == torch.float32 else r


def rand(shape, dtype, lo=-2.0, hi=2.0):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype in (torch.int64, torch.int32):
        return torch.randint(-5, 6, shape, dtype=dtype)
    if dtype == torch.uint8:
        return torch.randint(0, 11, shape, dtype=dtype)
    return (torch.rand(shape, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


# ---- unary ops: float dtypes, and an integer input where torch promotes
UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "log1p": torch.log1p,
    "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh,
    "sigmoid": torch.sigmoid, "relu": torch.relu, "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
}
POSITIVE = {"log", "sqrt", "rsqrt", "log1p"}
for name, f in UNARY.items():
    for dt in FLOATS:
        x = rand((3, 4), dt, 0.1 if name in POSITIVE else -3.0, 3.0)
        case(f"{name}_{DTYPES[dt]}", name, [x], ref(f, x))
    if name not in ("silu", "gelu", "gelu_tanh"):
        xi = rand((2, 3), torch.int64).abs() + (1 if name in POSITIVE else 0)
        case(f"{name}_int64", name, [xi], f(xi))

for dt in FLOATS + [torch.int64]:
    x = rand((2, 5), dt, 0.5, 2.0) if dt != torch.int64 else torch.randint(0, 5, (2, 5))
    for e in ([2, 3, 0.5, -1.5, 0] if dt != torch.int64 else [2, 3, 0, 1.5]):
        case(f"pow_scalar_{DTYPES[dt]}_{e}", "pow_scalar", [x], ref(lambda t: torch.pow(t, e), x), exponent=e)

# ---- binary ops with broadcasting and promotion
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum,
    "minimum": torch.minimum, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le,
    "gt": torch.gt, "ge": torch.ge, "pow": torch.pow,
}
for name, f in BINARY.items():
    for dt in FLOATS + [torch.int64, torch.int32]:
        a = rand((2, 1, 3), dt, 0.5, 2.0)
        b = rand((4, 1), dt, 0.5, 2.0)
        if name == "pow" and dt in (torch.int64, torch.int32):
            a, b = a.abs(), b.abs()
        case(f"{name}_{DTYPES[dt]}_bcast", name, [a, b], ref(f, a, b))
    pairs = [(torch.int32, torch.float16), (torch.uint8, torch.int64), (torch.bool, torch.float32),
             (torch.float16, torch.bfloat16), (torch.int64, torch.float64), (torch.bool, torch.int32)]
    for da, db in pairs:
        if name == "sub" and torch.bool in (da, db):
            continue
        a = rand((3,), da, 0.5, 2.0)
        b = rand((2, 3), db, 0.5, 2.0)
        if name == "pow":
            a, b = a.abs() if da != torch.bool else a, b.abs() if db != torch.bool else b
        case(f"{name}_{DTYPES[da]}_{DTYPES[db]}", name, [a, b], ref(f, a, b))
    # 0-dim tensors rank below dimensioned ones in promotion
    a = rand((2, 2), torch.int32, 0.5, 2.0).abs()
    z = torch.tensor(1.5, dtype=torch.float64)
    case(f"{name}_int32_zerodim_float64", name, [a, z], f(a, z))
    a16 = rand((3,), torch.float16, 0.5, 2.0)
    z32 = torch.tensor(2.0, dtype=torch.float32)
    case(f"{name}_float16_zerodim_float32", name, [a16, z32], ref(f, a16, z32))

a, b = rand((2, 3), torch.float32), rand((2, 3), torch.float32)
case("add_alpha_float32", "add", [a, b], torch.add(a, b, alpha=2.5), alpha=2.5)
case("sub_alpha_float64", "sub", [a.double(), b.double()], torch.sub(a.double(), b.double(), alpha=-3), alpha=-3)

# ---- where, clamp, masked_fill
c = torch.rand(2, 1, 4) > 0.5
for dt in FLOATS + [torch.int64]:
    a, b = rand((3, 1), dt), rand((4,), dt)
    case(f"where_{DTYPES[dt]}", "where", [c, a, b], ref(lambda a, b: torch.where(c, a, b), a, b))
    x = rand((3, 5), dt, -3, 3)
    case(f"clamp_{DTYPES[dt]}", "clamp", [x], ref(lambda t: torch.clamp(t, -1, 2), x), min=-1, max=2)
    case(f"clamp_min_{DTYPES[dt]}", "clamp", [x], ref(lambda t: torch.clamp(t, min=0.5), x), min=0.5)
    m = torch.rand(1, 5) > 0.5
    case(f"masked_fill_{DTYPES[dt]}", "masked_fill", [x, m], ref(lambda t: t.masked_fill(m, 7), x), value=7)

# ---- reductions
for dt in FLOATS:
    x = rand((3, 4, 5), dt)
    for dims, keep in [((), False), ((1,), False), ((0, 2), True), ((-1,), True)]:
        tag = "_".join(str(d) for d in dims) or "all"
        case(f"sum_{DTYPES[dt]}_{tag}_{int(keep)}", "sum", [x], ref(lambda t: t.sum(dim=dims, keepdim=keep) if dims else t.sum(), x), dims=dims, keepdim=int(keep))
        case(f"mean_{DTYPES[dt]}_{tag}_{int(keep)}", "mean", [x], ref(lambda t: t.mean(dim=dims, keepdim=keep) if dims else t.mean(), x), dims=dims, keepdim=int(keep))
        case(f"amax_{DTYPES[dt]}_{tag}_{int(keep)}", "amax", [x], ref(lambda t: t.amax(dim=dims, keepdim=keep), x), dims=dims, keepdim=int(keep))
        case(f"amin_{DTYPES[dt]}_{tag}_{int(keep)}", "amin", [x], ref(lambda t: t.amin(dim=dims, keepdim=keep), x), dims=dims, keepdim=int(keep))
        if dt in (torch.float32, torch.float64):
            case(f"var_{DTYPES[dt]}_{tag}_{int(keep)}", "var", [x], x.var(dim=dims if dims else None, keepdim=keep), dims=dims, keepdim=int(keep))
            case(f"std_{DTYPES[dt]}_{tag}_{int(keep)}", "std", [x], x.std(dim=dims if dims else None, keepdim=keep), dims=dims, keepdim=int(keep))
            case(f"logsumexp_{DTYPES[dt]}_{tag}_{int(keep)}", "logsumexp", [x], torch.logsumexp(x, dim=dims if dims else (0, 1, 2), keepdim=keep), dims=dims if dims else (0, 1, 2), keepdim=int(keep))
            for p in (1, 2, 3):
                case(f"norm{p}_{DTYPES[dt]}_{tag}_{int(keep)}", "norm", [x], torch.linalg.vector_norm(x, ord=p, dim=dims if dims else None, keepdim=keep), p=p, dims=dims, keepdim=int(keep))
    for d in (0, 1, -1):
        v, i = ref(lambda t: t.max(dim=d), x)
        case(f"max_dim_{DTYPES[dt]}_{d}", "max_dim", [x], [v, i], dim=d)
        v, i = ref(lambda t: t.min(dim=d, keepdim=True), x)
        case(f"min_dim_{DTYPES[dt]}_{d}", "min_dim", [x], [v, i], dim=d, keepdim=1)
        case(f"argmax_{DTYPES[dt]}_{d}", "argmax", [x], ref(lambda t: t.argmax(dim=d), x), dim=d)
        case(f"argmin_{DTYPES[dt]}_{d}", "argmin", [x], ref(lambda t: t.argmin(dim=d), x), dim=d)
        case(f"softmax_{DTYPES[dt]}_{d}", "softmax", [x], ref(lambda t: torch.softmax(t, d), x), dim=d)
        case(f"log_softmax_{DTYPES[dt]}_{d}", "log_softmax", [x], ref(lambda t: torch.log_softmax(t, d), x), dim=d)
    xp = rand((2, 3), dt, 0.5, 1.5)
    case(f"prod_{DTYPES[dt]}_1", "prod", [xp], ref(lambda t: t.prod(dim=1), xp), dim=1)
for dt in (torch.int64, torch.int32, torch.uint8, torch.bool):
    x = rand((3, 4), dt)
    case(f"sum_{DTYPES[dt]}_1_0", "sum", [x], x.sum(dim=1), dims=(1,), keepdim=0)
    case(f"sum_{DTYPES[dt]}_all_0", "sum", [x], x.sum(), dims=(), keepdim=0)
    if dt != torch.bool:
        case(f"amax_{DTYPES[dt]}_0_0", "amax", [x], x.amax(dim=0), dims=(0,), keepdim=0)
        case(f"argmax_{DTYPES[dt]}_1", "argmax", [x], x.argmax(dim=1), dim=1)

# ---- matmul in all its forms
for dt in [torch.float32, torch.float64, torch.int64]:
    shapes = [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((3, 4), (4, 5)), ((2, 3, 4), (4, 5)),
              ((2, 1, 3, 4), (5, 4, 2)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,))]
    for sa, sb in shapes:
        a, b = rand(sa, dt), rand(sb, dt)
        tag = "x".join(map(str, sa)) + "_" + "x".join(map(str, sb))
        case(f"matmul_{DTYPES[dt]}_{tag}", "matmul", [a, b], torch.matmul(a, b))

# ---- cat, stack, indexing
for dt in (torch.float32, torch.int64):
    a, b = rand((2, 3), dt), rand((2, 5), dt)
    case(f"cat_{DTYPES[dt]}", "cat", [a, b], torch.cat([a, b], 1), dim=1)
    a, b = rand((2, 3), dt), rand((2, 3), dt)
    case(f"stack_{DTYPES[dt]}", "stack", [a, b], torch.stack([a, b], 1), dim=1)
a, b = rand((2, 3), torch.int32), rand((1, 3), torch.float16)
case("cat_promote", "cat", [a, b], torch.cat([a, b], 0), dim=0)
x = rand((3, 4), torch.float32)
idx = torch.randint(0, 4, (3, 2))
case("gather_1", "gather", [x, idx], torch.gather(x, 1, idx), dim=1)
idx0 = torch.randint(0, 3, (2, 4))
case("gather_0", "gather", [x, idx0], torch.gather(x, 0, idx0), dim=0)
src = rand((2, 4), torch.float32)
case("scatter_add_0", "scatter_add", [x, idx0, src], x.scatter_add(0, idx0, src), dim=0)
sel = torch.tensor([2, 0, 2])
case("index_select_0", "index_select", [x, sel], x.index_select(0, sel), dim=0)
case("index_select_1", "index_select", [x, sel], x.index_select(1, sel), dim=1)
lab = torch.tensor([[0, 3], [2, 1]])
case("one_hot", "one_hot", [lab], torch.nn.functional.one_hot(lab, 5), num_classes=5)

# ---- activations with parameters (last, so that the cases above keep their
# random draws). Inputs in [-3, 3] include exact zeros; softplus with
# beta * x above the threshold on some elements.
F = torch.nn.functional
for dt in FLOATS:
    x = rand((3, 4), dt, -3.0, 3.0)
    x.view(-1)[0] = 0
    for slope in (0.01, 0.2, -0.5):
        case(f"leaky_relu_{DTYPES[dt]}_{slope}", "leaky_relu", [x], ref(lambda t: F.leaky_relu(t, slope), x),
             negative_slope=slope)
    for alpha, scale, input_scale in ((1.0, 1.0, 1.0), (0.7, 1.5, 2.0)):
        case(f"elu_{DTYPES[dt]}_{alpha}_{scale}_{input_scale}", "elu", [x],
             ref(lambda t: torch._C._nn.elu(t, alpha, scale, input_scale), x),
             alpha=alpha, scale=scale, input_scale=input_scale)
    for beta, threshold in ((1.0, 20.0), (2.0, 3.0)):
        case(f"softplus_{DTYPES[dt]}_{beta}_{threshold}", "softplus", [x], ref(lambda t: F.softplus(t, beta, threshold), x),
             beta=beta, threshold=threshold)

os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w") as f:
    f.write(f"# generated by scripts/gen_reference.py with torch {torch.__version__}; do not edit\n")
    f.write("\n".join(records) + "\n")
print(f"wrote {sum(1 for r in records if r.startswith('case '))} cases to {os.path.normpath(OUT)}")
