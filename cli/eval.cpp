// tandem eval, and the evaluation tandem train runs after each epoch.
#include "cli/eval.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "cli/common.h"
#include "cli/models.h"
#include "cli/run_state.h"
#include "nn/functional/loss.h"
#include "tensor/core/grad_mode.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/parallel.h"
#include "tensor/ops/reduce.h"

namespace tandem::cli {

namespace F = nn::functional;

int default_threads(const std::string& model) {
  // The MLP's ops are small: one thread is fastest (1.2-1.5 s an epoch
  // against 4.1-4.7 s with two). The CNN's convolutions are large enough
  // to use every core.
  if (model == "mlp") return 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));  // taskset, cgroups' cpusets
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

EvalResult evaluate(nn::Sequential& model, data::DataLoader& loader, int64_t num_classes) {
  bool was_training = model->is_training();
  model->eval();
  NoGradGuard no_grad;
  EvalResult r;
  Tensor loss_sum, correct;  // on the device: no wait for it per batch
  std::vector<int64_t> class_correct(num_classes, 0), class_total(num_classes, 0);
  for (data::Example<>& batch : loader) {
    Tensor logits = model->forward(prepare_images(batch.data));
    Tensor loss = F::cross_entropy(logits, batch.target, F::CrossEntropyFuncOptions().reduction(kSum));
    Tensor hit = logits.argmax(1).eq(batch.target);
    loss_sum = loss_sum.defined() ? loss_sum.add(loss) : loss;
    correct = correct.defined() ? correct.add(hit.sum()) : hit.sum();
    r.total += batch.target.size(0);
    if (num_classes > 0) {
      std::vector<int64_t> target = batch.target.to_vector<int64_t>();
      std::vector<int64_t> ok = hit.to_vector<int64_t>();
      for (size_t i = 0; i < target.size(); ++i) {
        ++class_total[target[i]];
        class_correct[target[i]] += ok[i];
      }
    }
  }
  model->train(was_training);
  if (r.total > 0) {
    r.loss = loss_sum.item<double>() / static_cast<double>(r.total);
    r.correct = correct.item<int64_t>();
  }
  r.class_correct = std::move(class_correct);
  r.class_total = std::move(class_total);
  return r;
}

int run_eval(const EvalOptions& o) {
  std::string why;
  Device device = choose_device(o.device, &why);
  RunCheckpoint run = read_run(o.checkpoint, device);
  const RunConfig& c = run.config;
  set_num_threads(o.threads > 0 ? o.threads : default_threads(c.model));
  Data d = load_data(o.data.empty() ? c.data : o.data, 0, o.data.empty() ? c.test_examples : 0, /*need_train=*/false);

  nn::Sequential model = make_model(c.model);
  model->to(device);
  run.checkpoint.load_module(*model);
  data::DataLoader loader(d.test, data::DataLoaderOptions(o.batch_size).device(device));

  std::printf("checkpoint  %s: %s after %lld of %lld epochs%s\n", o.checkpoint.c_str(), c.model.c_str(),
              static_cast<long long>(run.position.epochs_done), static_cast<long long>(c.epochs),
              run.position.steps_in_epoch > 0 ? " (and part of the next)" : "");
  std::printf("device      %s%s\n", describe_device(device).c_str(), why.empty() ? "" : (" (" + why + ")").c_str());
  std::printf("data        %s test set, %s examples (%s)\n", d.name.c_str(), thousands(d.test_size).c_str(),
              d.root.c_str());
  EvalResult r = evaluate(model, loader, static_cast<int64_t>(d.classes.size()));
  std::printf("test loss   %.4f\naccuracy    %.2f%% (%s of %s)\n\n", r.loss, 100 * r.accuracy(),
              thousands(r.correct).c_str(), thousands(r.total).c_str());
  std::printf("%-12s %9s %9s\n", "class", "accuracy", "examples");
  for (size_t k = 0; k < d.classes.size(); ++k) {
    double acc = r.class_total[k] > 0
                     ? 100.0 * static_cast<double>(r.class_correct[k]) / static_cast<double>(r.class_total[k])
                     : 0;
    std::printf("%-12s %8.2f%% %9s\n", d.classes[k].c_str(), acc, thousands(r.class_total[k]).c_str());
  }
  return 0;
}

}  // namespace tandem::cli
