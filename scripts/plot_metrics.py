#!/usr/bin/python3
"""Draws a metrics.jsonl of `tandem train --out DIR` (or of bench/peer_train_torch.py) as one PNG: loss per epoch and
accuracy per epoch, train and test, side by side.

    /usr/bin/python3 scripts/plot_metrics.py METRICS.jsonl [-o OUT.png] [--title T]

The default output is metrics.png beside the metrics file. A resumed run appends to the file, so where an epoch
appears twice the later line wins. Bad input is one line on stderr and exit status 2.
"""
import argparse
import json
import os
import sys

PLOTTED = ("epoch", "train_loss", "test_loss", "train_accuracy", "test_accuracy")


def fail(message):
    """One line on stderr and exit status 2, as argparse's own usage errors."""
    print(f"plot_metrics: {message}", file=sys.stderr)
    sys.exit(2)


def read_metrics(path):
    """The epochs of a metrics file, one dict per epoch in epoch order, the last line of each epoch winning."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    epochs = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            fail(f"{path}:{number}: not JSON ({e.msg} at column {e.colno})")
        if not isinstance(row, dict):
            fail(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
        missing = [k for k in PLOTTED if k not in row]
        if missing:
            fail(f"{path}:{number}: missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
        # null: a value with no JSON form (tandem train writes NaN and inf as null); drawn as a gap.
        for k in PLOTTED[1:]:
            if row[k] is None:
                row[k] = float("nan")
        wrong = [k for k in PLOTTED if not isinstance(row[k], (int, float)) or isinstance(row[k], bool)]
        if wrong:
            got = ", ".join(f"{k} (got {json.dumps(row[k])})" for k in wrong)
            fail(f"{path}:{number}: expected numbers for {got}")
        epochs[row["epoch"]] = row
    if not epochs:
        fail(f"{path} is empty: no epoch to plot")
    return [epochs[e] for e in sorted(epochs)]


def default_title(rows):
    last = rows[-1]
    where = " on ".join(str(last[k]) for k in ("model", "device") if k in last) or "training"
    return (f"{where}, {len(rows)} epoch{'s' if len(rows) > 1 else ''}: "
            f"final test accuracy {100 * last['test_accuracy']:.2f}%")


def plot(rows, out, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        fail(f"matplotlib is missing for {sys.executable}: apt-get install python3-matplotlib "
             f"(and run this with /usr/bin/python3)")
    epoch = [r["epoch"] for r in rows]
    marker = "o" if len(rows) <= 30 else None
    fig, (loss, acc) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    for ax, key, scale, label in ((loss, "loss", 1, "cross-entropy loss"), (acc, "accuracy", 100, "accuracy (%)")):
        for split, color in (("train", "tab:blue"), ("test", "tab:orange")):
            ax.plot(epoch, [scale * r[f"{split}_{key}"] for r in rows], marker=marker, color=color, label=split)
        ax.set_xlabel("epoch")
        ax.set_ylabel(label)
        ax.set_title(f"{key} per epoch")
        if len(rows) <= 12:
            ax.set_xticks(epoch)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    try:
        fig.savefig(out, dpi=120)
    except OSError as e:
        fail(f"cannot write {out}: {e.strerror}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("metrics", help="a metrics.jsonl: one JSON object per epoch")
    p.add_argument("-o", "--output", help="the PNG to write (default: metrics.png beside the metrics file)")
    p.add_argument("--title", help="the figure's title (default: model, device, epochs, final test accuracy)")
    args = p.parse_args()
    rows = read_metrics(args.metrics)
    out = args.output or os.path.join(os.path.dirname(os.path.abspath(args.metrics)), "metrics.png")
    plot(rows, out, args.title or default_title(rows))
    print(out)


if __name__ == "__main__":
    main()
