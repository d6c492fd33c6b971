// Mistake: a batch too large for the GPU's memory. Then the three usual
// fixes: a smaller batch, gradient accumulation (the large batch's update in
// pieces), and NoGradGuard in evaluation (no activations kept for backward);
// and what cuda::empty_cache() does and does not do.
//
// On an emulated device the memory is capped at 256 MiB (unless
// TANDEM_EMULATE_CUDA_MEMORY says otherwise), so the error comes at the same
// point on every machine; on a real GPU the batch is sized from its memory.
#include <cmath>

#include "examples/common.h"

using namespace tandem;
namespace F = tandem::nn::functional;

namespace {
double mib(size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }
}  // namespace

int main() {
  return examples::run([] {
    Device device = examples::cuda_device("256M");
    manual_seed(0);
    nn::Sequential model(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                         nn::Flatten(), nn::Linear(32 * 14 * 14, 10));
    model->to(device);
    optim::SGD opt(model->parameters(), optim::SGDOptions(0.01));
    TensorOptions on_device = TensorOptions().device(device);
    // n random images (n, 1, 28, 28) and labels, made on the device.
    auto batch_of = [&](int64_t n) {
      return std::pair{randn({n, 1, 28, 28}, on_device), randint(0, 10, {n}, on_device.dtype(kInt64))};
    };

    // A batch whose first activations alone, the convolution's (n, 32, 28, 28)
    // floats, are more than the whole device holds.
    const size_t capacity = cuda::mem_get_info().second;
    const size_t per_image = 32 * 28 * 28 * sizeof(float);
    const int64_t too_big = static_cast<int64_t>(capacity / per_image) + 1;
    std::printf("device memory %.0f MiB; a batch of %lld images needs %.0f MiB for the convolution's output alone\n",
                mib(capacity), static_cast<long long>(too_big), mib(too_big * per_image));
    bool caught = examples::shows_error("a batch too large for the device", [&] {
      // [tutorial:oom-mistake]
      auto [images, labels] = batch_of(too_big);
      Tensor loss = F::cross_entropy(model->forward(images), labels);  // OutOfMemoryError
      // [end]
    });

    std::printf("\n--- not a fix: cuda::empty_cache()\n");
    size_t reserved = cuda::memory_reserved();
    // [tutorial:oom-empty-cache]
    cuda::empty_cache();  // cached free blocks go back to the device, for other programs
    // [end]
    std::printf(
        "reserved by Tandem: %.1f MiB before empty_cache(), %.1f MiB after (in tensors: %.1f MiB).\n"
        "Tandem did this itself before raising OutOfMemoryError, and this program could reuse the cached\n"
        "blocks anyway: it makes room for other programs on the GPU, not for this one.\n",
        mib(reserved), mib(cuda::memory_reserved()), mib(cuda::memory_allocated()));

    examples::fix("1. a smaller batch");
    cuda::reset_peak_memory_stats();
    // [tutorial:oom-smaller-batch]
    auto [images, labels] = batch_of(256);
    opt.zero_grad();
    Tensor loss = F::cross_entropy(model->forward(images), labels);
    loss.backward();
    opt.step();
    // [end]
    std::printf("ok: a batch of 256 trains (loss %.4f), peak %.1f MiB in tensors\n", loss.item<double>(),
                mib(cuda::max_memory_allocated()));

    examples::fix("2. gradient accumulation: the update of a batch of 256, in pieces of 64");
    opt.zero_grad();
    F::cross_entropy(model->forward(images), labels).backward();  // the whole batch at once, to compare
    Tensor whole_batch_grad = model->parameters()[0].grad().clone();
    cuda::reset_peak_memory_stats();
    // [tutorial:oom-accumulate]
    const int64_t pieces = 4;  // 4 x 64 = 256 examples per update
    std::vector<Tensor> image_pieces = images.chunk(pieces), label_pieces = labels.chunk(pieces);
    opt.zero_grad();
    for (int64_t k = 0; k < pieces; ++k) {
      // Each piece's mean, divided by the number of pieces: together, the mean over all 256.
      Tensor piece_loss = F::cross_entropy(model->forward(image_pieces[k]), label_pieces[k]) / pieces;
      piece_loss.backward();  // gradients add up in .grad(); this piece's activations are freed
    }
    opt.step();  // one update, as with the whole batch
    // [end]
    double diff = (model->parameters()[0].grad() - whole_batch_grad).abs().max().item<double>();
    std::printf("ok: the accumulated gradient is the whole batch's (%s), peak %.1f MiB in tensors\n",
                diff < 1e-5 ? "differences below 1e-5" : "DIFFERENT", mib(cuda::max_memory_allocated()));

    examples::fix("3. evaluation under NoGradGuard: no graph, so no activations kept");
    auto [test_images, test_labels] = batch_of(256);
    size_t base = cuda::memory_allocated();
    size_t with_graph = 0, without_graph = 0;
    {
      Tensor logits = model->forward(test_images);  // records a graph: keeps what backward needs
      with_graph = cuda::memory_allocated() - base;
    }
    {
      // [tutorial:oom-no-grad]
      NoGradGuard no_grad;  // evaluation: nothing is recorded, intermediate results are freed at once
      Tensor logits = model->forward(test_images);
      // [end]
      without_graph = cuda::memory_allocated() - base;
    }
    std::printf("ok: holding the logits of 256 images takes %.2f MiB with a graph, %.2f MiB under NoGradGuard\n",
                mib(with_graph), mib(without_graph));
    return caught ? 0 : 1;
  });
}
