// The benchmarks' command-line parser (bench/bench_options.h): what each
// flag gives, what --help shows, and the exact line and exit code of every
// usage error, for the shapes of command line the benches have (bench_ops,
// a device bench, bench_nn with --threads, bench_gpu_memory without
// --filter). The benches themselves are not tests; this needs none of them.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_options.h"

using bench::CommandLine;
using bench::ParseResult;
using bench::Program;
using Action = ParseResult::Action;
using Args = std::vector<std::string>;

namespace {

const Program kOps{.name = "bench_ops", .about = "CPU ops", .quick = "Fewer sizes"};
const Program kDevice{.name = "bench_norm", .about = "Norms", .quick = "Less sampling", .device = true};
const Program kNn{
    .name = "bench_nn", .about = "Convolutions", .quick = "Less sampling", .device = true, .threads = true};
const Program kMemory{.name = "bench_gpu_memory", .about = "Allocator", .quick = "Fewer samples", .filter = false};

// The options of a command line that must parse.
CommandLine run(const Program& program, const Args& args) {
  const ParseResult r = bench::parse_command_line(program, args);
  INFO(r.text);
  REQUIRE(r.action == Action::kRun);
  REQUIRE(r.exit_code() == 0);
  return r.line;
}

// The error line of a command line that must not parse.
std::string usage_error(const Program& program, const Args& args) {
  const ParseResult r = bench::parse_command_line(program, args);
  REQUIRE(r.action == Action::kUsageError);
  REQUIRE(r.exit_code() == 2);
  return r.text;
}

// "<name>: error: <message> (see <name> --help)".
std::string error_line(const Program& program, const std::string& message) {
  return program.name + ": error: " + message + " (see " + program.name + " --help)";
}

// What fd (1 or 2) received while f ran, and nothing of it on the terminal.
template <typename F>
std::string captured(int fd, F f) {
  std::FILE* stream = fd == 1 ? stdout : stderr;
  std::fflush(stream);
  std::FILE* tmp = std::tmpfile();
  REQUIRE(tmp != nullptr);
  const int saved = dup(fd);
  dup2(fileno(tmp), fd);
  f();
  std::fflush(stream);
  dup2(saved, fd);
  close(saved);
  std::string text;
  std::rewind(tmp);
  for (int ch; (ch = std::fgetc(tmp)) != EOF;) text += static_cast<char>(ch);
  std::fclose(tmp);
  return text;
}

}  // namespace

TEST_CASE("bench options: an empty command line runs with the defaults", "[bench]") {
  for (const Program* p : {&kOps, &kDevice, &kNn, &kMemory}) {
    INFO(p->name);
    const CommandLine line = run(*p, {});
    CHECK_FALSE(line.quick);
    CHECK(line.filter.empty());
    CHECK(line.device == "cpu");
    CHECK(line.threads == 1);
  }
}

TEST_CASE("bench options: --quick and --filter", "[bench]") {
  CHECK(run(kOps, {"--quick"}).quick);
  CHECK(run(kOps, {"--quick", "--quick"}).quick);
  CHECK(run(kOps, {"--filter", "matmul"}).filter == "matmul");
  CHECK(run(kOps, {"--filter=matmul"}).filter == "matmul");
  // A filter may hold spaces (a case name's words).
  CHECK(run(kOps, {"--filter", "adam amsgrad"}).filter == "adam amsgrad");
  const CommandLine both = run(kDevice, {"--filter", "layer", "--quick"});
  CHECK(both.quick);
  CHECK(both.filter == "layer");
  // CLI11's flag values: --quick=false says no.
  CHECK_FALSE(run(kOps, {"--quick=false"}).quick);
  CHECK(run(kMemory, {"--quick"}).quick);
}

TEST_CASE("bench options: --device keeps a valid device string unresolved", "[bench]") {
  // Whether the device exists is the bench's question at run time (exit 1), not the parser's.
  for (const char* device : {"cpu", "cpu:0", "cuda", "cuda:0", "cuda:7"}) {
    INFO(device);
    CHECK(run(kDevice, {"--device", device}).device == device);
  }
  CHECK(run(kDevice, {"--device=cuda:1"}).device == "cuda:1");
  const CommandLine nn = run(kNn, {"--quick", "--device", "cuda", "--threads", "2", "--filter", "conv2"});
  CHECK(nn.quick);
  CHECK(nn.device == "cuda");
  CHECK(nn.threads == 2);
  CHECK(nn.filter == "conv2");
}

TEST_CASE("bench options: --threads takes a whole number from 1", "[bench]") {
  CHECK(run(kNn, {"--threads", "1"}).threads == 1);
  CHECK(run(kNn, {"--threads", "16"}).threads == 16);
  CHECK(run(kNn, {"--threads=3"}).threads == 3);
  for (const char* bad : {"0", "-2", "1.5", "abc", "2x", "", "99999999999"}) {
    INFO(bad);
    CHECK(usage_error(kNn, {"--threads", bad}) ==
          error_line(kNn, std::string("--threads: expected a whole number >= 1, got '") + bad + "'"));
  }
}

TEST_CASE("bench options: a bad --device names the flag and what it takes", "[bench]") {
  for (const char* bad : {"tpu", "gpu", "CUDA", "cuda:", "cuda:x", "cuda:-1", "cpu:1", "cuda:0:1", ""}) {
    INFO(bad);
    CHECK(usage_error(kDevice, {"--device", bad}) ==
          error_line(kDevice, std::string("--device: expected cpu, cuda or cuda:N (N a device index, e.g. cuda:0), "
                                          "got '") +
                                  bad + "'"));
  }
  CHECK(usage_error(kNn, {"--device=tpu"}) ==
        error_line(kNn, "--device: expected cpu, cuda or cuda:N (N a device index, e.g. cuda:0), got 'tpu'"));
}

TEST_CASE("bench options: unknown flags and stray words are errors, named in order", "[bench]") {
  CHECK(usage_error(kOps, {"--bogus"}) == error_line(kOps, "The following argument was not expected: --bogus"));
  CHECK(usage_error(kOps, {"matmul"}) == error_line(kOps, "The following argument was not expected: matmul"));
  CHECK(usage_error(kOps, {"-q"}) == error_line(kOps, "The following argument was not expected: -q"));
  // Near misses are not taken for a flag.
  CHECK(usage_error(kOps, {"--Quick"}) == error_line(kOps, "The following argument was not expected: --Quick"));
  CHECK(usage_error(kOps, {"-quick"}) == error_line(kOps, "The following argument was not expected: -quick"));
  // Several: in the order given (CLI11 2.1's own message lists them last first).
  CHECK(usage_error(kDevice, {"--filter", "a", "--bogus", "b", "c"}) ==
        error_line(kDevice, "The following arguments were not expected: --bogus b c"));
  // The flags around an unknown one still parse: only the unknown one is named.
  CHECK(usage_error(kDevice, {"--quick", "--bogus", "--device", "cuda"}) ==
        error_line(kDevice, "The following argument was not expected: --bogus"));
}

TEST_CASE("bench options: a flag the bench does not take is an error", "[bench]") {
  CHECK(usage_error(kOps, {"--device", "cuda"}) ==
        error_line(kOps, "The following arguments were not expected: --device cuda"));
  CHECK(usage_error(kOps, {"--threads", "2"}) ==
        error_line(kOps, "The following arguments were not expected: --threads 2"));
  CHECK(usage_error(kDevice, {"--threads", "2"}) ==
        error_line(kDevice, "The following arguments were not expected: --threads 2"));
  CHECK(usage_error(kMemory, {"--filter", "copy"}) ==
        error_line(kMemory, "The following arguments were not expected: --filter copy"));
  CHECK(usage_error(kMemory, {"--device", "cuda:0"}) ==
        error_line(kMemory, "The following arguments were not expected: --device cuda:0"));
}

TEST_CASE("bench options: missing, repeated and unconvertible values", "[bench]") {
  CHECK(usage_error(kOps, {"--filter"}) == error_line(kOps, "--filter: 1 required SUBSTR missing"));
  CHECK(usage_error(kDevice, {"--device"}) == error_line(kDevice, "--device: 1 required DEVICE missing"));
  CHECK(usage_error(kNn, {"--threads"}) == error_line(kNn, "--threads: 1 required N missing"));
  // CLI11 takes the next word for the value even when it is a flag: the checks name it.
  CHECK(usage_error(kOps, {"--filter", "--quick"}) ==
        error_line(kOps, "--filter: expected a part of a case's name, got the flag '--quick'"));
  CHECK(usage_error(kNn, {"--device", "--quick"}) ==
        error_line(kNn, "--device: expected cpu, cuda or cuda:N (N a device index, e.g. cuda:0), got '--quick'"));
  CHECK(usage_error(kNn, {"--threads", "--quick"}) ==
        error_line(kNn, "--threads: expected a whole number >= 1, got '--quick'"));
  // A filter may start with one dash: "-1" is part of "sum dim -1".
  CHECK(run(kOps, {"--filter", "-1"}).filter == "-1");
  // Twice is an error rather than a silent choice of one.
  CHECK(usage_error(kOps, {"--filter", "a", "--filter", "b"}) ==
        error_line(kOps, "--filter: At Most 1 required but received 2"));
  CHECK(usage_error(kNn, {"--threads", "1", "--threads", "2"}) ==
        error_line(kNn, "--threads: At Most 1 required but received 2"));
  CHECK(usage_error(kOps, {"--quick=maybe"}) == error_line(kOps, "Could not convert: --quick = maybe"));
}

TEST_CASE("bench options: --help shows the usage and the flags the bench takes", "[bench]") {
  for (const char* flag : {"--help", "-h"}) {
    INFO(flag);
    const ParseResult r = bench::parse_command_line(kNn, {"--quick", flag});
    REQUIRE(r.action == Action::kHelp);
    CHECK(r.exit_code() == 0);
    using Catch::Contains;
    CHECK_THAT(r.text, Contains("Convolutions\nUsage: bench_nn [OPTIONS]\n"));
    CHECK_THAT(r.text, Contains("--quick                     Less sampling\n"));
    CHECK_THAT(r.text, Contains("--filter SUBSTR             Run only the cases whose section or name contains"));
    CHECK_THAT(r.text, Contains("--device DEVICE=cpu         cpu, cuda (the current device) or cuda:N\n"));
    CHECK_THAT(r.text, Contains("--threads N=1               CPU threads per op"));
    CHECK_THAT(r.text, Contains("Exit status: 0 done, 1 an error while running (such as --device cuda without a GPU), "
                                "2 a usage error.\nbench/README.md says what each line measures.\n"));
  }
  const std::string ops = bench::parse_command_line(kOps, {"--help"}).text;
  CHECK_THAT(ops, Catch::Contains("Usage: bench_ops [OPTIONS]"));
  CHECK_THAT(ops, Catch::Contains("--filter SUBSTR"));
  CHECK_THAT(ops, !Catch::Contains("--device") && !Catch::Contains("--threads"));
  CHECK_THAT(ops, Catch::Contains("Exit status: 0 done, 1 an error while running, 2 a usage error.\n"));
  const std::string memory = bench::parse_command_line(kMemory, {"--help"}).text;
  CHECK_THAT(memory, Catch::Contains("Usage: bench_gpu_memory [OPTIONS]") && Catch::Contains("--quick"));
  CHECK_THAT(memory, !Catch::Contains("--filter") && !Catch::Contains("--device"));
  // --help wins over a bad flag after it, as CLI11 reads it first.
  CHECK(bench::parse_command_line(kOps, {"--help", "--bogus"}).action == Action::kHelp);
}

TEST_CASE("bench options: read_command_line prints help to stdout and errors to stderr", "[bench]") {
  std::vector<std::string> words;
  std::vector<char*> argv;
  auto make_argv = [&](const Args& args) {
    words = {"build/bench/bench_nn"};
    words.insert(words.end(), args.begin(), args.end());
    argv.clear();
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    return static_cast<int>(words.size());
  };

  CommandLine line;
  int argc = make_argv({"--device", "cuda:0", "--threads", "4"});
  std::optional<int> code;
  std::string out = captured(1, [&] { code = bench::read_command_line(kNn, argc, argv.data(), line); });
  CHECK_FALSE(code.has_value());
  CHECK(out.empty());
  CHECK(line.device == "cuda:0");
  CHECK(line.threads == 4);

  argc = make_argv({"--help"});
  out = captured(1, [&] { code = bench::read_command_line(kNn, argc, argv.data(), line); });
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK_THAT(out, Catch::StartsWith("Convolutions\nUsage: bench_nn [OPTIONS]\n"));

  argc = make_argv({"--device", "tpu"});
  const std::string err = captured(2, [&] { code = bench::read_command_line(kNn, argc, argv.data(), line); });
  REQUIRE(code.has_value());
  CHECK(*code == 2);
  CHECK(err ==
        error_line(kNn, "--device: expected cpu, cuda or cuda:N (N a device index, e.g. cuda:0), got 'tpu'") + "\n");
  // The options of an earlier run stay as they were.
  CHECK(line.device == "cuda:0");

  // argc 0 (no program name at all) reads as an empty command line.
  CommandLine empty;
  CHECK_FALSE(bench::read_command_line(kNn, 0, argv.data(), empty).has_value());
  CHECK(empty.device == "cpu");
}
