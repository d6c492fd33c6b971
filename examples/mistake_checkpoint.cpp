// Mistake: a checkpoint saved on a GPU, loaded where there is none. Tandem
// puts each tensor back on the device it was saved from, so the load refuses
// and asks for map_location; with map_location = cpu it loads.
//
// "Where there is none" is a second process of this same program: Tandem
// reads TANDEM_EMULATE_CUDA once per process, so a process that has seen a
// GPU (real or emulated) cannot lose it. The parent saves, then starts
// /proc/self/exe (this program) with --load, TANDEM_EMULATE_CUDA=0 (no
// emulated devices; set, so examples::cuda_device would not turn one on) and
// CUDA_VISIBLE_DEVICES= (the CUDA runtime then shows no real GPU either).
// posix_spawn builds the child's environment beforehand: nothing runs in
// between, as it would after a fork() of a process with threads.
#include <spawn.h>
#include <sys/wait.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "examples/common.h"

extern char** environ;

using namespace tandem;
namespace F = tandem::nn::functional;

namespace {

nn::Sequential make_model() { return nn::Sequential(nn::Linear(784, 128), nn::ReLU(), nn::Linear(128, 10)); }

// Trains one step on cuda (so that Adam has state), then saves.
void save_on_gpu(Device device) {
  manual_seed(0);
  nn::Sequential model = make_model();
  model->to(device);
  optim::Adam opt(model->parameters(), optim::AdamOptions(1e-3));
  TensorOptions on_device = TensorOptions().device(device);
  Tensor loss =
      F::cross_entropy(model->forward(rand({64, 784}, on_device)), randint(0, 10, {64}, on_device.dtype(kInt64)));
  loss.backward();
  opt.step();
  // [tutorial:save-on-gpu]
  nn::save_checkpoint("checkpoint.safetensors", *model, &opt, /*scheduler=*/nullptr, /*epoch=*/1);
  // [end]
  std::printf("saved checkpoint.safetensors from %s\n", device.str().c_str());
}

// The child: a machine without a GPU.
int load_without_gpu() {
  std::printf("\n(a new process with no GPU: cuda::is_available() is %s)\n", cuda::is_available() ? "true" : "false");
  nn::Sequential model = make_model();  // on the cpu
  optim::Adam opt(model->parameters(), optim::AdamOptions(1e-3));
  bool caught = examples::shows_error("loading it where there is no GPU", [&] {
    // [tutorial:load-mistake]
    nn::load_checkpoint("checkpoint.safetensors", *model, &opt);  // back to cuda:0, which is not here
    // [end]
  });
  examples::fix("say where the tensors go: map_location");
  // [tutorial:load-fix]
  int64_t epoch = nn::load_checkpoint("checkpoint.safetensors", *model, &opt, /*scheduler=*/nullptr,
                                      /*map_location=*/Device("cpu"));
  // [end]
  std::printf("ok: loaded epoch %lld, model on %s\n", static_cast<long long>(epoch),
              model->parameters()[0].device().str().c_str());
  return caught ? 0 : 1;
}

// Runs this program again with --load, in an environment without GPUs;
// returns its exit code.
int run_without_gpu(char* argv0) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view var(*e);
    if (!var.starts_with("TANDEM_EMULATE_CUDA=") && !var.starts_with("CUDA_VISIBLE_DEVICES=")) env.emplace_back(var);
  }
  env.emplace_back("TANDEM_EMULATE_CUDA=0");
  env.emplace_back("CUDA_VISIBLE_DEVICES=");
  std::vector<char*> envp;
  for (std::string& var : env) envp.push_back(var.data());
  envp.push_back(nullptr);
  char load[] = "--load";
  char* args[] = {argv0, load, nullptr};

  std::fflush(stdout);  // our output first, then the child's
  pid_t pid = 0;
  int err = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, args, envp.data());
  TANDEM_CHECK(err == 0, Error, "posix_spawn /proc/self/exe: ", std::strerror(err));
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run([&] {
    if (argc > 1 && std::strcmp(argv[1], "--load") == 0) return load_without_gpu();
    save_on_gpu(examples::cuda_device());
    return run_without_gpu(argv[0]);
  });
}
