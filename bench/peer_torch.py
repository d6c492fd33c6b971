#!/usr/bin/python3
"""The cases of bench_ops run in PyTorch, printed in the same table, so that Tandem and torch can be compared
side by side. torch is a peer for benchmarking only, never a build dependency.

Run it with Debian's /usr/bin/python3 (the one with python3-torch):
    /usr/bin/python3 bench/peer_torch.py [--quick] [--filter SUBSTR] [--compare TANDEM_TABLE]
--compare reads bench_ops's output and prints a third table: time of Tandem / time of torch per case.

Ceilings here: torch's own copy_ moving the same bytes (read + written; it runs on torch's threads, like the
ops), and cblas_?gemm called through ctypes on the same buffers (the OpenBLAS that torch itself calls).
"""
import argparse
import ctypes
import ctypes.util
import math
import os
import re
import statistics
import sys
import time

import torch

SAMPLE_SECONDS = 1e-3  # a sample batches calls until it lasts this long
MIN_SAMPLES, MAX_SAMPLES = 5, 2000


class Sampler:
    """Samples of one callable; its first call warms up, its second sizes the batch. wait, when given, runs before
    the clock is read after a call or a batch, to end the work the calls left queued (a GPU's launches)."""

    def __init__(self, f, wait=None):
        self.f, self.wait = f, wait or (lambda: None)
        f()
        self.wait()
        t0 = time.perf_counter()
        f()
        self.wait()
        self.batch = max(1, int(SAMPLE_SECONDS / max(time.perf_counter() - t0, 1e-9)))
        self.samples = []

    def sample(self):
        t0 = time.perf_counter()
        for _ in range(self.batch):
            self.f()
        self.wait()
        self.samples.append((time.perf_counter() - t0) / self.batch)

    def enough(self, start, budget):
        n = len(self.samples)
        return n >= MIN_SAMPLES and (n >= MAX_SAMPLES or time.perf_counter() - start >= budget)


def time_per_call(f, budget):
    """Median seconds per call of f."""
    s, start = Sampler(f), time.perf_counter()
    while not s.enough(start, budget):
        s.sample()
    return statistics.median(s.samples)


def time_pair(op, ceiling, budget):
    """Median seconds per call of an op and of its ceiling, their samples interleaved so that a change in the
    machine's load touches both alike."""
    a, b, start = Sampler(op), Sampler(ceiling), time.perf_counter()
    while not (a.enough(start, budget) and b.enough(start, budget)):
        a.sample()
        b.sample()
    return statistics.median(a.samples), statistics.median(b.samples)


# ---------------------------------------------------------------- shared by the device peers
# (peer_autograd_torch, peer_nn_torch, peer_norm_torch, peer_optim_torch)

def wait_for(device):
    """A GPU runs a launch after the call that queued it returned: a timed batch ends when the device is done."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_all(fns, budget, device):
    """Median seconds per call of each callable on device, their samples interleaved so that a change in the
    machine's load touches all of them alike."""
    s = [Sampler(f, lambda: wait_for(device)) for f in fns]
    start = time.perf_counter()
    while not all(x.enough(start, budget) for x in s):
        for x in s:
            x.sample()
    return [statistics.median(x.samples) for x in s]


def peer_arguments(description, tandem_bench, threads=False):
    """The parser of a device peer's options: --device, [--threads,] --quick, --filter, --compare."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N: where the tensors live (default cpu)")
    if threads:
        p.add_argument("--threads", type=int, default=1, help="torch's CPU threads (default 1)")
    p.add_argument("--quick", action="store_true", help="shorter timings (a smoke run)")
    p.add_argument("--filter", default="", help="only the cases whose section or name contains this")
    p.add_argument("--compare", metavar="TANDEM_TABLE", help=f"{tandem_bench}'s output: print Tandem/torch ratios")
    return p


def resolve_device(spec, program):
    """torch.device of --device, with cuda's index filled in; exits with the reason where there is no such
    device."""
    try:
        device = torch.device(spec)
    except RuntimeError as e:
        sys.exit(f"{program}: --device {spec}: {e}")
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        sys.exit(f"{program}: --device {spec}: expected cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        sys.exit(f"{program}: --device {spec}: torch {torch.__version__} (CUDA build: "
                 f"{torch.version.cuda or 'none'}) sees no CUDA device: torch.cuda.is_available() is False. Use "
                 f"--device cpu, or run it with a torch that has a GPU")
    count = torch.cuda.device_count()
    index = torch.cuda.current_device() if device.index is None else device.index
    if index >= count:
        sys.exit(f"{program}: --device {spec}: there {'is' if count == 1 else 'are'} {count} CUDA "
                 f"device{'' if count == 1 else 's'} (cuda:0 to cuda:{count - 1})")
    return torch.device("cuda", index)


def describe(device):
    """The device as the first comment line names it: "cpu", or "cuda:0 (its name)"."""
    return "cpu" if device.type == "cpu" else f"{device} ({torch.cuda.get_device_name(device)})"


def print_row(widths, *fields):
    """One line of a table whose columns are two spaces apart (a device bench's table or a comparison): widths[i]
    is field i's width, negative to align it left; flushed, so that a long run shows each line as it is measured."""
    print("  ".join(f"{f:<{-w}}" if w < 0 else f"{f:>{w}}" for f, w in zip(fields, widths)), flush=True)


def print_compare_table(tandem_rows, torch_rows, case_w, size_w, ratio_columns):
    """The Tandem/torch table of a device bench: {(thr, case, size): (seconds or None, ratio)} from each program,
    a line per case of Tandem's that torch has too; with ratio_columns each program's own ratio column beside."""
    widths = (-4, -case_w, -size_w, 10, 10, 12) + ((12, 11) if ratio_columns else ())
    print_row(widths, "thr", "case", "size", "tandem", "torch", "tandem/torch",
              *(("ratio tandem", "ratio torch") if ratio_columns else ()))
    for key, (t, ratio) in tandem_rows.items():
        if key not in torch_rows:
            continue
        p, p_ratio = torch_rows[key]
        times = (fmt_time(t), fmt_time(p), f"{t / p:.2f}") if t is not None and p is not None else ("-", "-", "-")
        print_row(widths, *key, *times, *((ratio, p_ratio) if ratio_columns else ()))


def headline(times):
    """The line scripts/gpu-check.sh reads for its summary, from [(time of Tandem, time of torch, label)] over the
    cases both tables time (a case without both times is left out): the geometric mean of Tandem / torch, the lowest
    and the highest (each with its label where it has one); None where there is no case."""
    ratios = sorted(((t / p, label) for t, p, label in times if t and p), key=lambda r: r[0])
    if not ratios:
        return None
    mean = math.exp(sum(math.log(r) for r, _ in ratios) / len(ratios))

    def end(r):
        return f"{r[0]:.2f} {r[1]}" if r[1] else f"{r[0]:.2f}"

    return (f"headline: tandem/torch time {mean:.2f} (geometric mean of {len(ratios)} cases; {end(ratios[0])} to "
            f"{end(ratios[-1])})")


# ---------------------------------------------------------------- OpenBLAS through ctypes

def load_openblas():
    """The OpenBLAS library with cblas_sgemm and cblas_dgemm typed, or None where there is none (a GPU machine may
    lack it)."""
    try:
        blas = ctypes.CDLL(ctypes.util.find_library("openblas") or "libopenblas.so.0")
    except OSError:
        return None
    i, p = ctypes.c_int, ctypes.c_void_p
    for name, real in (("cblas_sgemm", ctypes.c_float), ("cblas_dgemm", ctypes.c_double)):
        getattr(blas, name).argtypes = [i, i, i, i, i, i, real, p, i, p, i, real, p, i]
        getattr(blas, name).restype = None
    blas.openblas_get_config.restype = ctypes.c_char_p
    return blas


_blas = load_openblas()
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


def gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
    fn = _blas.cblas_sgemm if a.dtype == torch.float32 else _blas.cblas_dgemm
    fn(ROW_MAJOR, TRANS if ta else NO_TRANS, TRANS if tb else NO_TRANS, m, n, k, 1.0, a.data_ptr(), lda, b.data_ptr(),
       ldb, 0.0, c.data_ptr(), ldc)


# ---------------------------------------------------------------- table (the format of bench_ops.cpp)

def fmt_time(s):
    if s < 1e-6:
        return f"{s * 1e9:.1f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.2f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"


def fmt_value(v, unit):
    return (f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}") + " " + unit


def print_line(thr, name, size, t, figure, ceiling, ratio):
    print(f"{thr:<4} {name:<26} {size:<12} {t:>11} {figure:>15} {ceiling:>24} {ratio:>6}", flush=True)


class Bench:
    def __init__(self, quick, filt):
        self.quick, self.filter = quick, filt
        self.budget = 0.05 if quick else 0.2
        self.threads = 1
        self.times = {}  # (thr, case, size) -> seconds, for --compare

    def emit(self, name, size, t, figure, ceiling, ratio):
        self.times[(str(self.threads), name, size)] = t
        print_line(str(self.threads), name, size, fmt_time(t), figure, ceiling, ratio)

    def selected(self, section, name):
        return not self.filter or self.filter in section or self.filter in name

    def report(self, name, size, t, figure, ceiling, unit, kind):
        self.emit(name, size, t, fmt_value(figure, unit), fmt_value(ceiling, unit) + " " + kind,
                  f"{figure / ceiling:.2f}")

    @staticmethod
    def copy_moving(traffic):
        """torch's copy_ moving `traffic` bytes (half read, half written) as float32."""
        src, dst = torch.ones(traffic // 8), torch.zeros(traffic // 8)
        return lambda: dst.copy_(src)

    def bandwidth_case(self, section, name, size, traffic, op):
        if not self.selected(section, name):
            return
        t, tc = time_pair(op, self.copy_moving(traffic), self.budget)
        self.report(name, size, t, traffic / t * 1e-9, traffic / tc * 1e-9, "GB/s", "copy_")

    # ------------------------------------------------------------ cases

    def small(self):
        a, b = torch.randn(10), torch.randn(10)
        for name, op in (("small add", lambda: a + b), ("small relu", lambda: a.relu()), ("small sum", lambda: a.sum())):
            if self.selected("small", name):
                t = time_per_call(op, self.budget)
                self.emit(name, "10", t, f"{t * 1e6:.2f} us/call", "-", "-")

    def elementwise(self, n):
        size = {1 << 16: "2^16", 1 << 20: "2^20"}.get(n, "2^24")
        f4 = 4 * n
        a, b, inplace = torch.randn(n), torch.randn(n), torch.randn(n)
        C = 256
        x, bias = torch.randn(n // C, C), torch.randn(C)
        side = round(math.sqrt(n))
        square = torch.randn(side, side)
        s = "elementwise"
        self.bandwidth_case(s, "add", size, 3 * f4, lambda: a + b)
        self.bandwidth_case(s, "mul", size, 3 * f4, lambda: a * b)
        self.bandwidth_case(s, "add_ (in place)", size, 3 * f4, lambda: inplace.add_(b))
        self.bandwidth_case(s, "exp", size, 2 * f4, lambda: a.exp())
        self.bandwidth_case(s, "sigmoid", size, 2 * f4, lambda: a.sigmoid())
        self.bandwidth_case(s, "relu", size, 2 * f4, lambda: a.relu())
        self.bandwidth_case(s, "add (N,256)+(256)", size, 2 * f4 + 4 * C, lambda: x + bias)
        self.bandwidth_case(s, "to float16", size, f4 + 2 * n, lambda: a.to(torch.float16))
        self.bandwidth_case(s, "t().contiguous()", size, 2 * f4, lambda: square.t().contiguous())

    def reductions(self):
        s = "reduction"
        rows = 1024 if self.quick else 4096
        size = f"{rows}x{rows}"
        x = torch.randn(rows, rows)
        nbytes = x.numel() * 4
        # bench_ops's read loop has no torch counterpart: the ceiling is copy_ bandwidth over the bytes read.
        copy = self.copy_moving(nbytes)
        for name, op in (("sum", lambda: x.sum()), ("sum dim 0", lambda: x.sum(0)), ("sum dim 1", lambda: x.sum(1)),
                         ("amax", lambda: x.amax())):
            if self.selected(s, name):
                t, tc = time_pair(op, copy, self.budget)
                self.report(name, size, t, nbytes / t * 1e-9, nbytes / tc * 1e-9, "GB/s", "copy_")
        logits = torch.randn(rows, 1000)
        self.bandwidth_case(s, "softmax dim -1", f"{rows}x1000", 2 * logits.numel() * 4, lambda: logits.softmax(-1))

    def matmul_case(self, name, dtype, M, K, N, ta, tb, size):
        if not self.selected("matmul", name):
            return
        a_s = torch.randn(K, M, dtype=dtype) if ta else torch.randn(M, K, dtype=dtype)
        b_s = torch.randn(N, K, dtype=dtype) if tb else torch.randn(K, N, dtype=dtype)
        a, b = (a_s.t() if ta else a_s), (b_s.t() if tb else b_s)
        c = torch.empty(M, N, dtype=dtype)

        def blas():
            gemm(ta, tb, M, N, K, a_s, a_s.size(1), b_s, b_s.size(1), c, N)

        blas()
        diff = (torch.matmul(a, b) - c).abs().max().item()
        if not diff <= 1e-4 * c.abs().max().item():
            print(f"# WARNING: {name} {size} differs from cblas by {diff}")
        t, tc = time_pair(lambda: torch.matmul(a, b), blas, self.budget)
        flops = 2.0 * M * N * K
        self.report(name, size, t, flops / t * 1e-9, flops / tc * 1e-9, "GFLOP/s", "cblas")

    def matmul(self):
        cubes = [256] if self.quick else [256, 1024]
        f32, f64 = torch.float32, torch.float64
        for s in cubes:
            self.matmul_case("matmul f32", f32, s, s, s, False, False, f"{s}^3")
            self.matmul_case("matmul f64", f64, s, s, s, False, False, f"{s}^3")
        self.matmul_case("matmul f32", f32, 128, 784, 256, False, False, "128x784x256")
        self.matmul_case("matmul f64", f64, 128, 784, 256, False, False, "128x784x256")
        self.matmul_case("matmul f32 x@W.t()", f32, 128, 784, 256, False, True, "128x784x256")
        self.matmul_case("matmul f32 g.t()@x", f32, 256, 128, 784, True, False, "256x128x784")
        for s in cubes:
            self.matmul_case("matmul f32 a.t()@b", f32, s, s, s, True, False, f"{s}^3")

    def run_pass(self, threads):
        self.threads = threads
        torch.set_num_threads(threads)
        _blas.openblas_set_num_threads(threads)
        # The order of bench_ops: OpenBLAS's threads spin a while after a call, so GEMMs go last.
        self.small()
        self.elementwise(1 << 16)
        self.elementwise(1 << 20 if self.quick else 1 << 24)
        self.reductions()
        self.matmul()


# ---------------------------------------------------------------- comparison with bench_ops's table

UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def table_lines(path):
    """The seven fields of each line of a table in the format above (columns two or more spaces apart), without
    the comments and the header."""
    with open(path) as f:
        for line in f:
            fields = re.split(r"\s{2,}", line.strip())
            if not (line.startswith("#") or len(fields) != 7 or fields[0] == "thr"):
                yield fields


def parse_time(field):
    """Seconds of a time field ("1.23 us"), None for "-"."""
    if field == "-":
        return None
    value, unit = field.split()
    return float(value) * UNITS[unit]


def read_table(path):
    """{(thr, case, size): seconds} from a table in the format above."""
    return {(f[0], f[1], f[2]): parse_time(f[3]) for f in table_lines(path)}


def table_rows(path):
    """{(thr, case, size): (seconds or None, ratio)} from a device bench's table (bench_autograd, bench_norm,
    bench_optim, their peers): the same seven columns as above."""
    return {(f[0], f[1], f[2]): (parse_time(f[3]), f[6]) for f in table_lines(path)}


def print_comparison(tandem_rows, torch_rows):
    print("# time of Tandem / time of torch for the same case (below 1: Tandem faster)")
    print(f"{'thr':<4} {'case':<26} {'size':<12} {'tandem':>11} {'torch':>11} {'tandem/torch':>12}")
    for key, t in tandem_rows.items():
        if key in torch_rows:
            p = torch_rows[key]
            print(f"{key[0]:<4} {key[1]:<26} {key[2]:<12} {fmt_time(t):>11} {fmt_time(p):>11} {t / p:>12.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer and smaller sizes, shorter timings (a smoke run)")
    p.add_argument("--filter", default="", help="only the cases whose section or name contains this")
    p.add_argument("--compare", metavar="TANDEM_TABLE", help="bench_ops's output: print Tandem/torch time ratios")
    args = p.parse_args()
    if _blas is None:
        sys.exit("peer_torch: no OpenBLAS library found: its cblas_?gemm is the GEMM ceiling here")

    torch.manual_seed(0)
    threads_all = os.cpu_count() or 1
    print(f"# peer_torch: torch {torch.__version__}, OpenBLAS {_blas.openblas_get_config().decode()}; "
          f"{threads_all} hardware threads{'; --quick' if args.quick else ''}")
    print("# time: median per call; ratio = figure / ceiling, both measured in this run (1.00 = at the ceiling)")
    print("# copy_: torch's copy_ of float32 moving the same bytes (read + written); cblas: cblas_?gemm on the "
          "same buffers")
    print_line("thr", "case", "size", "time", "figure", "ceiling", "ratio")
    bench = Bench(args.quick, args.filter)
    bench.run_pass(1)
    if threads_all > 1:
        bench.run_pass(threads_all)
    if args.compare:
        print()
        print_comparison(read_table(args.compare), bench.times)

if __name__ == "__main__":
    main()
