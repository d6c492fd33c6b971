// The tandem command: `tandem info`, `tandem train`, `tandem eval`. Flags
// are parsed with CLI11; every failure is one line on stderr and an exit
// code (common.h): 2 for usage, 1 for errors at run time, 130 for Ctrl-C.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <typeinfo>

#include "cli/common.h"
#include "cli/eval.h"
#include "cli/info.h"
#include "cli/interrupt.h"
#include "cli/launch.h"
#include "cli/ranks.h"
#include "cli/train.h"
#include "tandem/version.h"
#include "tensor/core/errors.h"

using namespace tandem;
using namespace tandem::cli;

namespace {

// "tandem train: error: ..." on one line: a message's later lines (the
// same-device error's origins, say) are joined with " | ".
int fail(const std::string& command, const std::string& message, int code) {
  std::string one_line;
  for (char ch : message) {
    if (ch == '\n') {
      one_line += " | ";
    } else {
      one_line += ch;
    }
  }
  // A progress line may be on the terminal: the error takes its place.
  if (isatty(STDOUT_FILENO) == 1) std::fputs("\r\x1b[K", stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "%s: error: %s\n", command.c_str(), one_line.c_str());
  return code;
}

// Number checks with plain messages ("--epochs: expected a whole number
// >= 1, got 0"); CLI11 2.1's PositiveNumber prints its range as a
// 300-digit double and calls a word out of range.
CLI::Validator whole_number(int64_t min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size())
          return "expected a whole number >= " + std::to_string(min) + ", got '" + text + "'";
        if (v < min) return "expected a whole number >= " + std::to_string(min) + ", got " + text;
        return "";
      },
      "INT>=" + std::to_string(min));
}

CLI::Validator positive_real() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        size_t used = 0;
        double v = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size()) return "expected a positive number, got '" + text + "'";
        if (!(v > 0) || !std::isfinite(v)) return "expected a positive number, got " + text;
        return "";
      },
      "NUMBER>0");
}

}  // namespace

int main(int argc, char** argv) {
  choose_blas_kernels(argv);
  CLI::App app{
      "Tandem: train and evaluate models on the cpu or a CUDA device.\n"
      "  tandem info                        the build, the CPU and the CUDA devices\n"
      "  tandem train [options]             train on Fashion-MNIST (tandem train --help)\n"
      "  tandem eval --checkpoint FILE      evaluate a checkpoint on any device",
      "tandem"};
  app.set_version_flag("--version", std::string("tandem ") + version());
  app.require_subcommand(1, 1);

  CLI::App* info = app.add_subcommand("info", "The build, the CPU and every CUDA device");

  TrainOptions t;
  RunConfig& c = t.config;
  CLI::App* train = app.add_subcommand("train", "Train a model on Fashion-MNIST (or --data DIR)");
  train->add_option("--model", c.model, "mlp or cnn")->check(CLI::IsMember({"mlp", "cnn"}))->capture_default_str();
  train->add_option("--epochs", c.epochs, "Passes over the training set")
      ->check(whole_number(1))
      ->capture_default_str();
  train->add_option("--batch-size", c.batch_size, "Examples per step")->check(whole_number(1))->capture_default_str();
  train->add_option("--lr", c.lr, "Learning rate (the peak, with onecycle)")
      ->check(positive_real())
      ->capture_default_str();
  train->add_option("--optimizer", c.optimizer, "adam, sgd (momentum 0.9) or adamw (weight decay 0.01)")
      ->check(CLI::IsMember({"adam", "sgd", "adamw"}))
      ->capture_default_str();
  train->add_option("--schedule", c.schedule, "Learning-rate schedule over all steps: cosine, onecycle or none")
      ->check(CLI::IsMember({"cosine", "onecycle", "none"}))
      ->capture_default_str();
  train->add_option("--device", t.device, "auto (cuda when there is one, else cpu), cpu, cuda or cuda:N")
      ->capture_default_str();
  train->add_option("--workers", t.workers, "Loader threads building batches ahead [default: 2 on cuda, 0 on cpu]")
      ->check(whole_number(0));
  bool pin_on = false, pin_off = false;
  CLI::Option* pin_flag =
      train->add_flag("--pin-memory", pin_on, "Build batches in pinned memory [default: on for a cuda device]");
  train->add_flag("--no-pin-memory", pin_off, "Build batches in pageable memory")->excludes(pin_flag);
  train->add_option("--threads", t.threads, "CPU threads per op [default: 1 for mlp, every core for cnn]")
      ->check(whole_number(1));
  train->add_option("--seed", c.seed, "Seed of the initial weights and the shuffling")
      ->check(whole_number(0))
      ->capture_default_str();
  train->add_option("--data", c.data,
                    "A folder with the four IDX files of MNIST's layout [default: Debian's dataset-fashion-mnist]");
  train->add_option("--train-examples", c.train_examples, "Use the first N training examples [default: all]")
      ->check(whole_number(1));
  train->add_option("--test-examples", c.test_examples, "Use the first N test examples [default: all]")
      ->check(whole_number(1));
  train->add_option("--out", t.out, "Write DIR/checkpoint.safetensors and DIR/metrics.jsonl after every epoch");
  train->add_option("--resume", t.resume, "Continue the run in DIR (or from a checkpoint file) where it stopped");
  train->add_flag("--amp", c.amp,
                  "Mixed precision: float16 with a GradScaler on cuda, bfloat16 on the cpu (docs/autocast.md)");
  train
      ->add_option("--nproc-per-node", t.nproc_per_node,
                   "Start N local processes, one rank each (cuda:LOCAL_RANK, or the cpu), joined by DDP, as torchrun "
                   "does; --batch-size stays the global batch")
      ->check(whole_number(1));
  train
      ->add_option("--backend", t.backend,
                   "The collective backend of a distributed run: auto (gloo), gloo, nccl or mpi")
      ->check(CLI::IsMember({"auto", "gloo", "nccl", "mpi"}))
      ->capture_default_str();
  train->add_flag("--plot", t.plot, "Draw DIR/metrics.png at the end (needs --out and matplotlib)");
  train
      ->add_option("--progress-interval", t.progress_interval,
                   "Seconds between progress updates [default: 0.1 on a terminal, 5 otherwise]")
      ->check(positive_real());
  train
      ->add_option("--stop-after-steps", t.stop_after_steps,
                   "Stop as Ctrl-C would (checkpoint, then exit 0) after N steps of this run")
      ->check(whole_number(1));

  EvalOptions e;
  CLI::App* eval = app.add_subcommand("eval", "Evaluate a checkpoint written by tandem train on any device");
  eval->add_option("--checkpoint", e.checkpoint, "DIR/checkpoint.safetensors of a tandem train --out DIR")->required();
  eval->add_option("--device", e.device, "auto, cpu, cuda or cuda:N (the checkpoint loads onto it)")
      ->capture_default_str();
  eval->add_option("--data", e.data, "Another folder of MNIST-layout data [default: the run's test set]");
  eval->add_option("--batch-size", e.batch_size, "Examples per batch")->check(whole_number(1))->capture_default_str();
  eval->add_option("--threads", e.threads, "CPU threads per op")->check(whole_number(1));

  // CLI11 takes an unknown word for a missing subcommand: name it.
  if (argc > 1 && argv[1][0] != '-' && std::string_view(argv[1]) != "info" && std::string_view(argv[1]) != "train" &&
      std::string_view(argv[1]) != "eval")
    return fail("tandem",
                std::string("unknown command '") + argv[1] + "': expected info, train or eval (see tandem --help)",
                kExitUsage);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.get_subcommands().empty() ? app.help().c_str() : app.get_subcommands()[0]->help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::printf("tandem %s (%s)\n", version(), *build_features() ? build_features() : "cpu only");
    return 0;
  } catch (const CLI::ParseError& err) {
    std::string where = app.get_subcommands().empty() ? "tandem" : "tandem " + app.get_subcommands()[0]->get_name();
    return fail(where, std::string(err.what()) + " (see " + where + " --help)", kExitUsage);
  }

  std::string command = "tandem " + app.get_subcommands()[0]->get_name();
  // One rank of a distributed run says which it is.
  if (const char* world = std::getenv("WORLD_SIZE"); world && std::atoi(world) > 1 && train->parsed())
    if (const char* rank = std::getenv("RANK")) command += std::string(": rank ") + rank;
  try {
    if (info->parsed()) return run_info();
    if (eval->parsed()) return run_eval(e);
    if (t.nproc_per_node > 1) {
      // What every rank would refuse, said once (a resumed run's batch is its own).
      if (t.resume.empty()) check_batch_split(t.config.batch_size, t.nproc_per_node);
      check_device_flag(t.device, t.nproc_per_node);
      if (t.backend == "nccl" || t.backend == "mpi")
        throw UsageError("--backend " + t.backend + ": the " + t.backend +
                         " backend is not in this Tandem yet; use gloo (the default), which takes cuda tensors "
                         "through host memory");
      return launch_ranks(argc, argv, t.nproc_per_node);
    }
    install_interrupt_handler();
    {
      // A rank started by --nproc-per-node has SIGINT blocked until now.
      sigset_t unblock;
      sigemptyset(&unblock);
      sigaddset(&unblock, SIGINT);
      sigprocmask(SIG_UNBLOCK, &unblock, nullptr);
    }
    if (pin_on || pin_off) t.pin_memory = pin_on;
    for (const char* flag : {"model", "epochs", "batch-size", "lr", "optimizer", "schedule", "seed", "data",
                             "train-examples", "test-examples", "amp"})
      if (train->count(std::string("--") + flag) > 0) t.given.insert(flag);
    return run_train(t);
  } catch (const UsageError& err) {
    return fail(command, err.what(), kExitUsage);
  } catch (const Error& err) {
    return fail(command, err.what(), kExitError);
  } catch (const std::exception& err) {
    return fail(command, std::string(err.what()) + " (" + detail::demangle(typeid(err)) + ")", kExitError);
  }
}
