// The benchmarks' command line (bench_options.h), parsed with CLI11.
#include "bench/bench_options.h"

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <system_error>

#include "tensor/core/device.h"
#include "tensor/core/errors.h"

namespace bench {

namespace {

// --threads: a whole number >= 1 that fits an int. CLI11 2.1's PositiveNumber
// prints its range as a 300-digit double and takes 0.5.
CLI::Validator whole_number_from_one() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || end != text.data() + text.size() || v < 1)
          return "expected a whole number >= 1, got '" + text + "'";
        return "";
      },
      "");
}

// --device: what tandem::Device parses. Whether the device is there is the
// bench's question at run time (resolve_device), not a usage error.
CLI::Validator device_string() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          (void)tandem::Device(text);
        } catch (const tandem::Error&) {
          return "expected cpu, cuda or cuda:N (N a device index, e.g. cuda:0), got '" + text + "'";
        }
        return "";
      },
      "");
}

// --filter: CLI11 takes the word after --filter as its value even when it is
// a flag, so `--filter --quick` would run no case and not be quick. No case
// name starts with "--" ("-1" is part of "sum dim -1").
CLI::Validator not_a_flag() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.rfind("--", 0) == 0) return "expected a part of a case's name, got the flag '" + text + "'";
        return "";
      },
      "");
}

// "bench_nn: error: <message> (see bench_nn --help)", as the tandem command words its usage errors.
std::string usage_error(const Program& program, const std::string& message) {
  return program.name + ": error: " + message + " (see " + program.name + " --help)";
}

}  // namespace

ParseResult parse_command_line(const Program& program, const std::vector<std::string>& args) {
  ParseResult result;
  CommandLine& line = result.line;
  CLI::App app{program.about, program.name};
  app.footer(std::string("Exit status: 0 done, 1 an error while running") +
             (program.device ? " (such as --device cuda without a GPU)" : "") +
             ", 2 a usage error.\nbench/README.md says what each line measures.");
  app.add_flag("--quick", line.quick, program.quick);
  if (program.filter)
    app.add_option("--filter", line.filter, "Run only the cases whose section or name contains SUBSTR")
        ->type_name("SUBSTR")
        ->check(not_a_flag());
  if (program.device)
    app.add_option("--device", line.device, "cpu, cuda (the current device) or cuda:N")
        ->type_name("DEVICE")
        ->check(device_string())
        ->capture_default_str();
  if (program.threads)
    app.add_option("--threads", line.threads, "CPU threads per op (Tandem's, and OpenBLAS's where it is built in)")
        ->type_name("N")
        ->check(whole_number_from_one())
        ->capture_default_str();

  // CLI11 takes the arguments last first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    result.action = ParseResult::Action::kHelp;
    result.text = app.help();
  } catch (const CLI::ExtrasError&) {
    // CLI11 2.1 names the unexpected arguments last first: name them in order.
    const std::vector<std::string> extras = app.remaining();
    std::string message =
        extras.size() > 1 ? "The following arguments were not expected:" : "The following argument was not expected:";
    for (const std::string& arg : extras) message += " " + arg;
    result.action = ParseResult::Action::kUsageError;
    result.text = usage_error(program, message);
  } catch (const CLI::ParseError& err) {
    result.action = ParseResult::Action::kUsageError;
    result.text = usage_error(program, err.what());
  }
  return result;
}

std::optional<int> read_command_line(const Program& program, int argc, char** argv, CommandLine& line) {
  const std::vector<std::string> args =
      argc > 1 ? std::vector<std::string>(argv + 1, argv + argc) : std::vector<std::string>();
  const ParseResult result = parse_command_line(program, args);
  switch (result.action) {
    case ParseResult::Action::kRun: line = result.line; return std::nullopt;
    case ParseResult::Action::kHelp: std::fputs(result.text.c_str(), stdout); return result.exit_code();
    case ParseResult::Action::kUsageError: std::fprintf(stderr, "%s\n", result.text.c_str()); return result.exit_code();
  }
  return kExitUsage;  // not reached: the switch names every action
}

}  // namespace bench
