#!/usr/bin/python3
"""The cases of bench_norm run in PyTorch, printed in the same table, so that Tandem's batch norm and layer norm
and torch's can be compared side by side. torch is a peer for benchmarking only, never a build dependency.

Run it with Debian's /usr/bin/python3 (the one with python3-torch), or any python3 with torch:
    /usr/bin/python3 bench/peer_norm_torch.py [--device cpu|cuda|cuda:N] [--quick] [--filter SUBSTR]
                                              [--compare TANDEM_TABLE]
--compare reads bench_norm's output (run with the same --device and --quick) and prints a third table: time of
Tandem / time of torch per case.

The cases are bench_norm's: float32, training mode (batch statistics, running statistics updated); fwd under
torch.no_grad(), fwd+bwd the forward recorded and torch.autograd.grad of sum(y * seed) for the input, weight and
bias; beside x.clone() of the same input. Passes: 1 thread, then every core (torch.set_num_threads); on cuda one
pass, and every timed batch of calls ends with torch.cuda.synchronize().
"""
import os

import torch
import torch.nn.functional as F

# From peer_torch.py (this file's folder): the sampling on a device, the options, and writing and reading the tables.
from peer_torch import (describe, fmt_time, fmt_value, headline, peer_arguments, print_compare_table, print_row,
                        resolve_device, table_rows, time_all)

WIDTHS = (-4, -20, -14, 10, 12, 18, 6)  # bench_norm's columns


def print_line(*fields):
    print_row(WIDTHS, *fields)


class Bench:
    def __init__(self, quick, filt, device):
        self.quick, self.filter, self.device = quick, filt, device
        self.scale = 0.25 if quick else 1.0
        self.threads = 1
        self.rows = {}  # (thr, case, size) -> seconds, for --compare

    def emit(self, section, name, size, t, figure, reference, ratio):
        if self.selected(section, name):
            self.rows[(str(self.threads), name, size)] = (t, ratio)
            print_line(self.threads, name, size, fmt_time(t), figure, reference, ratio)

    def selected(self, section, name):
        return not self.filter or self.filter in section or self.filter in name

    def layer(self, section, size, x, layer, params):
        fwd, both = f"{section} fwd", f"{section} fwd+bwd"
        if not (self.selected(section, fwd) or self.selected(section, both)):
            return
        leaf = x.detach().clone().requires_grad_(True)
        seed = torch.randn(x.shape, device=self.device)
        wrt = [leaf] + params

        def forward():
            with torch.no_grad():
                layer(x)

        def forward_backward():
            torch.autograd.grad(layer(leaf), wrt, seed)

        t = time_all([forward, forward_backward, lambda: x.clone()], 0.6 * self.scale, self.device)
        nbytes = x.numel() * x.element_size()
        copy_gbs = 2 * nbytes / t[2] / 1e9
        fwd_gbs, both_gbs = 2 * nbytes / t[0] / 1e9, 5 * nbytes / t[1] / 1e9
        reference = fmt_value(copy_gbs, "GB/s") + " copy"
        self.emit(section, fwd, size, t[0], fmt_value(fwd_gbs, "GB/s"), reference, f"{fwd_gbs / copy_gbs:.2f}")
        self.emit(section, both, size, t[1], fmt_value(both_gbs, "GB/s"), reference, f"{both_gbs / copy_gbs:.2f}")

    def run_pass(self, threads):
        self.threads = threads
        torch.set_num_threads(threads)
        dev = self.device
        n, c = (32 if self.quick else 128), 32
        x = torch.randn(n, c, 28, 28, device=dev) * 2 + 1
        w = torch.ones(c, device=dev, requires_grad=True)
        b = torch.zeros(c, device=dev, requires_grad=True)
        rm, rv = torch.zeros(c, device=dev), torch.ones(c, device=dev)
        self.layer("batch_norm2d", f"{n}x32x28x28", x,
                   lambda t: F.batch_norm(t, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5), [w, b])
        rows, d = (1024 if self.quick else 4096), 1024
        x = torch.randn(rows, d, device=dev) * 2 + 1
        w = torch.ones(d, device=dev, requires_grad=True)
        b = torch.zeros(d, device=dev, requires_grad=True)
        self.layer("layer_norm", f"{rows}x1024", x, lambda t: F.layer_norm(t, [d], w, b, 1e-5), [w, b])


def print_comparison(tandem_rows, torch_rows):
    print("# time of Tandem / time of torch for the same case (below 1: Tandem faster)")
    print_compare_table(tandem_rows, torch_rows, 20, 14, ratio_columns=False)
    line = headline([(t, torch_rows[key][0], "") for key, (t, _) in tandem_rows.items() if key in torch_rows])
    if line:
        print(line)


def main():
    args = peer_arguments(__doc__.split("\n\n")[0], "bench_norm").parse_args()
    device = resolve_device(args.device, "peer_norm_torch")
    torch.manual_seed(0)
    cores = os.cpu_count() or 1
    print(f"# peer_norm_torch: torch {torch.__version__}; {cores} hardware threads; device {describe(device)}"
          f"{'; --quick' if args.quick else ''}")
    print_line("thr", "case", "size", "time", "figure", "reference", "ratio")
    b = Bench(args.quick, args.filter, device)
    b.run_pass(1)
    if cores > 1 and device.type == "cpu":
        b.run_pass(cores)
    if args.compare:
        print()
        print_comparison(table_rows(args.compare), b.rows)


if __name__ == "__main__":
    main()
