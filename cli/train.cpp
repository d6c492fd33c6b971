// tandem train: the main job. One device holds the model, the optimizer's
// state and every batch; the DataLoader delivers the batches there.
#include "cli/train.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/common.h"
#include "cli/eval.h"
#include "cli/interrupt.h"
#include "cli/models.h"
#include "cli/progress.h"
#include "cli/ranks.h"
#include "data/distributed_sampler.h"
#include "distributed/process_group.h"
#include "nn/checkpoint.h"
#include "nn/functional/loss.h"
#include "nn/parallel/distributed.h"
#include "optim/adam.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "tandem/version.h"
#include "tensor/core/grad_mode.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/cuda.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/parallel.h"
#include "tensor/ops/random.h"
#include "tensor/ops/reduce.h"

#ifndef TANDEM_PLOT_SCRIPTS
#define TANDEM_PLOT_SCRIPTS ""
#endif

namespace tandem::cli {

namespace F = nn::functional;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// ---- settings

// A resumed run keeps the checkpoint's settings: a flag given again must agree.
void check_resume_flags(const TrainOptions& o, const RunConfig& saved, const std::string& path) {
  const RunConfig& c = o.config;
  auto differs = [&](const char* flag, bool same, const std::string& given, const std::string& kept) {
    if (o.given.count(flag) > 0 && !same)
      throw UsageError(detail::str_cat("--", flag, " ", given, " differs from the run being resumed (", path, ": ",
                                       kept,
                                       "); a resumed run keeps its settings: drop the flag, or start a new "
                                       "run with another --out"));
  };
  auto str = [](auto v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  differs("model", c.model == saved.model, c.model, saved.model);
  differs("epochs", c.epochs == saved.epochs, str(c.epochs), str(saved.epochs));
  differs("batch-size", c.batch_size == saved.batch_size, str(c.batch_size), str(saved.batch_size));
  differs("lr", c.lr == saved.lr, str(c.lr), str(saved.lr));
  differs("optimizer", c.optimizer == saved.optimizer, c.optimizer, saved.optimizer);
  differs("schedule", c.schedule == saved.schedule, c.schedule, saved.schedule);
  differs("seed", c.seed == saved.seed, str(c.seed), str(saved.seed));
  differs("amp", c.amp == saved.amp, c.amp ? "(given)" : "(not given)", saved.amp ? "--amp" : "without --amp");
  differs("data", c.data == saved.data, c.data, saved.data.empty() ? "the default" : saved.data);
  differs("train-examples", c.train_examples == saved.train_examples, str(c.train_examples), str(saved.train_examples));
  differs("test-examples", c.test_examples == saved.test_examples, str(c.test_examples), str(saved.test_examples));
}

// --out must be a folder we can write, checked before any work is done.
void prepare_out_dir(const std::string& dir, bool resuming) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw Error("--out " + dir + ": cannot create the folder (" + ec.message() + ")");
  std::string probe = (fs::path(dir) / ".tandem-write-test").string();
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error("--out " + dir + ": cannot write there (" + std::strerror(errno) + ")");
  ::close(fd);
  ::unlink(probe.c_str());
  if (!resuming && fs::exists(checkpoint_path(dir)))
    throw UsageError("--out " + dir + " already holds a run (" + checkpoint_path(dir) + "): resume it with --resume " +
                     dir + ", or choose another folder");
  if (!resuming && fs::exists(metrics_path(dir)))
    throw UsageError("--out " + dir + " already holds " + metrics_path(dir) +
                     " but no checkpoint to resume: remove it, or choose another folder");
}

// fused: Adam's step counts on the device, so that the GradScaler skips a
// step there and a mixed-precision step makes no host synchronisation (SGD
// does so as it is).
std::unique_ptr<optim::Optimizer> make_optimizer(const RunConfig& c, const std::vector<Tensor>& params, bool fused) {
  if (c.optimizer == "sgd") return std::make_unique<optim::SGD>(params, optim::SGDOptions(c.lr).momentum(0.9));
  if (c.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions(c.lr).weight_decay(0.01).fused(fused));
  return std::make_unique<optim::Adam>(params, optim::AdamOptions(c.lr).fused(fused));
}

// Stepped after every optimizer step: the schedules run over all the run's steps.
std::unique_ptr<optim::LRScheduler> make_scheduler(const RunConfig& c, optim::Optimizer& opt, int64_t total_steps) {
  if (c.schedule == "cosine") return std::make_unique<optim::CosineAnnealingLR>(opt, total_steps);
  if (c.schedule == "onecycle")
    return std::make_unique<optim::OneCycleLR>(opt, optim::OneCycleLROptions(c.lr).total_steps(total_steps));
  return nullptr;
}

std::string describe_optimizer(const RunConfig& c) {
  std::ostringstream s;
  s << c.optimizer << " lr " << c.lr;
  if (c.optimizer == "sgd") s << " momentum 0.9";
  if (c.optimizer == "adamw") s << " weight decay 0.01";
  if (c.schedule == "cosine") s << ", cosine schedule over all steps";
  if (c.schedule == "onecycle") s << ", one-cycle schedule (peak lr " << c.lr << ")";
  return s.str();
}

// ---- files

json::Value number(double x) { return std::isfinite(x) ? json::Value(x) : json::Value(); }

// One line, one write(): a reader never sees half of it.
void append_line(const std::string& path, const std::string& line) {
  CriticalSection hold_ctrl_c;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) throw Error(path + ": cannot open for writing (" + std::strerror(errno) + ")");
  std::string text = line + "\n";
  ssize_t n = ::write(fd, text.data(), text.size());
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) throw Error(path + ": write failed");
}

// A resumed run drops the metrics of epochs its checkpoint does not hold
// (a run stopped between writing the line and the checkpoint).
void trim_metrics(const std::string& path, int64_t epochs_done) {
  std::ifstream in(path);
  if (!in) return;
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      if (json::as_int(json::at(json::parse(line), "epoch")) > epochs_done) continue;
    } catch (const Error&) {
      continue;  // a damaged line is dropped, not copied on
    }
    kept += line + "\n";
  }
  CriticalSection hold_ctrl_c;
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept;
    if (!out) throw Error(tmp + ": write failed");
  }
  fs::rename(tmp, path);
}

size_t peak_memory(Device device) {
  if (device.is_cuda()) return cuda::max_memory_allocated(device.index());
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<size_t>(ru.ru_maxrss) * 1024;  // kilobytes on Linux
}

// Runs a program (no shell: paths stay as they are) and returns its exit
// status; quiet: its output goes nowhere.
int run_quietly(const std::vector<std::string>& args, bool quiet = true) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  std::fflush(stdout);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// --plot: scripts/plot_metrics.py with a Python that has matplotlib.
void plot(const std::string& out_dir) {
  // The installed copy first, then the source tree's (TANDEM_PLOT_SCRIPTS: dirs separated by ':').
  std::string script, dir;
  std::stringstream dirs(TANDEM_PLOT_SCRIPTS);
  while (script.empty() && std::getline(dirs, dir, ':'))
    if (!dir.empty() && fs::exists(fs::path(dir) / "plot_metrics.py"))
      script = (fs::path(dir) / "plot_metrics.py").string();
  if (script.empty()) {
    std::printf("--plot: plot_metrics.py is not installed; the metrics are in %s\n", metrics_path(out_dir).c_str());
    return;
  }
  const char* env = std::getenv("TANDEM_PYTHON");
  std::vector<std::string> pythons = {env != nullptr ? env : "", "python3", "/usr/bin/python3"};
  for (const std::string& py : pythons) {
    if (py.empty() || run_quietly({py, "-c", "import matplotlib"}) != 0) continue;
    std::string png = (fs::path(out_dir) / "metrics.png").string();
    run_quietly({py, script, metrics_path(out_dir), "-o", png}, /*quiet=*/false);  // it says what it wrote
    return;
  }
  std::printf("--plot: matplotlib is not installed (sudo apt-get install python3-matplotlib); the metrics are in %s\n",
              metrics_path(out_dir).c_str());
}

// After a stop: where the checkpoint is and the command that resumes it.
void say_how_to_resume(const std::string& out) {
  if (out.empty()) {
    std::printf("No checkpoint written: there is no --out folder.\n");
  } else {
    std::printf("Checkpoint written: %s\nResume with: tandem train --resume %s\n", checkpoint_path(out).c_str(),
                out.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int run_train(TrainOptions o) {
  // ---- settings, then everything that can fail before any work
  if (o.plot && o.out.empty() && o.resume.empty())
    throw UsageError("--plot needs --out DIR: it draws DIR/metrics.jsonl");
  // One rank of a distributed run when the environment says so
  // (--nproc-per-node's launcher, torchrun or mpirun set it).
  const Ranks ranks = Ranks::from_env(o.backend);
  const bool writer = ranks.rank == 0;  // prints, writes metrics and checkpoints
  if (!writer) std::freopen("/dev/null", "w", stdout);
  std::string device_why;
  Device device = choose_device(ranks.device_flag(o.device), &device_why);
  if (ranks.on && device.is_cuda() && device_why.empty()) device_why = "cuda:LOCAL_RANK: one device per rank";

  std::optional<RunCheckpoint> resumed;
  std::string resumed_dir;  // the folder of the run resumed
  if (!o.resume.empty()) {
    const bool is_dir = fs::is_directory(o.resume);
    std::string path = is_dir ? checkpoint_path(o.resume) : o.resume;
    resumed_dir = is_dir ? o.resume : fs::path(o.resume).parent_path().string();
    if (resumed_dir.empty()) resumed_dir = ".";  // --resume checkpoint.safetensors, in its folder
    resumed = read_run(path, device);
    check_resume_flags(o, resumed->config, path);
    if (resumed->config.world_size != ranks.world)
      throw UsageError("the run in " + path + " had " + std::to_string(resumed->config.world_size) +
                       " rank(s), this one " + std::to_string(ranks.world) + ": resume it with " +
                       (resumed->config.world_size > 1
                            ? "--nproc-per-node " + std::to_string(resumed->config.world_size)
                            : std::string("one process")) +
                       " (each rank's shard of the data and the sums depend on the world size)");
    o.config = resumed->config;
    if (o.out.empty()) o.out = resumed_dir;
  }
  const RunConfig& c = o.config;
  if (resumed && resumed->position.epochs_done >= c.epochs) {
    std::printf("The run in %s finished all %lld epochs; nothing to resume (tandem eval --checkpoint %s)\n",
                o.out.c_str(), static_cast<long long>(c.epochs), checkpoint_path(o.out).c_str());
    return 0;
  }
  // Resuming into the run's own folder continues its files; any other --out
  // must not hold a run of its own.
  std::error_code same_ec;
  bool into_resumed = resumed && fs::exists(o.out) && fs::equivalent(o.out, resumed_dir, same_ec);
  if (!o.out.empty() && writer) prepare_out_dir(o.out, into_resumed);
  // Each rank takes an equal part of the global batch.
  if (ranks.on) check_batch_split(c.batch_size, ranks.world);
  const int64_t rank_batch = c.batch_size / ranks.world;
  o.config.world_size = ranks.world;

  // Local ranks share the machine's cores.
  int threads = o.threads > 0 ? o.threads : std::max(1, default_threads(c.model) / ranks.local_world);
  if (resumed && c.threads > 0 && o.threads == 0) threads = static_cast<int>(c.threads);
  const bool threads_differ = resumed && c.threads > 0 && threads != c.threads;
  o.config.threads = threads;
  set_num_threads(threads);
  bool pin = o.pin_memory.value_or(device.is_cuda());
  if (pin && !cuda::is_available())
    throw UsageError("--pin-memory: pinned memory needs a CUDA device (real or emulated), and there is none here");
  int64_t workers = o.workers >= 0 ? o.workers : (device.is_cuda() ? 2 : 0);

  Data d = load_data(c.data, c.train_examples, c.test_examples);
  // Joined after everything that can fail alone; leaving is at the end.
  struct Leave {
    ~Leave() {
      if (distributed::is_initialized()) distributed::destroy_process_group();
    }
  } leave;
  if (ranks.on) ranks.join();

  // ---- the model, its optimizer and schedule, the loaders: all on `device`
  manual_seed(c.seed);
  nn::Sequential model = make_model(c.model);
  model->to(device);
  std::unique_ptr<optim::Optimizer> opt = make_optimizer(c, model->parameters(), c.amp && device.is_cuda());
  // A distributed run: this rank's shard of each epoch's order (PyTorch's
  // DistributedSampler, padded to divide evenly), which depends only on the
  // seed and the epoch.
  std::shared_ptr<data::DistributedSampler> sampler;
  if (ranks.on)
    sampler = std::make_shared<data::DistributedSampler>(
        static_cast<size_t>(d.train_size),
        data::DistributedSamplerOptions().num_replicas(ranks.world).rank(ranks.rank).seed(c.seed));
  data::DataLoaderOptions train_opts = data::DataLoaderOptions(rank_batch)
                                           .shuffle(!ranks.on)
                                           .sampler(sampler)
                                           .num_workers(workers)
                                           .persistent_workers(workers > 0)
                                           .pin_memory(pin)
                                           .device(device)
                                           .seed(c.seed);
  data::DataLoader train_loader(d.train, train_opts);
  data::DataLoader test_loader(d.test, data::DataLoaderOptions(1000).pin_memory(pin).device(device));
  auto steps_per_epoch = static_cast<int64_t>(train_loader.size());
  std::unique_ptr<optim::LRScheduler> sched = make_scheduler(c, *opt, c.epochs * steps_per_epoch);
  // --amp: autocast for the forward pass and the loss; on cuda, float16
  // with loss scaling; on the cpu, bfloat16, which needs none (the scaler
  // is then disabled and passes everything through).
  const Dtype amp_dtype = device.is_cuda() ? kFloat16 : kBFloat16;
  amp::GradScaler scaler(amp::GradScalerOptions().enabled(c.amp && device.is_cuda()));

  Position pos;
  if (resumed) {
    const nn::Checkpoint& ckpt = resumed->checkpoint;
    ckpt.load_module(*model);
    nn::load_from_checkpoint(ckpt, *opt);
    if (sched) nn::load_from_checkpoint(ckpt, *sched);
    // A run that moved between the cpu and cuda starts a fresh scale.
    if (scaler.is_enabled() && ckpt.contains("grad_scaler")) nn::load_from_checkpoint(ckpt, scaler);
    pos = resumed->position;
    pos.restore_generators(device);
    train_loader.set_epoch(static_cast<uint64_t>(pos.epochs_done));
    if (!o.out.empty() && writer) trim_metrics(metrics_path(o.out), pos.epochs_done);
  }
  // After the resume: DDP checks the replicas match and broadcasts rank 0's.
  nn::parallel::DistributedDataParallel ddp{nullptr};
  if (ranks.on) ddp = nn::parallel::DistributedDataParallel(model.ptr());
  const std::string ranks_line = ranks.on ? ranks.describe(device) : std::string();
  StopAgreement agreement(ranks);

  // ---- what is about to run
  std::printf("Tandem %s (%s)\n", version(), *build_features() ? build_features() : "cpu only");
  std::printf("device       %s%s\n", describe_device(device).c_str(),
              device_why.empty() ? "" : ("  [" + device_why + "]").c_str());
  if (cuda::is_emulated() && device.is_cuda())
    std::printf("             emulated: host memory and the CPU kernels under a cuda tag (TANDEM_EMULATE_CUDA)\n");
  std::printf("model        %s, %s parameters\n", model_shape(c.model).c_str(),
              thousands(parameter_count(*model)).c_str());
  std::printf("data         %s (%s): %s train, %s test\n", d.name.c_str(), d.root.c_str(),
              thousands(d.train_size).c_str(), thousands(d.test_size).c_str());
  std::printf("batches      %lld a batch%s, %lld steps an epoch, %lld epochs\n", static_cast<long long>(c.batch_size),
              ranks.on ? detail::str_cat(" (", ranks.world, " x ", rank_batch, ")").c_str() : "",
              static_cast<long long>(steps_per_epoch), static_cast<long long>(c.epochs));
  if (ranks.on) std::printf("distributed  %s; DistributedDataParallel, rank 0 prints and writes\n", ranks_line.c_str());
  std::printf("optimizer    %s\n", describe_optimizer(c).c_str());
  if (c.amp)
    std::printf("precision    mixed: autocast to %s%s\n", dtype_name(amp_dtype).data(),
                scaler.is_enabled() ? ", loss scaling (GradScaler, initial scale 65536)" : " (no loss scaling needed)");
  std::printf("threads      %d%s\n", threads,
              resumed && o.threads == 0 && resumed->config.threads > 0 ? "  [the run's]"
              : o.threads > 0                                          ? ""
                                                                       : ("  [default for " + c.model + "]").c_str());
  if (threads_differ)
    std::printf(
        "             note: the run used %lld thread(s); with %d the CPU kernels add up in another order, so "
        "the result will not be bit for bit that of the run left alone\n",
        static_cast<long long>(resumed->config.threads), threads);
  if (std::string advice = blas_note(); !advice.empty() && device.is_cpu())
    std::printf("             note: %s\n", advice.c_str());
  std::printf("loader       %lld worker%s, pinned memory %s, batches delivered to %s\n",
              static_cast<long long>(workers), workers == 1 ? "" : "s", pin ? "on" : "off", device.str().c_str());
  std::printf("checkpoints  %s\n", o.out.empty() ? "none (--out DIR keeps a checkpoint and metrics after every epoch)"
                                                 : (checkpoint_path(o.out) + ", " + metrics_path(o.out)).c_str());
  if (resumed)
    std::printf(
        "resuming     after epoch %lld%s\n", static_cast<long long>(pos.epochs_done),
        pos.steps_in_epoch > 0 ? (" and " + std::to_string(pos.steps_in_epoch) + " steps of the next").c_str() : "");
  std::fflush(stdout);

  Progress progress(stdout, o.progress_interval);
  int64_t steps_this_run = 0;
  // What this process would like: Ctrl-C before --stop-after-steps.
  auto stop_wish = [&] {
    if (interrupt_requested()) return kStopInterrupt;
    return o.stop_after_steps > 0 && steps_this_run >= o.stop_after_steps ? kStopSteps : kGoOn;
  };
  TensorOptions acc_options = TensorOptions().dtype(kFloat64).device(device);
  for (int64_t epoch = pos.epochs_done; epoch < c.epochs; ++epoch) {
    model->train();
    if (device.is_cuda()) cuda::reset_peak_memory_stats(device.index());
    // Sums on the device, so no step waits for the loss to reach the host.
    Tensor loss_sum = zeros({}, acc_options), correct = zeros({}, acc_options);
    const int64_t skipped_before = scaler.is_enabled() ? scaler.skipped_steps() : 0;
    int64_t step = 0, seen = 0;
    double wait = 0;
    if (sampler) sampler->set_epoch(static_cast<uint64_t>(epoch));
    if (ranks.on) ddp->reset_comm_stats();
    std::string label = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(c.epochs);
    progress.start(label, d.train_size, pos.seen);
    Clock::time_point t0 = Clock::now();

    auto stop_here = [&](bool interrupted) {
      if (device.is_cuda()) cuda::synchronize(device.index());
      progress.clear();
      agreement.now(interrupted ? kStopInterrupt : kStopSteps);  // nothing left in flight
      double ls = loss_sum.item<double>(), cs = correct.item<double>();
      int64_t ss = seen;
      sum_over_ranks(ranks, ls, cs, ss);
      Position now = pos;
      now.epochs_done = epoch;
      now.steps_in_epoch += step;
      now.loss_sum += ls;
      now.correct += static_cast<int64_t>(cs);
      now.seen += ss;
      now.elapsed_s += seconds_since(t0);
      now.wait_s += wait;
      now.capture_generators(device);
      std::printf("%s at step %lld of epoch %lld.\n",
                  interrupted ? "Stopped by Ctrl-C" : "Stopped (--stop-after-steps)",
                  static_cast<long long>(now.steps_in_epoch), static_cast<long long>(epoch + 1));
      if (!o.out.empty() && writer) save_run(checkpoint_path(o.out), *model, *opt, sched.get(), scaler, c, now);
      say_how_to_resume(o.out);
      return interrupted ? kExitInterrupted : 0;
    };

    {
      Clock::time_point tw = Clock::now();
      // A resumed epoch starts at its next batch: the loader's order depends
      // only on the seed and the epoch, and set_epoch chose the epoch.
      data::DataLoader::Iterator it = train_loader.begin(static_cast<size_t>(pos.steps_in_epoch));
      wait += seconds_since(tw);
      int64_t done_before = pos.seen;
      while (it != train_loader.end()) {
        data::Example<>& batch = *it;
        Tensor x = prepare_images(batch.data), y = batch.target;
        opt->zero_grad();
        Tensor logits, loss;
        {
          AutocastGuard autocast(device.type(), amp_dtype, /*enabled=*/c.amp);
          logits = ranks.on ? ddp->forward(x) : model->forward(x);
          loss = F::cross_entropy(logits, y);
        }
        scaler.scale(loss).backward();
        scaler.step(*opt);
        scaler.update();
        if (sched) sched->step();
        int64_t n = y.size(0);
        {
          NoGradGuard no_grad;
          loss_sum.add_(loss.detach().to(kFloat64), static_cast<double>(n));
          correct.add_(logits.argmax(1).eq(y).sum().to(kFloat64));
        }
        ++step;
        ++steps_this_run;
        seen += n;
        bool last = pos.steps_in_epoch + step == steps_per_epoch;
        int stop = agreement.step(stop_wish());
        if (stop != kGoOn && !last) return stop_here(stop == kStopInterrupt);
        progress.update(done_before + seen * ranks.world, [&] {
          // Rank 0's part stands for every rank's.
          return (pos.loss_sum + loss_sum.item<double>() * ranks.world) /
                 static_cast<double>(pos.seen + seen * ranks.world);
        });
        tw = Clock::now();
        ++it;
        wait += seconds_since(tw);
      }
    }
    if (device.is_cuda()) cuda::synchronize(device.index());
    double epoch_loss = loss_sum.item<double>(), epoch_correct = correct.item<double>();
    sum_over_ranks(ranks, epoch_loss, epoch_correct, seen);
    double elapsed = pos.elapsed_s + seconds_since(t0);
    wait += pos.wait_s;
    int64_t total_seen = pos.seen + seen;
    double train_loss = (pos.loss_sum + epoch_loss) / static_cast<double>(total_seen);
    double train_acc = (static_cast<double>(pos.correct) + epoch_correct) / static_cast<double>(total_seen);
    progress.clear();

    // Rank 0 evaluates alone; the others wait for it in the stop agreement
    // below (a collective).
    Clock::time_point te = Clock::now();
    EvalResult test = writer ? evaluate(model, test_loader) : EvalResult{};
    double eval_time = seconds_since(te);
    size_t peak = peak_memory(device);
    double rate = static_cast<double>(total_seen) / elapsed, share = wait / elapsed;
    double lr = opt->param_groups()[0].options().get_lr();
    // The loss scale after the epoch and the steps the scaler skipped in it.
    const double loss_scale = scaler.get_scale();
    const int64_t skipped = scaler.is_enabled() ? scaler.skipped_steps() - skipped_before : 0;
    const std::string scaling =
        scaler.is_enabled() ? detail::str_cat("  scale ", loss_scale, " skipped ", skipped) : std::string();

    std::printf(
        "epoch %2lld/%lld  train loss %.4f acc %5.2f%%  test loss %.4f acc %5.2f%%  %.2f s  %s samples/s  "
        "waiting for data %.1f%%  peak %s %s%s\n",
        static_cast<long long>(epoch + 1), static_cast<long long>(c.epochs), train_loss, 100 * train_acc, test.loss,
        100 * test.accuracy(), elapsed, compact(rate).c_str(), 100 * share, device.is_cuda() ? "memory" : "RSS",
        bytes(static_cast<double>(peak)).c_str(), scaling.c_str());
    if (share > 0.10)
      std::printf(
          "             the step waited for data %.0f%% of the time: raise --workers (now %lld) so that "
          "batches are built ahead\n",
          100 * share, static_cast<long long>(workers));
    std::fflush(stdout);

    pos = Position{};
    pos.epochs_done = epoch + 1;
    pos.capture_generators(device);
    if (!o.out.empty() && writer) {
      json::Value m = {{"epoch", epoch + 1},
                       {"epochs", c.epochs},
                       {"model", c.model},
                       {"device", device.str()},
                       {"train_loss", number(train_loss)},
                       {"train_accuracy", number(train_acc)},
                       {"test_loss", number(test.loss)},
                       {"test_accuracy", number(test.accuracy())},
                       {"epoch_time_s", number(elapsed)},
                       {"eval_time_s", number(eval_time)},
                       {"samples_per_s", number(rate)},
                       {"loader_wait_share", number(share)},
                       {"peak_memory_bytes", static_cast<int64_t>(peak)},
                       {"lr", number(lr)},
                       {"batch_size", c.batch_size},
                       {"threads", threads},
                       {"workers", workers},
                       {"pin_memory", pin},
                       {"amp", c.amp},
                       {"world_size", ranks.world}};
      if (ranks.on) {
        // Rank 0's gradient communication in the epoch, and how much of it
        // backward did not hide.
        m["backend"] = ranks.backend;
        nn::parallel::Reducer::CommStats cs = ddp->comm_stats();
        m["allreduce_s"] = number(cs.allreduce_s);
        m["allreduce_exposed_s"] = number(cs.exposed_s);
      }
      if (c.amp) m["amp_dtype"] = std::string(dtype_name(amp_dtype));
      if (scaler.is_enabled()) {
        m["loss_scale"] = number(loss_scale);
        m["skipped_steps"] = skipped;
      }
      append_line(metrics_path(o.out), json::dump(m));
      save_run(checkpoint_path(o.out), *model, *opt, sched.get(), scaler, c, pos);
    }
    int stop = agreement.now(stop_wish());
    if (stop != kGoOn && epoch + 1 < c.epochs) {
      std::printf("%s after epoch %lld.\n",
                  stop == kStopInterrupt ? "Stopped by Ctrl-C" : "Stopped (--stop-after-steps)",
                  static_cast<long long>(epoch + 1));
      say_how_to_resume(o.out);
      return stop == kStopInterrupt ? kExitInterrupted : 0;
    }
  }
  std::printf("done: %s on %s, %lld epochs\n", c.model.c_str(), device.str().c_str(), static_cast<long long>(c.epochs));
  if (!o.out.empty())
    std::printf("checkpoint: %s (tandem eval --checkpoint %s --device cpu)\n", checkpoint_path(o.out).c_str(),
                checkpoint_path(o.out).c_str());
  if (o.plot && writer) plot(o.out);
  if (interrupt_requested()) {
    // Ctrl-C during the last step or the last evaluation: the run is whole.
    std::printf("Ctrl-C came at the end of the run: it finished all the same\n");
    return kExitInterrupted;
  }
  return 0;
}

}  // namespace tandem::cli
