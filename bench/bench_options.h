// The benchmarks' command line, one parser for all of them (CLI11):
// --quick, --filter SUBSTR, --device cpu|cuda|cuda:N and --threads N for the
// benches that take them, --help. A usage error is one stderr line and exit
// code 2; the flags a bench does not take are usage errors too.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace bench {

// Exit code of a usage error (an unknown flag, a missing or malformed value),
// as the tandem command's (cli/common.h).
constexpr int kExitUsage = 2;

// A bench's command line as --help shows it: its name, what it measures,
// what --quick changes, and which of the optional flags it takes.
struct Program {
  std::string name;      // "bench_nn": the usage line's and the errors' first word
  std::string about;     // one line on what it measures
  std::string quick;     // what --quick does, e.g. "A quarter of the sampling time"
  bool filter = true;    // --filter SUBSTR (every bench but bench_gpu_memory)
  bool device = false;   // --device cpu|cuda|cuda:N (the device benches)
  bool threads = false;  // --threads N (bench_nn)
};

// What a command line asks for. A flag it does not give, or that the program
// does not take, keeps its default here.
struct CommandLine {
  bool quick = false;
  std::string filter;          // run only the cases whose section or name contains it ("": all)
  std::string device = "cpu";  // a valid device string ("cpu", "cuda", "cuda:N"), not yet resolved
  int threads = 1;             // >= 1
};

// The outcome of parsing: run with `line`, or print `text` (--help: the
// usage, to stdout; a usage error: "bench_nn: error: ... (see bench_nn
// --help)", to stderr) and exit with exit_code().
struct ParseResult {
  enum class Action { kRun, kHelp, kUsageError };
  Action action = Action::kRun;
  CommandLine line;
  std::string text;

  int exit_code() const { return action == Action::kUsageError ? kExitUsage : 0; }
};

// Parses args (the command line without the program's own name).
ParseResult parse_command_line(const Program& program, const std::vector<std::string>& args);

// The benches' main: parses argv[1..] into line and returns nullopt when the
// bench should run; after --help or a usage error prints the text and
// returns the exit code for main to return.
std::optional<int> read_command_line(const Program& program, int argc, char** argv, CommandLine& line);

}  // namespace bench
