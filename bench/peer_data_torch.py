#!/usr/bin/python3
"""The cases of bench_data run with torch.utils.data, printed in the same table, so that Tandem's DataLoader and
torch's can be compared side by side. torch is a peer for benchmarking only, never a build dependency.

Run it with Debian's /usr/bin/python3 (the one with python3-torch), or any python3 with torch:
    /usr/bin/python3 bench/peer_data_torch.py [--device cpu|cuda|cuda:N] [--quick] [--filter SUBSTR]
                                              [--compare TANDEM_TABLE]
--compare reads bench_data's output (run with the same --device) and prints a third table: time of Tandem / time of
torch per case, its inverse (Tandem's throughput over torch's) and each program's figure.

Without torchvision: the transforms are torch ops in a Dataset's __getitem__ (torchvision's ToTensor, RandomCrop(28,
padding=2), RandomHorizontalFlip, Normalize do the same per image); Fashion-MNIST is read from its gzip IDX files with
Python's gzip module. torch's workers are processes (started with fork, as on Linux by default before Python 3.14),
made anew each epoch (persistent_workers=False, as Tandem's default); the main process runs one thread in the loader
and h2d cases (torch.set_num_threads(1), and OpenBLAS's threads through ctypes where it is found, as the thr column
says; each worker process runs one too). On cuda the batches are pinned (pin_memory=True) and
moved with .to(device, non_blocking=True) in the loop, as a torch training loop does; every timed epoch ends with
torch.cuda.synchronize().
"""
import gzip
import os
import re
import struct
import time
import warnings

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

# From peer_torch.py (this file's folder): the options, the table lines and the headline.
import peer_torch
from peer_torch import describe, fmt_time, fmt_value, headline, peer_arguments, print_row, resolve_device, wait_for

WIDTHS = (-4, -26, -20, 10, 16, 24, 6)  # bench_data's columns
BATCH = 128
ROOT = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


def set_threads(n):
    """torch's intra-op threads and, where it is loaded, OpenBLAS's (as bench_data)."""
    torch.set_num_threads(n)
    if peer_torch._blas is not None:
        peer_torch._blas.openblas_set_num_threads(n)


def print_line(*fields):
    print_row(WIDTHS, *fields)


def fmt_rate(per_s):
    """Samples per second: "98.6k samples/s", "2.11M samples/s" (bench_data's fmt_rate)."""
    v = fmt_value(per_s * 1e-6, "M") if per_s >= 1e6 else fmt_value(per_s * 1e-3, "k")
    return v[:-2] + v[-1] + " samples/s"


# ---------------------------------------------------------------- the data

def read_idx(path):
    """The tensor of an IDX file (uint8 only: the MNIST family), gunzipped when its name ends in .gz."""
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        raw = f.read()
    zero, kind, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or kind != 0x08:
        raise ValueError(f"{path}: not a uint8 IDX file (magic {raw[:4].hex()})")
    sizes = struct.unpack(f">{ndim}i", raw[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(raw[4 + 4 * ndim:]), dtype=torch.uint8).reshape(sizes)


def fashion_mnist_train():
    """(images (N, 1, 28, 28) uint8, labels (N) int64, real); generated data where the files are absent."""
    images_path, labels_path = (os.path.join(ROOT, f"train-{n}-ubyte.gz") for n in ("images-idx3", "labels-idx1"))
    if os.path.exists(images_path) and os.path.exists(labels_path):
        return read_idx(images_path).unsqueeze(1), read_idx(labels_path).long(), True
    g = torch.Generator().manual_seed(0)
    return (torch.randint(0, 256, (60000, 1, 28, 28), dtype=torch.uint8, generator=g),
            torch.randint(0, 10, (60000,), generator=g), False)


class Images(Dataset):
    """Example i: (transform(images[i]), labels[i]); raw uint8 without a transform."""

    def __init__(self, images, labels, transform=None):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self):
        return self.images.shape[0]

    def __getitem__(self, i):
        x = self.images[i]
        return (self.transform(x) if self.transform else x), self.labels[i]


def to_float_normalize(x):
    return (x.float() * (1 / 255) - MEAN) / STD


def augment(x):
    """ToFloat(1/255), RandomCrop(28, padding=2), RandomHorizontalFlip(), Normalize(0.2860, 0.3530)."""
    x = F.pad(x.float() * (1 / 255), (2, 2, 2, 2))
    top, left = torch.randint(0, 5, (2,)).tolist()
    x = x[:, top:top + 28, left:left + 28]
    if torch.rand(1).item() < 0.5:
        x = x.flip(-1)
    return (x - MEAN) / STD


def make_loader(dataset, device, batch, workers, pin):
    return DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers,
                      pin_memory=pin and device.type == "cuda", generator=torch.Generator().manual_seed(0),
                      multiprocessing_context="fork" if workers > 0 else None)


def drain(loader, batches, device):
    """The first `batches` batches of an epoch (all when there are fewer), on the device when it is a GPU."""
    for k, (x, y) in enumerate(loader):
        if device.type == "cuda":
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        if k + 1 >= batches:
            break


def time_rounds(fns, min_rounds, budget, device):
    """bench_data's time_rounds: a warm-up call each, then rounds of one call each until every one has min_rounds
    samples and budget seconds have passed; medians."""
    for f in fns:
        f()
        wait_for(device)
    samples = [[] for _ in fns]
    start = time.perf_counter()
    while len(samples[0]) < min_rounds or time.perf_counter() - start < budget:
        for f, s in zip(fns, samples):
            t0 = time.perf_counter()
            f()
            wait_for(device)
            s.append(time.perf_counter() - t0)
    return [sorted(s)[len(s) // 2] for s in samples]


def selected(args, section, name):
    return not args.filter or args.filter in section or args.filter in name


def worker_counts():
    return [0, 1, 2, 4] + ([8] if (os.cpu_count() or 1) >= 8 else [])


# ---------------------------------------------------------------- cases

def bench_loader(args, device, images, labels, rows):
    set_threads(1)
    n = images.shape[0]
    size = f"{n}x1x28x28 b128"
    batches = min(100, -(-n // BATCH)) if args.quick else -(-n // BATCH)
    samples = min(n, batches * BATCH)
    scale = 0.25 if args.quick else 1
    workers = worker_counts()

    def emit(name, t, rate, ref, ref_label):
        fields = ("1", name, size, fmt_time(t / batches), fmt_rate(rate), fmt_rate(ref) + ref_label,
                  f"{rate / ref:.2f}")
        print_line(*fields)
        rows[fields[:3]] = fields

    if selected(args, "loader", "raw"):
        raw = Images(images, labels)
        fns = [lambda w=w: drain(make_loader(raw, device, BATCH, w, True), batches, device) for w in workers]
        order = torch.randperm(n, generator=torch.Generator().manual_seed(0))

        def gather():
            for k in range(batches):
                idx = order[k * BATCH:(k + 1) * BATCH]
                x, y = images.index_select(0, idx), labels.index_select(0, idx)
                if device.type == "cuda":
                    x, y = x.to(device), y.to(device)

        t = time_rounds(fns + [gather], 3 if args.quick else 5, 2.0 * scale, device)
        ref = samples / t[-1]
        for w, tw in zip(workers, t):
            emit(f"raw workers={w}", tw, samples / tw, ref, " gather")

    if selected(args, "loader", "aug"):
        aug = Images(images, labels, augment)
        fns = [lambda w=w: drain(make_loader(aug, device, BATCH, w, True), batches, device) for w in workers]
        t = time_rounds(fns, 1 if args.quick else 2, 0, device)
        ref = samples / t[0]
        for w, tw in zip(workers, t):
            emit(f"aug workers={w}", tw, samples / tw, ref, " w=0")


def bench_h2d(args, device, rows):
    if device.type != "cuda" or not selected(args, "h2d", "h2d"):
        return
    set_threads(1)
    nbytes = 256 << 20
    gb = nbytes * 1e-9
    pageable = torch.ones(nbytes, dtype=torch.uint8)
    pinned = pageable.pin_memory()
    # torch has no direct cudaMemcpy: its own pinned copy (a cudaMemcpyAsync) is the reference here.
    t = time_rounds([lambda: pinned.to(device, non_blocking=True), lambda: pageable.to(device, non_blocking=True)],
                    5 if args.quick else 15, 0.5 * (0.25 if args.quick else 1), device)
    ceiling = gb / t[0]
    ref = fmt_value(ceiling, "GB/s") + " .to pinned"
    for name, tc in (("h2d .to pinned", t[0]), ("h2d .to pageable", t[1])):
        fields = ("1", name, "256 MiB", fmt_time(tc), fmt_value(gb / tc, "GB/s"), ref, f"{gb / tc / ceiling:.2f}")
        print_line(*fields)
        rows[fields[:3]] = fields

    batch = 64
    n = batch * (32 if args.quick else 128)
    g = torch.Generator().manual_seed(0)
    ds = TensorDataset(torch.randint(0, 256, (n, 3, 224, 224), dtype=torch.uint8, generator=g),
                       torch.randint(0, 1000, (n,), generator=g))
    epoch_gb = (n * 3 * 224 * 224 + n * 8) * 1e-9
    size = f"{n}x3x224x224 b64"
    workers = [4] + ([8] if (os.cpu_count() or 1) >= 8 and not args.quick else [])
    runs = [(f"loader {'pinned' if pin else 'pageable'} workers={w}", pin, w) for pin in (True, False) for w in workers]
    fns = [lambda pin=pin, w=w: drain(make_loader(ds, device, batch, w, pin), n // batch, device) for _, pin, w in runs]
    tl = time_rounds(fns, 2 if args.quick else 4, 1.0 * (0.25 if args.quick else 1), device)
    for (name, _, _), tr in zip(runs, tl):
        gbs = epoch_gb / tr
        fields = ("1", name, size, fmt_time(tr / (n // batch)), fmt_value(gbs, "GB/s"), ref, f"{gbs / ceiling:.2f}")
        print_line(*fields)
        rows[fields[:3]] = fields


class Mlp:
    def __init__(self, device):
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                                         torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(device)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def step(self, x, y):
        self.opt.zero_grad()
        F.cross_entropy(self.model(x.flatten(1)), y).backward()
        self.opt.step()


def bench_wait(args, device, images, labels, threads, rows):
    if not selected(args, "wait", "wait mlp"):
        return
    set_threads(threads)
    ds = Images(images, labels, to_float_normalize)
    n = images.shape[0]
    steps = min(100, -(-n // BATCH)) if args.quick else -(-n // BATCH)
    size = f"{steps} steps b128"
    cuda = device.type == "cuda"

    def batches(loader):
        for x, y in loader:
            yield (x.to(device, non_blocking=True), y.to(device, non_blocking=True)) if cuda else (x, y)

    # The reference: the same steps on batches built beforehand, run before and after the loader's runs (their
    # mean), after ten steps of warm-up.
    prebuilt = []
    for b in batches(make_loader(ds, device, BATCH, 0, True)):
        prebuilt.append(b)
        if len(prebuilt) == steps:
            break
    wait_for(device)

    def train_prebuilt(count):
        mlp = Mlp(device)
        t0 = time.perf_counter()
        for x, y in prebuilt[:count]:
            mlp.step(x, y)
        wait_for(device)
        return time.perf_counter() - t0

    train_prebuilt(min(10, steps))
    prebuilt_s = train_prebuilt(steps)
    workers = (0, 2)
    runs = [train_with_loader(make_loader(ds, device, BATCH, w, True), batches, steps, device) for w in workers]
    prebuilt_s = (prebuilt_s + train_prebuilt(steps)) / 2
    ref_step = prebuilt_s / steps
    prebuilt.clear()

    for w, (wall, wait) in zip(workers, runs):
        step = wall / steps
        fields = (str(threads), f"wait mlp workers={w}", size, fmt_time(step), f"{100 * wait / wall:.2f}% wait",
                  fmt_time(ref_step) + " prebuilt", f"{ref_step / step:.2f}")
        print_line(*fields)
        rows[fields[:3]] = fields


def train_with_loader(loader, batches, steps, device):
    """(seconds of `steps` training steps fed by the loader, the part of them spent in next() of its iterator)."""
    mlp = Mlp(device)
    wait = 0.0
    t0 = time.perf_counter()
    tw = time.perf_counter()
    it = batches(loader)
    x, y = next(it)
    wait += time.perf_counter() - tw
    for s in range(steps):
        mlp.step(x, y)
        if s + 1 == steps:
            break
        tw = time.perf_counter()
        x, y = next(it)
        wait += time.perf_counter() - tw
    it.close()
    wait_for(device)
    return time.perf_counter() - t0, wait


# ---------------------------------------------------------------- comparison with bench_data's table

UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def read_rows(path):
    """{(thr, case, size): the seven fields} of each table line of bench_data's output (columns two or more spaces
    apart), without the comments and the header."""
    rows = {}
    with open(path) as f:
        for line in f:
            fields = tuple(re.split(r"\s{2,}", line.strip()))
            if not line.startswith("#") and len(fields) == 7 and fields[0] != "thr":
                rows[fields[:3]] = fields
    return rows


def seconds(field):
    value, unit = field.split()
    return float(value) * UNITS[unit]


def print_comparison(tandem_rows, torch_rows):
    print("# time of Tandem / time of torch for the same case (below 1: Tandem faster); its inverse, Tandem's")
    print("# throughput over torch's (above 1: Tandem faster); each program's figure")
    widths = (-4, -26, -20, 10, 10, 12, 10, 16, 16)
    print_row(widths, "thr", "case", "size", "tandem", "torch", "tandem/torch", "throughput", "figure tandem",
              "figure torch")
    times = []
    for key, t_fields in tandem_rows.items():
        if key not in torch_rows:
            continue
        p_fields = torch_rows[key]
        t, p = seconds(t_fields[3]), seconds(p_fields[3])
        times.append((t, p, key[1]))
        ratio, inverse = (f"{t / p:.2f}", f"{p / t:.2f}") if t and p else ("-", "-")
        print_row(widths, *key, t_fields[3], p_fields[3], ratio, inverse, t_fields[4], p_fields[4])
    line = headline(times)
    if line:
        print(line)


def main():
    args = peer_arguments(__doc__.split("\n\n")[0], "bench_data").parse_args()
    # torch warns when num_workers passes the cores it suggests; the table runs those on purpose.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    device = resolve_device(args.device, "peer_data_torch")
    torch.manual_seed(0)
    print(f"# peer_data_torch: torch {torch.__version__}; {os.cpu_count()} hardware threads; device "
          f"{describe(device)}{'; --quick' if args.quick else ''}")
    images, labels, real = fashion_mnist_train()
    if not real:
        print(f"# note: {ROOT} not found: generated uint8 images (60000, 1, 28, 28) stand in for Fashion-MNIST")
    print("# the table of bench_data, for torch.utils.data.DataLoader (worker processes); h2d's reference is torch's")
    print("# own pinned .to(non_blocking=True); thr: torch's intra-op threads and OpenBLAS's where found (the loader's")
    print("# workers are extra processes)")
    print_line("thr", "case", "size", "time", "figure", "reference", "ratio")
    rows = {}
    bench_loader(args, device, images, labels, rows)
    bench_h2d(args, device, rows)
    bench_wait(args, device, images, labels, 1, rows)
    threads = os.cpu_count() or 1
    if threads > 1 and device.type == "cpu":
        bench_wait(args, device, images, labels, threads, rows)
    if args.compare:
        print()
        print_comparison(read_rows(args.compare), rows)


if __name__ == "__main__":
    main()
