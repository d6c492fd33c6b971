#!/usr/bin/env python3
"""Summarise RES lines of several bench runs: per case, thread count and method,
the median (over runs) of each run's median ratio to float32 sgemm, with the
min-max over runs; per-step aggregates; conversion share of (a).
Usage: summarize.py [--cpu] run1.txt run2.txt ..."""
import re
import statistics
import sys
from collections import defaultdict

use_cpu = "--cpu" in sys.argv
files = [f for f in sys.argv[1:] if not f.startswith("--")]
pat = re.compile(
    r"RES (.+?) T=(\d) (\S+)\s+median_us\s+([\d.]+) ratio\s+([\d.]+)\s+\[([\d.]+) ([\d.]+)\]\s+cpu_ratio\s+([\d.]+)")
# (case, T, method) -> list over runs of (ratio, us)
data = defaultdict(list)
cases = []
methods = []
for f in files:
    for line in open(f):
        m = pat.match(line)
        if not m:
            continue
        tag, T, meth, us, ratio, lo, hi, cr = m.groups()
        tag = tag.strip()
        if tag not in cases:
            cases.append(tag)
        if meth not in methods:
            methods.append(meth)
        data[(tag, int(T), meth)].append((float(cr) if use_cpu else float(ratio), float(us)))


def fmt(vals):
    if not vals:
        return "      -       "
    md = statistics.median(vals)
    if len(vals) == 1:
        return f"{md:5.2f}         "
    return f"{md:5.2f} ({min(vals):4.2f}-{max(vals):4.2f})"


show = [m for m in ["a_tandem", "a2_betterconv", "b_dnnl_gemm", "b2_dnnl_matmul"] if m in methods]
print(f"runs: {len(files)}; ratio = {'process CPU time' if use_cpu else 'wall time'} / float32 sgemm's in the same rep; "
      "median over runs of each run's median, (min-max over runs)")
for T in (1, 2):
    print(f"\n{T} thread(s)")
    print(f"{'case':44s} {'sgemm us':>9s}  " + "  ".join(f"{m:>19s}" for m in show) + "  conv share of (a)")
    for c in cases:
        if (c, T, "sgemm_f32") not in data:
            continue
        us = statistics.median(u for _, u in data[(c, T, "sgemm_f32")])
        row = f"{c:44s} {us:9.0f}  " + "  ".join(f"{fmt([r for r, _ in data.get((c, T, m), [])]):>19s}" for m in show)
        # conversion share: conv_only_a time / a_tandem time, per run
        a = data.get((c, T, "a_tandem"), [])
        co = data.get((c, T, "conv_only_a"), [])
        sh = [x[1] / y[1] for x, y in zip(co, a)]
        co2 = data.get((c, T, "conv_only_a2"), [])
        sh2 = [x[1] / y[1] for x, y in zip(co2, a)]
        row += f"  {fmt(sh)}"
        if sh2:
            row += f"  (a2's conv: {statistics.median(sh2):.2f} of a)"
        print(row)
    # aggregates per training step: summed median times, per run
    for grp, prefix in (("MLP batch 128 step (8 GEMMs)", "mlp128"), ("GEMM-heavy MLP step (5 GEMMs)", "mlp1024"),
                        ("CNN conv GEMMs (5 passes)", "conv")):
        members = [c for c in cases if c.startswith(prefix) and (c, T, "sgemm_f32") in data]
        if not members:
            continue
        nruns = min(len(data[(c, T, "sgemm_f32")]) for c in members)
        out = []
        for m in show + ["conv_only_a"]:
            vals = []
            for r in range(nruns):
                try:
                    tm = sum(data[(c, T, m)][r][1] for c in members)
                except (KeyError, IndexError):
                    vals = []
                    break
                ts = sum(data[(c, T, "sgemm_f32")][r][1] for c in members)
                vals.append(tm / ts)
            out.append(f"{m}={fmt(vals).strip()}" if vals else f"{m}=-")
        ts_med = statistics.median(sum(data[(c, T, "sgemm_f32")][r][1] for c in members) for r in range(nruns))
        print(f"  SUM {grp}: sgemm {ts_med:.0f} us; " + "; ".join(out))
