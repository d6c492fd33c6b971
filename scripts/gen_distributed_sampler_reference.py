#!/usr/bin/python3
"""Writes tests/data/distributed_sampler_reference.txt: the indices that
torch.utils.data.DistributedSampler gives each rank of a range dataset of N
examples split over R replicas, without shuffling, with and without
drop_last, for every N and R of the table below: R dividing N, not dividing
it, N < R, a padding longer than the dataset (N = 2, R = 5) and N = 0.
tests/test_distributed_sampler.cpp builds data::DistributedSampler with the
same arguments and checks size(), total_size() and indices() against each
line. Run with Debian's python3-torch (1.13; the python3 first on PATH has
no torch):

    /usr/bin/python3 scripts/gen_distributed_sampler_reference.py

The output is committed; tests never need torch. Format, one line per rank:
    sampler <N> <R> <drop_last 0|1> <rank> <len(sampler)> <total_size> <indices...>
"""
import os

import torch
from torch.utils.data import DistributedSampler

SIZES = [0, 1, 2, 3, 4, 5, 7, 10, 12, 13, 17]
REPLICAS = [1, 2, 3, 4, 5, 7]


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                       "distributed_sampler_reference.txt")
    lines = [f"# written by scripts/gen_distributed_sampler_reference.py (torch {torch.__version__}); do not edit"]
    for n in SIZES:
        for r in REPLICAS:
            for drop_last in (False, True):
                for rank in range(r):
                    s = DistributedSampler(range(n), num_replicas=r, rank=rank, shuffle=False, drop_last=drop_last)
                    idx = list(iter(s))
                    assert len(idx) == len(s)
                    lines.append(" ".join(["sampler", str(n), str(r), str(int(drop_last)), str(rank), str(len(s)),
                                           str(s.total_size)] + [str(i) for i in idx]))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(lines) - 1} lines to {os.path.normpath(out)}")


if __name__ == "__main__":
    main()
