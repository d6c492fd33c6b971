// Blocks and threads of a simulated launch. A block's threads run one at a
// time on fibers: a fiber takes the next thread that has not started and
// runs it to its end, then the next, so a kernel without a barrier runs all
// of a block on one fiber with two context switches per block. A thread that
// reaches __syncthreads() or a warp shuffle parks its fiber, and the next
// thread starts on another; when every thread of the block has arrived, the
// barrier opens and the waiting threads resume, in an order
// that changes from one barrier to the next (Schedule), so that a missing
// barrier or a race on shared memory changes the result.
#include "kernels/cuda/sim/scheduler.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/sim/device.h"
#include "tensor/core/errors.h"

#if defined(__SANITIZE_ADDRESS__)
#define TANDEM_SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TANDEM_SIM_ASAN 1
#endif
#endif
#ifndef TANDEM_SIM_ASAN
#define TANDEM_SIM_ASAN 0
#endif
#if TANDEM_SIM_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

uint3 threadIdx;
uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;

namespace tandem::sim {

namespace {

// ---------------------------------------------------------------- fibers
// Under AddressSanitizer frames are larger (redzones).
constexpr size_t kStackBytes = TANDEM_SIM_ASAN ? 512 * 1024 : 128 * 1024;
constexpr size_t kGuardBytes = 4096;

struct Fiber;
void fiber_main(Fiber* f);

struct Fiber {
  char* map = nullptr;  // guard page, then the stack
  char* stack = nullptr;
  size_t size = kStackBytes;
  bool started = false;
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t context;
#endif
  void* asan_fake_stack = nullptr;

  Fiber() {
    map = static_cast<char*>(
        mmap(nullptr, kGuardBytes + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    TANDEM_CHECK(map != MAP_FAILED, OutOfMemoryError, "simulated GPU: cannot map a ", size, "-byte fiber stack");
    mprotect(map, kGuardBytes, PROT_NONE);  // a stack overflow faults instead of corrupting the next stack
    stack = map + kGuardBytes;
    reset();
  }
  ~Fiber() { munmap(map, kGuardBytes + size); }
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // A fresh context that enters fiber_main(this) when first resumed; also
  // for a fiber whose thread was abandoned (a launch that deadlocked).
  void reset();
};

#if defined(__x86_64__)
// tandem_sim_switch(&save, to): saves the callee-saved registers, the SSE and
// x87 control words and the stack pointer into *save, loads them from `to`.
// tandem_sim_fiber_start is where a fresh fiber's first switch returns to:
// it calls r13(r12), which never returns.
asm(R"(
.text
.globl tandem_sim_switch
.type tandem_sim_switch,@function
tandem_sim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size tandem_sim_switch,.-tandem_sim_switch
.globl tandem_sim_fiber_start
.type tandem_sim_fiber_start,@function
tandem_sim_fiber_start:
  movq %r12, %rdi
  callq *%r13
  ud2
.size tandem_sim_fiber_start,.-tandem_sim_fiber_start
.section .note.GNU-stack,"",@progbits
.text
)");
extern "C" void tandem_sim_switch(void** save, void* to);
extern "C" void tandem_sim_fiber_start();

void* g_scheduler_sp = nullptr;

void Fiber::reset() {
#if TANDEM_SIM_ASAN
  __asan_unpoison_memory_region(stack, size);
#endif
  auto* top = reinterpret_cast<uint64_t*>(stack + size);  // 16-aligned: mmap'd pages
  uint32_t csr[2] = {0, 0};
  asm volatile("stmxcsr %0" : "=m"(csr[0]));
  asm volatile("fnstcw %0" : "=m"(csr[1]));
  uint64_t* sp = top - 8;
  std::memcpy(&sp[0], csr, 8);                                  // mxcsr, x87 control word
  sp[1] = 0;                                                    // r15
  sp[2] = 0;                                                    // r14
  sp[3] = reinterpret_cast<uint64_t>(&fiber_main);              // r13
  sp[4] = reinterpret_cast<uint64_t>(this);                     // r12
  sp[5] = 0;                                                    // rbx
  sp[6] = 0;                                                    // rbp
  sp[7] = reinterpret_cast<uint64_t>(&tandem_sim_fiber_start);  // return address
  this->sp = sp;
  started = false;
}

void switch_to_fiber(Fiber* f) { tandem_sim_switch(&g_scheduler_sp, f->sp); }
void switch_to_scheduler(Fiber* f) { tandem_sim_switch(&f->sp, g_scheduler_sp); }
#else
ucontext_t g_scheduler_context;

void fiber_entry(unsigned hi, unsigned lo) {
  fiber_main(reinterpret_cast<Fiber*>((static_cast<uintptr_t>(hi) << 32) | lo));
}

void Fiber::reset() {
#if TANDEM_SIM_ASAN
  __asan_unpoison_memory_region(stack, size);
#endif
  getcontext(&context);
  context.uc_stack.ss_sp = stack;
  context.uc_stack.ss_size = size;
  context.uc_link = nullptr;
  auto p = reinterpret_cast<uintptr_t>(this);
  makecontext(&context, reinterpret_cast<void (*)()>(&fiber_entry), 2, static_cast<unsigned>(p >> 32),
              static_cast<unsigned>(p));
  started = false;
}

void switch_to_fiber(Fiber* f) { swapcontext(&g_scheduler_context, &f->context); }
void switch_to_scheduler(Fiber* f) { swapcontext(&f->context, &g_scheduler_context); }
#endif

// AddressSanitizer follows the stack switches (or it reports the fibers'
// frames as overflows of the host stack).
#if TANDEM_SIM_ASAN
void* g_scheduler_fake_stack = nullptr;
const void* g_scheduler_stack_bottom = nullptr;
size_t g_scheduler_stack_size = 0;
#endif

void enter_fiber(Fiber* f) {
#if TANDEM_SIM_ASAN
  __sanitizer_start_switch_fiber(&g_scheduler_fake_stack, f->stack, f->size);
#endif
  switch_to_fiber(f);
#if TANDEM_SIM_ASAN
  __sanitizer_finish_switch_fiber(g_scheduler_fake_stack, nullptr, nullptr);
#endif
}

void leave_fiber(Fiber* f) {
#if TANDEM_SIM_ASAN
  __sanitizer_start_switch_fiber(&f->asan_fake_stack, g_scheduler_stack_bottom, g_scheduler_stack_size);
#endif
  switch_to_scheduler(f);
#if TANDEM_SIM_ASAN
  __sanitizer_finish_switch_fiber(f->asan_fake_stack, &g_scheduler_stack_bottom, &g_scheduler_stack_size);
#endif
}

// ---------------------------------------------------------------- one block
enum class State : uint8_t { Unstarted, Running, Runnable, AtBarrier, AtShuffle, AtWarpSync, Done };

struct Thread {
  State state = State::Unstarted;
  Fiber* fiber = nullptr;
  // A shuffle in progress: what the thread gave, what it asked for, what it got.
  unsigned mask = 0;
  uint32_t word = 0;
  ShuffleKind kind = ShuffleKind::Index;
  int arg = 0;
  int width = 32;
  uint32_t result = 0;
};

struct Block {
  const std::function<void()>* body = nullptr;
  int n = 0;
  unsigned bx = 1, by = 1;
  std::vector<Thread> threads;
  std::vector<int> start_order;
  int next_start = 0;
  std::vector<int> runnable;  // run from the back
  int done = 0;
  int phase = 0;
  std::string error;
};

Block* g_block = nullptr;
int g_current = -1;
Schedule g_schedule = Schedule::Shuffle;
std::mt19937_64 g_rng;
std::vector<std::unique_ptr<Fiber>> g_fibers;
std::vector<Fiber*> g_idle;
std::vector<unsigned char> g_dynamic_smem;
SchedulerStats g_stats;

void set_builtins(int t) {
  const auto u = static_cast<unsigned>(t);
  threadIdx.x = u % g_block->bx;
  threadIdx.y = (u / g_block->bx) % g_block->by;
  threadIdx.z = u / (g_block->bx * g_block->by);
}

// Puts `ids` in the order this phase runs them: the scheduler takes
// runnable threads from the back.
void order(std::vector<int>& ids) {
  switch (g_schedule) {
    case Schedule::Forward: std::sort(ids.begin(), ids.end(), std::greater<>()); break;
    case Schedule::Reverse: std::sort(ids.begin(), ids.end()); break;
    case Schedule::Shuffle: std::shuffle(ids.begin(), ids.end(), g_rng); break;
  }
}

void fiber_main(Fiber* f) {
#if TANDEM_SIM_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &g_scheduler_stack_bottom, &g_scheduler_stack_size);
#endif
  for (;;) {
    Block& b = *g_block;
    while (b.next_start < b.n) {
      const int t = b.start_order[static_cast<size_t>(b.next_start++)];
      Thread& th = b.threads[static_cast<size_t>(t)];
      th.state = State::Running;
      th.fiber = f;
      g_current = t;
      set_builtins(t);
      try {
        (*b.body)();
      } catch (const std::exception& e) {  // device code cannot throw; a host function called from it can
        if (b.error.empty()) b.error = detail::str_cat("thread ", t, " threw: ", e.what());
      }
      th.state = State::Done;
      ++b.done;
    }
    g_idle.push_back(f);
    leave_fiber(f);
  }
}

// The calling thread waits in `state` until the scheduler resumes it.
void park(State state) {
  TANDEM_INTERNAL_ASSERT(g_block != nullptr && g_current >= 0,
                         "__syncthreads() or a warp shuffle outside a simulated kernel");
  Thread& th = g_block->threads[static_cast<size_t>(g_current)];
  th.state = state;
  ++g_stats.fiber_switches;
  leave_fiber(th.fiber);
}

Fiber* idle_fiber() {
  if (!g_idle.empty()) {
    Fiber* f = g_idle.back();
    g_idle.pop_back();
    return f;
  }
  g_fibers.push_back(std::make_unique<Fiber>());
  ++g_stats.fibers_created;
  return g_fibers.back().get();
}

const char* state_name(State s) {
  switch (s) {
    case State::AtBarrier: return "at __syncthreads()";
    case State::AtShuffle: return "at a warp shuffle";
    case State::AtWarpSync: return "at __syncwarp()";
    case State::Done: return "exited";
    default: return "running";
  }
}

// The source lane of a shuffle by lane `lane` (of its warp), or -1 when the
// lane keeps its own value.
int source_lane(const Thread& th, int lane) {
  const int w = th.width;
  const int segment = lane / w * w;
  switch (th.kind) {
    case ShuffleKind::Index: return segment + ((th.arg % w) + w) % w;
    case ShuffleKind::Down: return lane % w + th.arg < w ? lane + th.arg : -1;
    case ShuffleKind::Up: return lane % w >= th.arg ? lane - th.arg : -1;
    case ShuffleKind::Xor: {
      const int s = lane ^ th.arg;
      return s / w == lane / w ? s : -1;
    }
  }
  return -1;
}

// Opens the warps whose every lane waits at a shuffle or __syncwarp; returns
// whether one opened, or sets b.error when a warp cannot open.
bool release_warps(Block& b) {
  bool any = false;
  const int warps = (b.n + 31) / 32;
  for (int w = 0; w < warps; ++w) {
    const int first = w * 32, last = std::min(b.n, first + 32);
    int waiting = 0, exited = 0, elsewhere = 0;
    for (int t = first; t < last; ++t) {
      const State s = b.threads[static_cast<size_t>(t)].state;
      if (s == State::AtShuffle || s == State::AtWarpSync) {
        ++waiting;
      } else if (s == State::Done) {
        ++exited;
      } else {
        ++elsewhere;
      }
    }
    if (waiting == 0 || elsewhere > 0) continue;  // nothing to open, or lanes still to come
    // Every lane is here or has exited: each named lane must be here.
    for (int t = first; t < last; ++t) {
      const Thread& th = b.threads[static_cast<size_t>(t)];
      if (th.state != State::AtShuffle && th.state != State::AtWarpSync) continue;
      for (int l = 0; l < 32; ++l) {
        if (!((th.mask >> l) & 1u)) continue;
        const int other = first + l;
        if (other >= last || b.threads[static_cast<size_t>(other)].state != th.state) {
          b.error = detail::str_cat("thread ", t, " (warp ", w, ", lane ", t - first, ") waits ", state_name(th.state),
                                    " with mask 0x", std::hex, th.mask, std::dec, ", which names lane ", l,
                                    ", and that lane ",
                                    other >= last ? "is not in the block" : state_name(b.threads[other].state));
          return false;
        }
      }
      if (th.state == State::AtShuffle) {
        const int src = source_lane(th, t - first);
        if (src >= 0 && !((th.mask >> src) & 1u)) {
          b.error = detail::str_cat("thread ", t, " shuffles from lane ", src, ", which its mask 0x", std::hex, th.mask,
                                    std::dec, " does not name");
          return false;
        }
      }
    }
    std::vector<int> released;
    for (int t = first; t < last; ++t) {
      Thread& th = b.threads[static_cast<size_t>(t)];
      if (th.state != State::AtShuffle && th.state != State::AtWarpSync) continue;
      if (th.state == State::AtShuffle) {
        const int src = source_lane(th, t - first);
        th.result = src < 0 ? th.word : b.threads[static_cast<size_t>(first + src)].word;
      }
      released.push_back(t);
    }
    for (int t : released) b.threads[static_cast<size_t>(t)].state = State::Runnable;
    order(released);
    b.runnable.insert(b.runnable.end(), released.begin(), released.end());
    any = true;
  }
  return any;
}

// Opens the barrier when every thread of the block waits at it. A thread
// that has exited does not count as arrived: the programming guide makes a
// __syncthreads() that not every thread reaches undefined (the hardware
// happens to count exited threads; code that relies on it is reported).
bool release_barrier(Block& b) {
  std::vector<int> released;
  for (int t = 0; t < b.n; ++t) {
    if (b.threads[static_cast<size_t>(t)].state != State::AtBarrier) return false;
    released.push_back(t);
  }
  if (released.empty()) return false;
  for (int t : released) b.threads[static_cast<size_t>(t)].state = State::Runnable;
  order(released);
  b.runnable = std::move(released);
  ++b.phase;
  return true;
}

std::string describe_deadlock(const Block& b) {
  int at_barrier = 0, at_shuffle = 0, exited = 0;
  for (const Thread& th : b.threads) {
    at_barrier += th.state == State::AtBarrier;
    at_shuffle += th.state == State::AtShuffle || th.state == State::AtWarpSync;
    exited += th.state == State::Done;
  }
  return detail::str_cat(at_barrier, " thread(s) wait at __syncthreads(), ", at_shuffle,
                         " at a warp shuffle or __syncwarp(), ", exited,
                         " have exited: a barrier or shuffle that not every thread of the block (or warp) reaches");
}

// Runs one block; false (with b.error) when it cannot finish.
bool run_block(Block& b) {
  for (;;) {
    if (!b.runnable.empty()) {
      const int t = b.runnable.back();
      b.runnable.pop_back();
      Thread& th = b.threads[static_cast<size_t>(t)];
      th.state = State::Running;
      g_current = t;
      set_builtins(t);
      ++g_stats.fiber_switches;
      enter_fiber(th.fiber);
      if (!b.error.empty()) return false;
      continue;
    }
    if (b.next_start < b.n) {
      ++g_stats.fiber_switches;
      enter_fiber(idle_fiber());
      if (!b.error.empty()) return false;
      continue;
    }
    if (b.done == b.n) return true;
    if (release_warps(b)) continue;
    if (!b.error.empty()) return false;
    if (release_barrier(b)) continue;
    b.error = describe_deadlock(b);
    return false;
  }
}

// After a block that could not finish, its parked fibers hold frames that
// will never return: they start afresh.
void reset_fibers() {
  g_idle.clear();
  for (auto& f : g_fibers) {
    f->reset();
    g_idle.push_back(f.get());
  }
}

}  // namespace

void* dynamic_shared_memory() { return g_dynamic_smem.data(); }

void sync_threads() { park(State::AtBarrier); }

void sync_warp(unsigned mask) {
  Thread& th = g_block->threads[static_cast<size_t>(g_current)];
  th.mask = mask;
  park(State::AtWarpSync);
}

uint32_t shuffle_word(unsigned mask, uint32_t word, ShuffleKind kind, int arg, int width) {
  TANDEM_INTERNAL_ASSERT(g_block != nullptr && g_current >= 0, "a warp shuffle outside a simulated kernel");
  Thread& th = g_block->threads[static_cast<size_t>(g_current)];
  th.mask = mask;
  th.word = word;
  th.kind = kind;
  th.arg = arg;
  th.width = width;
  park(State::AtShuffle);
  return g_block->threads[static_cast<size_t>(g_current)].result;
}

std::string run_launch(const LaunchConfig& c, const std::function<void()>& thread, uint64_t launch_number,
                       Schedule schedule, uint64_t seed) {
  g_schedule = schedule;
  g_rng.seed(seed * 0x9E3779B97F4A7C15ull + launch_number);
  gridDim = c.grid;
  blockDim = c.block;
  // Uninitialised, as on a GPU: a pattern that is NaN in every float type.
  g_dynamic_smem.assign(std::max<size_t>(c.dynamic_smem, 16), 0xff);

  Block b;
  b.body = &thread;
  b.bx = c.block.x;
  b.by = c.block.y;
  b.n = static_cast<int>(c.block.x * c.block.y * c.block.z);
  b.threads.resize(static_cast<size_t>(b.n));
  std::vector<int> base(static_cast<size_t>(b.n));
  std::iota(base.begin(), base.end(), 0);

  const uint64_t gx = c.grid.x, gy = c.grid.y, gz = c.grid.z;
  const uint64_t blocks = gx * gy * gz;
  // Blocks in order, or from the last, alternating by launch when shuffled.
  const bool backwards = schedule == Schedule::Reverse || (schedule == Schedule::Shuffle && launch_number % 2 == 1);
  std::string error;
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint64_t k = backwards ? blocks - 1 - i : i;
    blockIdx.x = static_cast<unsigned>(k % gx);
    blockIdx.y = static_cast<unsigned>((k / gx) % gy);
    blockIdx.z = static_cast<unsigned>(k / (gx * gy));
    for (Thread& th : b.threads) th = Thread{};
    b.start_order = base;
    order(b.start_order);
    std::reverse(b.start_order.begin(), b.start_order.end());  // taken from the front
    b.next_start = 0;
    b.runnable.clear();
    b.done = 0;
    b.phase = 0;
    g_block = &b;
    const bool ok = run_block(b);
    ++g_stats.blocks;
    if (!ok) {
      error = detail::str_cat("block (", blockIdx.x, ", ", blockIdx.y, ", ", blockIdx.z, "): ", b.error);
      reset_fibers();
      break;
    }
  }
  g_block = nullptr;
  g_current = -1;
  return error;
}

SchedulerStats scheduler_stats() { return g_stats; }

}  // namespace tandem::sim
