// Running a program as a child process in a test: its stdout and stderr
// captured (stdout on a pseudo-terminal on request), its environment
// changed, signals sent to it, and a watchdog that kills a child that hangs
// and fails the test instead of blocking it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "helpers.h"

namespace tandem::test {

struct RunOptions {
  std::vector<std::string> env;    // "NAME=value", added or replacing
  std::vector<std::string> unset;  // names taken out of the child's environment
  std::string cwd;                 // the child's working folder ("": this process's)
  bool terminal = false;           // stdin and stdout on a pseudo-terminal (stderr stays a file)
  bool ignore_sigint = false;      // start it with SIGINT ignored, as nohup or a shell's `cmd &` do
  double timeout_s = 120;          // the watchdog: a run past it is killed and fails the test
};
RunOptions with_env(std::vector<std::string> env);
RunOptions without_env(std::vector<std::string> names);
RunOptions on_terminal();
RunOptions with_timeout(double seconds);
RunOptions in_folder(std::string cwd);

struct Result {
  std::string command;  // the program's file name and the arguments, for messages
  int exit_code = -1;   // 128 + N when killed by signal N
  std::string out, err;
};
// The command, exit code, stdout (its end, when long) and stderr: for INFO.
std::ostream& operator<<(std::ostream& os, const Result& r);

// One child process, started at construction (the environment this process
// has, changed by the options; SIGINT at its default unless ignore_sigint,
// no signal blocked);
// stdin is /dev/null, stdout and stderr go to files of its own (or stdout
// to a pseudo-terminal, 120 columns wide, read as the child writes). A
// Child that goes before it is finished kills its process.
class Child {
 public:
  Child(const std::string& program, const std::vector<std::string>& args, RunOptions options = {});
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // What it printed so far.
  std::string out();
  std::string err();
  void signal(int sig);
  // Waits until stdout (or stderr) holds text; a child that exits first, or
  // the watchdog, fails the test.
  void wait_for(const std::string& text, bool in_stderr = false);
  // Waits for it to exit.
  Result finish();

 private:
  void pump(int ms);
  bool reap();
  void check_deadline(const std::string& what);
  Result result();

  RunOptions options_;
  TempDir dir_;
  std::string command_, out_path_, err_path_, terminal_out_;
  pid_t pid_ = -1;
  int master_ = -1;  // the pseudo-terminal's side this process reads
  bool reaped_ = false;
  int exit_code_ = -1;
  std::chrono::steady_clock::time_point deadline_;
};

Result run(const std::string& program, const std::vector<std::string>& args, RunOptions options = {});
// Each of runs, a few at a time, in the order given: for quick commands.
std::vector<Result> run_all(const std::string& program, const std::vector<std::vector<std::string>>& runs,
                            size_t at_once = 4);

}  // namespace tandem::test
