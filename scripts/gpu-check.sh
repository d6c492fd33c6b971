#!/usr/bin/env bash
# The one command for the GPU test machine (an H200 without apt or network):
# says what it found, builds with CUDA, runs every test suite, runs
# compute-sanitizer's memcheck and racecheck over the GPU-only tests (and
# memcheck over the cuda:0 sections of test_conv, test_nn_norm,
# test_optim and test_data_loader), runs the GPU benchmarks, then
# bench_autograd, bench_nn, bench_norm, bench_optim, bench_data and bench_amp on cuda:0,
# each beside its torch peer
# (bench/peer_*_torch.py --compare), and prints a summary table last.
# Before the benchmarks it runs the main job: tandem train on cuda:0 (one
# epoch of each model) and tandem eval of its checkpoint on the cpu. Run it
# from the root of a copy of the tree; stage the Catch2 header first
# (scripts/stage-gpu-deps.sh).
# Without a GPU it still builds and runs the cpu and emulated suites, and
# fails on the GPU parts, saying so.
#
# Usage: scripts/gpu-check.sh [BUILDDIR]       (default build-gpu)
#   OUT=dir            where the logs go (default gpu-check-out): at most 7
#                      files, env.txt build.log tests.log testlog.json
#                      sanitizer.log bench.log summary.txt
#   GPU_CHECK_BUDGET=s seconds for the whole run (default 465, under 8 minutes);
#                      each step's timeout is cut to what is left
#   GPU_ARCHS=90       compute capabilities to build for
#   JOBS=n             parallel compile and test jobs (default: all cores)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$(pwd)
build=${1:-build-gpu}
out=${OUT:-gpu-check-out}
mkdir -p "$out" && out=$(cd "$out" && pwd)
budget=${GPU_CHECK_BUDGET:-465}
archs=${GPU_ARCHS:-90}
jobs=${JOBS:-$(nproc)}
t_start=$(date +%s)
: >"$out/summary.txt"

elapsed() { echo $(($(date +%s) - t_start)); }
# Seconds a step may take: its share of the budget (percent), cut to what is
# left after a reserve (percent of the budget) for the steps after it; 0 when
# nothing is left. At the default budget, the build gets 300 s at most.
step_limit() {
  local want=$(($1 * budget / 100)) reserve=$(($2 * budget / 100)) left
  left=$((budget - $(elapsed) - reserve))
  [ "$left" -lt "$want" ] && want=$left
  [ "$want" -lt 5 ] && want=0
  echo "$want"
}
say() { printf '%s\n' "$*"; }
row() { printf '%-22s %s\n' "$1" "$2" >>"$out/summary.txt"; }
failed=0
fail() { failed=1; }

# ---------------------------------------------------------------- what is here
tmpbin=$(mktemp -d)
trap 'rm -rf "$tmpbin"' EXIT
export PATH="$tmpbin:$PATH"

find_cuda_root() {
  local c
  for c in "${CUDA_PATH:-}" "${CUDA_HOME:-}" /usr/local/cuda /usr/local/cuda-1[0-9].*; do
    [ -n "$c" ] && [ -x "$c/bin/nvcc" ] && { echo "$c"; return; }
  done
  c=$(command -v nvcc 2>/dev/null) && [ -n "$c" ] && { dirname "$(dirname "$(readlink -f "$c")")"; return; }
  # The pip cuda-toolkit's nvcc, if it brought one.
  python3 - <<'PY' 2>/dev/null
import glob, os, site
for sp in site.getsitepackages() + [site.getusersitepackages()]:
    for nvcc in sorted(glob.glob(os.path.join(sp, "nvidia", "*", "bin", "nvcc"))):
        print(os.path.dirname(os.path.dirname(nvcc)))
        raise SystemExit
PY
}

has_gpu=0
{
  say "gpu-check: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname) ($(uname -m), $(nproc) cores), tree at $root"
  say "commit:            $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout') $(git -C "$root" status --porcelain 2>/dev/null | grep -q . && echo '(with local changes)')"
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    gpu_line=$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null | head -1)
    say "GPU:               $(nvidia-smi -L | head -1)"
    say "GPU (name, driver, memory, compute capability): $gpu_line"
    has_gpu=1
  else
    say "GPU:               none (nvidia-smi $(command -v nvidia-smi >/dev/null 2>&1 && echo 'found no device' || echo 'not found'))"
  fi
  cuda_root=$(find_cuda_root)
  if [ -n "$cuda_root" ]; then
    say "CUDA toolkit:      $cuda_root; $("$cuda_root/bin/nvcc" --version | grep -i release)"
  else
    say "CUDA toolkit:      no nvcc found (CUDA_PATH, /usr/local/cuda, PATH, pip nvidia-* packages)"
  fi
  # meson and ninja, from PATH or from pip's modules.
  if ! command -v meson >/dev/null 2>&1 && python3 -c 'import mesonbuild' 2>/dev/null; then
    printf '#!/bin/sh\nexec python3 -m mesonbuild.mesonmain "$@"\n' >"$tmpbin/meson" && chmod +x "$tmpbin/meson"
  fi
  if ! command -v ninja >/dev/null 2>&1; then
    nb=$(python3 -c 'import ninja; print(ninja.BIN_DIR)' 2>/dev/null) && [ -x "$nb/ninja" ] && ln -s "$nb/ninja" "$tmpbin/ninja"
  fi
  say "meson:             $(command -v meson >/dev/null && echo "$(meson --version) ($(command -v meson))" || echo 'NOT FOUND')"
  say "ninja:             $(command -v ninja >/dev/null && echo "$(ninja --version) ($(command -v ninja))" || echo 'NOT FOUND')"
  say "c++:               $(c++ --version 2>/dev/null | head -1 || echo 'NOT FOUND')"
  say "ccache:            $(command -v ccache || echo 'not found')"
  say "pkg-config:        $(command -v pkg-config || echo 'not found')"
  cublas=$( (ldconfig -p 2>/dev/null | awk '/libcublas\.so/ {print $NF}'
    [ -n "$cuda_root" ] && ls "$cuda_root"/lib64/libcublas.so* "$cuda_root"/lib/libcublas.so* 2>/dev/null
    python3 -c 'import glob,site; [print(p) for s in site.getsitepackages() for p in glob.glob(s+"/nvidia/*/lib/libcublas.so*")]' 2>/dev/null
  ) | sort -u | tr '\n' ' ')
  say "libcublas:         ${cublas:-NOT FOUND}"
  sanitizer=$(command -v compute-sanitizer 2>/dev/null)
  for c in "$cuda_root/bin/compute-sanitizer" "$cuda_root/compute-sanitizer/compute-sanitizer"; do
    [ -z "$sanitizer" ] && [ -n "$cuda_root" ] && [ -x "$c" ] && sanitizer=$c
  done
  say "compute-sanitizer: ${sanitizer:-NOT FOUND}${sanitizer:+ ($("$sanitizer" --version 2>/dev/null | grep -i version | head -1))}"
  if [ -f /usr/include/catch2/catch.hpp ]; then
    catch2="system (/usr/include/catch2)"
  elif [ -f "$root/shared/gpu-deps/include/catch2/catch.hpp" ]; then
    catch2="staged (shared/gpu-deps)"
    export PKG_CONFIG_PATH="$root/shared/gpu-deps/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  else
    catch2=""
  fi
  say "Catch2 v2 header:  ${catch2:-NOT FOUND: run scripts/stage-gpu-deps.sh where catch2 is installed, before sending the tree}"
  if [ -f /usr/include/nlohmann/json.hpp ]; then
    nlohmann="system (/usr/include/nlohmann)"
  elif [ -f "$root/shared/gpu-deps/include/nlohmann/json.hpp" ]; then
    nlohmann="staged (shared/gpu-deps)"
  fi
  say "nlohmann-json:     ${nlohmann:-NOT FOUND: the library needs it; run scripts/stage-gpu-deps.sh where nlohmann-json3-dev is installed}"
  say "OpenBLAS:          $(pkg-config --exists openblas 2>/dev/null && echo "found ($(pkg-config --modversion openblas))" || echo 'not found: the CPU GEMM uses its blocked C++ fallback')"
} >"$out/env.txt" 2>&1
cat "$out/env.txt"
tests_opt=true
[ -z "$catch2" ] && tests_opt=false
if [ -n "$cuda_root" ]; then
  export CUDA_PATH=$cuda_root PATH="$cuda_root/bin:$PATH"
  export LD_LIBRARY_PATH="$cuda_root/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
row "found" "GPU: ${gpu_line:-none}; CUDA: ${cuda_root:-none}; Catch2: ${catch2:-none}"

# ---------------------------------------------------------------- build
say ""
say "== configure and build ($build, -j$jobs), log in $out/build.log"
cuda_opt=enabled
[ -z "$cuda_root" ] && cuda_opt=disabled
setup_args=(-Dcuda=$cuda_opt -Dopenblas=auto "-Dgpu_archs=$archs" "-Dtests=$tests_opt")
built=0
t0=$(date +%s)
lim=$(step_limit 25 65)
if [ -f "$build/build.ninja" ]; then
  timeout "$lim" meson setup --reconfigure "$build" "${setup_args[@]}" >"$out/build.log" 2>&1
else
  timeout "$lim" meson setup "$build" "${setup_args[@]}" >"$out/build.log" 2>&1
fi
rc=$?
if [ $rc -ne 0 ]; then
  tail -25 "$out/build.log"
  row "configure" "FAILED (exit $rc$([ $rc = 124 ] && echo ', timed out'))"
  fail
else
  lim=$(step_limit 65 35)
  # -k 0: a file that does not compile stops only what depends on it, so
  # what did build still runs (and the failure is reported). Every test file
  # is in one binary (tests/tandem_tests): one that does not compile leaves
  # no tests to run, and the sanitizer rows say so.
  timeout "$lim" ninja -C "$build" -j "$jobs" -k 0 >>"$out/build.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    built=1
    row "build" "ok ($(($(date +%s) - t0)) s, cuda $cuda_opt, tests $tests_opt)"
  else
    grep -E "error:|^FAILED:" "$out/build.log" | head -20
    row "build" "FAILED (exit $rc$([ $rc = 124 ] && echo ", timed out after $lim s"); $(grep -c '^FAILED:' "$out/build.log") targets failed)"
    fail
    # Partly built: run what exists.
    ls "$build"/libtandem.so* >/dev/null 2>&1 && built=partial
  fi
fi
[ -z "$cuda_root" ] && { row "cuda" "FAILED: no nvcc, built without CUDA"; fail; }
[ "$tests_opt" = false ] && { row "tests" "FAILED: no Catch2 header (run scripts/stage-gpu-deps.sh)"; fail; }
say "$(tail -1 "$out/build.log")"

# ---------------------------------------------------------------- tests
ran_tests=0
if [ $built != 0 ] && [ "$tests_opt" = true ]; then
  say ""
  say "== meson test (all suites), log in $out/tests.log"
  lim=$(step_limit 40 29)
  ran_tests=1
  # --no-rebuild: after a partial build, the binaries that are missing fail.
  timeout "$lim" meson test -C "$build" --no-rebuild --num-processes "$jobs" --print-errorlogs >"$out/tests.log" 2>&1
  rc=$?
  [ $rc = 124 ] && say "meson test timed out after $lim s"
  # The test log without each test's environment (nothing of the machine's
  # variables leaves it).
  python3 -c 'import json, sys
for line in open(sys.argv[1]):
    rec = json.loads(line); rec.pop("env", None); print(json.dumps(rec))' \
    "$build/meson-logs/testlog.json" >"$out/testlog.json" 2>/dev/null
  grep -E "^(Ok|Fail|Skipped|Timeout|Unexpected|Expected Fail):" "$out/tests.log"
  # Per suite: tests (a test file's run each) ok/failed/skipped, and Catch2's test-case counts.
  # Exit 3: a GPU-suite test was skipped (it saw no GPU).
  python3 - "$out/testlog.json" >>"$out/summary.txt" <<'PY'
import collections, json, re, sys
suites = collections.OrderedDict()
gpu_skipped = False
for line in open(sys.argv[1]):
    rec = json.loads(line)
    # "suite": ["tandem:gpu"] in newer meson; meson 1.0 only names it: "tandem:gpu / test_gpu_linalg"
    suite = ((rec.get("suite") or [None])[0] or rec.get("name", "?").split(" / ")[0]).split(":")[-1]
    s = suites.setdefault(suite, collections.Counter())
    result, out = rec.get("result", ""), rec.get("stdout", "") or ""
    s["skip" if result == "SKIP" else "ok" if result == "OK" else "fail"] += 1
    gpu_skipped |= result == "SKIP" and suite == "gpu"
    m = re.search(r"All tests passed \(\d+ assertions? in (\d+) test cases?\)", out)
    if m:
        s["cases_ok"] += int(m.group(1))
    m = re.search(r"test cases:\s+(\d+) \|\s+(\d+) passed \|\s+(\d+) failed", out)
    if m:
        s["cases_ok"] += int(m.group(2))
        s["cases_fail"] += int(m.group(3))
order = {"cpu": 0, "emulated": 1, "gpu": 2}
for name, s in sorted(suites.items(), key=lambda kv: (order.get(kv[0], 3), kv[0])):
    print(f"{'suite ' + name:<22} {s['ok']} ok, {s['fail']} failed, {s['skip']} skipped tests; "
          f"{s['cases_ok']} test cases passed, {s['cases_fail']} failed")
sys.exit(3 if gpu_skipped else 0)
PY
  prc=$?
  [ $prc = 3 ] && row "suite gpu" "FAILED: GPU tests skipped (they saw no GPU)"
  [ $prc -ne 0 ] && fail
  [ $rc -ne 0 ] && fail
fi

# ---------------------------------------------------------------- sanitizers
# Shares, in percent of the budget: a run over a GPU test wants 20 and leaves
# 16 (memcheck) or 13 (racecheck), the benchmarks' share; a run over a device
# test's cuda:0 sections wants 4 and leaves 23, so that the GPU benches keep 10
# beside the 13 of the bench pairs.
# Every test file is in one binary (tests/meson.build), chosen by its file
# tag: tandem_tests -# '[#test_gpu_reduce]'. The list is the test_gpu_*.cpp
# files: one that tests/meson.build does not build fails its run (-w
# NoTests) instead of being passed over.
tests_bin="$build/tests/tandem_tests"
gpu_tests=()
if [ -x "$tests_bin" ]; then
  for f in "$root"/tests/test_gpu_*.cpp; do
    gpu_tests+=("$(basename "$f" .cpp)")
  done
fi
# Device tests run on cuda:0 in the cpu suite above; these four hold the CUDA
# work that no test_gpu_* file covers (conv and pooling, the norms and
# embedding, the optimizers and clip_grad_norm_, the DataLoader's side-stream
# copies and pinned batches), so memcheck also runs over their "on cuda:0"
# sections (DEVICE_TEST_CASE's), after the GPU tests' runs.
device_tests=()
[ -x "$tests_bin" ] && device_tests=(test_conv test_nn_norm test_optim test_data_loader)
# sanitize TOOL SHARE RESERVE SECTION FILE...: compute-sanitizer's TOOL over
# each test file's cases in tandem_tests, without the [large] ones (only the
# sections named SECTION when it is not empty), each run limited to
# step_limit SHARE RESERVE. Sets errors, failures (the tests failed under the
# tool, or it stopped without a summary), timeouts, not_run and runs.
sanitize() {
  local tool=$1 share=$2 reserve=$3 section=$4 f lim rc n args
  shift 4
  errors=0 failures=0 timeouts=0 not_run=0 runs=0
  for f in "$@"; do
    args=(-# "[#$f]~[large]" -w NoTests)
    [ -n "$section" ] && args+=(-c "$section")
    lim=$(step_limit "$share" "$reserve")
    [ "$lim" = 0 ] && { not_run=$((not_run + 1)); continue; }
    TANDEM_NO_CUDA_MEMORY_CACHING=1 timeout "$lim" "$sanitizer" --tool "$tool" --print-limit 20 "$tests_bin" \
      "${args[@]}" >"$out/run.tmp" 2>&1
    rc=$?
    runs=$((runs + 1))
    { echo "--- $tool $f${section:+ -c \"$section\"} (limit $lim s): exit $rc"; cat "$out/run.tmp"; } >>"$out/sanitizer.log"
    # memcheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)"
    n=$(sed -nE 's/.*ERROR SUMMARY: ([0-9]+) error.*/\1/p; s/.*RACECHECK SUMMARY: .*\(([0-9]+) error.*/\1/p' "$out/run.tmp" | tail -1)
    # Cut off before its summary: the error records it printed until then.
    [ -z "$n" ] && n=$(grep -cE '^========= (Invalid|Program hit|Misaligned|Out-of-range|Malloc|Error: Race)' "$out/run.tmp")
    errors=$((errors + n))
    if [ $rc = 124 ]; then
      timeouts=$((timeouts + 1))
    elif [ $rc != 0 ]; then
      failures=$((failures + 1))
    fi
  done
  rm -f "$out/run.tmp"
}
: >"$out/sanitizer.log"
if [ $has_gpu = 0 ]; then
  row "compute-sanitizer" "FAILED: not run, no GPU"
  fail
elif [ -z "$sanitizer" ]; then
  row "compute-sanitizer" "FAILED: not found"
  fail
elif [ $built != 0 ] && [ ${#gpu_tests[@]} -gt 0 ]; then
  say ""
  say "== compute-sanitizer over ${#gpu_tests[@]} GPU test files (without [large] cases), log in $out/sanitizer.log"
  for tool in memcheck racecheck; do
    reserve=16
    [ $tool = racecheck ] && reserve=13
    sanitize $tool 20 $reserve "" "${gpu_tests[@]}"
    timeouts=$((timeouts + not_run))
    row "$tool" "$errors errors in $runs runs, $failures runs failed, $timeouts timed out or not run"
    say "$tool: $errors errors in $runs runs, $failures runs failed, $timeouts timed out or not run"
    [ $errors -gt 0 ] || [ $failures -gt 0 ] || [ $timeouts -gt 0 ] && fail
  done
  if [ ${#device_tests[@]} -gt 0 ]; then
    names="${device_tests[*]} "
    say "== memcheck over the cuda:0 sections of ${names% }"
    sanitize memcheck 4 23 "on cuda:0" "${device_tests[@]}"
    # A time-out here is a partial check, not a failure: these runs take the
    # time the GPU tests' runs left; the GPU benches keep theirs.
    summary="$errors errors in $runs runs (${names% }), $failures runs failed, $timeouts timed out (partial), $not_run not run (no time left)"
    row "memcheck cuda:0" "$summary"
    say "memcheck cuda:0: $summary"
    [ $errors -gt 0 ] || [ $failures -gt 0 ] && fail
  fi
fi

# Shares, in percent of the budget: each bench_gpu_* program wants 25; each
# Tandem bench beside its torch peer (bench_pair) wants 2 for Tandem and 4 for
# torch (its import and CUDA start take seconds) and is kept 3 by the steps
# before it: 18 for the six pairs, 84 s at the default budget.
pairs=(bench_autograd:peer_autograd_torch.py bench_nn:peer_nn_torch.py bench_norm:peer_norm_torch.py
  bench_optim:peer_optim_torch.py bench_data:peer_data_torch.py bench_amp:peer_amp_torch.py)
pairs_share=$((3 * ${#pairs[@]}))

# ---------------------------------------------------------------- the main job
# tandem train on cuda:0 (one short epoch each of the MLP and the CNN, with
# pinned memory and two loader workers), then tandem eval of the cuda
# checkpoint on the cpu. Fashion-MNIST comes from shared/gpu-deps/ (staged
# by scripts/stage-gpu-deps.sh; the GPU machine has no apt).
main_job() {
  local exe="$build/cli/tandem" run="$tmpbin/run" lim rc model
  [ -d "$root/shared/gpu-deps/fashion-mnist" ] && export TANDEM_FASHION_MNIST="$root/shared/gpu-deps/fashion-mnist"
  if [ ! -x "$exe" ]; then
    row "tandem train" "FAILED: build/cli/tandem not built"
    fail
    return
  fi
  for model in mlp cnn; do
    lim=$(step_limit 3 $((1 + pairs_share)))
    [ "$lim" = 0 ] && { row "tandem train $model" "not run: no time left"; continue; }
    say ""
    say "== tandem train --model $model --device cuda:0 --epochs 1 (limit $lim s), log in $out/bench.log"
    say "### tandem train --model $model --device cuda:0 --epochs 1" >>"$out/bench.log"
    rm -rf "$run"
    env -u TANDEM_EMULATE_CUDA timeout "$lim" "$exe" train --model "$model" --device cuda:0 --epochs 1 \
      --out "$run" >"$out/run.tmp" 2>&1 &&
      env -u TANDEM_EMULATE_CUDA timeout "$(step_limit 1 $((pairs_share)))" "$exe" eval --checkpoint "$run/checkpoint.safetensors" \
        --device cpu >>"$out/run.tmp" 2>&1
    rc=$?
    cat "$out/run.tmp" >>"$out/bench.log"
    tail -4 "$out/run.tmp"
    if [ $rc -ne 0 ]; then
      row "tandem train $model" "FAILED (exit $rc$([ $rc = 124 ] && echo ', timed out')): $(tail -1 "$out/run.tmp" | cut -c1-100)"
      fail
    else
      row "tandem train $model" "$(grep -E '^epoch +1/1 +train' "$out/run.tmp" | sed -E 's/ +/ /g' | cut -c1-150)"
    fi
    rm -f "$out/run.tmp"
  done
}
: >"$out/bench.log"
[ $built != 0 ] && main_job

# ---------------------------------------------------------------- benchmarks
if [ $built != 0 ]; then
  for f in "$build"/bench/bench_gpu_*; do
    [ -x "$f" ] && [ -f "$f" ] || continue
    name=$(basename "$f")
    lim=$(step_limit 25 $((1 + pairs_share)))
    [ "$lim" = 0 ] && { row "$name" "not run: no time left"; continue; }
    say ""
    say "== $name (limit $lim s), log in $out/bench.log"
    say "### $name" >>"$out/bench.log"
    timeout "$lim" "$f" >"$out/bench.tmp" 2>&1
    rc=$?
    cat "$out/bench.tmp" >>"$out/bench.log"
    tail -3 "$out/bench.tmp"
    headline=$(grep -E '^headline:' "$out/bench.tmp" | tail -1 | sed 's/^headline: *//')
    if grep -qi 'no GPU' "$out/bench.tmp"; then
      row "$name" "FAILED: no GPU"
      fail
    elif [ $rc -ne 0 ]; then
      row "$name" "FAILED (exit $rc$([ $rc = 124 ] && echo ', timed out'))"
      fail
    else
      row "$name" "${headline:-ran (no headline line; see bench.log)}"
    fi
    rm -f "$out/bench.tmp"
  done
fi

# The peers need a python3 with torch (the first on PATH on the GPU machine).
peer_py=""
for py in python3 /usr/bin/python3; do
  command -v "$py" >/dev/null 2>&1 || continue
  "$py" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' 2>/dev/null &&
    { peer_py=$py; break; }
done

# bench_pair NAME PEER RESERVE: Tandem's bench/NAME on cuda:0 beside torch's
# bench/PEER on the same GPU, both --quick (a few seconds each): the time of
# each case, and with --compare the peer's Tandem/torch table and its headline
# (the geometric mean of the ratios), which is NAME's summary row. Each run is
# cut to leave RESERVE percent of the budget for the pairs after it, the
# Tandem run one more for its peer (which also gets what Tandem leaves of its
# 2). TANDEM_EMULATE_CUDA is dropped: emulated devices would time the CPU.
bench_pair() {
  local name=$1 peer=$2 reserve=$3 lim rc prc result
  local exe="$build/bench/$1" table="$tmpbin/$1.txt" peer_out="$tmpbin/$2.txt"
  lim=$(step_limit 2 $((reserve + 1)))
  if [ ! -x "$exe" ]; then
    row "$name" "FAILED: not built (see bench/meson.build)"
    fail
    return
  elif [ "$lim" = 0 ]; then
    row "$name" "not run: no time left"
    return
  fi
  say ""
  say "== $name --device cuda:0 --quick (limit $lim s), log in $out/bench.log"
  say "### $name --device cuda:0 --quick" >>"$out/bench.log"
  env -u TANDEM_EMULATE_CUDA timeout "$lim" "$exe" --device cuda:0 --quick >"$table" 2>&1
  rc=$?
  cat "$table" >>"$out/bench.log"
  tail -3 "$table"
  if [ $rc -ne 0 ]; then
    if grep -q 'CUDA is not available' "$table"; then
      row "$name" "FAILED: no GPU (--device cuda:0: CUDA is not available)"
    else
      row "$name" "FAILED (exit $rc$([ $rc = 124 ] && echo ', timed out'))"
    fi
    fail
    rm -f "$table"
    return
  fi
  lim=$(step_limit 4 "$reserve")
  if [ -z "$peer_py" ]; then
    result="torch peer not run: no python3 with torch"
  elif [ ! -f "$root/bench/$peer" ]; then
    result="torch peer not run: bench/$peer is missing"
  elif [ "$lim" = 0 ]; then
    result="torch peer not run: no time left"
  else
    say "== $peer --device cuda:0 --quick --compare ($peer_py, limit $lim s)"
    say "### $peer --device cuda:0 --quick --compare ($peer_py)" >>"$out/bench.log"
    env -u TANDEM_EMULATE_CUDA timeout "$lim" "$peer_py" "$root/bench/$peer" --device cuda:0 --quick \
      --compare "$table" >"$peer_out" 2>&1
    prc=$?
    cat "$peer_out" >>"$out/bench.log"
    tail -1 "$peer_out"
    result=$(grep -E '^headline:' "$peer_out" | tail -1 | sed 's/^headline: *//')
    [ -z "$result" ] && result="torch peer gave no headline line (see bench.log)"
    if [ $prc -ne 0 ]; then
      result="torch peer FAILED (exit $prc$([ $prc = 124 ] && echo ', timed out')): $(tail -1 "$peer_out" | cut -c1-120)"
    fi
  fi
  case $result in
    "tandem/torch"*) row "$name" "cuda:0: $result" ;;
    *)
      row "$name" "cuda:0: Tandem ran (see bench.log); $result"
      fail
      ;;
  esac
  rm -f "$table" "$peer_out"
}

if [ $built != 0 ]; then
  left=${#pairs[@]}
  for pair in "${pairs[@]}"; do
    left=$((left - 1))
    bench_pair "${pair%%:*}" "${pair#*:}" $((1 + 3 * left))
  done
fi

# ---------------------------------------------------------------- summary
if [ $has_gpu = 0 ]; then
  row "GPU parts" "FAILED: no GPU on this machine$([ $ran_tests = 1 ] && echo '; the cpu and emulated suites above ran')"
fi
row "total" "$(elapsed) s of $budget s budget; $([ $failed = 0 ] && echo PASS || echo FAIL)"
say ""
say "== gpu-check summary (also in $out/summary.txt)"
cat "$out/summary.txt"
exit $failed
