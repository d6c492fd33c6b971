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

#include "kernels/cuda/sim/asan.h"
#include "kernels/cuda/sim/device.h"
#include "tensor/core/errors.h"

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
  int nwords = 0;
  uint32_t words[kShuffleWords] = {};
  ShuffleKind kind = ShuffleKind::Index;
  int arg = 0;
  int width = 32;
  uint32_t results[kShuffleWords] = {};
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
  int at_barrier = 0;             // threads waiting at __syncthreads()
  std::vector<int> warp_waiting;  // per warp: lanes waiting at a shuffle or __syncwarp()
  std::vector<int> full_warps;    // warps whose every lane waits there: to open first
  std::string error;
};

Block* g_block = nullptr;
int g_current = -1;
Schedule g_schedule = Schedule::Shuffle;
// SplitMix64: the schedule's random numbers (a permutation per barrier and
// per warp exchange; mt19937 cost more than the exchange itself).
struct SplitMix {
  uint64_t state = 0;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};
SplitMix g_rng;
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
template <typename It>
void order(It first, It last) {
  switch (g_schedule) {
    case Schedule::Forward: std::sort(first, last, std::greater<>()); break;
    case Schedule::Reverse: std::sort(first, last); break;
    case Schedule::Shuffle:
      for (auto n = last - first; n > 1; --n)
        std::swap(first[n - 1], first[static_cast<std::ptrdiff_t>(g_rng.next() % static_cast<uint64_t>(n))]);
      break;
  }
}
void order(std::vector<int>& ids) { order(ids.begin(), ids.end()); }

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
      } catch (...) {
        if (b.error.empty()) b.error = detail::str_cat("thread ", t, " threw");
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
  Block& b = *g_block;
  Thread& th = b.threads[static_cast<size_t>(g_current)];
  th.state = state;
  if (state == State::AtBarrier) {
    ++b.at_barrier;
  } else {
    const int w = g_current / 32;
    if (++b.warp_waiting[static_cast<size_t>(w)] == std::min(32, b.n - w * 32)) b.full_warps.push_back(w);
  }
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
// lane keeps its own value. Offsets use their low five bits, as the
// hardware; a lane may read from an earlier group of `width` lanes with xor,
// not from a later one.
int source_lane(const Thread& th, int lane) {
  const int w = th.width;
  const int segment = lane / w * w;
  const int d = th.arg & 31;
  switch (th.kind) {
    case ShuffleKind::Index: return segment + (th.arg & (w - 1));
    case ShuffleKind::Down: return lane % w + d < w ? lane + d : -1;
    case ShuffleKind::Up: return lane % w >= d ? lane - d : -1;
    case ShuffleKind::Xor: {
      const int s = lane ^ d;
      return s / w <= lane / w ? s : -1;
    }
  }
  return -1;
}

bool waiting_in_warp(State s) { return s == State::AtShuffle || s == State::AtWarpSync; }

// Opens the lanes of warp w waiting at a shuffle or __syncwarp() whose masks
// name only lanes waiting at the same kind of call; returns whether any
// opened, or sets b.error when a lane can never open.
bool release_warp(Block& b, int w) {
  const int first = w * 32, last = std::min(b.n, first + 32);
  bool ready[32] = {};
  int count = 0;
  // The common case: a whole warp at one kind of call, every mask full.
  bool whole = last - first == 32;
  for (int t = first; t < last && whole; ++t) {
    const Thread& th = b.threads[static_cast<size_t>(t)];
    whole =
        th.state == b.threads[static_cast<size_t>(first)].state && waiting_in_warp(th.state) && th.mask == 0xffffffffu;
  }
  if (whole) {
    std::fill(std::begin(ready), std::end(ready), true);
    count = 32;
  } else {
    for (int t = first; t < last; ++t) {
      const Thread& th = b.threads[static_cast<size_t>(t)];
      if (!waiting_in_warp(th.state)) continue;
      ready[t - first] = true;
      for (int l = 0; l < 32; ++l) {
        if (!((th.mask >> l) & 1u)) continue;
        const int other = first + l;
        const State os = other < last ? b.threads[static_cast<size_t>(other)].state : State::Done;
        if (other >= last || os == State::Done) {
          b.error = detail::str_cat("thread ", t, " (warp ", w, ", lane ", t - first, ") waits ", state_name(th.state),
                                    " with mask 0x", std::hex, th.mask, std::dec, ", which names lane ", l,
                                    ", and that lane ", other >= last ? "is not in the block" : "exited");
          return false;
        }
        if (os != th.state) ready[t - first] = false;  // still to come (or elsewhere: a deadlock, found later)
      }
      count += ready[t - first];
    }
  }
  if (count == 0) return false;
  for (int t = first; t < last; ++t) {
    const Thread& th = b.threads[static_cast<size_t>(t)];
    if (!ready[t - first] || th.state != State::AtShuffle) continue;
    const int src = source_lane(th, t - first);
    if (src < 0) continue;
    const Thread& from = b.threads[static_cast<size_t>(first + src)];
    if (!((th.mask >> src) & 1u) || !ready[src] || from.state != State::AtShuffle || from.nwords != th.nwords) {
      b.error =
          detail::str_cat("thread ", t, " (warp ", w, ", lane ", t - first, ") shuffles from lane ", src, ", which ",
                          !((th.mask >> src) & 1u) ? "its mask does not name" : "is not in the same shuffle");
      return false;
    }
  }
  // Every result first: a lane's words are read by others.
  for (int t = first; t < last; ++t) {
    Thread& th = b.threads[static_cast<size_t>(t)];
    if (!ready[t - first] || th.state != State::AtShuffle) continue;
    const int src = source_lane(th, t - first);
    const Thread& from = src < 0 ? th : b.threads[static_cast<size_t>(first + src)];
    for (int k = 0; k < th.nwords; ++k) th.results[k] = from.words[k];
  }
  const size_t before = b.runnable.size();
  for (int t = first; t < last; ++t) {
    if (!ready[t - first]) continue;
    b.threads[static_cast<size_t>(t)].state = State::Runnable;
    b.runnable.push_back(t);
  }
  b.warp_waiting[static_cast<size_t>(w)] -= count;
  order(b.runnable.begin() + static_cast<std::ptrdiff_t>(before), b.runnable.end());
  return true;
}

// The warps whose every lane has arrived first; then any warp (partial masks).
bool release_warps(Block& b) {
  bool any = false;
  while (!b.full_warps.empty()) {
    const int w = b.full_warps.back();
    b.full_warps.pop_back();
    any |= release_warp(b, w);
    if (!b.error.empty()) return false;
  }
  if (any) return true;
  for (int w = 0; w < (b.n + 31) / 32; ++w) {
    if (b.warp_waiting[static_cast<size_t>(w)] == 0) continue;
    any |= release_warp(b, w);
    if (!b.error.empty()) return false;
  }
  return any;
}

// Opens the barrier when every thread of the block waits at it. A thread
// that has exited does not count as arrived: the programming guide makes a
// __syncthreads() that not every thread reaches undefined (the hardware
// happens to count exited threads; code that relies on it is reported).
bool release_barrier(Block& b) {
  if (b.at_barrier != b.n) return false;
  b.at_barrier = 0;
  std::vector<int> released;
  for (int t = 0; t < b.n; ++t) released.push_back(t);
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

void shuffle_words(unsigned mask, const uint32_t* in, uint32_t* out, int n, ShuffleKind kind, int arg, int width) {
  TANDEM_INTERNAL_ASSERT(g_block != nullptr && g_current >= 0, "a warp shuffle outside a simulated kernel");
  TANDEM_INTERNAL_ASSERT(n >= 1 && n <= kShuffleWords, "shuffle of ", n, " words");
  Thread& th = g_block->threads[static_cast<size_t>(g_current)];
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    // The block stops at this shuffle (run_block sees the error).
    if (g_block->error.empty())
      g_block->error = detail::str_cat("thread ", g_current, " shuffles with width ", width,
                                       ", which is not a power of two from 1 to 32");
    width = 32;
  }
  th.mask = mask;
  th.nwords = n;
  std::memcpy(th.words, in, sizeof(uint32_t) * static_cast<size_t>(n));
  th.kind = kind;
  th.arg = arg;
  th.width = width;
  park(State::AtShuffle);
  std::memcpy(out, g_block->threads[static_cast<size_t>(g_current)].results, sizeof(uint32_t) * static_cast<size_t>(n));
}

std::string run_launch(const LaunchConfig& c, const std::function<void()>& thread, uint64_t launch_number,
                       Schedule schedule, uint64_t seed) {
  g_schedule = schedule;
  g_rng.state = seed * 0x9E3779B97F4A7C15ull + launch_number;
  gridDim = c.grid;
  blockDim = c.block;
  g_dynamic_smem.resize(std::max<size_t>(c.dynamic_smem, 16));

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
    // Uninitialised, as on a GPU: a pattern that is NaN in every float
    // type, afresh for each block.
    std::fill(g_dynamic_smem.begin(), g_dynamic_smem.end(), static_cast<unsigned char>(0xff));
    b.start_order = base;
    order(b.start_order);
    std::reverse(b.start_order.begin(), b.start_order.end());  // taken from the front
    b.next_start = 0;
    b.runnable.clear();
    b.done = 0;
    b.phase = 0;
    b.at_barrier = 0;
    b.warp_waiting.assign(static_cast<size_t>((b.n + 31) / 32), 0);
    b.full_warps.clear();
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
