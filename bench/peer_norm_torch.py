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
import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F

# From peer_torch.py (this file's folder): the sampling and the table's time fields.
from peer_torch import Sampler, fmt_time, fmt_value, parse_time, table_lines


def wait_for(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_all(fns, budget, device):
    """Median seconds per call of each callable, their samples interleaved."""
    s = [Sampler(f, lambda: wait_for(device)) for f in fns]
    start = time.perf_counter()
    while not all(x.enough(start, budget) for x in s):
        for x in s:
            x.sample()
    return [statistics.median(x.samples) for x in s]


def print_line(thr, name, size, t, figure, reference, ratio):
    """bench_norm's columns (two or more spaces apart)."""
    print(f"{thr:<4}  {name:<20}  {size:<14}  {t:>10}  {figure:>12}  {reference:>18}  {ratio:>6}", flush=True)


class Bench:
    def __init__(self, quick, filt, device):
        self.quick, self.filter, self.device = quick, filt, device
        self.scale = 0.25 if quick else 1.0
        self.threads = 1
        self.rows = {}  # (thr, case, size) -> seconds, for --compare

    def emit(self, section, name, size, t, figure, reference, ratio):
        if self.selected(section, name):
            self.rows[(str(self.threads), name, size)] = t
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


def read_table(path):
    """{(thr, case, size): seconds} from a table in bench_norm's format."""
    return {(f[0], f[1], f[2]): parse_time(f[3]) for f in table_lines(path)}


def print_comparison(tandem_rows, torch_rows):
    print("# time of Tandem / time of torch for the same case (below 1: Tandem faster)")
    print(f"{'thr':<4}  {'case':<20}  {'size':<14}  {'tandem':>10}  {'torch':>10}  {'tandem/torch':>12}")
    for key, t in tandem_rows.items():
        if key in torch_rows and t is not None and torch_rows[key] is not None:
            p = torch_rows[key]
            print(f"{key[0]:<4}  {key[1]:<20}  {key[2]:<14}  {fmt_time(t):>10}  {fmt_time(p):>10}  {t / p:>12.2f}")
    ratios = [t / torch_rows[key] for key, t in tandem_rows.items() if t and key in torch_rows and torch_rows[key]]
    if ratios:
        print(f"headline: tandem/torch time {statistics.geometric_mean(ratios):.2f} (geometric mean of "
              f"{len(ratios)} cases; {min(ratios):.2f} to {max(ratios):.2f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--filter", default="")
    ap.add_argument("--compare", metavar="TANDEM_TABLE")
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    torch.manual_seed(0)
    cores = os.cpu_count() or 1
    name = "cpu" if device.type == "cpu" else f"{device} ({torch.cuda.get_device_name(device)})"
    print(f"# peer_norm_torch: torch {torch.__version__}; {cores} hardware threads; device {name}"
          f"{'; --quick' if args.quick else ''}")
    print_line("thr", "case", "size", "time", "figure", "reference", "ratio")
    b = Bench(args.quick, args.filter, device)
    b.run_pass(1)
    if cores > 1 and device.type == "cpu":
        b.run_pass(cores)
    if args.compare:
        print()
        print_comparison(read_table(args.compare), b.rows)


if __name__ == "__main__":
    main()
