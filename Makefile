# Thin wrappers over meson: each target installs what is missing, configures,
# builds and runs.
#   make train   the main job: builds the library and the tandem command only,
#                then runs tandem train (DEVICE=cpu|cuda:0 to choose, default the
#                best present; TRAIN_ARGS="--model cnn" for more flags)
#   make test    the whole test suite (cpu, then two emulated CUDA devices)
#   make sim     the CUDA backend built for two simulated GPUs (no toolkit
#                needed), and the suite on them, GPU-only tests included
#   make asan    the simulated build once more, under ASan and UBSan
BUILD ?= build
# ccache caches the files compiled with a precompiled header (the tests',
# the library's) only with this sloppiness; without it they are compiled
# every time. An environment that sets CCACHE_SLOPPINESS keeps its own (it
# should include these two); ccache.conf's is overridden.
export CCACHE_SLOPPINESS ?= pch_defines,time_macros
MESON_ARGS ?=

.PHONY: deps build test train sim asan check-embed clean

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_ARGS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

test: build
	scripts/run-tests.sh $(BUILD)

train: deps $(BUILD)/build.ninja
	ninja -C $(BUILD) cli/tandem
	$(BUILD)/cli/tandem train $(if $(DEVICE),--device $(DEVICE)) $(TRAIN_ARGS)

# The CUDA backend on simulated GPUs (kernels/cuda/sim): the cpu suite and
# the simulated one; the [large] cases are `meson test -C build-sim --suite
# simulated-large` (gigabytes, minutes).
sim: deps
	[ -f build-sim/build.ninja ] || meson setup build-sim -Dcuda=simulated -Dbench=false
	ninja -C build-sim
	scripts/run-tests.sh build-sim --no-suite simulated-large

# The simulated build once more under AddressSanitizer and
# UndefinedBehaviorSanitizer, at -O1 (sanitizers' usual level; it compiles in
# 40% less time than -O2): the CPU kernels, and the CUDA kernels on the
# simulator, which poisons device memory outside kernels and copies.
asan: deps
	[ -f build-asan/build.ninja ] || meson setup build-asan -Dcuda=simulated -Dbench=false -Doptimization=1 \
		-Db_sanitize=address,undefined -Db_lundef=false
	grep -q "cuda=simulated" build-asan/meson-logs/meson-log.txt || meson configure build-asan -Dcuda=simulated
	ninja -C build-asan
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		scripts/run-tests.sh build-asan --no-suite simulated-large

# An outside program built against the installed headers and pkg-config file.
check-embed: build
	scripts/check-embed.sh $(BUILD)

clean:
	rm -rf $(BUILD) build-asan build-sim
