#!/usr/bin/python3
"""The cases of bench_nn run in PyTorch, printed in the same table, so that Tandem's conv2d and max_pool2d and
torch's can be compared side by side. torch is a peer for benchmarking only, never a build dependency.

Run it with Debian's /usr/bin/python3 (the one with python3-torch), or any python3 with torch:
    /usr/bin/python3 bench/peer_nn_torch.py [--device cpu|cuda|cuda:N] [--threads N] [--quick] [--filter SUBSTR]
                                            [--compare TANDEM_TABLE]
--compare reads bench_nn's output (run with the same --device and --threads) and prints a third table: time of
Tandem / time of torch per case (below 1: Tandem is faster).

One thread by default (torch.set_num_threads(1)), as bench_nn. On cuda every timed batch of calls ends with
torch.cuda.synchronize().
"""
import re
import sys

import torch
import torch.nn.functional as F

# From peer_torch.py (this file's folder): the sampling on a device, the options, and writing and reading the table's
# fields.
from peer_torch import fmt_time, fmt_value, headline, parse_time, peer_arguments, print_row, resolve_device, time_all


def print_line(name, size, t, figure):
    print_row((-22, -30, 10, 14), name, size, t, figure)


class Bench:
    def __init__(self, device, budget, filt):
        self.device, self.budget, self.filter = device, budget, filt
        self.rows = {}  # case -> seconds, for --compare

    def emit(self, name, size, t, figure):
        self.rows[name] = t
        print_line(name, size, fmt_time(t), figure)

    def selected(self, section, name):
        return not self.filter or self.filter in section or self.filter in name

    def time_call(self, f):
        return time_all([f], self.budget, self.device)[0]

    def conv(self, name, n, c_in, c_out, hw, input_grad):
        size = f"{n}x{c_in}x{hw}x{hw} -> {c_out}, 3x3 p1"
        x = torch.randn(n, c_in, hw, hw, device=self.device).requires_grad_(input_grad)
        w = (torch.randn(c_out, c_in, 3, 3, device=self.device) * 0.1).requires_grad_()
        b = torch.zeros(c_out, device=self.device).requires_grad_()
        seed = torch.randn(n, c_out, hw, hw, device=self.device)
        fwd_flops = 2.0 * n * c_out * c_in * 9 * hw * hw
        if self.selected(name, f"{name} fwd"):
            def fwd():
                with torch.no_grad():
                    F.conv2d(x, w, b, padding=1)
            t = self.time_call(fwd)
            self.emit(f"{name} fwd", size, t, fmt_value(fwd_flops / t * 1e-9, "GFLOP/s"))
        if self.selected(name, f"{name} fwd+bwd"):
            leaves = [w, b] + ([x] if input_grad else [])
            t = self.time_call(lambda: torch.autograd.grad(F.conv2d(x, w, b, padding=1), leaves, seed))
            flops = fwd_flops * (3 if input_grad else 2)
            self.emit(f"{name} fwd+bwd", size, t, fmt_value(flops / t * 1e-9, "GFLOP/s"))

    def pool(self, name, n, c, hw):
        size = f"{n}x{c}x{hw}x{hw}, 2x2 s2"
        x = torch.randn(n, c, hw, hw, device=self.device).requires_grad_()
        seed = torch.randn(n, c, hw // 2, hw // 2, device=self.device)
        in_bytes, out_elems = 4.0 * n * c * hw * hw, 1.0 * n * c * (hw // 2) * (hw // 2)
        if self.selected(name, f"{name} fwd"):
            def fwd():
                # With the indices, as Tandem's max_pool2d always computes them (and torch's does under autograd).
                with torch.no_grad():
                    F.max_pool2d(x, 2, return_indices=True)
            t = self.time_call(fwd)
            self.emit(f"{name} fwd", size, t, fmt_value((in_bytes + 12 * out_elems) / t * 1e-9, "GB/s"))
        if self.selected(name, f"{name} fwd+bwd"):
            t = self.time_call(lambda: torch.autograd.grad(F.max_pool2d(x, 2), [x], seed))
            self.emit(f"{name} fwd+bwd", size, t, fmt_value((2 * in_bytes + 24 * out_elems) / t * 1e-9, "GB/s"))


def read_rows(path):
    """case -> seconds, from a bench_nn table (columns two or more spaces apart; the time is the third)."""
    rows = {}
    with open(path) as f:
        for line in f:
            fields = re.split(r"\s{2,}", line.strip())
            if not line.startswith("#") and len(fields) >= 4 and fields[0] != "case":
                rows[fields[0]] = parse_time(fields[2])
    return rows


def main():
    args = peer_arguments(__doc__.split("\n\n")[0], "bench_nn", threads=True).parse_args()
    device = resolve_device(args.device, "peer_nn_torch")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"# peer_nn_torch: torch {torch.__version__}; device {device}; {torch.get_num_threads()} thread(s); "
          f"mkldnn {torch.backends.mkldnn.is_available()}")
    print_line("case", "size", "time", "figure")
    b = Bench(device, 0.25 if args.quick else 1.0, args.filter)
    b.conv("conv1", 128, 1, 32, 28, False)
    b.conv("conv2", 128, 32, 64, 14, True)
    b.pool("maxpool1", 128, 32, 28)
    b.pool("maxpool2", 128, 64, 14)
    if args.compare:
        tandem = read_rows(args.compare)
        print("# time of Tandem / time of torch for the same case (below 1: Tandem faster)")
        widths = (-22, 10, 10, 12)
        print_row(widths, "case", "tandem", "torch", "tandem/torch")
        for name, t in tandem.items():
            if name in b.rows:
                p = b.rows[name]
                print_row(widths, name, fmt_time(t), fmt_time(p), f"{t / p:.2f}")
        line = headline([(t, b.rows[name], "") for name, t in tandem.items() if name in b.rows])
        if line:
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
