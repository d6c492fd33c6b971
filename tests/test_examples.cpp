// Runs every program of examples/ and checks what it prints: the exact
// errors the tutorial teaches (and quotes: docs/tutorial*.md must hold each
// device error line as printed), that each fix works, and that the training
// template trains. Each example runs in a fresh folder under this test's
// environment: in the cpu suite an example turns on one emulated device
// itself where there is no GPU; the emulated suite sets TANDEM_EMULATE_CUDA=2.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/allocator.h"
#include "tests/helpers.h"

using Catch::Contains;

namespace {

struct Output {
  int exit_code = -1;
  std::string text;
  std::vector<std::string> lines;

  bool has(const std::string& line) const {
    for (const auto& l : lines)
      if (l == line) return true;
    return false;
  }
  // The first line starting with prefix ("" when there is none).
  std::string line_starting(const std::string& prefix) const {
    for (const auto& l : lines)
      if (l.starts_with(prefix)) return l;
    return "";
  }
};

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Runs `exe args` in dir, stdout and stderr together. One CPU thread unless
// the caller set OMP_NUM_THREADS: the examples' models are small, and on a
// machine of few cores running other tests, threads cost them far more than
// they give (4x on the 2-core build machines).
Output run_in(const std::string& dir, const std::string& exe, const std::string& args = "") {
  std::string command = "cd '" + dir + "' && OMP_NUM_THREADS=\"${OMP_NUM_THREADS:-1}\" '" + exe + "' " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  Output out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.text.append(buf, n);
  int status = pclose(pipe);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  out.lines = split_lines(out.text);
  return out;
}

Output run_example(const std::string& exe, const std::string& args = "") {
  tandem::test::TempDir dir;
  return run_in(dir.str(), exe, args);
}

// "  input is on cpu: created by tandem::rand at ../examples/x.cpp:17" ->
// "... at examples/x.cpp:17": the build folder's place does not matter.
std::string normalise(const std::string& line) {
  size_t at = line.rfind(" at ");
  size_t examples = line.find("examples/", at == std::string::npos ? 0 : at);
  if (at == std::string::npos || examples == std::string::npos) return line;
  return line.substr(0, at + 4) + line.substr(examples);
}

// A line of `out` that starts with origin + " at " and points at a line of
// examples/<file>.
void check_origin(const Output& out, const std::string& origin, const std::string& file) {
  std::string line = out.line_starting(origin + " at ");
  INFO("looking for: " << origin << " at .../examples/" << file << ":<line>");
  REQUIRE(!line.empty());
  std::string where = normalise(line).substr(origin.size() + 4);
  const size_t digits = file.size() + 10;  // after "examples/<file>:"
  REQUIRE(where.starts_with("examples/" + file + ":"));
  REQUIRE(where.size() > digits);
  REQUIRE(where.find_first_not_of("0123456789", digits) == std::string::npos);
}

// The same-device error as examples::shows_error prints it: the type, then
// PyTorch's line naming the argument and the op, where each tensor is, and
// Tandem's fix.
void check_device_error(const Output& out, const std::string& first_line, const std::string& origin_a,
                        const std::string& origin_b, const std::string& file, const std::string& bad,
                        const std::string& good, bool module_tensor = false) {
  CHECK(out.has("tandem::DeviceError:"));
  CHECK(out.has(first_line));
  check_origin(out, origin_a, file);
  check_origin(out, origin_b, file);
  if (module_tensor) {
    CHECK(out.has("Tandem never moves tensors between devices by itself. '" + bad +
                  "' is a module's buffer: move "
                  "the module that holds it, e.g. module->to(" +
                  good +
                  ".device()) (for a loss with class weights, "
                  "the loss module too), and move each batch with .to(device)."));
  } else {
    CHECK(out.has("Tandem never moves tensors between devices by itself. Move one of them first, e.g. " + bad + " = " +
                  bad + ".to(" + good + ".device()), or create both on the same device (for a model, call " +
                  "model->to(device) and move each batch with .to(device))."));
  }
}

const std::string kMismatch =
    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! ";

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every line of a device error the example printed is quoted, as printed,
// in both tutorials.
void check_quoted_in_tutorials(const Output& out) {
  for (const char* doc : {"docs/tutorial.md", "docs/tutorial.zh.md"}) {
    std::vector<std::string> doc_lines = split_lines(read_file(std::string(TANDEM_SOURCE_DIR) + "/" + doc));
    for (std::string& l : doc_lines) l = normalise(l);
    bool in_error = false;
    for (const std::string& line : out.lines) {
      if (line == "tandem::DeviceError:") {
        in_error = true;
        continue;
      }
      if (in_error && (line.empty() || line.starts_with("---"))) in_error = false;
      if (!in_error) continue;
      INFO(doc << " should quote this line of the example's output (copy it from a run):\n" << line);
      CHECK(std::find(doc_lines.begin(), doc_lines.end(), normalise(line)) != doc_lines.end());
    }
  }
}

bool emulated(const Output& out) { return !out.line_starting("note: no GPU in use: cuda:0 is emulated").empty(); }

}  // namespace

TEST_CASE("mistake_cpu_batch: a model on cuda fed a cpu batch", "[examples]") {
  Output out = run_example(EXAMPLE_MISTAKE_CPU_BATCH);
  INFO(out.text);
  REQUIRE(out.exit_code == 0);
  check_device_error(out, kMismatch + "(when checking argument 'input' of linear)",
                     "  weight is on cuda:0: parameter '0.weight', moved by Module::to()",
                     "  input is on cpu: created by tandem::rand", "mistake_cpu_batch.cpp", "input", "weight");
  CHECK(out.has("ok: logits [64, 10] on cuda:0"));
  check_quoted_in_tutorials(out);
}

TEST_CASE("mistake_eval_batch: an evaluation loop that forgot to move its batch", "[examples]") {
  Output out = run_example(EXAMPLE_MISTAKE_EVAL_BATCH);
  INFO(out.text);
  REQUIRE(out.exit_code == 0);
  check_device_error(out, kMismatch + "(when checking argument 'input' of linear)",
                     "  weight is on cuda:0: parameter '1.weight', moved by Module::to()",
                     "  input is on cpu: a batch, created by DataLoader", "mistake_eval_batch.cpp", "input", "weight");
  CHECK(!out.line_starting("ok: evaluated 512 examples on cuda:0").empty());
  check_quoted_in_tutorials(out);
}

TEST_CASE("mistake_cpu_tensor: a factory without a device, class weights left on the cpu", "[examples]") {
  Output out = run_example(EXAMPLE_MISTAKE_CPU_TENSOR);
  INFO(out.text);
  REQUIRE(out.exit_code == 0);
  check_device_error(out, kMismatch + "(when checking argument 'other' of add)",
                     "  self is on cuda:0: created by tandem::rand",
                     "  other is on cpu: computed by mul from a tensor created by tandem::randn",
                     "mistake_cpu_tensor.cpp", "other", "self");
  CHECK(out.has("ok: noisy images on cuda:0"));
  check_device_error(out, kMismatch + "(when checking argument 'weight' of cross_entropy)",
                     "  input is on cuda:0: computed by add from a tensor created by tandem::rand",
                     "  weight is on cpu: buffer 'weight', created by tandem::ones", "mistake_cpu_tensor.cpp", "weight",
                     "input", /*module_tensor=*/true);
  CHECK(!out.line_starting("ok: weighted loss ").empty());
  check_quoted_in_tutorials(out);
}

TEST_CASE("mistake_checkpoint: saved on cuda, loaded where there is no GPU", "[examples]") {
  Output out = run_example(EXAMPLE_MISTAKE_CHECKPOINT);
  INFO(out.text);
  REQUIRE(out.exit_code == 0);
  CHECK(out.has("saved checkpoint.safetensors from cuda:0"));
  CHECK(out.has("(a new process with no GPU: cuda::is_available() is false)"));
  CHECK(out.has("tandem::DeviceError:"));
  // The reason in the parentheses depends on the machine: no driver, no
  // device, or a build without CUDA.
  std::string line = out.line_starting("load_file: ");
  CHECK(
      line.starts_with("load_file: 'checkpoint.safetensors': tensor 'model.0.weight' was saved from cuda:0. "
                       "Attempting to deserialize object on a CUDA device but CUDA is not available ("));
  CHECK(
      line.ends_with("). If you are running on a CPU-only machine, pass map_location to load the tensors on "
                     "the cpu: map_location = Device(\"cpu\")"));
  CHECK(out.has("ok: loaded epoch 1, model on cpu"));
}

TEST_CASE("mistake_oom: a batch too large, and the fixes", "[examples]") {
  Output out = run_example(EXAMPLE_MISTAKE_OOM);
  INFO(out.text);
  REQUIRE(out.exit_code == 0);
  CHECK(out.has("tandem::OutOfMemoryError:"));
  std::string line = out.line_starting("CUDA out of memory. ");
  CHECK(line.starts_with("CUDA out of memory. Tried to allocate "));
  CHECK_THAT(line, Contains(" on cuda:0 ("));
  CHECK(
      line.ends_with(". Tandem already gave its cached blocks back and retried. Use a smaller batch, run "
                     "evaluation under NoGradGuard, free tensors you no longer need, or call cuda::empty_cache() "
                     "where other programs share the GPU"));
  const char* cap = std::getenv("TANDEM_EMULATE_CUDA_MEMORY");
  if (emulated(out) && (cap == nullptr || std::string(cap) == "256M")) {
    // The example caps an emulated device at 256 MiB: the same numbers everywhere.
    CHECK(out.has("device memory 256 MiB; a batch of 2675 images needs 256 MiB for the convolution's output alone"));
    CHECK(
        line.starts_with("CUDA out of memory. Tried to allocate 256.01 MiB on cuda:0 (emulated; capacity set by "
                         "TANDEM_EMULATE_CUDA_MEMORY; 256.00 MiB total capacity; "));
  }
  CHECK(!out.line_starting("ok: a batch of 256 trains").empty());
  CHECK(!out.line_starting("ok: the accumulated gradient is the whole batch's (differences below 1e-5)").empty());
  CHECK(!out.line_starting("ok: holding the logits of 256 images takes ").empty());
}

TEST_CASE("exercise_spot_the_bug: the loop that forgot to move its batch", "[examples]") {
  Output out = run_example(EXAMPLE_EXERCISE_SPOT_THE_BUG);
  INFO(out.text);
  REQUIRE(out.exit_code == 0);
  check_device_error(out, kMismatch + "(when checking argument 'input' of linear)",
                     "  weight is on cuda:0: parameter '1.weight', moved by Module::to()",
                     "  input is on cpu: a batch, created by DataLoader", "exercise_spot_the_bug.cpp", "input",
                     "weight");
  CHECK(out.has("ok: trained one epoch (16 batches) on cuda:0"));
  check_quoted_in_tutorials(out);
}

TEST_CASE("exercise_train_one_epoch: the loss falls", "[examples]") {
  Output out = run_example(EXAMPLE_EXERCISE_TRAIN_ONE_EPOCH);
  INFO(out.text);
  REQUIRE(out.exit_code == 0);
  std::vector<double> losses;
  for (const auto& l : out.lines)
    if (l.starts_with("epoch ")) losses.push_back(std::stod(l.substr(l.find("loss ") + 5)));
  REQUIRE(losses.size() == 3);
  for (double loss : losses) CHECK(std::isfinite(loss));
  CHECK(losses[2] < losses[0]);
}

TEST_CASE("train_amp: float16 with a GradScaler learns, with no host synchronisation in a step", "[examples][amp]") {
  Output out = run_example(EXAMPLE_TRAIN_AMP);
  INFO(out.text);
  REQUIRE(out.exit_code == 0);
  std::vector<double> losses;
  std::regex epoch(R"(epoch \d  loss ([\d.]+)  scale (\d+)  skipped (\d+)  host syncs in the last step (\d+))");
  for (const auto& l : out.lines) {
    std::smatch m;
    if (!std::regex_match(l, m, epoch)) continue;
    losses.push_back(std::stod(m[1]));
    CHECK(std::stod(m[2]) >= 1);
    // With the caching allocator off (the sanitizer runs) every free is a cudaFree, which waits.
    if (!tandem::cuda::detail::caching_disabled()) CHECK(std::stoll(m[4]) == 0);
  }
  REQUIRE(losses.size() == 3);
  CHECK(losses[2] < losses[0]);
  CHECK(out.has("ok: weights float32, gradients scaled in float16"));
}

TEST_CASE("train_template: trains, evaluates, saves and loads on the cpu", "[examples]") {
  if (!std::filesystem::exists(std::string(tandem::data::FashionMNIST::kDefaultRoot) + "/train-images-idx3-ubyte.gz")) {
    WARN("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist): train_template not run");
    return;
  }
  tandem::test::TempDir dir;
  Output out = run_in(dir.str(), EXAMPLE_TRAIN_TEMPLATE, "--batches 10 --epochs 1 --workers 1 --out .");
  INFO(out.text);
  REQUIRE(out.exit_code == 0);
  std::string device = out.line_starting("training on ").substr(12);
  REQUIRE((device == "cpu" || device == "cuda:0"));
  CHECK(out.has("model parameters on " + device + "; batch: data [128, 1, 28, 28] on " + device + ", labels on " +
                device));
  std::string epoch = out.line_starting("epoch 1/1  train loss ");
  REQUIRE(!epoch.empty());
  double loss = std::stod(epoch.substr(22));
  CHECK(std::isfinite(loss));
  CHECK(loss < 2.3);  // below log(10): it learned something in 10 batches
  CHECK_THAT(epoch, Contains(" 10 batches in "));
  CHECK_THAT(epoch, Contains("waiting for data "));
  CHECK(!out.line_starting("saved ./checkpoint.safetensors; loaded epoch 1 on the cpu: test accuracy ").empty());
  CHECK(std::filesystem::exists(dir.file("checkpoint.safetensors")));
}

TEST_CASE("every cpp block of the tutorials is a region of a compiled example", "[examples][docs]") {
  Output out = run_example("python3", std::string("'") + TANDEM_SOURCE_DIR + "/scripts/check-tutorial.py'");
  INFO(out.text);
  CHECK(out.exit_code == 0);
}
