#!/usr/bin/python3
"""Trains each model with `tandem train --device cpu` and with its torch peer (bench/peer_train_torch.py) in the same
run, with the same settings, and prints per model a table of both metrics files: epoch time, samples/s and test
accuracy per epoch and their mean over the epochs after the first (a warm-up), with the tandem/torch epoch-time ratio.

    /usr/bin/python3 bench/train_vs_torch.py --tandem build/cli/tandem [--models mlp,cnn] [--epochs N] [--threads T]
        [--batch-size B] [--lr LR] [--optimizer O] [--schedule S] [--seed S] [--train-examples N]
        [--test-examples N] [--output FILE] [--keep DIR]

The programs run one at a time, alternating per model (tandem, then torch), so that a change in the machine's load
touches both alike; their own per-epoch lines go to stderr as they come, the report to stdout (and to --output). The
header records the machine, its load average before and after (how quiet it was) and the commit.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROGRAM = "train_vs_torch"
REQUIRED = ("epoch", "epoch_time_s", "samples_per_s", "test_accuracy")  # the keys the table needs


def fail(message):
    print(f"{PROGRAM}: {message}", file=sys.stderr)
    sys.exit(2)


def arguments():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tandem", required=True, metavar="PATH", help="the tandem command (e.g. build/cli/tandem)")
    p.add_argument("--models", default="mlp,cnn", help="comma-separated, of mlp and cnn (default mlp,cnn)")
    p.add_argument("--epochs", type=int, default=3, help="epochs per run; the first is a warm-up (default 3)")
    p.add_argument("--threads", type=int, help="both programs' CPU threads (default as tandem train: 1 for mlp, "
                                                "every core for cnn)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--optimizer", choices=("adam", "sgd", "adamw"), default="adam")
    p.add_argument("--schedule", choices=("cosine", "none", "onecycle"), default="cosine")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-examples", type=int, help="use only the first N training examples")
    p.add_argument("--test-examples", type=int, help="use only the first N test examples")
    p.add_argument("--python", default="/usr/bin/python3", help="the interpreter that has torch (default "
                                                                 "/usr/bin/python3)")
    p.add_argument("--output", metavar="FILE", help="write the report there too")
    p.add_argument("--keep", metavar="DIR", help="keep the metrics files in DIR/<tandem|torch>-<model>/ (default: a "
                                                 "temporary folder, removed)")
    args = p.parse_args()
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in args.models if m not in ("mlp", "cnn")]
    if unknown or not args.models:
        p.error(f"--models: expected mlp, cnn or both, got {','.join(unknown) or 'none'}")
    if args.epochs < 1 or (args.threads is not None and args.threads < 1):
        p.error("--epochs and --threads must be at least 1")
    if not (os.path.isfile(args.tandem) and os.access(args.tandem, os.X_OK)):
        fail(f"--tandem {args.tandem}: no such executable. Build it first (ninja -C build cli/tandem) and pass its "
             f"path, e.g. --tandem build/cli/tandem")
    return args


def sh(*cmd):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True).stdout


def cpu_model():
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def commit():
    head = sh("git", "rev-parse", "--short", "HEAD").strip() or "unknown"
    dirty = [line[3:] for line in sh("git", "status", "--porcelain", "--untracked-files=no").splitlines()]
    return head + (f" plus uncommitted changes to {', '.join(dirty)}" if dirty else "")


def tandem_version(tandem):
    done = subprocess.run([tandem, "--version"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "version unknown"


def same_blas_kernels(tandem):
    """Both programs on the same OpenBLAS kernels: torch's Linear layers use the
    same OpenBLAS as Tandem. Where OPENBLAS_CORETYPE is unset and tandem picks
    kernels itself (OpenBLAS does not know the CPU), the torch peer gets them too."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return
    info = subprocess.run([tandem, "info"], capture_output=True, text=True).stdout
    chosen = re.search(r"tandem chose OpenBLAS's (\w+) kernels", info)
    if chosen:
        os.environ["OPENBLAS_CORETYPE"] = chosen.group(1)


def threads(args, model):
    return args.threads or (1 if model == "mlp" else os.cpu_count() or 1)


def recipe(args, model):
    """The flags both programs take, spelt out so that neither falls back on a default of its own."""
    flags = ["--model", model, "--epochs", args.epochs, "--batch-size", args.batch_size, "--lr", args.lr,
             "--optimizer", args.optimizer, "--schedule", args.schedule, "--threads", threads(args, model),
             "--seed", args.seed]
    for name in ("train_examples", "test_examples"):
        if getattr(args, name) is not None:
            flags += [f"--{name.replace('_', '-')}", getattr(args, name)]
    return [str(f) for f in flags]


def run(name, cmd):
    """Runs one training, its output going to stderr as it comes."""
    print(f"# {PROGRAM}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    done = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr)
    if done.returncode != 0:
        fail(f"{name} failed (exit status {done.returncode}); its output is above. The command: {' '.join(cmd)}")


def read_metrics(path):
    """The epochs of a metrics.jsonl in order, the later line winning where an epoch appears twice."""
    if not os.path.exists(path):
        fail(f"{path} was not written")
    rows = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    fail(f"{path}:{number}: not JSON ({e.msg})")
                missing = [k for k in REQUIRED if not isinstance(row, dict) or k not in row]
                if missing:
                    fail(f"{path}:{number}: missing {', '.join(missing)}")
                rows[row["epoch"]] = row
    return [rows[e] for e in sorted(rows)]


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def fmt(value, spec):
    return "-" if value is None else spec.format(value)


WIDTHS = (-10, 9, 9, 12, 16, 15, 10, 9)


def table_row(*fields):
    return "  ".join(f"{f:<{-w}}" if w < 0 else f"{f:>{w}}" for f, w in zip(fields, WIDTHS)).rstrip()


def table(tandem, torch):
    """(the report's lines for one model, tandem/torch of the mean epoch times): a row per epoch, then the means of
    epochs 2..N and of the other figures."""
    epochs = sorted({r["epoch"] for r in tandem + torch})
    t_rows, p_rows = {r["epoch"]: r for r in tandem}, {r["epoch"]: r for r in torch}

    def figures(rows, es, key, scale=1):
        return mean([rows[e][key] * scale if e in rows and key in rows[e] else None for e in es])

    def line(label, es):
        t_time, p_time = figures(t_rows, es, "epoch_time_s"), figures(p_rows, es, "epoch_time_s")
        ratio = t_time / p_time if t_time and p_time else None
        return ratio, table_row(label, fmt(t_time, "{:.2f} s"), fmt(p_time, "{:.2f} s"), fmt(ratio, "{:.2f}"),
                                fmt(figures(t_rows, es, "samples_per_s"), "{:.0f}"),
                                fmt(figures(p_rows, es, "samples_per_s"), "{:.0f}"),
                                fmt(figures(t_rows, es, "test_accuracy", 100), "{:.2f}%"),
                                fmt(figures(p_rows, es, "test_accuracy", 100), "{:.2f}%"))

    lines = [table_row("epoch", "tandem", "torch", "tandem/torch", "tandem samples/s", "torch samples/s",
                       "tandem acc", "torch acc")]
    lines += [line(str(e), [e])[1] for e in epochs]
    later = epochs[1:]
    if later:
        ratio, mean_line = line("mean 2" + (f"-{epochs[-1]}" if len(later) > 1 else ""), later)
        lines.append(mean_line)
    else:
        ratio = line("", epochs)[0]
        lines.append("mean: - (one epoch only, the warm-up: run --epochs 2 or more)")
    es = later or epochs
    for label, key, scale, spec in (("eval time", "eval_time_s", 1, "{:.2f} s"),
                                    ("loader wait", "loader_wait_share", 100, "{:.1f}%"),
                                    ("peak memory", "peak_memory_bytes", 2 ** -20, "{:.0f} MiB")):
        lines.append(f"{label + ':':<13} tandem {fmt(figures(t_rows, es, key, scale), spec)}, "
                     f"torch {fmt(figures(p_rows, es, key, scale), spec)}")
    return lines, ratio


def main():
    args = arguments()
    tandem = os.path.abspath(args.tandem)
    keep = args.keep and os.path.abspath(args.keep)
    for model in args.models if keep else ():
        for side in ("tandem", "torch"):
            d = os.path.join(keep, f"{side}-{model}")
            if os.path.isdir(d) and os.listdir(d):
                fail(f"--keep {args.keep}: {d} is not empty (tandem train would resume there): pick a new folder")
    same_blas_kernels(tandem)
    load_before = loadavg()
    start = datetime.datetime.now(datetime.timezone.utc)
    with tempfile.TemporaryDirectory(prefix="train_vs_torch-") as tmp:
        out = keep or tmp
        results = {}
        for model in args.models:
            flags = recipe(args, model)
            dirs = {side: os.path.join(out, f"{side}-{model}") for side in ("tandem", "torch")}
            run(f"tandem train --model {model}",
                [tandem, "train", *flags, "--device", "cpu", "--out", dirs["tandem"]])
            run(f"peer_train_torch.py --model {model}",
                [args.python, os.path.join(HERE, "peer_train_torch.py"), *flags, "--out", dirs["torch"]])
            results[model] = tuple(read_metrics(os.path.join(d, "metrics.jsonl")) for d in dirs.values())
    end = datetime.datetime.now(datetime.timezone.utc)

    torch_version = next((r["framework"] for _, p in results.values() for r in p if "framework" in r), "torch")
    examples = (f"{args.train_examples or 'all'} train / {args.test_examples or 'all'} test examples")
    report = [
        f"# date:       {start:%Y-%m-%d %H:%M} UTC ({(end - start).total_seconds():.0f} s)",
        f"# machine:    {cpu_model()}, {os.cpu_count()} cores",
        f"# load:       {load_before} before, {loadavg()} after (1, 5, 15 min averages)",
        f"# commit:     {commit()}",
        f"# tandem:     {tandem_version(tandem)} ({tandem} train --device cpu)",
        f"# torch:      {torch_version} (bench/peer_train_torch.py, {args.python})",
        f"# OpenBLAS:   OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset: OpenBLAS chooses)')} for both",
        f"# recipe:     {args.epochs} epoch(s), {examples}, batch {args.batch_size}, {args.optimizer} lr {args.lr:g}, "
        f"schedule {args.schedule}, seed {args.seed}",
        "# epoch time: the training loop of the epoch, data included, evaluation not; acc: test accuracy after it;",
        "# mean: over the epochs after the first (a warm-up); tandem/torch below 1: Tandem faster",
    ]
    summary = []
    for model, (t, p) in results.items():
        lines, ratio = table(t, p)
        report += ["", f"## {model}, {threads(args, model)} thread(s) each", *lines]
        summary.append(f"{model} {fmt(ratio, '{:.2f}')}" + ("" if args.epochs > 1 else " (epoch 1, a warm-up)"))
    report += ["", f"summary: tandem/torch epoch time {', '.join(summary)}"]
    text = "\n".join(report) + "\n"
    sys.stdout.write(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
        print(f"written to {args.output}", file=sys.stderr)
    if keep:
        print(f"metrics kept in {keep}/<tandem|torch>-<model>/metrics.jsonl", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
