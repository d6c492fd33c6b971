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
import os

import torch

# From peer_torch.py (this file's folder): the sampling on a device, the options, and writing and reading the tables.
from peer_torch import (describe, fmt_time, fmt_value, headline, peer_arguments, print_compare_table, print_row,
                        resolve_device, table_rows, time_all)

WIDTHS = (-4, -22, -16, 10, 12, 18, 6)  # bench_optim's columns


def print_line(*fields):
    print_row(WIDTHS, *fields)


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


def print_comparison(tandem_rows, torch_rows):
    print("# time of Tandem / time of torch for the same case (below 1: Tandem faster), and each program's fraction of")
    print("# its copy reference")
    print_compare_table(tandem_rows, torch_rows, 22, 16, ratio_columns=True)
    line = headline([(t, torch_rows[key][0], "") for key, (t, _) in tandem_rows.items() if key in torch_rows])
    if line:
        print(line)


def main():
    args = peer_arguments(__doc__.split("\n\n")[0], "bench_optim").parse_args()
    device = resolve_device(args.device, "peer_optim_torch")
    torch.manual_seed(0)
    print(f"# peer_optim_torch: torch {torch.__version__}; {os.cpu_count()} hardware threads; device "
          f"{describe(device)}{'; --quick' if args.quick else ''}")
    print("# the table of bench_optim, for torch (optimizers with foreach=True)")
    print_line("thr", "case", "size", "time", "figure", "reference", "ratio")
    sets = param_sets(device)
    rows = run_pass(args, device, sets, 1)
    threads = os.cpu_count() or 1
    if threads > 1 and device.type == "cpu":
        rows.update(run_pass(args, device, sets, threads))
    if args.compare:
        print()
        print_comparison(table_rows(args.compare), rows)


if __name__ == "__main__":
    main()
