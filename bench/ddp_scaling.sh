#!/usr/bin/env bash
# Data-parallel scaling on this machine: samples/s of one process and of
# 2 ranks (one thread a rank) for the MLP and the CNN, Tandem's
# `tandem train --nproc-per-node` beside PyTorch's DDP with Gloo
# (bench/peer_ddp_torch.py) on the same recipe (Adam 1e-3, no schedule,
# global batch 128, the first N training examples), run alternately.
# Tandem's figure is its second epoch's samples/s (the first warms up), as
# the peer times its second epoch; for 2 ranks also rank 0's gradient
# allreduce time per step and the share of it that backward hid (the rest
# the end of the pass waited for: metrics.jsonl's allreduce_s and
# allreduce_exposed_s).
#   bench/ddp_scaling.sh [BUILD] [TRAIN_EXAMPLES] [ROUNDS]
set -euo pipefail
build=${1:-build}
n=${2:-10000}
rounds=${3:-2}
tandem="$build/cli/tandem"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
tandem_rate() {  # model nproc
  local dir="$out/$1-$2-$RANDOM" launch=()
  [ "$2" -gt 1 ] && launch=(--nproc-per-node "$2")
  "$tandem" train "${launch[@]}" --model "$1" --epochs 2 --train-examples "$n" --test-examples 1000 \
    --schedule none --threads 1 --device cpu --out "$dir" >/dev/null
  python3 - "$dir/metrics.jsonl" <<'PY'
import json, sys
m = json.loads(open(sys.argv[1]).read().splitlines()[-1])
comm = m.get("allreduce_s")
if comm:
    steps = m["samples_per_s"] * m["epoch_time_s"] / m["batch_size"]
    print(round(m["samples_per_s"], 1), f"{comm / steps * 1e3:.2f}ms/step,{100 * (1 - m['allreduce_exposed_s'] / comm):.0f}%hidden")
else:
    print(round(m["samples_per_s"], 1), "-")
PY
}
torch_rate() {  # model nproc
  /usr/bin/python3 "$(dirname "$0")/peer_ddp_torch.py" --model "$1" --nproc "$2" --train-examples "$n" |
    awk '{print $NF, "-"}'
}
echo "ddp_scaling: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $n examples, $rounds rounds, load $(cut -d' ' -f1 /proc/loadavg)"
printf "%-5s %-7s %6s %12s %9s  %s\n" model library ranks samples/s speedup "allreduce (rank 0)"
for model in mlp cnn; do
  for lib in tandem pytorch; do
    best1=0; best2=0; comm2=-
    for ((k = 0; k < rounds; ++k)); do
      read -r r1 _ < <(${lib/pytorch/torch}_rate "$model" 1)
      read -r r2 c2 < <(${lib/pytorch/torch}_rate "$model" 2)
      best1=$(python3 -c "print(max($best1, $r1))")
      if python3 -c "import sys; sys.exit(0 if $r2 > $best2 else 1)"; then best2=$r2; comm2=$c2; fi
    done
    printf "%-5s %-7s %6d %12.1f %9s\n" "$model" "$lib" 1 "$best1" "1.00x"
    printf "%-5s %-7s %6d %12.1f %9s  %s\n" "$model" "$lib" 2 "$best2" "$(python3 -c "print(f'{$best2 / $best1:.2f}x')")" "$comm2"
  done
done
