#!/usr/bin/python3
"""Writes tests/data/safetensors_reference.safetensors with Hugging Face's
`safetensors` package (safetensors.torch.save_file) from PyTorch tensors, so
that tests/test_checkpoint.cpp proves Tandem reads what PyTorch writes: every
dtype Tandem has, a 0-dim tensor, empty tensors, special floats, a dotted
name, and the metadata {"format": "pt"} (what transformers writes). The test
holds the same values, written by hand, and also checks that Tandem lays out
the byte buffer exactly as the package does (same order, same bytes).

Debian's python3-torch (1.13) runs under /usr/bin/python3; safetensors is not
a Debian package, so install it from PyPI into a virtual environment that
sees the system's torch:

    /usr/bin/python3 -m venv --system-site-packages /tmp/stvenv
    /tmp/stvenv/bin/pip install safetensors      # 0.8.0 when this was written
    /tmp/stvenv/bin/python scripts/gen_safetensors_reference.py

The output is committed; tests never need Python.

    /tmp/stvenv/bin/python scripts/gen_safetensors_reference.py --check FILE

loads FILE (written by Tandem) with safetensors.torch.load_file and with
safe_open, and prints each tensor and the metadata: the check that PyTorch
reads Tandem's files.
"""
import os
import sys

import safetensors
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "safetensors_reference.safetensors")


def tensors():
    inf, nan = float("inf"), float("nan")
    return {
        # Values exact in their dtype, so the test can state them by hand.
        "f32": torch.tensor([[1.5, -2.25, 3.0], [0.1, 1e-8, -0.0]], dtype=torch.float32),
        "f32_special": torch.tensor([inf, -inf, nan], dtype=torch.float32),
        "f64": torch.tensor([3.141592653589793, -1e300, 5e-324], dtype=torch.float64),
        "f16": torch.tensor([1.0, -0.5, 65504.0, 2.0**-14, 2.0**-24], dtype=torch.float16),
        "bf16": torch.tensor([1.0, -2.0, 3.140625, 2.0**100, -(2.0**-126)], dtype=torch.bfloat16),
        "i64": torch.tensor([-(2**63), 2**63 - 1, 0, -1], dtype=torch.int64),
        "i32": torch.tensor([[-(2**31), 2**31 - 1], [7, -7]], dtype=torch.int32),
        "u8": torch.tensor([0, 1, 127, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True], dtype=torch.bool),
        "scalar": torch.tensor(2.5, dtype=torch.float32),
        "empty": torch.zeros(0, 3, dtype=torch.float32),
        "empty_i64": torch.zeros(2, 0, dtype=torch.int64),
        "layer.0.weight": torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64),
    }


def check(path):
    loaded = load_file(path)
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata()
        keys = list(f.keys())
    print("safetensors", safetensors.__version__, "torch", torch.__version__)
    print("metadata", metadata)
    print("keys", keys)
    for name, t in loaded.items():
        print(name, t.dtype, tuple(t.shape), t.reshape(-1).tolist())


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        check(sys.argv[2])
        return
    save_file(tensors(), OUT, metadata={"format": "pt"})
    # Read it back as a check of the values above.
    back = load_file(OUT)
    for name, t in tensors().items():
        assert torch.equal(back[name], t) or (name == "f32_special"), name
    print("wrote", os.path.normpath(OUT), os.path.getsize(OUT), "bytes with safetensors", safetensors.__version__)


if __name__ == "__main__":
    main()
