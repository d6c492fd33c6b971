#!/usr/bin/python3
"""PyTorch's DDP on the recipe of `tandem train --nproc-per-node N`, for bench/ddp_scaling.sh.

The same models (mlp: 784-256-128-10; cnn: conv32-BN-pool-conv64-BN-pool-fc128-fc10), Adam 1e-3,
the global batch split over the ranks, DistributedSampler, Gloo, one thread a rank, on the first
--train-examples of Fashion-MNIST in memory. Debian's torch.distributed.run fails in its elastic
agent (../shared/FACTS.md), so this script starts its ranks itself, setting MASTER_ADDR,
MASTER_PORT, RANK and WORLD_SIZE by hand. Prints one line: model, ranks, seconds, samples/s.

    /usr/bin/python3 bench/peer_ddp_torch.py --model cnn --nproc 2 --train-examples 10000
"""
import argparse
import gzip
import os
import socket
import subprocess
import sys
import time

import numpy as np


def load_images(path, n):
    with gzip.open(path) as f:
        data = np.frombuffer(f.read(), dtype=np.uint8, offset=16)
    return data.reshape(-1, 1, 28, 28)[:n]


def load_labels(path, n):
    with gzip.open(path) as f:
        data = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    return data[:n]


def model_of(name, nn):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def rank_main(args):
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo")
    root = "/usr/share/datasets/fashion-mnist"
    x = torch.from_numpy(load_images(f"{root}/train-images-idx3-ubyte.gz", args.train_examples).copy()).float() / 255
    y = torch.from_numpy(load_labels(f"{root}/train-labels-idx1-ubyte.gz", args.train_examples).copy()).long()
    torch.manual_seed(0)
    model = model_of(args.model, nn)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, seed=0) if world > 1 else None
    loader = DataLoader(ds, batch_size=args.batch_size // world, shuffle=sampler is None, sampler=sampler)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs + 1):  # the first epoch warms up
        if sampler is not None:
            sampler.set_epoch(epoch)
        if epoch == 1:
            if world > 1:
                dist.barrier()
            t0 = time.perf_counter()
        for xb, yb in loader:
            opt.zero_grad()
            loss_fn(model(xb), yb).backward()
            opt.step()
    if world > 1:
        dist.barrier()
    elapsed = time.perf_counter() - t0
    if rank == 0:
        samples = args.epochs * len(ds)
        print(f"pytorch {torch.__version__} {args.model} ranks {world} seconds {elapsed:.3f} "
              f"samples/s {samples / elapsed:.1f}", flush=True)
    if world > 1:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="cnn", choices=["mlp", "cnn"])
    p.add_argument("--nproc", type=int, default=1)
    p.add_argument("--train-examples", type=int, default=10000)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--rank-worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank_worker or args.nproc == 1:
        rank_main(args)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(args.nproc):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                   WORLD_SIZE=str(args.nproc), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, __file__, "--rank-worker"] + sys.argv[1:], env=env))
    sys.exit(max(p.wait() for p in procs))


if __name__ == "__main__":
    main()
