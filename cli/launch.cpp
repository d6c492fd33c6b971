// The local launcher of tandem train --nproc-per-node (see launch.h).
#include "cli/launch.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cli/common.h"

namespace tandem::cli {

namespace {

std::atomic<int> interrupts{0};
void on_sigint(int) { interrupts.fetch_add(1); }

// A port nobody listens on now; rank 0 binds it a moment later (the store
// says clearly if another process took it in between).
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (fd >= 0) close(fd);
    return 29500;
  }
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

std::string self_exe(const char* argv0) {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string(argv0);
}

}  // namespace

int launch_ranks(int argc, char** argv, int nproc) {
  // The ranks' command line: this one without --nproc-per-node and its value.
  std::vector<std::string> args{self_exe(argv[0])};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--nproc-per-node") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc-per-node=", 0) == 0) continue;
    args.push_back(a);
  }
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  std::string master_addr = addr && *addr ? addr : "127.0.0.1";
  std::string master_port = port && *port ? port : std::to_string(free_port());

  // Started with SIGINT ignored (nohup, `cmd &`): it stays ignored, here and
  // in the ranks, as for one process. Else Ctrl-C is counted and forwarded;
  // without SA_RESTART it also wakes the wait below.
  struct sigaction old {};
  sigaction(SIGINT, nullptr, &old);
  const bool ignore_sigint = old.sa_handler == SIG_IGN;
  if (!ignore_sigint) {
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
  }
  // An inherited SIG_IGN would reap the ranks behind waitpid's back.
  signal(SIGCHLD, SIG_DFL);

  std::vector<pid_t> pids(static_cast<size_t>(nproc), -1);
  for (int r = 0; r < nproc; ++r) {
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("--nproc-per-node: fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      // A group of its own: a terminal's Ctrl-C reaches the launcher alone,
      // which forwards it once (twice would make each rank exit at once).
      // And it goes if the launcher is killed.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (!ignore_sigint) {
        // Blocked until the rank's own handler is in place (cli/main.cpp
        // unblocks it): a Ctrl-C while it loads then stops it at a step
        // like the others, instead of killing it before it joins them.
        signal(SIGINT, SIG_DFL);
        sigset_t block;
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigprocmask(SIG_BLOCK, &block, nullptr);
      }
      setenv("MASTER_ADDR", master_addr.c_str(), 1);
      setenv("MASTER_PORT", master_port.c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      std::vector<char*> cargs;
      for (std::string& s : args) cargs.push_back(s.data());
      cargs.push_back(nullptr);
      execv(cargs[0], cargs.data());
      std::fprintf(stderr, "tandem train: error: rank %d: cannot start %s: %s\n", r, cargs[0], std::strerror(errno));
      std::_Exit(kExitError);
    }
    pids[static_cast<size_t>(r)] = pid;
  }

  int result = 0, forwarded = 0, failed_rank = -1, failed_code = 0;
  size_t running = pids.size();
  auto stop_at = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    // Ctrl-C: every rank gets each one, so they stop at the same step.
    for (int k = interrupts.load(); forwarded < k; ++forwarded)
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGINT);
    int status = 0;
    // Blocking until a rank exits (or a Ctrl-C comes), so the first rank to
    // fail is the first seen; once the others are told to stop, polling
    // for the deadline past which they are killed.
    const bool stopping = stop_at != std::chrono::steady_clock::time_point::max();
    pid_t pid = waitpid(-1, &status, stopping ? WNOHANG : 0);
    if (pid < 0 && errno == ECHILD) break;
    if (pid <= 0) {
      if (std::chrono::steady_clock::now() > stop_at)
        for (pid_t p : pids)
          if (p > 0) kill(p, SIGKILL);
      if (stopping) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    int rank = -1;
    for (size_t i = 0; i < pids.size(); ++i)
      if (pids[i] == pid) {
        rank = static_cast<int>(i);
        pids[i] = -1;
      }
    if (rank < 0) continue;
    --running;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    // 130: stopped by a Ctrl-C, this launcher's or one a rank got itself;
    // the ranks agree on the step, so the others stop there too.
    if (code == 0 || code == kExitInterrupted) {
      if (code != 0) result = code;
      continue;
    }
    if (failed_rank < 0) {
      // The first rank to fail: the others cannot go on without it (their
      // collectives would wait for it until their timeout).
      failed_rank = rank;
      failed_code = code;
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGTERM);
      stop_at = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    }
  }
  if (failed_rank >= 0) {
    std::fprintf(stderr,
                 "tandem train: error: rank %d of %d failed (exit code %d; its error is above), so the other ranks "
                 "were stopped\n",
                 failed_rank, nproc, failed_code);
    return failed_code == kExitUsage ? kExitUsage : kExitError;
  }
  return result;
}

}  // namespace tandem::cli
