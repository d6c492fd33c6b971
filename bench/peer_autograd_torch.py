#!/usr/bin/python3
"""The cases of bench_autograd run in PyTorch, printed in the same table, so that Tandem's autograd and torch's can
be compared side by side. torch is a peer for benchmarking only, never a build dependency.

Run it with Debian's /usr/bin/python3 (the one with python3-torch), or any python3 with torch:
    /usr/bin/python3 bench/peer_autograd_torch.py [--device cpu|cuda|cuda:N] [--quick] [--filter SUBSTR]
                                                  [--compare TANDEM_TABLE]
--compare reads bench_autograd's output (run with the same --device) and prints a third table: time of Tandem /
time of torch per case, and each program's own ratio column side by side.

References here, as in bench_autograd: the same forward under torch.no_grad(), and the MLP's GEMMs without the
graph: on the cpu, cblas_sgemm called through ctypes on buffers of the MLP's sizes (the OpenBLAS that Debian's torch
itself calls; ctypes adds about a microsecond per call, under 2% of the GEMMs' time at these sizes); on a GPU, or
where no OpenBLAS is found, torch.mm under torch.no_grad() on the same device. On cuda every timed batch of calls
ends with torch.cuda.synchronize().
"""
import math
import os
import re

import torch

# From peer_torch.py (this file's folder): the sampling on a device, the options, the OpenBLAS loader, and writing
# and reading the tables.
from peer_torch import (NO_TRANS, ROW_MAJOR, TRANS, describe, fmt_time, fmt_value, headline, load_openblas,
                        peer_arguments, print_compare_table, print_row, resolve_device, table_rows, time_all)


# ---------------------------------------------------------------- OpenBLAS through ctypes

_blas = load_openblas()  # None where there is none: the cpu ceiling is then torch.mm


def gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
    _blas.cblas_sgemm(ROW_MAJOR, TRANS if ta else NO_TRANS, TRANS if tb else NO_TRANS, m, n, k, 1.0, a, lda, b, ldb,
                      0.0, c, ldc)


# ---------------------------------------------------------------- table (the format of bench_autograd.cpp)

WIDTHS = (-4, -20, -20, 10, 16, 24, 6)  # bench_autograd's columns


def print_line(*fields):
    print_row(WIDTHS, *fields)


CHAIN_OPS = 64
B, D0, D1, D2, D3 = 128, 784, 256, 128, 10


def chain(y):
    for i in range(CHAIN_OPS):
        y = y * 0.9 if i % 3 == 0 else y + 0.1 if i % 3 == 1 else y.tanh()
    return y


class Mlp:
    """784-256-128-10 with relu, batch 128; weights (in, out) used as x.mm(w) + b, leaves that require grad."""

    def __init__(self, device):
        def weight(i, o):
            return (torch.randn(i, o) * math.sqrt(2.0 / i)).to(device).requires_grad_()

        self.w1, self.w2, self.w3 = weight(D0, D1), weight(D1, D2), weight(D2, D3)
        self.b1, self.b2, self.b3 = (torch.zeros(d, device=device).requires_grad_() for d in (D1, D2, D3))
        self.x = torch.randn(B, D0).to(device)
        self.labels = torch.randint(0, D3, (B,)).to(device)
        self.params = [self.w1, self.b1, self.w2, self.b2, self.w3, self.b3]

    def loss(self):
        h1 = (self.x.mm(self.w1) + self.b1).relu()
        h2 = (h1.mm(self.w2) + self.b2).relu()
        logits = h2.mm(self.w3) + self.b3
        return -logits.log_softmax(1).gather(1, self.labels.unsqueeze(1)).mean()

    def sgd(self, lr):
        with torch.no_grad():
            for p in self.params:
                p.add_(p.grad, alpha=-lr)
                p.grad.zero_()


def mlp_forward_flops():
    return 2.0 * B * (D0 * D1 + D1 * D2 + D2 * D3)


def mlp_backward_flops():
    return mlp_forward_flops() + 2.0 * B * (D1 * D2 + D2 * D3)


class MlpGemms:
    """The MLP's GEMMs called directly through cblas: 3 forward, 5 backward (every weight gradient, the input
    gradients of layers 2 and 3), row-major, with the transpose flags of the mm backward."""
    name = "cblas"

    def __init__(self):
        def buf(*shape):
            return torch.randn(*shape) * 0.01

        self.b = {k: buf(*s) for k, s in dict(x=(B, D0), w1=(D0, D1), h1=(B, D1), w2=(D1, D2), h2=(B, D2),
                                                 w3=(D2, D3), logits=(B, D3), g3=(B, D3), dw3=(D2, D3),
                                                 dh2=(B, D2), g2=(B, D2), dw2=(D1, D2), dh1=(B, D1), g1=(B, D1),
                                                 dw1=(D0, D1)).items()}
        self.p = {k: v.data_ptr() for k, v in self.b.items()}

    def forward(self):
        p = self.p
        gemm(False, False, B, D1, D0, p["x"], D0, p["w1"], D1, p["h1"], D1)
        gemm(False, False, B, D2, D1, p["h1"], D1, p["w2"], D2, p["h2"], D2)
        gemm(False, False, B, D3, D2, p["h2"], D2, p["w3"], D3, p["logits"], D3)

    def backward(self):
        p = self.p
        gemm(True, False, D2, D3, B, p["h2"], D2, p["g3"], D3, p["dw3"], D3)
        gemm(False, True, B, D2, D3, p["g3"], D3, p["w3"], D3, p["dh2"], D2)
        gemm(True, False, D1, D2, B, p["h1"], D1, p["g2"], D2, p["dw2"], D2)
        gemm(False, True, B, D1, D2, p["g2"], D2, p["w2"], D2, p["dh1"], D1)
        gemm(True, False, D0, D1, B, p["x"], D0, p["g1"], D1, p["dw1"], D1)



class MlpMm:
    """The same GEMMs through torch.mm under torch.no_grad() on the device (a GPU, or a cpu without OpenBLAS found):
    the products the mm backward computes, on the same transposed views; each call allocates its output, as the
    graph's GEMMs do."""
    name = "mm"

    def __init__(self, device):
        def buf(*shape):
            return (torch.randn(*shape) * 0.01).to(device)

        self.x, self.w1, self.h1, self.w2 = buf(B, D0), buf(D0, D1), buf(B, D1), buf(D1, D2)
        self.h2, self.w3, self.g3, self.g2, self.g1 = buf(B, D2), buf(D2, D3), buf(B, D3), buf(B, D2), buf(B, D1)

    def forward(self):
        with torch.no_grad():
            self.x.mm(self.w1), self.h1.mm(self.w2), self.h2.mm(self.w3)

    def backward(self):
        with torch.no_grad():
            self.h2.t().mm(self.g3), self.g3.mm(self.w3.t())  # dw3, dh2
            self.h1.t().mm(self.g2), self.g2.mm(self.w2.t())  # dw2, dh1
            self.x.t().mm(self.g1)  # dw1


def mlp_ceiling(device):
    return MlpGemms() if device.type == "cpu" and _blas is not None else MlpMm(device)


class Bench:
    def __init__(self, quick, filt, device):
        self.quick, self.filter, self.device = quick, filt, device
        self.scale = 0.25 if quick else 1.0
        self.threads = 1
        self.rows = {}  # (thr, case, size) -> (seconds or None, ratio), for --compare

    def selected(self, section, name):
        return not self.filter or self.filter in section or self.filter in name

    def emit(self, section, name, size, t, figure, reference, ratio):
        if not self.selected(section, name):
            return
        self.rows[(str(self.threads), name, size)] = (t, ratio)
        print_line(str(self.threads), name, size, "-" if t is None else fmt_time(t), figure, reference, ratio)

    # ------------------------------------------------------------ cases

    def chain(self):
        s, size = "chain", f"{CHAIN_OPS} ops x 16"
        names = ("chain fwd no-grad", "chain fwd record", "chain fwd+bwd")
        if not any(self.selected(s, n) for n in names):
            return
        x, seed = torch.randn(16).to(self.device).requires_grad_(), torch.ones(16, device=self.device)

        def nograd():
            with torch.no_grad():
                chain(x)

        def both():
            x.grad = None
            chain(x).backward(seed)

        t = time_all([nograd, lambda: chain(x), both], 0.3 * self.scale, self.device)
        n, bwd = CHAIN_OPS, t[2] - t[1]
        self.emit(s, names[0], size, t[0], fmt_value(t[0] / n * 1e6, "us/op"), "-", "-")
        self.emit(s, names[1], size, t[1], fmt_value(t[1] / n * 1e6, "us/op"),
                  fmt_value(t[0] / n * 1e6, "us/op no-grad"), f"{t[1] / t[0]:.2f}")
        self.emit(s, names[2], size, t[2], fmt_value(bwd / n * 1e6, "us/op bwd"),
                  fmt_value(t[1] / n * 1e6, "us/op fwd"), f"{bwd / t[1]:.2f}")

    def softmax(self):
        s, size = "softmax", "256x1024"
        names = ("softmax fwd no-grad", "softmax fwd record", "softmax fwd+bwd")
        if not any(self.selected(s, n) for n in names):
            return
        x = torch.randn(256, 1024).to(self.device).requires_grad_()
        w = torch.randn(1024).to(self.device).requires_grad_()

        def f():
            return (x.softmax(1) * w).sum()

        def nograd():
            with torch.no_grad():
                f()

        def both():
            x.grad = None
            w.grad = None
            f().backward()

        t = time_all([nograd, f, both], 0.5 * self.scale, self.device)
        bwd = t[2] - t[1]
        self.emit(s, names[0], size, t[0], "-", "-", "-")
        self.emit(s, names[1], size, t[1], fmt_time(t[1]) + " fwd", fmt_time(t[0]) + " no-grad", f"{t[1] / t[0]:.2f}")
        self.emit(s, names[2], size, t[2], fmt_time(bwd) + " bwd", fmt_time(t[1]) + " fwd", f"{bwd / t[1]:.2f}")

    def mlp(self):
        s, size = "mlp", "b128 784-256-128-10"
        names = ("mlp fwd no-grad", "mlp fwd record", "mlp fwd+bwd", "mlp step (sgd)", "mlp (fwd+bwd)/fwd")
        if not any(self.selected(s, n) for n in names):
            return
        net, blas = Mlp(self.device), mlp_ceiling(self.device)
        net.loss().backward()
        if any(p.grad is None or not torch.isfinite(p.grad).all() for p in net.params):
            print("# WARNING: mlp: a parameter got no finite gradient")
        net.sgd(0.0)

        def nograd():
            with torch.no_grad():
                net.loss()

        def step():
            net.loss().backward()
            net.sgd(1e-3)

        def blas_all():
            blas.forward()
            blas.backward()

        t = time_all([nograd, net.loss, lambda: net.loss().backward(), step, blas.forward, blas_all],
                     1.0 * self.scale, self.device)
        f_fwd = mlp_forward_flops()
        f_all = f_fwd + mlp_backward_flops()

        def gemm_line(name, tm, flops, ceiling):
            self.emit(s, name, size, tm, fmt_value(flops / tm * 1e-9, "GFLOP/s"),
                      fmt_value(flops / ceiling * 1e-9, "GFLOP/s " + blas.name), f"{ceiling / tm:.2f}")

        gemm_line(names[0], t[0], f_fwd, t[4])
        gemm_line(names[1], t[1], f_fwd, t[4])
        gemm_line(names[2], t[2], f_all, t[5])
        gemm_line(names[3], t[3], f_all, t[5])
        self.emit(s, names[4], size, None, fmt_value(t[2] / t[0], "x"), fmt_value(t[5] / t[4], "x " + blas.name),
                  f"{(t[2] / t[0]) / (t[5] / t[4]):.2f}")

    def run_pass(self, threads):
        self.threads = threads
        torch.set_num_threads(threads)
        if _blas is not None:
            _blas.openblas_set_num_threads(threads)
        # The order of bench_autograd: OpenBLAS's threads spin a while after a call, so GEMMs go last.
        self.chain()
        self.softmax()
        self.mlp()


# ---------------------------------------------------------------- comparison with bench_autograd's table

def table_device(path):
    """The device a table's "# bench_autograd: ..." or "# peer_autograd_torch: ..." line names ("cpu", "cuda:0"),
    or None."""
    with open(path) as f:
        for line in f:
            m = re.match(r"# \w+: .*; device ([\w:]+)", line)
            if m:
                return m.group(1)
    return None


def parts(rows):
    """{(thr, section, size): (record part, backward part)} in seconds per call: differences of the medians of the
    chain and softmax lines. torch runs both parts in C++ (the Python front end's cost is the same with and without
    recording, so it cancels), which makes them the fair comparison of the two engines."""
    out = {}
    for (thr, case, size), (t, _) in rows.items():
        section = case.split()[0]
        if case != f"{section} fwd no-grad":
            continue
        rec, both = rows.get((thr, f"{section} fwd record", size)), rows.get((thr, f"{section} fwd+bwd", size))
        if rec and both:
            out[(thr, section, size)] = (rec[0] - t, both[0] - rec[0])
    return out


def print_comparison(tandem_rows, torch_rows):
    print("# time of Tandem / time of torch for the same case (below 1: Tandem faster), and each program's own ratio")
    print("# column (record / no-grad, backward / forward, fraction of the GEMM ceiling, as in the tables above)")
    print_compare_table(tandem_rows, torch_rows, 20, 20, ratio_columns=True)
    tandem_parts, torch_parts = parts(tandem_rows), parts(torch_rows)
    print()
    print("# the parts, per call: recording = fwd record - fwd no-grad, backward = fwd+bwd - fwd record (differences")
    print("# of the medians above). torch runs both in C++, so these compare the two engines without Python's front")
    print("# end; the chain's parts are also given per op. '-': the difference is not positive (within the noise)")
    print(f"{'thr':<4}  {'part':<20}  {'size':<20}  {'tandem':>10}  {'torch':>10}  {'tandem/torch':>12}  "
          f"{'tandem/op':>12}  {'torch/op':>11}")
    for key, (rec, bwd) in tandem_parts.items():
        if key not in torch_parts:
            continue
        p_rec, p_bwd = torch_parts[key]
        for name, a, b in (("recording", rec, p_rec), ("backward", bwd, p_bwd)):
            per_op = (fmt_time(a / CHAIN_OPS), fmt_time(b / CHAIN_OPS)) if key[1] == "chain" else ("-", "-")
            ratio = f"{a / b:.2f}" if a > 0 and b > 0 else "-"
            print(f"{key[0]:<4}  {key[1] + ' ' + name:<20}  {key[2]:<20}  {fmt_time(a) if a > 0 else '-':>10}  "
                  f"{fmt_time(b) if b > 0 else '-':>10}  {ratio:>12}  {per_op[0]:>12}  {per_op[1]:>11}")
    print_headline(tandem_rows, torch_rows)


def print_headline(tandem_rows, torch_rows):
    """One line for a summary (scripts/gpu-check.sh): peer_torch's headline over the timed cases both tables have,
    the lowest and the highest named, and the MLP step's two times."""

    def name(key):
        return key[1] if key[0] == "1" else f"{key[1]} ({key[0]} threads)"

    line = headline([(t, torch_rows[key][0], name(key)) for key, (t, _) in tandem_rows.items() if key in torch_rows])
    if line is None:
        print("headline: no case in both tables")
        return
    step = next((key for key in tandem_rows if key[0] == "1" and key[1] == "mlp step (sgd)"), None)
    if step in torch_rows and tandem_rows[step][0] and torch_rows[step][0]:
        line += f"; mlp step {fmt_time(tandem_rows[step][0])} vs {fmt_time(torch_rows[step][0])}"
    print(line)


def main():
    args = peer_arguments(__doc__.split("\n\n")[0], "bench_autograd").parse_args()
    device = resolve_device(args.device, "peer_autograd_torch")
    torch.manual_seed(0)
    threads_all = os.cpu_count() or 1
    blas = f"OpenBLAS {_blas.openblas_get_config().decode()}" if _blas is not None else "no OpenBLAS found"
    print(f"# peer_autograd_torch: torch {torch.__version__}, {blas}; {threads_all} hardware threads; "
          f"device {describe(device)}{'; --quick' if args.quick else ''}")
    print("# time: median per call (one chain, one graph, one step); ratio = figure / reference, both measured")
    print("# in this run, a section's samples interleaved. chain, softmax: record = fwd record / fwd no-grad,")
    print("# fwd+bwd = backward part (fwd+bwd - fwd record) / fwd record. mlp: fraction of the GEMM ceiling,")
    print("# the same GEMMs without the graph (3 forward; 3 + 5 with backward): 'cblas' called directly on the")
    print("# cpu, 'mm' torch.mm under torch.no_grad() elsewhere; (fwd+bwd)/fwd: torch's over the GEMMs'")
    print("# own (1.00 = the graph adds nothing to the backward beyond its GEMMs' share)")
    if device.type == "cuda":
        print(f"# {device}: one pass (thr: torch's CPU threads; the kernels run on the device); every timed")
        print("# batch of calls ends with torch.cuda.synchronize, so a time is the device's work, not its launches")
    print_line("thr", "case", "size", "time", "figure", "reference", "ratio")
    bench = Bench(args.quick, args.filter, device)
    bench.run_pass(1)
    # On a GPU the host's threads run no kernels: the all-cores pass would repeat the first.
    if threads_all > 1 and device.type == "cpu":
        bench.run_pass(threads_all)
    if args.compare:
        print()
        theirs = table_device(args.compare)
        if theirs is not None and theirs != str(device):
            print(f"# WARNING: the Tandem table ran on {theirs}, torch on {device}: the ratios compare two devices")
        print_comparison(table_rows(args.compare), bench.rows)


if __name__ == "__main__":
    main()
