// The tandem command (cli/), run as a subprocess the way a user runs it:
// what info, train and eval print, write and exit with (0, 1 at run time, 2
// for usage, 130 for Ctrl-C; every error one stderr line), exact resume after
// --stop-after-steps and Ctrl-C, the progress line on a terminal and off it.
// Each case trains on a few hundred Fashion-MNIST examples; the device
// expectations come from what this process sees (the cpu suite, or two
// emulated devices in the emulated suite).
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "helpers.h"
#include "nn/serialize_private.h"
#include "subprocess.h"

#ifndef TANDEM_EXE
#error "TANDEM_EXE (the path of the tandem command) must be defined by the build"
#endif

using namespace tandem;
using Catch::Contains;
using test::TempDir;
namespace fs = std::filesystem;
using Args = std::vector<std::string>;

namespace {

const std::string kFashion = data::FashionMNIST::kDefaultRoot;
// The small run: 8 steps an epoch.
const Args kSmall = {"--train-examples", "512", "--test-examples", "256", "--batch-size", "64"};

Args cat(Args a, const Args& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}
bool has_line(const std::string& text, const std::string& line) {
  for (const std::string& l : lines_of(text))
    if (l == line) return true;
  return false;
}
// The first line starting with prefix ("" when none does).
std::string line_starting(const std::string& text, const std::string& prefix) {
  for (const std::string& l : lines_of(text))
    if (l.starts_with(prefix)) return l;
  return "";
}
int count_matching(const std::string& text, const std::regex& re) {
  int n = 0;
  for (const std::string& l : lines_of(text)) n += std::regex_match(l, re) ? 1 : 0;
  return n;
}

std::string fmt(const char* format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

// ---------------------------------------------------------------- running tandem

using test::on_terminal;
using test::Result;
using test::RunOptions;
using test::with_env;
using test::without_env;

// One tandem process, started at construction.
class Tandem : public test::Child {
 public:
  explicit Tandem(const Args& args, RunOptions options = {}) : Child(TANDEM_EXE, args, std::move(options)) {}
  void interrupt() { signal(SIGINT); }
};
Result run(const Args& args, RunOptions options = {}) { return test::run(TANDEM_EXE, args, std::move(options)); }
// Each start of tandem takes a fifth of a second to load its libraries:
// quick commands go a few at a time.
std::vector<Result> run_all(const std::vector<Args>& runs) { return test::run_all(TANDEM_EXE, runs); }
// The runs over the whole training set.
RunOptions long_run() { return test::with_timeout(300); }

// ---------------------------------------------------------------- checks

// The run failed with `code` and said why on exactly one stderr line,
// "tandem <sub>: error: ...", holding every one of words.
void check_error(const Result& r, int code, const std::string& sub, const std::vector<std::string>& words) {
  INFO(r);
  CHECK(r.exit_code == code);
  std::string prefix = (sub.empty() ? "tandem" : "tandem " + sub) + ": error: ";
  REQUIRE(!r.err.empty());
  CHECK(r.err.back() == '\n');
  CHECK(r.err.find('\n') == r.err.size() - 1);
  CHECK(r.err.starts_with(prefix));
  for (const std::string& w : words) CHECK_THAT(r.err, Contains(w));
}
void check_usage_error(const Result& r, const std::string& sub, const std::vector<std::string>& words) {
  check_error(r, 2, sub, words);
  INFO(r);
  CHECK(r.out.empty());
}

// No temporary file (a checkpoint or metrics being written) left in dir.
void check_no_tmp(const std::string& dir) {
  if (!fs::exists(dir)) return;
  for (const auto& e : fs::directory_iterator(dir)) {
    INFO(e.path());
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
  }
}

std::vector<json::Value> read_metrics(const std::string& dir) {
  std::vector<json::Value> out;
  for (const std::string& line : lines_of(read_file((fs::path(dir) / "metrics.jsonl").string()))) {
    INFO(line);
    out.push_back(json::parse(line));
    REQUIRE(out.back().is_object());
  }
  return out;
}

std::string bytes_of(const Tensor& t) {
  Tensor c = t.to(Device(kCPU)).contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// Every tensor of the two checkpoints (model, optimizer state) has the same
// dtype, shape and bits, and the metadata (epoch, optimizer and scheduler
// state, the run's settings and position) is the same.
void check_same_checkpoint(const std::string& actual_dir, const std::string& expected_dir) {
  INFO(actual_dir << " against " << expected_dir);
  nn::Checkpoint a = nn::Checkpoint::load((fs::path(actual_dir) / "checkpoint.safetensors").string(), Device(kCPU));
  nn::Checkpoint e = nn::Checkpoint::load((fs::path(expected_dir) / "checkpoint.safetensors").string(), Device(kCPU));
  REQUIRE(e.all_tensors().size() > 6);  // the mlp's 6 parameters and Adam's state
  REQUIRE(a.all_tensors().keys() == e.all_tensors().keys());
  for (const auto& item : e.all_tensors()) {
    INFO(item.first);
    const Tensor& t = a.all_tensors()[item.first];
    CHECK(t.dtype() == item.second.dtype());
    CHECK(t.sizes() == item.second.sizes());
    CHECK(bytes_of(t) == bytes_of(item.second));
  }
  CHECK(a.metadata() == e.metadata());
}

// What this process sees is what tandem, its child, sees.
bool have_cuda() { return cuda::is_available(); }
// The device `--device auto` picks.
std::string auto_device() { return have_cuda() ? "cuda:" + std::to_string(cuda::current_device()) : "cpu"; }

bool have_dataset() {
  if (fs::is_directory(kFashion)) return true;
  WARN("Fashion-MNIST is not installed in " << kFashion << " (apt-get install dataset-fashion-mnist): skipped");
  return false;
}

// A copy of the installed Fashion-MNIST files in dir/name.
std::string copy_dataset(const TempDir& dir, const std::string& name) {
  fs::path to = dir.path() / name;
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(kFashion)) fs::copy_file(e.path(), to / e.path().filename());
  return to.string();
}

// An uncompressed IDX file of uint8 (n, 28, 28) images with `pixels` bytes
// after the header, and the given magic number.
std::string idx_images(uint32_t magic, uint32_t n, size_t pixels) {
  std::string out;
  for (uint32_t v : {magic, n, 28u, 28u})
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xff);
  return out + std::string(pixels, '\x7f');
}

// The 3-epoch run with --out that several cases read; made once.
struct BaseRun {
  TempDir dir;
  std::string out;
  Result result;
};
const BaseRun& base_run() {
  static BaseRun base;  // its folder goes when the program ends
  static bool made = false;
  if (!made) {
    base.out = base.dir.file("run");
    base.result = run(cat({"train", "--epochs", "3", "--out", base.out, "--progress-interval", "0.001"}, kSmall));
    INFO(base.result);
    REQUIRE(base.result.exit_code == 0);
    made = true;
  }
  return base;
}

const std::regex kEpochLine(
    R"(epoch +(\d+)/(\d+)  train loss (\d+\.\d{4}) acc +(\d+\.\d\d)%  test loss (\d+\.\d{4}) acc +(\d+\.\d\d)%  )"
    R"(\d+\.\d\d s  [\d.]+[kM]? samples/s  waiting for data \d+\.\d%  peak (RSS|memory) [\d.]+ (B|KiB|MiB|GiB))");

}  // namespace

// ---------------------------------------------------------------- info, help, usage errors

TEST_CASE("tandem info: the version and build and the CPU and the devices", "[cli]") {
  Result r = run({"info"});
  INFO(r);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  std::string features = *build_features() ? build_features() : "cpu only";
  CHECK(lines_of(r.out).at(0) == std::string("Tandem ") + version());
  CHECK(has_line(r.out, "build        " + features));
  CHECK_THAT(line_starting(r.out, "CPU          "),
             Contains(std::to_string(std::thread::hardware_concurrency()) + " hardware threads"));
  CHECK(!line_starting(r.out, "BLAS         ").empty());
  CHECK(!line_starting(r.out, "CUDA         ").empty());
  int n = cuda::device_count();
  if (n == 0) {
    CHECK(line_starting(r.out, "devices      cpu only: ") != "");
    CHECK(r.out.find("cuda:0") == std::string::npos);
  } else {
    CHECK(line_starting(r.out, "devices      " + std::to_string(n) + " CUDA device") != "");
    for (int i = 0; i < n; ++i) CHECK(line_starting(r.out, "  cuda:" + std::to_string(i) + "  ") != "");
    CHECK((r.out.find("EMULATED") != std::string::npos) == cuda::is_emulated());
  }
  if (cuda::is_emulated()) {
    CHECK(n == 2);
    CHECK_THAT(r.out, Contains("256.0 MiB"));  // TANDEM_EMULATE_CUDA_MEMORY=256M
  }
}

TEST_CASE("tandem --help and train/eval --help list every flag; --version", "[cli]") {
  // The flags of a help's option lines ("  -h,--help  ...", "  --model TEXT..."),
  // exactly: a flag added later must be added here too.
  auto flags_in = [](const std::string& help) {
    std::set<std::string> flags;
    std::regex flag(R"(--[a-z][a-z-]*)");
    for (const std::string& line : lines_of(help)) {
      if (!line.starts_with("  -")) continue;
      std::string names = line.substr(2, line.find(' ', 2) - 2);
      for (auto it = std::sregex_iterator(names.begin(), names.end(), flag); it != std::sregex_iterator(); ++it)
        flags.insert(it->str());
    }
    return flags;
  };
  Result app = run({"--help"});
  INFO(app);
  REQUIRE(app.exit_code == 0);
  CHECK(app.err.empty());
  for (const char* sub : {"info ", "train ", "eval "}) CHECK_THAT(app.out, Contains(std::string("  ") + sub));
  CHECK(flags_in(app.out) == std::set<std::string>{"--help", "--version"});

  Result train = run({"train", "--help"});
  INFO(train);
  REQUIRE(train.exit_code == 0);
  CHECK(flags_in(train.out) == std::set<std::string>{"--help",
                                                     "--model",
                                                     "--epochs",
                                                     "--batch-size",
                                                     "--lr",
                                                     "--optimizer",
                                                     "--schedule",
                                                     "--device",
                                                     "--workers",
                                                     "--pin-memory",
                                                     "--no-pin-memory",
                                                     "--threads",
                                                     "--seed",
                                                     "--data",
                                                     "--train-examples",
                                                     "--test-examples",
                                                     "--out",
                                                     "--resume",
                                                     "--amp",
                                                     "--plot",
                                                     "--progress-interval",
                                                     "--stop-after-steps",
                                                     "--nproc-per-node",
                                                     "--backend"});
  for (const char* shown : {"--model TEXT:{mlp,cnn}=mlp", "--epochs INT:INT>=1=10", "--batch-size INT:INT>=1=128",
                            "--lr FLOAT:NUMBER>0=0.001", "{adam,sgd,adamw}=adam", "{cosine,onecycle,none}=cosine",
                            "--device TEXT=auto", "--seed UINT:INT>=0=0"})
    CHECK_THAT(train.out, Contains(shown));
  CHECK(run({"train", "-h"}).out == train.out);

  Result eval = run({"eval", "--help"});
  INFO(eval);
  REQUIRE(eval.exit_code == 0);
  CHECK(flags_in(eval.out) ==
        std::set<std::string>{"--help", "--checkpoint", "--device", "--data", "--batch-size", "--threads"});
  CHECK_THAT(eval.out, Contains("--checkpoint TEXT REQUIRED"));

  Result v = run({"--version"});
  INFO(v);
  CHECK(v.exit_code == 0);
  CHECK(v.out ==
        std::string("tandem ") + version() + " (" + (*build_features() ? build_features() : "cpu only") + ")\n");
}

TEST_CASE("tandem: every usage error exits 2 with one line", "[cli]") {
  struct Case {
    Args args;
    std::vector<std::string> words;  // in the one stderr line
  };
  std::vector<Case> cases = {
      {{}, {"A subcommand is required", "tandem --help"}},
      {{"info", "--bogus"}, {"--bogus", "not expected", "tandem info --help"}},
      {{"train", "--bogus"}, {"--bogus", "not expected", "tandem train --help"}},
      // With its required flag: a missing --checkpoint is reported first.
      {{"eval", "--checkpoint", "x", "--bogus"}, {"--bogus", "not expected", "tandem eval --help"}},
      {{"train", "--model", "resnet"}, {"--model", "resnet", "{mlp,cnn}"}},
      {{"train", "--optimizer", "foo"}, {"--optimizer", "foo", "{adam,sgd,adamw}"}},
      {{"train", "--schedule", "foo"}, {"--schedule", "foo", "{cosine,onecycle,none}"}},
      {{"eval"}, {"--checkpoint is required", "tandem eval --help"}},
      {{"train", "--plot"}, {"--plot needs --out DIR"}},
      {{"train", "--pin-memory", "--no-pin-memory"}, {"--pin-memory excludes --no-pin-memory"}},
  };
  // The numeric checks: "expected a whole number >= 1, got 0", "expected a
  // positive number, got 'abc'".
  const std::vector<Args> numbers = {{"train", "--epochs", "0"},
                                     {"train", "--batch-size", "0"},
                                     {"train", "--lr", "-1"},
                                     {"train", "--lr", "0"},
                                     {"train", "--workers", "-1"},
                                     {"train", "--threads", "0"},
                                     {"train", "--train-examples", "0"},
                                     {"train", "--test-examples", "0"},
                                     {"train", "--progress-interval", "0"},
                                     {"train", "--stop-after-steps", "0"},
                                     {"eval", "--batch-size", "0"},
                                     {"eval", "--threads", "0"},
                                     {"train", "--epochs", "abc"},
                                     {"train", "--seed", "-1"},
                                     {"train", "--lr", "abc"}};
  const size_t first_number = cases.size();
  for (const Args& a : numbers) {
    const bool real = a[1] == "--lr" || a[1] == "--progress-interval";
    const bool zero_ok = a[1] == "--workers" || a[1] == "--seed";
    const bool word = a[2] == "abc";
    std::string expected = real      ? "expected a positive number, got "
                           : zero_ok ? "expected a whole number >= 0, got "
                                     : "expected a whole number >= 1, got ";
    cases.push_back({a, {a[1] + ": " + expected + (word ? "'" + a[2] + "'" : a[2]), "tandem " + a[0] + " --help"}});
  }
  for (const std::string sub : {"train", "eval"}) {
    Args checkpoint = sub == "eval" ? Args{"--checkpoint", "x.safetensors"} : Args{};
    cases.push_back({cat({sub, "--device", "gpu"}, checkpoint),
                     {"--device gpu: not a device; expected auto, cpu, cuda or cuda:N (e.g. cuda:0)"}});
    if (have_cuda()) {
      cases.push_back({cat({sub, "--device", "cuda:7"}, checkpoint),
                       {"--device cuda:7: there is no such device; this machine has " +
                        std::to_string(cuda::device_count()) + " CUDA device"}});
    } else {
      cases.push_back(
          {cat({sub, "--device", "cuda:7"}, checkpoint),
           {"--device cuda:7: there is no CUDA device here", "use --device cpu or auto", "TANDEM_EMULATE_CUDA=1"}});
      cases.push_back({cat({sub, "--device", "cuda"}, checkpoint), {"--device cuda: there is no CUDA device here"}});
    }
  }
  if (!have_cuda())
    cases.push_back(
        {{"train", "--pin-memory"}, {"--pin-memory: pinned memory needs a CUDA device (real or emulated)"}});

  std::vector<Args> args;
  for (const Case& c : cases) args.push_back(c.args);
  std::vector<Result> results = run_all(args);
  for (size_t i = 0; i < cases.size(); ++i) {
    const Args& a = cases[i].args;
    check_usage_error(results[i], a.empty() ? "" : a[0], cases[i].words);
    if (i >= first_number && i < first_number + numbers.size()) CHECK(results[i].err.size() < 200);
  }
  check_usage_error(run({"bogus"}), "",
                    {"tandem: error: unknown command 'bogus': expected info, train or eval (see tandem --help)"});
}

TEST_CASE("tandem train: --out of a run and --resume with another setting are usage errors", "[cli]") {
  if (!have_dataset()) return;
  const BaseRun& base = base_run();
  std::string before = read_file(base.out + "/checkpoint.safetensors");
  check_usage_error(run(cat({"train", "--out", base.out}, kSmall)), "train",
                    {"--out " + base.out + " already holds a run", "--resume " + base.out});
  check_usage_error(run({"train", "--resume", base.out, "--lr", "0.01"}), "train",
                    {"--lr 0.01 differs from the run being resumed", "0.001", "drop the flag"});
  check_usage_error(run({"train", "--resume", base.out, "--model", "cnn"}), "train",
                    {"--model cnn differs from the run being resumed", "mlp"});
  check_usage_error(run({"train", "--resume", base.out, "--data", "/elsewhere"}), "train",
                    {"--data /elsewhere differs", "the default"});
  CHECK(read_file(base.out + "/checkpoint.safetensors") == before);
  check_no_tmp(base.out);

  // Metrics but no checkpoint (a run killed between the two writes of its
  // first epoch): a new run there would mix its lines with the old ones.
  TempDir dir;
  write_file(dir.file("metrics.jsonl"), "{\"epoch\":1}\n");
  check_usage_error(
      run(cat({"train", "--out", dir.str()}, kSmall)), "train",
      {"--out " + dir.str() + " already holds " + dir.file("metrics.jsonl") + " but no checkpoint to resume"});
  CHECK(read_file(dir.file("metrics.jsonl")) == "{\"epoch\":1}\n");
}

// ---------------------------------------------------------------- errors at run time

TEST_CASE("tandem train: missing or damaged data is an error (exit 1) that says what to do", "[cli]") {
  if (!have_dataset()) return;
  TempDir dir;
  std::string out = dir.file("out");
  {
    Result r = run({"train", "--data", dir.file("nowhere"), "--out", out});
    check_error(r, 1, "train", {"--data " + dir.file("nowhere") + ": no such folder", "train-images-idx3-ubyte"});
    check_no_tmp(out);
  }
  {
    Result r = run({"train", "--out", out}, with_env({"TANDEM_FASHION_MNIST=/nonexistent"}));
    check_error(r, 1, "train",
                {"Fashion-MNIST is not installed (no folder /nonexistent)", "apt-get install dataset-fashion-mnist",
                 "--data DIR"});
    check_no_tmp(out);
  }
  std::string data = copy_dataset(dir, "damaged");
  {
    fs::resize_file(data + "/train-labels-idx1-ubyte.gz", 2000);
    Result r = run(cat({"train", "--data", data, "--out", out}, kSmall));
    check_error(r, 1, "train", {"train-labels-idx1-ubyte.gz", "truncated gzip stream"});
    check_no_tmp(out);
    fs::remove(data + "/train-labels-idx1-ubyte.gz");
    r = run(cat({"train", "--data", data, "--out", out}, kSmall));
    check_error(r, 1, "train", {"cannot find train-labels-idx1-ubyte in '" + data + "'"});
    fs::copy_file(kFashion + "/train-labels-idx1-ubyte.gz", data + "/train-labels-idx1-ubyte.gz");
  }
  fs::remove(data + "/train-images-idx3-ubyte.gz");
  {
    write_file(data + "/train-images-idx3-ubyte", idx_images(0x12340803, 1, 784));
    Result r = run(cat({"train", "--data", data, "--out", out}, kSmall));
    check_error(r, 1, "train", {"train-images-idx3-ubyte", "wrong magic number 0x12340803", "not an IDX file"});
    check_no_tmp(out);
  }
  {
    write_file(data + "/train-images-idx3-ubyte", idx_images(0x00000803, 10, 100));
    Result r = run(cat({"train", "--data", data, "--out", out}, kSmall));
    check_error(r, 1, "train", {"train-images-idx3-ubyte", "is truncated"});
    check_no_tmp(out);
  }
  CHECK(!fs::exists(out + "/checkpoint.safetensors"));
}

TEST_CASE("tandem train: an --out that cannot be made or written is an error", "[cli]") {
  TempDir dir;
  write_file(dir.file("file"), "a regular file\n");
  check_error(run({"train", "--out", dir.file("file") + "/run"}), 1, "train",
              {"--out " + dir.file("file") + "/run: cannot create the folder"});
  check_error(run({"train", "--out", "/proc"}), 1, "train", {"--out /proc: cannot write there"});
  check_error(run({"train", "--resume", dir.file("nothing")}), 1, "train", {dir.file("nothing") + ": no such file"});
  CHECK(dir.listing() == std::vector<std::string>{"file"});
}

TEST_CASE("tandem eval: a missing or truncated or foreign checkpoint is an error", "[cli]") {
  if (!have_dataset()) return;
  const BaseRun& base = base_run();
  TempDir dir;
  std::string good = read_file(base.out + "/checkpoint.safetensors");
  write_file(dir.file("head.safetensors"), good.substr(0, 1000));
  write_file(dir.file("cut.safetensors"), good.substr(0, good.size() - 1000));
  write_file(dir.file("notes.txt"), "these are notes, not a checkpoint\n");
  write_file(dir.file("short.txt"), "hi\n");
  nn::Linear linear(3, 2);
  nn::save(linear, dir.file("weights.safetensors"));
  {
    nn::Checkpoint ckpt;
    ckpt.add_module(*linear);
    ckpt.set_int(nn::Checkpoint::kEpoch, 1);
    ckpt.save(dir.file("other.safetensors"));
  }
  {
    nn::Checkpoint ckpt;
    ckpt.add_module(*linear);
    nn::set_json(ckpt, "tandem.train.config", {{"model", "mlp"}});
    nn::set_json(ckpt, "tandem.train.position", json::Value::object());
    ckpt.save(dir.file("damaged.safetensors"));
  }
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {dir.file("missing.safetensors"), {dir.file("missing.safetensors") + ": no such file", "--out DIR"}},
      {dir.str(), {dir.str() + ": not a file"}},
      {dir.file("head.safetensors"), {"head.safetensors", "runs past the end of the file", "truncated"}},
      {dir.file("cut.safetensors"), {"cut.safetensors", "run past the end of the buffer", "truncated"}},
      {dir.file("notes.txt"), {"notes.txt", "not a safetensors file"}},
      {dir.file("short.txt"), {"short.txt", "shorter than the 8-byte header length"}},
      {dir.file("weights.safetensors"),
       {"weights.safetensors: a safetensors file, but not a checkpoint of tandem train (no 'tandem.checkpoint' entry); "
        "give DIR/checkpoint.safetensors of a tandem train --out DIR"}},
      {dir.file("other.safetensors"), {"a Tandem checkpoint, but not one tandem train wrote"}},
      {dir.file("damaged.safetensors"),
       {"its 'tandem.train.config' entry is not what tandem train writes", "damaged or from another program"}},
  };
  std::vector<Args> args;
  for (const auto& c : cases) args.push_back({"eval", "--checkpoint", c.first, "--device", "cpu"});
  std::vector<Result> results = run_all(args);
  for (size_t i = 0; i < cases.size(); ++i) check_error(results[i], 1, "eval", cases[i].second);
  check_no_tmp(dir.str());
}

// ---------------------------------------------------------------- training

TEST_CASE("tandem train --out: the summary and a line per epoch and metrics.jsonl", "[cli]") {
  if (!have_dataset()) return;
  const BaseRun& base = base_run();
  const Result& r = base.result;
  INFO(r);
  std::string device = auto_device();
  bool on_cuda = device != "cpu";
  CHECK(r.err.empty());
  CHECK(lines_of(r.out).at(0) ==
        std::string("Tandem ") + version() + " (" + (*build_features() ? build_features() : "cpu only") + ")");
  CHECK_THAT(line_starting(r.out, "device       "),
             Contains(on_cuda ? "device       " + device + " (" : "device       cpu  [auto: no CUDA device"));
  if (cuda::is_emulated()) CHECK_THAT(r.out, Contains("[auto: emulated CUDA devices are on (TANDEM_EMULATE_CUDA)]"));
  CHECK(has_line(r.out, "model        MLP 784-256-128-10, 235,146 parameters"));
  CHECK(has_line(r.out, "data         Fashion-MNIST (" + kFashion + "): 512 train, 256 test"));
  CHECK(has_line(r.out, "batches      64 a batch, 8 steps an epoch, 3 epochs"));
  CHECK(has_line(r.out, "optimizer    adam lr 0.001, cosine schedule over all steps"));
  CHECK(has_line(r.out, "threads      1  [default for mlp]"));
  if (on_cuda) {
    CHECK(has_line(r.out, "loader       2 workers, pinned memory on, batches delivered to " + device));
  } else {
    CHECK(has_line(r.out, "loader       0 workers, pinned memory off, batches delivered to cpu"));
  }
  CHECK(has_line(r.out, "checkpoints  " + base.out + "/checkpoint.safetensors, " + base.out + "/metrics.jsonl"));
  CHECK(has_line(r.out, "done: mlp on " + device + ", 3 epochs"));
  CHECK(has_line(r.out, "checkpoint: " + base.out + "/checkpoint.safetensors (tandem eval --checkpoint " + base.out +
                            "/checkpoint.safetensors --device cpu)"));
  // Not a terminal: plain lines, no '\r', no escape sequences.
  CHECK(r.out.find('\r') == std::string::npos);
  CHECK(r.out.find('\x1b') == std::string::npos);
  // --progress-interval 0.001: plain progress lines, at most one a step but the epoch's last.
  for (int k = 1; k <= 3; ++k) {
    std::regex progress("epoch " + std::to_string(k) +
                        R"(/3: +\d+% [\d,]+/512  [\d.]+[kM]? samples/s  loss \d+\.\d{4}  \d+:\d\d left)");
    INFO("progress lines of epoch " << k);
    CHECK(count_matching(r.out, progress) >= 1);
    CHECK(count_matching(r.out, progress) <= 7);
  }
  CHECK(count_matching(r.out, kEpochLine) == 3);

  std::vector<json::Value> m = read_metrics(base.out);
  REQUIRE(m.size() == 3);
  std::vector<std::string> epoch_lines;
  for (const std::string& l : lines_of(r.out))
    if (std::regex_match(l, kEpochLine)) epoch_lines.push_back(l);
  REQUIRE(epoch_lines.size() == 3);
  for (int k = 0; k < 3; ++k) {
    const json::Value& e = m[k];
    INFO("epoch " << k + 1 << ": " << json::dump(e));
    std::set<std::string> keys;
    for (const auto& [key, value] : json::as_object(e).items()) keys.insert(key);
    CHECK(keys == std::set<std::string>{"epoch",
                                        "epochs",
                                        "model",
                                        "device",
                                        "train_loss",
                                        "train_accuracy",
                                        "test_loss",
                                        "test_accuracy",
                                        "epoch_time_s",
                                        "eval_time_s",
                                        "samples_per_s",
                                        "loader_wait_share",
                                        "peak_memory_bytes",
                                        "lr",
                                        "batch_size",
                                        "threads",
                                        "workers",
                                        "pin_memory",
                                        "amp",
                                        "world_size"});
    CHECK(json::as_int(json::at(e, "epoch")) == k + 1);
    CHECK(json::as_int(json::at(e, "epochs")) == 3);
    CHECK(json::as_string(json::at(e, "model")) == "mlp");
    CHECK(json::as_string(json::at(e, "device")) == device);
    for (const char* acc : {"train_accuracy", "test_accuracy"}) {
      CHECK(json::as_double(json::at(e, acc)) > 0);
      CHECK(json::as_double(json::at(e, acc)) <= 1);
    }
    for (const char* loss : {"train_loss", "test_loss"}) {
      CHECK(std::isfinite(json::as_double(json::at(e, loss))));
      CHECK(json::as_double(json::at(e, loss)) > 0);
    }
    CHECK(json::as_double(json::at(e, "epoch_time_s")) > 0);
    CHECK(json::as_double(json::at(e, "eval_time_s")) > 0);
    CHECK(json::as_double(json::at(e, "samples_per_s")) > 0);
    CHECK(json::as_double(json::at(e, "loader_wait_share")) >= 0);
    CHECK(json::as_double(json::at(e, "loader_wait_share")) < 1);
    CHECK(json::as_int(json::at(e, "peak_memory_bytes")) > 0);
    CHECK(json::as_int(json::at(e, "batch_size")) == 64);
    CHECK(json::as_int(json::at(e, "threads")) == 1);
    CHECK(json::as_int(json::at(e, "workers")) == (on_cuda ? 2 : 0));
    CHECK(json::as_bool(json::at(e, "pin_memory")) == on_cuda);
    // 512 examples of whole batches: the mean over samples is a multiple of 1/512.
    CHECK(json::as_double(json::at(e, "train_accuracy")) * 512 ==
          std::round(json::as_double(json::at(e, "train_accuracy")) * 512));
    // The epoch's line shows the same numbers.
    std::smatch s;
    REQUIRE(std::regex_match(epoch_lines[k], s, kEpochLine));
    CHECK(s[1] == std::to_string(k + 1));
    CHECK(s[3] == fmt("%.4f", json::as_double(json::at(e, "train_loss"))));
    CHECK(s[4] == fmt("%.2f", 100 * json::as_double(json::at(e, "train_accuracy"))));
    CHECK(s[5] == fmt("%.4f", json::as_double(json::at(e, "test_loss"))));
    CHECK(s[6] == fmt("%.2f", 100 * json::as_double(json::at(e, "test_accuracy"))));
    CHECK(s[7] == (on_cuda ? "memory" : "RSS"));
  }
  for (int k = 1; k < 3; ++k) {
    CHECK(json::as_double(json::at(m[k], "train_loss")) < json::as_double(json::at(m[k - 1], "train_loss")));
    CHECK(json::as_double(json::at(m[k], "test_loss")) < json::as_double(json::at(m[k - 1], "test_loss")));
    CHECK(json::as_double(json::at(m[k], "lr")) < json::as_double(json::at(m[k - 1], "lr")));
  }
  CHECK(json::as_double(json::at(m[0], "lr")) < 0.001);
  CHECK(json::as_double(json::at(m[2], "lr")) == Approx(0).margin(1e-15));  // cosine: 0 after the last step
  check_no_tmp(base.out);
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(base.out)) files.insert(e.path().filename().string());
  CHECK(files == std::set<std::string>{"checkpoint.safetensors", "metrics.jsonl"});
}

TEST_CASE("tandem train: --seed decides the numbers; the default progress interval prints none", "[cli]") {
  if (!have_dataset()) return;
  const BaseRun& base = base_run();
  TempDir dir;
  Tandem same(cat({"train", "--epochs", "3", "--seed", "0", "--out", dir.file("same")}, kSmall));
  Result other = run(cat({"train", "--epochs", "3", "--seed", "1", "--out", dir.file("other")}, kSmall));
  Result r = same.finish();
  INFO(r);
  REQUIRE(r.exit_code == 0);
  REQUIRE(other.exit_code == 0);
  // 5 s between progress lines off a terminal: none in a run this short.
  CHECK(r.out.find("samples/s  loss") == std::string::npos);
  std::vector<json::Value> a = read_metrics(base.out), b = read_metrics(dir.file("same")),
                           c = read_metrics(dir.file("other"));
  REQUIRE(a.size() == 3);
  REQUIRE(b.size() == 3);
  REQUIRE(c.size() == 3);
  for (int k = 0; k < 3; ++k)
    for (const char* key : {"train_loss", "train_accuracy", "test_loss", "test_accuracy", "lr"}) {
      INFO(key << " of epoch " << k + 1);
      CHECK(json::as_double(json::at(b[k], key)) == json::as_double(json::at(a[k], key)));
      if (std::string(key) == "train_loss" || std::string(key) == "test_loss")
        CHECK(json::as_double(json::at(c[k], key)) != json::as_double(json::at(a[k], key)));
    }
  check_same_checkpoint(dir.file("same"), base.out);
}

TEST_CASE("tandem train: --optimizer --schedule --lr --workers --threads --device cpu", "[cli]") {
  if (!have_dataset()) return;
  TempDir dir;
  Tandem adamw(cat({"train", "--optimizer", "adamw", "--schedule", "onecycle", "--lr", "0.002", "--epochs", "2",
                    "--out", dir.file("adamw")},
                   kSmall));
  Result r = run(cat({"train", "--optimizer", "sgd", "--schedule", "none", "--lr", "0.05", "--epochs", "2", "--workers",
                      "2", "--threads", "2", "--device", "cpu", "--out", dir.file("sgd")},
                     kSmall));
  {
    INFO(r);
    REQUIRE(r.exit_code == 0);
    CHECK(has_line(r.out, "device       cpu"));
    CHECK(has_line(r.out, "optimizer    sgd lr 0.05 momentum 0.9"));
    CHECK(has_line(r.out, "threads      2"));
    CHECK(has_line(r.out, "loader       2 workers, pinned memory off, batches delivered to cpu"));
    CHECK(count_matching(r.out, kEpochLine) == 2);
    std::vector<json::Value> m = read_metrics(dir.file("sgd"));
    REQUIRE(m.size() == 2);
    for (const json::Value& e : m) {
      CHECK(json::as_double(json::at(e, "lr")) == 0.05);  // no schedule
      CHECK(json::as_string(json::at(e, "device")) == "cpu");
      CHECK(json::as_int(json::at(e, "workers")) == 2);
      CHECK(json::as_int(json::at(e, "threads")) == 2);
      CHECK(!json::as_bool(json::at(e, "pin_memory")));
    }
    CHECK(json::as_double(json::at(m[1], "train_loss")) < json::as_double(json::at(m[0], "train_loss")));
  }
  Result a = adamw.finish();
  {
    INFO(a);
    REQUIRE(a.exit_code == 0);
    CHECK(has_line(a.out, "optimizer    adamw lr 0.002 weight decay 0.01, one-cycle schedule (peak lr 0.002)"));
    std::vector<json::Value> m = read_metrics(dir.file("adamw"));
    REQUIRE(m.size() == 2);
    // One cycle: past its peak (0.002) by the middle; at the end below where
    // it started (0.002 / 25). The last value is PyTorch's after total_steps
    // steps, a step past the cycle's minimum, and is never used for a step.
    double mid = json::as_double(json::at(m[0], "lr")), end = json::as_double(json::at(m[1], "lr"));
    CHECK(mid < 0.002);
    CHECK(mid > 0.0002);
    CHECK(end > 0);
    CHECK(end < 0.002 / 25);
  }
}

TEST_CASE("tandem train --model cnn", "[cli]") {
  if (!have_dataset()) return;
  Result r = run({"train", "--model", "cnn", "--epochs", "1", "--train-examples", "128", "--test-examples", "128",
                  "--batch-size", "64"});
  INFO(r);
  REQUIRE(r.exit_code == 0);
  // conv 320 + bn 64 + conv 18,496 + bn 128 + linear 401,536 + linear 1,290
  CHECK(has_line(r.out, "model        CNN conv32-bn-pool, conv64-bn-pool, 3136-128-10, 421,834 parameters"));
  CHECK(has_line(r.out, "data         Fashion-MNIST (" + kFashion + "): 128 train, 128 test"));
  CHECK(has_line(r.out, "batches      64 a batch, 2 steps an epoch, 1 epochs"));
  CHECK(has_line(r.out, "threads      " + std::to_string(std::max(1u, std::thread::hardware_concurrency())) +
                            "  [default for cnn]"));
  CHECK(has_line(r.out, "checkpoints  none (--out DIR keeps a checkpoint and metrics after every epoch)"));
  CHECK(count_matching(r.out, kEpochLine) == 1);
  CHECK(has_line(r.out, "done: cnn on " + auto_device() + ", 1 epochs"));
}

TEST_CASE("tandem train: --device cuda and cuda:1 and --pin-memory on a (emulated) CUDA device", "[cli]") {
  if (!have_dataset() || !have_cuda()) return;
  TempDir dir;
  Tandem pinned(
      cat({"train", "--epochs", "1", "--device", "cuda:1", "--pin-memory", "--out", dir.file("pinned")}, kSmall));
  Result r = run(cat({"train", "--epochs", "1", "--device", "cuda", "--no-pin-memory"}, kSmall));
  {
    INFO(r);
    REQUIRE(r.exit_code == 0);
    std::string current = "cuda:" + std::to_string(cuda::current_device());
    CHECK(line_starting(r.out, "device       ").starts_with("device       " + current + " ("));
    CHECK(line_starting(r.out, "device       ").find("[auto") == std::string::npos);
    CHECK(has_line(r.out, "loader       2 workers, pinned memory off, batches delivered to " + current));
  }
  Result p = pinned.finish();
  INFO(p);
  REQUIRE(p.exit_code == 0);
  CHECK(line_starting(p.out, "device       ").starts_with("device       cuda:1 ("));
  if (cuda::is_emulated())
    CHECK(has_line(p.out,
                   "             emulated: host memory and the CPU kernels under a cuda tag "
                   "(TANDEM_EMULATE_CUDA)"));
  CHECK(has_line(p.out, "loader       2 workers, pinned memory on, batches delivered to cuda:1"));
  CHECK(has_line(p.out, "done: mlp on cuda:1, 1 epochs"));
  std::vector<json::Value> m = read_metrics(dir.file("pinned"));
  REQUIRE(m.size() == 1);
  CHECK(json::as_string(json::at(m[0], "device")) == "cuda:1");
  CHECK(json::as_bool(json::at(m[0], "pin_memory")));
  CHECK(std::regex_search(p.out, std::regex("peak memory [\\d.]+ (KiB|MiB)")));
}

TEST_CASE("tandem train --amp: bfloat16 on the cpu, float16 with loss scaling on cuda", "[cli][amp]") {
  if (!have_dataset()) return;
  TempDir dir;
  Result cpu = run(cat({"train", "--epochs", "2", "--device", "cpu", "--amp", "--out", dir.file("cpu")}, kSmall));
  {
    INFO(cpu);
    REQUIRE(cpu.exit_code == 0);
    CHECK(has_line(cpu.out, "precision    mixed: autocast to bfloat16 (no loss scaling needed)"));
    CHECK(line_starting(cpu.out, "epoch  2/2").find("scale") == std::string::npos);
    std::vector<json::Value> m = read_metrics(dir.file("cpu"));
    REQUIRE(m.size() == 2);
    CHECK(json::as_bool(json::at(m[1], "amp")));
    CHECK(json::as_string(json::at(m[1], "amp_dtype")) == "bfloat16");
    CHECK_FALSE(m[1].contains("loss_scale"));
    CHECK(json::as_double(json::at(m[1], "test_accuracy")) > 0.5);
  }
  // Resuming with another precision is refused, as any other setting.
  Result plain = run(cat({"train", "--epochs", "1", "--device", "cpu", "--out", dir.file("plain")}, kSmall));
  REQUIRE(plain.exit_code == 0);
  Result mismatch = run({"train", "--resume", dir.file("plain"), "--amp"});
  INFO(mismatch);
  CHECK(mismatch.exit_code == 2);
  CHECK_THAT(mismatch.err, Contains("--amp (given) differs from the run being resumed"));
  CHECK_THAT(mismatch.err, Contains(": without --amp)"));

  if (!have_cuda()) return;
  // Stopped after 12 of its 16 steps, then resumed: the scale comes back from the checkpoint.
  Result gpu = run(cat(
      {"train", "--epochs", "2", "--device", "cuda:0", "--amp", "--stop-after-steps", "12", "--out", dir.file("cuda")},
      kSmall));
  INFO(gpu);
  REQUIRE(gpu.exit_code == 0);
  gpu = run({"train", "--resume", dir.file("cuda"), "--device", "cuda:0"});
  REQUIRE(gpu.exit_code == 0);
  CHECK(has_line(gpu.out, "precision    mixed: autocast to float16, loss scaling (GradScaler, initial scale 65536)"));
  CHECK(std::regex_search(line_starting(gpu.out, "epoch  2/2"), std::regex("  scale \\d+ skipped \\d+$")));
  std::vector<json::Value> m = read_metrics(dir.file("cuda"));
  REQUIRE(m.size() == 2);
  CHECK(json::as_string(json::at(m[1], "amp_dtype")) == "float16");
  const double scale = json::as_double(json::at(m[1], "loss_scale"));
  CHECK(scale >= 1.0);
  CHECK(scale <= 65536.0);
  CHECK(json::as_int(json::at(m[1], "skipped_steps")) >= 0);
  CHECK(json::as_double(json::at(m[1], "test_accuracy")) > 0.5);
  // Bit for bit as the run left alone: the scaler's state and fused Adam's
  // step counts (kept on the device, saved on the cpu) come back exactly.
  Result whole =
      run(cat({"train", "--epochs", "2", "--device", "cuda:0", "--amp", "--out", dir.file("whole")}, kSmall));
  INFO(whole);
  REQUIRE(whole.exit_code == 0);
  check_same_checkpoint(dir.file("cuda"), dir.file("whole"));
}

TEST_CASE("tandem train --amp reaches the float32 accuracy within 0.5 points: the MLP and the CNN",
          "[cli][amp][accuracy]") {
  if (!have_dataset()) return;
    // The whole training set five times would take most of an hour on a
    // simulated GPU, and many minutes under the sanitizers.
#if defined(__SANITIZE_ADDRESS__)
  WARN("skipped under AddressSanitizer: too slow for the whole training set (the cpu and emulated suites run it)");
  return;
#endif
  if (cuda::is_simulated()) {
    WARN("skipped on simulated devices: too slow for the whole training set (the emulated suite runs it on cuda)");
    return;
  }
  // The suite's device: the cpu (bfloat16) or cuda:0, emulated here or a GPU
  // (float16 with loss scaling). Same seed, data and thread count (1, so
  // that a machine's result does not depend on its cores); only the
  // precision differs. The MLP on the whole set for 5 epochs; the CNN for 1
  // epoch on the first 10,000 examples (the whole set takes minutes on these
  // cpus). Mixed precision must not lose more than 0.5 points; it may gain:
  // the two runs part ways after the first rounding, and end within a few
  // tenths of a point of each other either way.
  const std::string device = auto_device();
  struct Job {
    const char* name;
    Args flags;
    double floor;  // a trained model, not chance
  } jobs[] = {{"mlp", {"--epochs", "5"}, 85},
              {"cnn", {"--model", "cnn", "--epochs", "1", "--train-examples", "10000"}, 80}};
  TempDir dir;
  for (const Job& job : jobs) {
    double accuracy[2];
    for (int amp = 0; amp < 2; ++amp) {
      const std::string out = dir.file(std::string(job.name) + (amp ? "-amp" : "-fp32"));
      Args args = cat({"train", "--device", device, "--threads", "1", "--out", out}, job.flags);
      if (amp) args.push_back("--amp");
      Result r = run(args, long_run());
      INFO(r);
      REQUIRE(r.exit_code == 0);
      const std::vector<json::Value> m = read_metrics(out);
      REQUIRE(!m.empty());
      accuracy[amp] = 100 * json::as_double(json::at(m.back(), "test_accuracy"));
    }
    INFO(job.name << " on " << device << ": float32 " << accuracy[0] << "%, --amp " << accuracy[1] << "%");
    CHECK(accuracy[1] >= accuracy[0] - 0.5);
    CHECK(accuracy[0] > job.floor);
  }
}

// ---------------------------------------------------------------- resume, Ctrl-C

TEST_CASE("tandem train: --stop-after-steps and --resume continue bit for bit", "[cli]") {
  if (!have_dataset()) return;
  TempDir dir;
  const Args flags = cat({"--epochs", "3"}, kSmall);
  std::string a = dir.file("a"), b = dir.file("b"), c = dir.file("c");
  Tandem uninterrupted(cat({"train", "--out", a}, flags));

  // B stops at step 5 of epoch 1, then crosses into epoch 2 (6 more steps), then finishes.
  Result b1 = run(cat({"train", "--out", b, "--stop-after-steps", "5"}, flags));
  {
    INFO(b1);
    REQUIRE(b1.exit_code == 0);
    CHECK(has_line(b1.out, "Stopped (--stop-after-steps) at step 5 of epoch 1."));
    CHECK(has_line(b1.out, "Checkpoint written: " + b + "/checkpoint.safetensors"));
    CHECK(has_line(b1.out, "Resume with: tandem train --resume " + b));
    CHECK(count_matching(b1.out, kEpochLine) == 0);
    CHECK(read_metrics(b).empty());
    check_no_tmp(b);
  }
  check_usage_error(run({"train", "--resume", b, "--lr", "0.01"}), "train",
                    {"--lr 0.01 differs from the run being resumed (" + b + "/checkpoint.safetensors: 0.001)"});
  // A flag given again with the run's value is accepted.
  Result b2 = run({"train", "--resume", b, "--batch-size", "64", "--stop-after-steps", "6"});
  {
    INFO(b2);
    REQUIRE(b2.exit_code == 0);
    CHECK(has_line(b2.out, "resuming     after epoch 0 and 5 steps of the next"));
    CHECK(has_line(b2.out, "threads      1  [the run's]"));
    CHECK(has_line(b2.out, "checkpoints  " + b + "/checkpoint.safetensors, " + b + "/metrics.jsonl"));
    CHECK(count_matching(b2.out, kEpochLine) == 1);
    CHECK(has_line(b2.out, "Stopped (--stop-after-steps) at step 3 of epoch 2."));
    CHECK(read_metrics(b).size() == 1);
  }
  Result b3 = run({"train", "--resume", b + "/checkpoint.safetensors"});  // a file works as well as its folder
  {
    INFO(b3);
    REQUIRE(b3.exit_code == 0);
    CHECK(has_line(b3.out, "resuming     after epoch 1 and 3 steps of the next"));
    CHECK(count_matching(b3.out, kEpochLine) == 2);
    CHECK(has_line(b3.out, "done: mlp on " + auto_device() + ", 3 epochs"));
  }
  // C stops exactly at the end of epoch 1.
  Result c1 = run(cat({"train", "--out", c, "--stop-after-steps", "8"}, flags));
  {
    INFO(c1);
    REQUIRE(c1.exit_code == 0);
    CHECK(has_line(c1.out, "Stopped (--stop-after-steps) after epoch 1."));
    CHECK(has_line(c1.out, "Resume with: tandem train --resume " + c));
    CHECK(count_matching(c1.out, kEpochLine) == 1);
    CHECK(read_metrics(c).size() == 1);
  }
  // Resumed into another folder that holds a run of its own: refused.
  check_usage_error(run({"train", "--resume", c, "--out", b}), "train",
                    {"--out " + b + " already holds a run (" + b + "/checkpoint.safetensors)"});
  // As a run stopped between its metrics line and its checkpoint leaves it,
  // plus a damaged line: the resumed run drops both.
  {
    std::ofstream metrics(c + "/metrics.jsonl", std::ios::app);
    metrics << "{\"epoch\":2,\"stale\":true}\n{\"epoch\":\n";
  }
  Result c2 = run({"train", "--resume", c});
  {
    INFO(c2);
    REQUIRE(c2.exit_code == 0);
    CHECK(has_line(c2.out, "resuming     after epoch 1"));
    CHECK(count_matching(c2.out, kEpochLine) == 2);
    CHECK(read_file(c + "/metrics.jsonl").find("stale") == std::string::npos);
  }

  Result ra = uninterrupted.finish();
  INFO(ra);
  REQUIRE(ra.exit_code == 0);
  check_same_checkpoint(b, a);
  check_same_checkpoint(c, a);
  std::vector<json::Value> ma = read_metrics(a);
  REQUIRE(ma.size() == 3);
  for (const std::string& run_dir : {b, c}) {
    std::vector<json::Value> m = read_metrics(run_dir);
    REQUIRE(m.size() == 3);
    for (int k = 0; k < 3; ++k) {
      INFO(run_dir << " epoch " << k + 1);
      CHECK(json::as_int(json::at(m[k], "epoch")) == k + 1);
      CHECK(json::as_double(json::at(m[k], "train_accuracy")) == json::as_double(json::at(ma[k], "train_accuracy")));
      CHECK(json::as_double(json::at(m[k], "test_loss")) == json::as_double(json::at(ma[k], "test_loss")));
      CHECK(json::as_double(json::at(m[k], "test_accuracy")) == json::as_double(json::at(ma[k], "test_accuracy")));
      // Summed in another order across the stop: equal to rounding.
      CHECK(json::as_double(json::at(m[k], "train_loss")) ==
            Approx(json::as_double(json::at(ma[k], "train_loss"))).epsilon(1e-12));
    }
    check_no_tmp(run_dir);
  }

  std::string finished = read_file(a + "/checkpoint.safetensors");
  Result done = run({"train", "--resume", a});
  INFO(done);
  CHECK(done.exit_code == 0);
  CHECK(has_line(done.out, "The run in " + a + " finished all 3 epochs; nothing to resume (tandem eval --checkpoint " +
                               a + "/checkpoint.safetensors)"));
  CHECK(read_file(a + "/checkpoint.safetensors") == finished);
  CHECK(read_metrics(a).size() == 3);
}

TEST_CASE("tandem train: --resume of a file named from its own folder with other --threads", "[cli]") {
  if (!have_dataset()) return;
  TempDir dir;
  std::string out = dir.file("run");
  Result stopped = run(cat({"train", "--epochs", "2", "--out", out, "--stop-after-steps", "3"}, kSmall));
  {
    INFO(stopped);
    REQUIRE(stopped.exit_code == 0);
  }
  Result r = run({"train", "--resume", "checkpoint.safetensors", "--threads", "2"}, test::in_folder(out));
  INFO(r);
  REQUIRE(r.exit_code == 0);
  CHECK(has_line(r.out, "resuming     after epoch 0 and 3 steps of the next"));
  CHECK(has_line(r.out, "checkpoints  ./checkpoint.safetensors, ./metrics.jsonl"));
  CHECK(has_line(r.out, "threads      2"));
  CHECK_THAT(line_starting(r.out, "             note: the run used 1 thread"),
             Contains("with 2 the CPU kernels add up in another order, so the result will not be bit for bit"));
  CHECK(count_matching(r.out, kEpochLine) == 2);
  std::vector<json::Value> m = read_metrics(out);
  REQUIRE(m.size() == 2);
  CHECK(json::as_int(json::at(m[1], "threads")) == 2);
  CHECK(nn::Checkpoint::load(out + "/checkpoint.safetensors", Device(kCPU)).get_int("epoch") == 2);
  check_no_tmp(out);
}

TEST_CASE("tandem train: Ctrl-C stops with a checkpoint that resumes bit for bit", "[cli]") {
  if (!have_dataset()) return;
  TempDir dir;
  // The Ctrl-C must land in epoch 1, which must be long enough for that. The
  // whole training set (469 steps an epoch) takes under a second an epoch on the
  // cpu (a few seconds under the sanitizers); on a simulated GPU, which runs
  // each kernel thread by thread on the host, 64 steps take 20 s under the
  // sanitizers (400 examples a second: the whole set, resumed and uninterrupted
  // side by side, outran the 300 s watchdog on a slow 2-core machine).
  Args flags = {"--epochs", "2", "--test-examples", "256"};
  if (cuda::is_simulated()) flags = cat(flags, {"--train-examples", "8192"});
  std::string u = dir.file("uninterrupted"), i = dir.file("interrupted");
  Tandem uninterrupted(cat({"train", "--out", u}, flags), long_run());
  Tandem interrupted(cat({"train", "--out", i, "--progress-interval", "0.05"}, flags), long_run());
  interrupted.wait_for("epoch 1/2:");
  interrupted.interrupt();
  Result r = interrupted.finish();
  {
    INFO(r);
    REQUIRE(r.exit_code == 130);
    CHECK(std::regex_search(r.out, std::regex("\nStopped by Ctrl-C at step \\d+ of epoch 1\\.\n")));
    CHECK(has_line(r.out, "Checkpoint written: " + i + "/checkpoint.safetensors"));
    CHECK(has_line(r.out, "Resume with: tandem train --resume " + i));
    CHECK_THAT(r.err, Contains("Ctrl-C: stopping at the end of this step to write a checkpoint"));
    CHECK(r.err.find("error") == std::string::npos);
    CHECK(fs::exists(i + "/checkpoint.safetensors"));
    CHECK(read_metrics(i).empty());
    check_no_tmp(i);
  }
  Result resumed = run({"train", "--resume", i}, long_run());
  {
    INFO(resumed);
    REQUIRE(resumed.exit_code == 0);
    CHECK(std::regex_search(resumed.out, std::regex("\nresuming     after epoch 0 and \\d+ steps of the next\n")));
    CHECK(count_matching(resumed.out, kEpochLine) == 2);
  }
  Result ru = uninterrupted.finish();
  INFO(ru);
  REQUIRE(ru.exit_code == 0);
  check_same_checkpoint(i, u);
  std::vector<json::Value> mi = read_metrics(i), mu = read_metrics(u);
  REQUIRE(mi.size() == 2);
  REQUIRE(mu.size() == 2);
  for (int k = 0; k < 2; ++k)
    CHECK(json::as_double(json::at(mi[k], "test_accuracy")) == json::as_double(json::at(mu[k], "test_accuracy")));
}

TEST_CASE("tandem train: Ctrl-C twice exits at once and leaves no partial file", "[cli]") {
  if (!have_dataset()) return;
  TempDir dir;
  std::string out = dir.file("run");
  // Steps of 8192 examples take long enough for the second Ctrl-C to land in one.
  Tandem c({"train", "--epochs", "2", "--batch-size", "8192", "--test-examples", "256", "--out", out,
            "--progress-interval", "0.001"},
           long_run());
  c.wait_for("epoch 1/2:");
  c.interrupt();
  c.wait_for("Ctrl-C: stopping at the end of this step", /*in_stderr=*/true);  // the first is taken: send another
  c.interrupt();
  Result r = c.finish();
  INFO(r);
  CHECK(r.exit_code == 130);
  // "...; the last checkpoint written stays as it was", or, when it came
  // during a write, "... now that the checkpoint being written is whole".
  CHECK_THAT(r.err, Contains("\nCtrl-C again: exiting now"));
  check_no_tmp(out);
  // A checkpoint written when the second Ctrl-C came is whole.
  if (fs::exists(out + "/checkpoint.safetensors"))
    CHECK(nn::Checkpoint::load(out + "/checkpoint.safetensors", Device(kCPU)).all_tensors().size() > 6);
}

TEST_CASE("tandem train: started with SIGINT ignored (nohup) it keeps it so", "[cli]") {
  if (!have_dataset()) return;
  RunOptions nohup;
  nohup.ignore_sigint = true;
  Tandem c(cat({"train", "--epochs", "3", "--progress-interval", "0.001"}, kSmall), nohup);
  c.wait_for("epoch 1/3:");
  c.interrupt();
  Result r = c.finish();
  INFO(r);
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("Ctrl-C") == std::string::npos);
  CHECK(count_matching(r.out, kEpochLine) == 3);
}

TEST_CASE("tandem train on a terminal: one line redrawn with a bar", "[cli]") {
  if (!have_dataset()) return;
  Result r = run(cat({"train", "--epochs", "2", "--progress-interval", "0.001"}, kSmall), on_terminal());
  INFO(r);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find('\r') != std::string::npos);
  CHECK_THAT(r.out, Contains("\x1b[K"));
  CHECK(std::regex_search(r.out, std::regex(R"(\repoch 1/2 \[#+\.+\] +\d+% [\d,]+/512  )")));
  // The line is cleared before each epoch's summary.
  CHECK_THAT(r.out, Contains("\r\x1b[Kepoch  1/2  train loss "));
  CHECK_THAT(r.out, Contains("\r\x1b[Kepoch  2/2  train loss "));
  CHECK(r.out.find("epoch 1/2: ") == std::string::npos);  // no plain progress lines
}

// ---------------------------------------------------------------- eval

TEST_CASE("tandem eval: the loss and the accuracy and a per-class table", "[cli]") {
  if (!have_dataset()) return;
  const BaseRun& base = base_run();
  std::string ckpt = base.out + "/checkpoint.safetensors";
  std::vector<json::Value> m = read_metrics(base.out);
  REQUIRE(m.size() == 3);
  double accuracy = json::as_double(json::at(m.back(), "test_accuracy"));
  // What the run's last epoch measured, as eval prints it.
  auto check_eval = [&](const Result& r, const std::string& device_line, bool same_batches) {
    INFO(r);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(has_line(r.out, "checkpoint  " + ckpt + ": mlp after 3 of 3 epochs"));
    CHECK(line_starting(r.out, "device      ").starts_with(device_line));
    CHECK(has_line(r.out, "data        Fashion-MNIST test set, 256 examples (" + kFashion + ")"));
    if (same_batches)
      CHECK(has_line(r.out, "test loss   " + fmt("%.4f", json::as_double(json::at(m.back(), "test_loss")))));
    CHECK(has_line(r.out, "accuracy    " + fmt("%.2f", 100 * accuracy) + "% (" +
                              std::to_string(std::llround(accuracy * 256)) + " of 256)"));
    CHECK(has_line(r.out, "class         accuracy  examples"));
    int64_t examples = 0;
    double correct = 0;
    for (const char* name : data::FashionMNIST::kClasses) {
      std::string line = line_starting(r.out, name + std::string(" "));
      INFO(name);
      std::smatch s;
      REQUIRE(std::regex_match(line, s, std::regex(R"(.{12} +(\d+\.\d\d)% +(\d+))")));
      examples += std::stoll(s[2]);
      correct += std::stod(s[1]) / 100 * std::stod(s[2]);
    }
    CHECK(examples == 256);
    CHECK(correct == Approx(accuracy * 256).margin(0.1));
  };
  check_eval(run({"eval", "--checkpoint", ckpt, "--device", "cpu"}), "device      cpu", true);
  check_eval(run({"eval", "--checkpoint", ckpt, "--device", "cpu", "--batch-size", "100", "--threads", "2"}),
             "device      cpu", false);
  if (cuda::is_emulated()) {
    // Trained on cuda:0 (auto), evaluated where there is no CUDA device.
    CHECK(json::as_string(json::at(m.back(), "device")) == "cuda:0");
    check_eval(run({"eval", "--checkpoint", ckpt}, without_env({"TANDEM_EMULATE_CUDA"})),
               "device      cpu (auto: no CUDA device", true);
    check_eval(run({"eval", "--checkpoint", ckpt, "--device", "cuda:1"}), "device      cuda:1 (", true);
  } else {
    check_eval(run({"eval", "--checkpoint", ckpt}), "device      " + auto_device(), true);
  }
}

TEST_CASE("tandem train and eval --data: a copy of the dataset is MNIST-layout data with digits", "[cli]") {
  if (!have_dataset()) return;
  TempDir dir;
  std::string data = copy_dataset(dir, "copy");
  std::string out = dir.file("run");
  Result r = run(cat({"train", "--data", data, "--epochs", "1", "--out", out}, kSmall));
  {
    INFO(r);
    REQUIRE(r.exit_code == 0);
    CHECK(has_line(r.out, "data         MNIST-layout data (" + data + "): 512 train, 256 test"));
  }
  auto check_digits = [&](const Result& e, const std::string& examples) {
    INFO(e);
    REQUIRE(e.exit_code == 0);
    CHECK(has_line(e.out, "data        MNIST-layout data test set, " + examples + " examples (" + data + ")"));
    for (int k = 0; k < 10; ++k) CHECK(line_starting(e.out, std::to_string(k) + "     ") != "");
    CHECK(e.out.find("T-shirt/top") == std::string::npos);
  };
  // The run's own data and test subset.
  check_digits(run({"eval", "--checkpoint", out + "/checkpoint.safetensors", "--device", "cpu"}), "256");
  // Another model's checkpoint on --data: its whole test set.
  check_digits(
      run({"eval", "--checkpoint", base_run().out + "/checkpoint.safetensors", "--data", data, "--device", "cpu"}),
      "10,000");
}

TEST_CASE("tandem train --plot draws metrics.png (or says why not)", "[cli]") {
  if (!have_dataset()) return;
  TempDir dir;
  std::string out = dir.file("run");
  Result r = run(cat({"train", "--epochs", "2", "--out", out, "--plot"}, kSmall));
  INFO(r);
  REQUIRE(r.exit_code == 0);
  // The Pythons tandem tries, in its order.
  bool matplotlib = false;
  const char* env = std::getenv("TANDEM_PYTHON");
  for (std::string py :
       {std::string(env != nullptr ? env : ""), std::string("python3"), std::string("/usr/bin/python3")})
    if (!py.empty() && std::system(("'" + py + "' -c 'import matplotlib' >/dev/null 2>&1").c_str()) == 0) {
      matplotlib = true;
      break;
    }
  if (matplotlib) {
    CHECK(r.out.find(out + "/metrics.png") != std::string::npos);  // the script says what it wrote
    REQUIRE(fs::exists(out + "/metrics.png"));
    CHECK(read_file(out + "/metrics.png").starts_with("\x89PNG\r\n"));
  } else {
    CHECK(line_starting(r.out, "--plot: ").find("the metrics are in " + out + "/metrics.jsonl") != std::string::npos);
    CHECK(!fs::exists(out + "/metrics.png"));
  }
  check_no_tmp(out);
}

// ---------------------------------------------------------------- distributed

TEST_CASE("tandem train --nproc-per-node 2: two ranks, the one-process numbers, resume and Ctrl-C",
          "[cli][distributed]") {
  if (!have_dataset()) return;
  TempDir dir;
  // The cpu, or cuda:LOCAL_RANK where there are two (emulated) GPUs; a
  // simulated one runs too slowly for the epochs below.
  const bool on_cuda = have_cuda() && cuda::device_count() >= 2 && !cuda::is_simulated();
  const Args device = {"--device", on_cuda ? "cuda" : "cpu"};
  const Args common = {"--epochs", "2", "--train-examples", "2048", "--test-examples", "512", "--threads", "1"};
  const Args flags = cat(common, device);
  std::string one = dir.file("one"), two = dir.file("two"), stopped = dir.file("stopped");
  Result r1 = run(cat(cat({"train", "--out", one}, common), {"--device", on_cuda ? "cuda:0" : "cpu"}), long_run());
  Result r2 = run(cat({"train", "--nproc-per-node", "2", "--out", two}, flags), long_run());
  {
    INFO(r1 << r2);
    REQUIRE(r1.exit_code == 0);
    REQUIRE(r2.exit_code == 0);
    // Rank 0 alone prints: one settings table, one line per epoch.
    CHECK(count_matching(r2.out, kEpochLine) == 2);
    CHECK(has_line(r2.out, "batches      128 a batch (2 x 64), 16 steps an epoch, 2 epochs"));
    CHECK_THAT(r2.out, Contains(on_cuda ? "distributed  2 ranks (gloo): rank 0 cuda:0, rank 1 cuda:1"
                                        : "distributed  2 ranks (gloo): rank 0 cpu, rank 1 cpu"));
    CHECK(r2.err.find("error") == std::string::npos);
  }
  // The same global batches (DistributedSampler splits the one-process
  // order), averaged over the ranks: the numbers of one process, up to the
  // order of the sums.
  std::vector<json::Value> m1 = read_metrics(one), m2 = read_metrics(two);
  REQUIRE(m1.size() == 2);
  REQUIRE(m2.size() == 2);
  for (int k = 0; k < 2; ++k) {
    INFO("epoch " << k + 1);
    CHECK(json::as_double(json::at(m2[k], "train_loss")) ==
          Approx(json::as_double(json::at(m1[k], "train_loss"))).epsilon(1e-4));
    CHECK(std::abs(json::as_double(json::at(m2[k], "test_accuracy")) -
                   json::as_double(json::at(m1[k], "test_accuracy"))) <= 0.003);
    CHECK(json::as_int(json::at(m2[k], "world_size")) == 2);
    CHECK(json::as_string(json::at(m2[k], "backend")) == "gloo");
    CHECK(json::as_double(json::at(m2[k], "allreduce_s")) > 0);
    CHECK(json::as_double(json::at(m2[k], "allreduce_exposed_s")) >= 0);
  }
  // Stopped mid-epoch, then resumed: bit for bit the uninterrupted run.
  Result s1 =
      run(cat({"train", "--nproc-per-node", "2", "--out", stopped, "--stop-after-steps", "5"}, flags), long_run());
  {
    INFO(s1);
    REQUIRE(s1.exit_code == 0);
    // Every rank stops at the same step, one after the one asked (the ranks agree during the next step).
    CHECK(has_line(s1.out, "Stopped (--stop-after-steps) at step 6 of epoch 1."));
  }
  check_usage_error(run({"train", "--resume", stopped}), "train",
                    {"had 2 rank(s), this one 1: resume it with --nproc-per-node 2"});
  Result s2 = run(cat({"train", "--nproc-per-node", "2", "--resume", stopped}, device), long_run());
  {
    INFO(s2);
    REQUIRE(s2.exit_code == 0);
  }
  check_same_checkpoint(stopped, two);
  // Ctrl-C to the launcher reaches every rank; they stop at one step and
  // rank 0 writes the checkpoint.
  std::string c = dir.file("ctrl-c");
  Tandem interrupted(
      cat({"train", "--nproc-per-node", "2", "--out", c, "--progress-interval", "0.05", "--epochs", "50"}, device),
      long_run());
  interrupted.wait_for("epoch 1/50:");
  interrupted.interrupt();
  Result ri = interrupted.finish();
  {
    INFO(ri);
    REQUIRE(ri.exit_code == 130);
    CHECK(std::regex_search(ri.out, std::regex("\nStopped by Ctrl-C at step \\d+ of epoch \\d+\\.\n")));
    CHECK(fs::exists(c + "/checkpoint.safetensors"));
    CHECK(ri.err.find("error") == std::string::npos);
  }
}

TEST_CASE("tandem train --nproc-per-node: the refused settings", "[cli][distributed]") {
  std::vector<Result> rs = run_all({{"train", "--nproc-per-node", "3"},
                                    {"train", "--nproc-per-node", "2", "--device", "cuda:0"},
                                    {"train", "--nproc-per-node", "0"},
                                    {"train", "--nproc-per-node", "2", "--backend", "nccl"}});
  check_usage_error(rs[0], "train",
                    {"--batch-size 128 does not divide among 3 ranks: the global batch is split evenly, so give a "
                     "multiple of 3 (such as 126 or 129)"});
  check_usage_error(rs[1], "train",
                    {"--device cuda:0 with 2 local ranks would put every rank on cuda:0: each process owns one "
                     "device. Use --device cuda (rank r takes cuda:LOCAL_RANK) or --device cpu"});
  check_usage_error(rs[2], "train", {"--nproc-per-node"});
  check_usage_error(rs[3], "train", {"--backend nccl: the nccl backend is not in this Tandem yet; use gloo"});
}
