#!/usr/bin/python3
"""The cases of bench_optim run in PyTorch, printed in the same table, so that Tandem's optimizers and torch's can be
compared side by side. torch is a peer for benchmarking only, never a build dependency.

Run it with Debian's /usr/bin/python3 (the one with python3-torch), or any python3 with torch:
    /usr/bin/python3 bench/peer_optim_torch.py [--device cpu|cuda|cuda:N] [--quick] [--filter SUBSTR]
                                               [--compare TANDEM_TABLE]
--compare reads bench_optim's output (run with the same --device) and prints a third table: time of Tandem / time
of torch per case.

torch's optimizers run with foreach=True (its multi-tensor path: one _foreach_* call per operation over the whole
list); clip_grad_norm_ as torch ships it (1.13: one norm per gradient, then a mul_ per gradient). The reference, as in
bench_optim: torch's copy_ moving as many bytes. On cuda every timed batch of calls ends with torch.cuda.synchronize().
"""
import argparse
import math
import os
import re
import statistics
import sys
import time

import torch

# From peer_torch.py (this file's folder): the sampling and the table's fields.
from peer_torch import Sampler, fmt_time, fmt_value, parse_time


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
    print(f"{thr:<4}  {name:<22}  {size:<16}  {t:>10}  {figure:>12}  {reference:>18}  {ratio:>6}", flush=True)


def param_set(name, shapes, device):
    params = []
    for shape in shapes:
        p = (torch.randn(shape) * 0.1).to(device).requires_grad_()
        p.grad = (torch.randn(shape) * 0.01).to(device)
        params.append(p)
    numel = sum(p.numel() for p in params)
    return name, f"{len(params)} x, {(numel + 500) // 1000}k", params, numel


def param_sets(device):
    kinds = [(64,), (256,), (48, 32), (128,), (64, 64), (4096,)]
    return [param_set("mlp", [(784, 256), (256,), (256, 128), (128,), (128, 10), (10,)], device),
            param_set("many", [kinds[i % len(kinds)] for i in range(300)], device)]


CASES = [
    ("adam", 28, lambda p: torch.optim.Adam(p, lr=1e-3, foreach=True)),
    ("adamw", 28, lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=True)),
    ("adam amsgrad", 36, lambda p: torch.optim.Adam(p, lr=1e-3, amsgrad=True, foreach=True)),
    ("sgd momentum", 20, lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9, foreach=True)),
    ("clip_grad_norm_", 12, None),
]


def run_pass(args, device, sets, threads):
    """Prints a line per case and returns {(thr, case, size): (seconds, ratio)}."""
    rows = {}
    torch.set_num_threads(threads)
    budget = 0.5 * (0.25 if args.quick else 1)
    for set_name, size, params, numel in sets:
        for case, bytes_per_element, make in CASES:
            name = f"{case} {set_name}"
            if args.filter and args.filter not in name:
                continue
            if make:
                opt = make(params)

                def work(opt=opt):
                    opt.step()
            else:
                def work(params=params):
                    torch.nn.utils.clip_grad_norm_(params, 1e9)
            nbytes = bytes_per_element * numel
            src = torch.zeros(nbytes // 8, device=device)
            dst = torch.zeros(nbytes // 8, device=device)
            t, t_copy = time_all([work, lambda: dst.copy_(src)], budget, device)
            gbs, ref = nbytes / t * 1e-9, nbytes / t_copy * 1e-9
            print_line(str(threads), name, size, fmt_time(t), fmt_value(gbs, "GB/s"), fmt_value(ref, "GB/s copy"),
                       f"{gbs / ref:.2f}")
            rows[(str(threads), name, size)] = (t, f"{gbs / ref:.2f}")
    return rows


def table_lines(path):
    with open(path) as f:
        for line in f:
            fields = re.split(r"\s{2,}", line.strip())
            if not (line.startswith("#") or len(fields) != 7 or fields[0] == "thr"):
                yield fields


def read_table(path):
    return {(f[0], f[1], f[2]): (parse_time(f[3]), f[6]) for f in table_lines(path)}


def print_comparison(tandem_rows, torch_rows):
    print("# time of Tandem / time of torch for the same case (below 1: Tandem faster), and each program's fraction of")
    print("# its copy reference")
    print(f"{'thr':<4}  {'case':<22}  {'size':<16}  {'tandem':>10}  {'torch':>10}  {'tandem/torch':>12}  "
          f"{'ratio tandem':>12}  {'ratio torch':>11}")
    ratios = []
    for key, (t, ratio) in tandem_rows.items():
        if key not in torch_rows:
            continue
        p, p_ratio = torch_rows[key]
        ratios.append(t / p)
        print(f"{key[0]:<4}  {key[1]:<22}  {key[2]:<16}  {fmt_time(t):>10}  {fmt_time(p):>10}  {t / p:>12.2f}  "
              f"{ratio:>12}  {p_ratio:>11}")
    if ratios:
        mean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"headline: tandem/torch time {mean:.2f} (geometric mean of {len(ratios)} cases; {min(ratios):.2f} to "
              f"{max(ratios):.2f})")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--quick", action="store_true", help="shorter timings (a smoke run)")
    p.add_argument("--filter", default="", help="only the cases whose name contains this")
    p.add_argument("--compare", metavar="TANDEM_TABLE", help="bench_optim's output: print Tandem/torch ratios")
    args = p.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit(f"peer_optim_torch: --device {args.device}: torch {torch.__version__} sees no CUDA device")
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    torch.manual_seed(0)
    name = "cpu" if device.type == "cpu" else f"{device} ({torch.cuda.get_device_name(device)})"
    print(f"# peer_optim_torch: torch {torch.__version__}; {os.cpu_count()} hardware threads; device {name}"
          f"{'; --quick' if args.quick else ''}")
    print("# the table of bench_optim, for torch (optimizers with foreach=True)")
    print_line("thr", "case", "size", "time", "figure", "reference", "ratio")
    sets = param_sets(device)
    rows = run_pass(args, device, sets, 1)
    threads = os.cpu_count() or 1
    if threads > 1 and device.type == "cpu":
        rows.update(run_pass(args, device, sets, threads))
    if args.compare:
        print()
        print_comparison(read_table(args.compare), rows)


if __name__ == "__main__":
    main()
