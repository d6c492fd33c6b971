#!/usr/bin/python3
"""The cases of bench_amp run in PyTorch, printed in the same table, so that Tandem's mixed precision and torch's can be
compared side by side: a training step in float32 and in amp (torch.autocast; torch.amp.GradScaler on cuda) for the
Fashion-MNIST CNN (batch 128) and an MLP 784-4096-4096-10 (batch 1024). torch is a peer for benchmarking only, never a
build dependency.

Run it with Debian's /usr/bin/python3 (the one with python3-torch), or any python3 with torch:
    /usr/bin/python3 bench/peer_amp_torch.py [--device cpu|cuda|cuda:N] [--threads N] [--quick] [--filter SUBSTR]
                                             [--compare TANDEM_TABLE]
--compare reads bench_amp's output (run with the same --device and --threads) and prints one table with both: per
model and figure, each library's float32 and amp figures, amp/float32 for each, and Tandem/torch per precision; then
the headline and the issue's goals.

What it measures, as bench_amp does:
- a step: zero_grad(set_to_none=True), forward and cross_entropy under torch.autocast (amp: float16 on cuda with
  torch.amp.GradScaler, bfloat16 on the cpu without one: torch 1.13 has no cpu GradScaler, and bfloat16 needs none),
  backward, Adam 1e-3: fused=True on cuda (its step takes the scaler's found-inf flag on the device), foreach=True on
  the cpu. float32 on cuda runs without TF32 (torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
  off), as Tandem's float32 does.
- time: the median per step, steps batched until a sample lasts 1 ms, each batch ended by torch.cuda.synchronize().
- memory: on cuda torch.cuda.memory_allocated after the loss (act) and torch.cuda.max_memory_allocated over the step
  (peak), each over memory_allocated at the step's start, gradients freed. On the cpu torch has no allocator
  statistics: the resident set (VmRSS, VmHWM from /proc/self/status, the peak reset through /proc/self/clear_refs),
  measured before the timings with glibc's malloc mapping every block above 64 KiB apart (mallopt through ctypes), so
  that freed blocks leave the resident set; then the timings run with the heap at glibc's dynamic ceiling (mapping
  above 32 MiB, trimming above 64 MiB), as bench_amp does.
- host synchronisations per step, on cuda: torch.cuda.set_sync_debug_mode("warn") turns each synchronizing call
  torch makes (a copy to the host, .item(), nonzero, a synchronize) into a warning; the warnings of 5 steps are
  counted. "amp unfused" counts them for torch's usual recipe, Adam without fused=True, whose step the scaler decides
  on the host (GradScaler.step reads found_inf with .item()).
"""
import ctypes
import re
import statistics
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

# From peer_torch.py (this file's folder): the sampling on a device, the options, writing and reading the tables.
import peer_torch
from peer_torch import (Sampler, describe, fmt_time, headline, parse_time, peer_arguments, print_row, resolve_device,
                        wait_for)

WIDTHS = (-4, -20, 5, 10, 11, 11, 10, 8, 8, 8)  # bench_amp's columns
SAMPLE_BUDGET_S = 2  # per model (--quick: a quarter)
SYNC_COUNT_STEPS = 5

_libc = ctypes.CDLL("libc.so.6")
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3


def print_line(*fields):
    print_row(WIDTHS, *fields)


# ---------------------------------------------------------------- memory

def status_kib(key):
    with open("/proc/self/status") as f:
        return next((int(line.split()[1]) for line in f if line.startswith(key)), 0)


class MemoryProbe:
    """Bytes in use on the device: cuda's allocator statistics, or the cpu's resident set (see the docstring)."""

    def __init__(self, device):
        self.device = device

    def start(self):
        """Resets the peak and returns the bytes in use now."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            return torch.cuda.memory_allocated(self.device)
        _libc.malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return self.now()

    def now(self):
        if self.device.type == "cuda":
            return torch.cuda.memory_allocated(self.device)
        return status_kib("VmRSS:") * 1024

    def peak(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return torch.cuda.max_memory_allocated(self.device)
        return status_kib("VmHWM:") * 1024


def map_large_blocks():
    _libc.mallopt(M_MMAP_THRESHOLD, 64 << 10)


def heap_for_timing():
    _libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
    _libc.mallopt(M_TRIM_THRESHOLD, 64 << 20)


# ---------------------------------------------------------------- models and steps

def make_cnn():
    # tandem train --model cnn (cli/models.cpp), as bench/peer_train_torch.py's
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def make_mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                         nn.Linear(4096, 10))


MODELS = [("cnn", 128, make_cnn), ("mlp", 1024, make_mlp)]


def amp_dtype(device):
    return torch.float16 if device.type == "cuda" else torch.bfloat16


def make_scaler():
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda")
    return torch.cuda.amp.GradScaler()


class Run:
    """One model with its optimizer (and scaler, for amp on cuda), trained on one synthetic batch."""

    def __init__(self, make, device, amp, fused, x, y):
        self.device, self.amp, self.x, self.y = device, amp, x, y
        torch.manual_seed(0)
        self.model = make().to(device)
        options = {"fused": True} if fused else {"foreach": True} if device.type == "cpu" else {}
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3, **options)
        self.scaler = make_scaler() if amp and device.type == "cuda" else None

    def forward(self):
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=amp_dtype(self.device), enabled=self.amp):
            return F.cross_entropy(self.model(self.x), self.y)

    def backward_and_step(self, loss):
        if self.scaler is None:
            loss.backward()
            self.opt.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()

    def step(self):
        self.backward_and_step(self.forward())


def syncs_per_step(run):
    """Host synchronisations per step on cuda (the sync debug mode's warnings), None on the cpu."""
    if run.device.type != "cuda":
        return None
    torch.cuda.synchronize(run.device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(SYNC_COUNT_STEPS):
                run.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize(run.device)
    return sum("synchroniz" in str(w.message) for w in caught) / SYNC_COUNT_STEPS


def measure_memory(run):
    """(peak, activations) of one step over what is in use at its start, gradients freed."""
    probe = MemoryProbe(run.device)
    run.opt.zero_grad(set_to_none=True)
    base = probe.start()
    loss = run.forward()
    if run.device.type == "cuda":
        torch.cuda.synchronize(run.device)
    act = probe.now() - base
    run.backward_and_step(loss)
    del loss
    return probe.peak() - base, act


def time_steps(runs, device, quick):
    """Median seconds per step of each run, their samples interleaved; at least 5 samples (--quick: 3)."""
    samplers = [Sampler(r.step, lambda: wait_for(device)) for r in runs]
    min_samples, budget = (3, SAMPLE_BUDGET_S / 4) if quick else (5, SAMPLE_BUDGET_S)
    start = time.perf_counter()
    while len(samplers[0].samples) < min_samples or time.perf_counter() - start < budget:
        for s in samplers:
            s.sample()
    return [statistics.median(s.samples) for s in samplers]


# ---------------------------------------------------------------- table

def fmt_mib(nbytes):
    return f"{nbytes / 2 ** 20:.1f} MiB"


def fmt_syncs(s):
    return "n/a" if s is None else f"{s:.0f}" if s == int(s) else f"{s:.2f}"


def measure_model(name, batch, make, device):
    """The runs of a model, warmed up, with their memory and host synchronisations measured."""
    x, y = torch.randn(batch, 1, 28, 28).to(device), torch.randint(0, 10, (batch,)).to(device)
    fused = device.type == "cuda"
    runs = [Run(make, device, False, fused, x, y), Run(make, device, True, fused, x, y)]
    warm_up = 5 if device.type == "cuda" else 1
    for run in runs:
        for _ in range(warm_up):
            run.step()
    figures = [dict(zip(("peak", "act"), measure_memory(run))) for run in runs]
    for run, f in zip(runs, figures):
        f["syncs"] = syncs_per_step(run)
    unfused = None
    if device.type == "cuda":
        run = Run(make, device, True, False, x, y)
        for _ in range(warm_up):
            run.step()
        unfused = syncs_per_step(run)
    return {"name": name, "batch": batch, "runs": runs, "figures": figures, "unfused": unfused}


def time_and_print(m, device, threads, quick):
    """Times the model's runs, prints its lines and returns them as {case: fields}."""
    ff, fa = m["figures"]
    ff["time"], fa["time"] = time_steps(m["runs"], device, quick)
    thr, batch, name = str(threads), str(m["batch"]), m["name"]
    lines = [(thr, f"{name} float32", batch, fmt_time(ff["time"]), fmt_mib(ff["peak"]), fmt_mib(ff["act"]),
              fmt_syncs(ff["syncs"]), "1.00", "1.00", "1.00"),
             (thr, f"{name} amp", batch, fmt_time(fa["time"]), fmt_mib(fa["peak"]), fmt_mib(fa["act"]),
              fmt_syncs(fa["syncs"]), f"{fa['time'] / ff['time']:.2f}", f"{fa['peak'] / ff['peak']:.2f}",
              f"{fa['act'] / ff['act']:.2f}")]
    if m["unfused"] is not None:
        lines.append((thr, f"{name} amp unfused", batch, "-", "-", "-", fmt_syncs(m["unfused"]), "-", "-", "-"))
    for line in lines:
        print_line(*line)
    return {line[1]: line for line in lines}


# ---------------------------------------------------------------- comparison with bench_amp's table

def table_rows(path):
    """{case: the ten fields} of a table in bench_amp's format (columns two or more spaces apart)."""
    rows = {}
    with open(path) as f:
        for line in f:
            fields = re.split(r"\s{2,}", line.strip())
            if not line.startswith("#") and len(fields) == len(WIDTHS) and fields[0] != "thr":
                rows[fields[1]] = fields
    return rows


def number(field, column):
    """A field as a number: seconds for time, bytes for memory, a count for syncs; None for "-" and "n/a"."""
    if field in ("-", "n/a"):
        return None
    if column == 3:
        return parse_time(field)
    if column in (4, 5):
        return float(field.split()[0]) * 2 ** 20
    return float(field)


FIGURES = [("step time", 3, fmt_time), ("peak memory", 4, fmt_mib), ("activations", 5, fmt_mib),
           ("host syncs", 6, fmt_syncs)]


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"


def print_comparison(tandem, torch_rows, device):
    models = [case[:-len(" float32")] for case in tandem if case.endswith(" float32")]
    widths = (-5, -20, 11, 11, 7, 11, 11, 7, 12, 12)
    print("# per figure: each library's float32 and amp, amp/f32 (below 1: amp smaller or faster), and tandem/torch "
          "per precision")
    print("# (below 1: Tandem smaller or faster)")
    print_row(widths, "model", "figure", "tandem f32", "tandem amp", "amp/f32", "torch f32", "torch amp", "amp/f32",
              "t/torch f32", "t/torch amp")
    values = {}  # (model, column) -> (tandem f32, tandem amp, torch f32, torch amp)
    for model in models:
        cases = [f"{model} float32", f"{model} amp"]
        if not all(c in tandem and c in torch_rows for c in cases):
            continue
        for label, column, fmt in FIGURES:
            t32, tamp, p32, pamp = (number(rows[c][column], column) for rows in (tandem, torch_rows) for c in cases)
            values[(model, column)] = (t32, tamp, p32, pamp)
            show = (lambda v: "n/a" if v is None else fmt(v))
            print_row(widths, model, label, show(t32), show(tamp), ratio(tamp, t32), show(p32), show(pamp),
                      ratio(pamp, p32), ratio(t32, p32), ratio(tamp, pamp))
        case = f"{model} amp unfused"
        if case in tandem and case in torch_rows:
            print_row(widths, model, "host syncs, unfused", "-", tandem[case][6], "-", "-", torch_rows[case][6], "-",
                      "-", "-")
    line = headline([(t32, p32, f"{model} float32") for (model, column), (t32, _, p32, _) in values.items()
                     if column == 3] +
                    [(tamp, pamp, f"{model} amp") for (model, column), (_, tamp, _, pamp) in values.items()
                     if column == 3])
    if line:
        print(line)
    for model in models:
        if (model, 3) not in values:
            continue
        time_ratio = [values[(model, 3)][1] / values[(model, 3)][0], values[(model, 3)][3] / values[(model, 3)][2]]
        act_ratio = [values[(model, 5)][1] / values[(model, 5)][0], values[(model, 5)][3] / values[(model, 5)][2]]
        syncs = [values[(model, 6)][1], values[(model, 6)][3]]
        if device.type == "cuda":
            def verdict(ok):
                return "met" if ok else "NOT met"
            print(f"goals ({model}, issue 16, on a GPU): amp speed-up tandem {1 / time_ratio[0]:.2f}x (1.6x or "
                  f"better: {verdict(time_ratio[0] <= 1 / 1.6)}), torch {1 / time_ratio[1]:.2f}x; activations amp/f32 "
                  f"tandem {act_ratio[0]:.2f} (at most 0.6: {verdict(act_ratio[0] <= 0.6)}), torch {act_ratio[1]:.2f};"
                  f" host syncs per amp step tandem {fmt_syncs(syncs[0])} (zero: {verdict(syncs[0] == 0)}), torch "
                  f"{fmt_syncs(syncs[1])}")
        else:
            def effect(r):
                return f"{r:.2f}x float32's time ({'a gain' if r < 1 else 'a cost'})"
            print(f"bfloat16 on the cpu ({model}): tandem {effect(time_ratio[0])}, activations {act_ratio[0]:.2f}x; "
                  f"torch {effect(time_ratio[1])}, activations {act_ratio[1]:.2f}x")


def main():
    args = peer_arguments(__doc__.split("\n\n")[0], "bench_amp", threads=True).parse_args()
    device = resolve_device(args.device, "peer_amp_torch")
    # Before any parallel work: torch refuses to change the inter-op pool once it has started.
    torch.set_num_interop_threads(args.threads)
    torch.set_num_threads(args.threads)
    if peer_torch._blas is not None:
        peer_torch._blas.openblas_set_num_threads(args.threads)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    print(f"# peer_amp_torch: torch {torch.__version__}; device {describe(device)}; {torch.get_num_threads()} "
          f"thread(s){'; --quick' if args.quick else ''}")
    print("# a step: zero_grad, forward and cross_entropy (autocast for amp), backward, Adam 1e-3 step "
          f"({'fused' if device.type == 'cuda' else 'foreach'}), on one")
    print("# synthetic batch of Fashion-MNIST's shape (randn images, random labels). amp: " +
          ("autocast to float16, torch.amp.GradScaler" if device.type == "cuda" else "autocast to bfloat16, no scaler"))
    print("# time: median per step; peak: the step's peak over its start (gradients freed); act: held after the")
    print("# loss, what the forward keeps for the backward; both from " +
          ("torch.cuda.max_memory_allocated and memory_allocated" if device.type == "cuda" else
           "the resident set (VmHWM, VmRSS; no cpu allocator\n# statistics), measured before the timings with malloc "
           "mapping every block above 64 KiB apart"))
    print("# syncs: host synchronisations per step" +
          (" (torch.cuda.set_sync_debug_mode warnings)" if device.type == "cuda" else ": none on the cpu (n/a)") +
          "; */f32: amp over float32")
    print_line("thr", "case", "batch", "time", "peak", "act", "syncs", "time/f32", "peak/f32", "act/f32")
    if device.type == "cpu":
        map_large_blocks()
    models = [measure_model(name, batch, make, device) for name, batch, make in MODELS
              if not args.filter or args.filter in name]
    if device.type == "cpu":
        heap_for_timing()
    rows = {}
    for m in models:
        rows.update(time_and_print(m, device, args.threads, args.quick))
    for m in models:
        n = sum(p.numel() for p in m["runs"][0].model.parameters())
        print(f"# {m['name']}: {n} parameters ({fmt_mib(4 * n)}); autocast's {str(amp_dtype(device))[6:]} copies of "
              f"them: {fmt_mib(2 * n)}, of which act holds those of the\n# layers whose input needs a gradient (every "
              "layer but the first)")
    if args.compare:
        print()
        print_comparison(table_rows(args.compare), rows, device)


if __name__ == "__main__":
    main()
