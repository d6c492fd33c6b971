// Child processes for tests (subprocess.h): fork and exec with the output
// in files or on a pseudo-terminal, and a watchdog.
#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

namespace tandem::test {

using Clock = std::chrono::steady_clock;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

RunOptions with_env(std::vector<std::string> env) {
  RunOptions o;
  o.env = std::move(env);
  return o;
}
RunOptions without_env(std::vector<std::string> names) {
  RunOptions o;
  o.unset = std::move(names);
  return o;
}
RunOptions on_terminal() {
  RunOptions o;
  o.terminal = true;
  return o;
}
RunOptions with_timeout(double seconds) {
  RunOptions o;
  o.timeout_s = seconds;
  return o;
}
RunOptions in_folder(std::string cwd) {
  RunOptions o;
  o.cwd = std::move(cwd);
  return o;
}

std::ostream& operator<<(std::ostream& os, const Result& r) {
  std::string out = r.out.size() > 4000 ? "..." + r.out.substr(r.out.size() - 4000) : r.out;
  return os << r.command << "\nexit code " << r.exit_code << "\n--- stdout\n" << out << "--- stderr\n" << r.err;
}

Child::Child(const std::string& program, const std::vector<std::string>& args, RunOptions options)
    : options_(std::move(options)) {
  command_ = std::filesystem::path(program).filename().string();
  for (const std::string& a : args) command_ += " " + a;
  std::vector<std::string> argv_s = {program}, env_s;
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  auto dropped = [&](const std::string& kv) {
    std::string name = kv.substr(0, kv.find('='));
    for (const std::string& u : options_.unset)
      if (u == name) return true;
    for (const std::string& e : options_.env)
      if (e.substr(0, e.find('=')) == name) return true;
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e)
    if (!dropped(*e)) env_s.emplace_back(*e);
  env_s.insert(env_s.end(), options_.env.begin(), options_.env.end());
  // Everything the child needs is made before fork: after it, only dup2 and exec.
  std::vector<char*> argv, envp;
  for (std::string& s : argv_s) argv.push_back(s.data());
  for (std::string& s : env_s) envp.push_back(s.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  std::string failed = "subprocess: cannot execute " + program + "\n";

  out_path_ = dir_.file("stdout");
  err_path_ = dir_.file("stderr");
  int null_in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int out_fd = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err_fd = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE((null_in >= 0 && out_fd >= 0 && err_fd >= 0));
  int slave = -1;
  if (options_.terminal) {
    winsize ws{};
    ws.ws_row = 40;
    ws.ws_col = 120;
    REQUIRE(::openpty(&master_, &slave, nullptr, nullptr, &ws) == 0);
    // Output as written, no "\n" -> "\r\n": every '\r' read is the child's.
    termios t{};
    REQUIRE(::tcgetattr(slave, &t) == 0);
    t.c_oflag &= ~static_cast<tcflag_t>(OPOST);
    REQUIRE(::tcsetattr(slave, TCSANOW, &t) == 0);
    ::fcntl(master_, F_SETFD, FD_CLOEXEC);
  }
  pid_ = ::fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    if (slave >= 0) {
      ::setsid();
      ::ioctl(slave, TIOCSCTTY, 0);
      ::dup2(slave, 0);
      ::dup2(slave, 1);
      if (slave > 2) ::close(slave);
    } else {
      ::dup2(null_in, 0);
      ::dup2(out_fd, 1);
    }
    ::dup2(err_fd, 2);
    if (!options_.cwd.empty() && ::chdir(options_.cwd.c_str()) != 0) ::_exit(127);
    // As a shell starts a program: SIGINT at its default, nothing blocked.
    ::signal(SIGINT, options_.ignore_sigint ? SIG_IGN : SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    [[maybe_unused]] ssize_t n = ::write(2, failed.data(), failed.size());
    ::_exit(127);
  }
  ::close(null_in);
  ::close(out_fd);
  ::close(err_fd);
  if (slave >= 0) ::close(slave);
  deadline_ =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.timeout_s));
}

Child::~Child() {
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (master_ >= 0) ::close(master_);
}

std::string Child::out() { return options_.terminal ? terminal_out_ : read_file(out_path_); }
std::string Child::err() { return read_file(err_path_); }
void Child::signal(int sig) { REQUIRE(::kill(pid_, sig) == 0); }

void Child::wait_for(const std::string& text, bool in_stderr) {
  while ((in_stderr ? err() : out()).find(text) == std::string::npos) {
    if (reap()) FAIL("exited before printing '" << text << "'\n" << result());
    check_deadline("printing '" + text + "'");
    pump(2);
  }
}

Result Child::finish() {
  while (!reap()) {
    check_deadline("finishing");
    pump(5);
  }
  for (auto end = Clock::now() + std::chrono::seconds(5); master_ >= 0 && Clock::now() < end;) pump(50);
  return result();
}

// Reads what the terminal has ready, waiting up to ms for it (without a
// terminal: sleeps ms).
void Child::pump(int ms) {
  if (master_ < 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return;
  }
  pollfd p{master_, POLLIN, 0};
  if (::poll(&p, 1, ms) <= 0) return;
  char buf[4096];
  ssize_t n = ::read(master_, buf, sizeof buf);
  if (n > 0) {
    terminal_out_.append(buf, static_cast<size_t>(n));
  } else {
    ::close(master_);  // EIO: the child and every copy of the slave side are gone
    master_ = -1;
  }
}

bool Child::reap() {
  if (reaped_) return true;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
  reaped_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

void Child::check_deadline(const std::string& what) {
  if (Clock::now() < deadline_) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  reaped_ = true;
  FAIL("the watchdog killed it: not done " << what << " within " << options_.timeout_s << " s\n" << result());
}

Result Child::result() { return Result{command_, exit_code_, out(), err()}; }

Result run(const std::string& program, const std::vector<std::string>& args, RunOptions options) {
  return Child(program, args, std::move(options)).finish();
}

std::vector<Result> run_all(const std::string& program, const std::vector<std::vector<std::string>>& runs,
                            size_t at_once) {
  std::vector<Result> results;
  for (size_t first = 0; first < runs.size(); first += at_once) {
    std::vector<std::unique_ptr<Child>> children;
    for (size_t i = first; i < std::min(runs.size(), first + at_once); ++i)
      children.push_back(std::make_unique<Child>(program, runs[i]));
    for (auto& c : children) results.push_back(c->finish());
  }
  return results;
}

}  // namespace tandem::test
