#!/usr/bin/python3
"""Runs bench_ops and peer_torch.py and writes both tables, their comparison and a header saying where and on what
they ran (date, CPU, cores, load, commit, build type) to bench/results/<date>-cpu-<commit>.txt.

    /usr/bin/python3 bench/run_all.py --build build [--quick] [--out FILE] [--commit SHA]

--commit names the commit that was built, for a build made from a clean export of it (the default is this
checkout's HEAD, and the header then lists the files that differ from it).
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sh(*cmd, cwd=ROOT):
    return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def cpu_model():
    for line in sh("lscpu").splitlines():
        if line.startswith("Model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        flags = next(line for line in f if line.startswith("flags")).split(":", 1)[1].split()
    return " ".join(f for f in ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f") if f in flags)


def build_type(build):
    with open(os.path.join(build, "meson-info", "intro-buildoptions.json")) as f:
        return next(o["value"] for o in json.load(f) if o["name"] == "buildtype")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build", help="the meson build dir holding bench/bench_ops")
    p.add_argument("--quick", action="store_true", help="pass --quick to both benches")
    p.add_argument("--out", help="the results file (default bench/results/<date>-cpu-<commit>.txt)")
    p.add_argument("--commit", help="the commit that was built, when not this checkout's HEAD")
    p.add_argument("--python", default="/usr/bin/python3", help="the interpreter that has torch")
    args = p.parse_args()

    build = os.path.abspath(args.build)
    quick = ["--quick"] if args.quick else []
    commit = args.commit or sh("git", "rev-parse", "--short", "HEAD")
    dirty = [] if args.commit else [line[3:] for line in sh("git", "status", "--porcelain", "--untracked-files=no")
                                     .splitlines() if not line[3:].startswith("bench/")]
    date = datetime.datetime.now(datetime.timezone.utc)
    out = args.out or os.path.join(HERE, "results", f"{date:%Y-%m-%d}-cpu-{commit[:7]}.txt")

    load_before = loadavg()
    t0 = time.time()
    tandem = subprocess.run([os.path.join(build, "bench", "bench_ops"), *quick], check=True, capture_output=True,
                            text=True).stdout
    t1 = time.time()
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(tandem)
        f.flush()
        torch = subprocess.run([args.python, os.path.join(HERE, "peer_torch.py"), *quick, "--compare", f.name],
                               check=True, capture_output=True, text=True).stdout
    t2 = time.time()

    header = [
        f"# date:       {date:%Y-%m-%d %H:%M} UTC",
        f"# machine:    {cpu_model()}, nproc {os.cpu_count()}, flags {cpu_flags()}",
        f"# load:       {load_before} before, {loadavg()} after (1, 5, 15 min averages)",
        f"# commit:     {commit}" + (f" plus uncommitted changes to {', '.join(dirty)}" if dirty else ""),
        f"# build:      {build_type(build)} ({sh('c++', '--version').splitlines()[0]})",
        f"# run time:   bench_ops {t1 - t0:.0f} s, peer_torch {t2 - t1:.0f} s",
        "",
    ]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write("\n".join(header) + "\n" + tandem + "\n" + torch)
    sys.stdout.write(open(out).read())
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
