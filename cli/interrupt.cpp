// SIGINT for tandem train. A real handler, since the signal may reach any
// thread (OpenBLAS starts its own before main); it only touches lock-free
// atomics and calls write and _exit, which are async-signal-safe.
#include "cli/interrupt.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

#include "cli/common.h"

namespace tandem::cli {

namespace {

std::atomic<int> g_interrupts{0};
std::atomic<int> g_critical{0};         // CriticalSections open
std::atomic<bool> g_exit_after{false};  // a second Ctrl-C came during one
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);

std::atomic<bool> g_stderr_terminal{false};  // read by the handler; set at install

// text starts with '\n', which ends a progress line on a terminal and would
// be a blank line in a log.
void say(const char* text, size_t n) {
  if (!g_stderr_terminal.load()) ++text, --n;
  ssize_t ignored = write(STDERR_FILENO, text, n);
  (void)ignored;
}

[[noreturn]] void exit_now(bool after_write) {
  const char now[] = "\nCtrl-C again: exiting now; the last checkpoint written stays as it was\n";
  const char after[] = "\nCtrl-C again: exiting now that the checkpoint being written is whole\n";
  if (after_write) {
    say(after, sizeof after - 1);
  } else {
    say(now, sizeof now - 1);
  }
  _exit(kExitInterrupted);
}

void on_sigint(int) {
  if (g_interrupts.fetch_add(1) == 0) {
    const char msg[] = "\nCtrl-C: stopping at the end of this step to write a checkpoint (Ctrl-C again to exit now)\n";
    say(msg, sizeof msg - 1);
    return;
  }
  // Flag first, then look: with the destructor's "count down, then look at
  // the flag" (both sequentially consistent), one of the two sees the other
  // and exits; never neither.
  g_exit_after.store(true);
  if (g_critical.load() == 0) exit_now(false);
}

}  // namespace

void install_interrupt_handler() {
  struct sigaction old {};
  sigaction(SIGINT, nullptr, &old);
  // A program started with SIGINT ignored (in the background of a
  // non-interactive shell, under nohup) keeps it so, as Python does.
  if (old.sa_handler == SIG_IGN) return;
  g_stderr_terminal.store(isatty(STDERR_FILENO) == 1);
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
}

bool interrupt_requested() { return g_interrupts.load() > 0; }

CriticalSection::CriticalSection() { g_critical.fetch_add(1); }

CriticalSection::~CriticalSection() {
  if (g_critical.fetch_sub(1) == 1 && g_exit_after.load()) exit_now(true);
}

}  // namespace tandem::cli
