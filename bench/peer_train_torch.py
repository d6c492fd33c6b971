#!/usr/bin/python3
"""The torch peer of `tandem train`: the same Fashion-MNIST recipe (data, models, optimizers, schedules) trained with
PyTorch on the CPU, one line printed per epoch and the same metrics.jsonl written (to --out DIR). torch is a peer for
benchmarking only, never a build dependency.

Run it with Debian's /usr/bin/python3 (the one with python3-torch), or any python3 with torch:
    /usr/bin/python3 bench/peer_train_torch.py [--model mlp|cnn] [--epochs N] [--batch-size B] [--lr LR]
        [--optimizer adam|sgd|adamw] [--schedule cosine|none|onecycle] [--threads T] [--seed S]
        [--train-examples N] [--test-examples N] [--loader tensor|dataloader] [--workers W] [--out DIR]
bench/train_vs_torch.py runs it beside `tandem train` and compares the two metrics files.

The recipe: uint8 pixels, shape (N, 1, 28, 28), batched as they are and turned into x/255, then (x - 0.2860) / 0.3530 in
the step (as tandem train's prepare_images); the train set shuffled every epoch (a generator seeded with --seed), the
last batch kept even when short; the test set evaluated in batches of 1000 under no_grad, in eval mode. mlp:
784-256-128-10 with ReLU; cnn: conv32-BN-ReLU-pool-conv64-BN-ReLU-pool-fc128-ReLU-fc10; PyTorch's default init.
cross_entropy; Adam (default), SGD with momentum 0.9, or AdamW with weight_decay 0.01; CosineAnnealingLR(T_max = all
steps, default) or OneCycleLR(max_lr = --lr, total_steps = all steps), each stepped after every optimizer step, both
with torch's other defaults. --threads defaults as tandem train's: 1 for mlp, every core for cnn.

What is timed, as tandem train times it: epoch_time_s is the epoch's training loop, from its first batch being asked
for to its last optimizer step, data included; eval_time_s the test pass after it. loader_wait_share is the part of
epoch_time_s spent getting batches: with --loader tensor (default) a batch is an index_select of the uint8 tensors by
the epoch's permutation (torch at its fastest, no per-example work); with --loader dataloader it comes from
torch.utils.data.DataLoader over a TensorDataset (per-example indexing and default_collate, --workers processes).
peak_memory_bytes is the process's peak resident set (ru_maxrss): the CPU has no allocator statistics in torch.
train_loss and train_accuracy are over the epoch's batches as they were trained (train mode), weighted by batch size.
"""
import argparse
import json
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

# From this file's folder: OpenBLAS through ctypes (its thread count), and the IDX reader and normalization of the
# data peer.
import peer_torch
from peer_data_torch import MEAN, STD, read_idx

DATA = "/usr/share/datasets/fashion-mnist"
EVAL_BATCH = 1000


def arguments():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    p.add_argument("--epochs", type=int, default=10, help="(default 10, as tandem train)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--optimizer", choices=("adam", "sgd", "adamw"), default="adam")
    p.add_argument("--schedule", choices=("cosine", "none", "onecycle"), default="cosine")
    p.add_argument("--threads", type=int, help="torch's intra-op and inter-op threads and OpenBLAS's (default as "
                                                "tandem train: 1 for mlp, every core for cnn)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-examples", type=int, help="use only the first N training examples")
    p.add_argument("--test-examples", type=int, help="use only the first N test examples")
    p.add_argument("--loader", choices=("tensor", "dataloader"), default="tensor",
                   help="tensor: index_select batches of the uint8 tensors (default); dataloader: "
                        "torch.utils.data.DataLoader")
    p.add_argument("--workers", type=int, default=0, help="the DataLoader's worker processes (--loader dataloader)")
    p.add_argument("--data", default=DATA, help=f"the folder of the four gzip IDX files (default {DATA})")
    p.add_argument("--out", metavar="DIR", help="write DIR/metrics.jsonl (one JSON object per epoch)")
    args = p.parse_args()
    for name in ("epochs", "batch_size", "threads", "train_examples", "test_examples"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.workers and args.loader != "dataloader":
        p.error("--workers needs --loader dataloader")
    if args.threads is None:
        args.threads = 1 if args.model == "mlp" else os.cpu_count() or 1
    return args


def load_split(root, prefix, limit):
    """(images (N, 1, 28, 28) uint8, labels (N) int64) of "train" or "t10k", the first `limit` only."""
    paths = [os.path.join(root, f"{prefix}-{kind}-ubyte.gz") for kind in ("images-idx3", "labels-idx1")]
    for path in paths:
        if not os.path.exists(path):
            sys.exit(f"peer_train_torch: {path} is missing: apt-get install dataset-fashion-mnist, or pass --data DIR")
    images, labels = (read_idx(path)[:limit] for path in paths)
    return images.unsqueeze(1).contiguous(), labels.long()


def prepare_images(pixels):
    """A batch of uint8 pixels as the model's input: x/255, normalized."""
    return (pixels.float() / 255 - MEAN) / STD


def make_model(name):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def make_optimizer(args, params, total_steps):
    """(optimizer, scheduler or None), the scheduler meant to step after every optimizer step."""
    if args.optimizer == "adam":
        opt = torch.optim.Adam(params, lr=args.lr)
    elif args.optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=args.lr, momentum=0.9)
    else:
        opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    if args.schedule == "cosine":
        return opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total_steps)
    if args.schedule == "onecycle":
        return opt, torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=total_steps)
    return opt, None


def train_batches(args, x, y, generator):
    """The epoch's shuffled batches (the last one short where N is not a multiple of the batch size)."""
    if args.loader == "dataloader":
        return iter(DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True, drop_last=False,
                               generator=generator, num_workers=args.workers))
    order = torch.randperm(x.shape[0], generator=generator)
    return ((x.index_select(0, idx), y.index_select(0, idx)) for idx in order.split(args.batch_size))


def train_epoch(args, model, opt, sched, x, y, generator):
    """(loss, accuracy, seconds, seconds waiting for batches) of one epoch of training."""
    model.train()
    loss_sum, correct, wait = 0.0, 0, 0.0
    start = time.perf_counter()
    batches = train_batches(args, x, y, generator)
    while True:
        t = time.perf_counter()
        batch = next(batches, None)
        wait += time.perf_counter() - t
        if batch is None:
            break
        xb, yb = batch
        logits = model(prepare_images(xb))
        loss = F.cross_entropy(logits, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        loss_sum += loss.item() * yb.shape[0]
        correct += (logits.argmax(1) == yb).sum().item()
    seconds = time.perf_counter() - start
    return loss_sum / x.shape[0], correct / x.shape[0], seconds, wait


@torch.no_grad()
def evaluate(model, x, y):
    """(loss, accuracy) over the test set, in batches of EVAL_BATCH, in eval mode."""
    model.eval()
    loss_sum, correct = 0.0, 0
    for xb, yb in zip(x.split(EVAL_BATCH), y.split(EVAL_BATCH)):
        logits = model(prepare_images(xb))
        loss_sum += F.cross_entropy(logits, yb, reduction="sum").item()
        correct += (logits.argmax(1) == yb).sum().item()
    return loss_sum / x.shape[0], correct / x.shape[0]


def main():
    args = arguments()
    # Before any parallel work: torch refuses to change the inter-op pool once it has started.
    torch.set_num_interop_threads(args.threads)
    torch.set_num_threads(args.threads)
    if peer_torch._blas is not None:
        peer_torch._blas.openblas_set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    x_train, y_train = load_split(args.data, "train", args.train_examples)
    x_test, y_test = load_split(args.data, "t10k", args.test_examples)
    model = make_model(args.model)
    steps_per_epoch = -(-x_train.shape[0] // args.batch_size)
    opt, sched = make_optimizer(args, model.parameters(), args.epochs * steps_per_epoch)
    generator = torch.Generator().manual_seed(args.seed)

    print(f"# peer_train_torch: torch {torch.__version__}; cpu, {torch.get_num_threads()} thread(s); {args.model}, "
          f"{x_train.shape[0]} train / {x_test.shape[0]} test examples, batch {args.batch_size}, {args.optimizer} "
          f"lr {args.lr:g}, schedule {args.schedule}, seed {args.seed}, loader {args.loader}"
          + (f" ({args.workers} workers)" if args.loader == "dataloader" else ""), flush=True)
    metrics = None
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        metrics = open(os.path.join(args.out, "metrics.jsonl"), "w")
    for epoch in range(1, args.epochs + 1):
        train_loss, train_acc, seconds, wait = train_epoch(args, model, opt, sched, x_train, y_train, generator)
        t = time.perf_counter()
        test_loss, test_acc = evaluate(model, x_test, y_test)
        eval_seconds = time.perf_counter() - t
        row = {
            "epoch": epoch, "epochs": args.epochs, "model": args.model, "device": "cpu",
            "train_loss": train_loss, "train_accuracy": train_acc, "test_loss": test_loss, "test_accuracy": test_acc,
            "epoch_time_s": seconds, "eval_time_s": eval_seconds, "samples_per_s": x_train.shape[0] / seconds,
            "loader_wait_share": wait / seconds,
            "peak_memory_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "lr": opt.param_groups[0]["lr"], "framework": f"torch {torch.__version__}", "batch_size": args.batch_size,
            "threads": args.threads,
        }
        print(f"epoch {epoch}/{args.epochs}  train loss {train_loss:.4f} acc {100 * train_acc:.2f}%  "
              f"test loss {test_loss:.4f} acc {100 * test_acc:.2f}%  {seconds:.2f} s "
              f"({row['samples_per_s']:.0f} samples/s, wait {100 * row['loader_wait_share']:.1f}%)  "
              f"eval {eval_seconds:.2f} s  lr {row['lr']:.3g}", flush=True)
        if metrics:
            metrics.write(json.dumps(row) + "\n")
            metrics.flush()
    if metrics:
        metrics.close()
        print(f"# metrics: {metrics.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
