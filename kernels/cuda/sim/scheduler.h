// The simulated GPU's execution of one kernel launch: every block, one after
// another, and in each block every thread, as fibers on the calling host
// thread (scheduler.cpp). runtime.cpp calls it when a stream reaches the
// launch.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kernels/cuda/sim/launch.h"

namespace tandem::sim {

// How the threads of a block are ordered between two barriers, and the
// blocks of a grid: TANDEM_SIM_SCHEDULE=forward|reverse|shuffle (default
// shuffle, from TANDEM_SIM_SEED, default 0).
enum class Schedule { Forward, Reverse, Shuffle };

// Runs the launch to its end. Returns an empty string, or what went wrong
// (a barrier or shuffle that not every thread reached): the launch stops at
// that block, as a GPU's would stop with an error.
std::string run_launch(const LaunchConfig& config, const std::function<void()>& thread, uint64_t launch_number,
                       Schedule schedule, uint64_t seed);

// Counters for the tests of the simulator itself.
struct SchedulerStats {
  uint64_t blocks = 0;
  uint64_t fiber_switches = 0;
  uint64_t fibers_created = 0;  // stacks, pooled: at most the largest block that waited
};
SchedulerStats scheduler_stats();

}  // namespace tandem::sim
