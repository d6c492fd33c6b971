"""The tensor line the reference generators (scripts/gen_*_reference.py)
write and tests/reference_data.h reads:
    t <dtype> <ndim> <sizes...> <values...>
Values are printed with repr(), so float64 and float32 round-trip exactly;
bool values print as 0/1. A generator imports it after putting its own
folder on sys.path, so it runs from any cwd:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from reference_format import DTYPES, fmt_tensor
"""
import torch

# torch's dtype names, as tests/reference_data.h's parse_dtype reads them.
DTYPES = {
    torch.float32: "float32", torch.float64: "float64", torch.int64: "int64", torch.bool: "bool",
    torch.float16: "float16", torch.bfloat16: "bfloat16",
}


def fmt_tensor(t):
    """One tensor line for t (detached, any layout)."""
    t = t.detach().contiguous()
    vals = t.reshape(-1).tolist()
    if t.dtype == torch.bool:
        vals = [int(v) for v in vals]
    sizes = list(t.shape)
    return " ".join(["t", DTYPES[t.dtype], str(len(sizes))] + [str(s) for s in sizes] +
                    [repr(float(v)) if isinstance(v, float) else str(v) for v in vals])
