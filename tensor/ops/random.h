// Random numbers: the Philox Generator (seed + offset), the default
// generators, and the random factories and in-place fills that take an
// explicit generator. rand/randn/randint with the default generator are
// declared in tensor/ops/factory.h.
//
// The numbers are DEFINED by the following map, which every backend follows
// (one CUDA thread per element reproduces it): a call that fills n elements
// takes (seed, offset) from the generator, advances the offset by the number
// of Philox counters it uses, and element i (row-major index of the result)
// is computed from P(c) = philox(counter = offset + c, subsequence = 0,
// key = seed), four 32-bit words w0..w3 (tensor/core/philox.h):
//
//   kind                          counter c   words used                      counters per call
//   uniform float32/16/bfloat16   i / 4       w[i % 4]                        ceil(n / 4)
//   uniform float64               i / 2       lo w[2(i%2)], hi w[2(i%2)+1]    ceil(n / 2)
//   randint (every dtype)         i / 2       lo w[2(i%2)], hi w[2(i%2)+1]    ceil(n / 2)
//   normal (every dtype)          i           all four                        n
//
// uniform: the top d bits of the word times 2^-d, d = 24 for float32 (that is
//   (x >> 8) * 2^-24), 11 for float16, 8 for bfloat16; float64 takes the top
//   53 bits of the 64-bit draw times 2^-53. Always in [0, 1), exactly
//   representable in the dtype (rounding a float32 draw to float16 could give
//   1.0). uniform_(from, to) then computes u * (to - from) + from in float
//   (double for float64), two rounded operations (a CUDA kernel must not
//   contract them into an fma), and rounds to the dtype.
// normal: Box-Muller's cos branch in double, z = sqrt(-2 ln u1) cos(2 pi u2),
//   with u1 in (0, 1] so the log is finite: u1 = (w0 + 1) 2^-32, u2 = w1 2^-32
//   for the 32-bit and 16-bit dtypes; u1 = (top53(w0, w1) + 1) 2^-53,
//   u2 = top53(w2, w3) 2^-53 for float64. normal_(mean, std) computes
//   z * std + mean in double (no fma), then converts to the dtype (through
//   float for float16 and bfloat16).
//   Uniform and randint numbers are the same bits on every backend. Normal
//   ones go through log and cos, which CUDA's libdevice and glibc compute to
//   within an ulp or two of double: after rounding to float32 or narrower a
//   mismatch needs a result within a few double ulps of a rounding boundary
//   (about one element in 10^8); float64 results may differ in the last bit.
// randint(low, high): low + (x mod (high - low)) with x the 64-bit draw,
//   converted to the dtype. The modulo makes a value at most
//   1 + (high - low) / 2^64 times likelier than another: below 2^-32 relative
//   for any range under 2^32, far below what any test of a training run can see.
//
// Because each element's counter depends only on its index, the numbers do
// not depend on the number of threads or the device, only on the seed, the
// offset and the shape. Reserving the counters is the only step that takes
// the generator's lock, so concurrent calls get disjoint counters.
#pragma once

#include <cstdint>
#include <mutex>

#include "tensor/core/philox.h"
#include "tensor/ops/factory.h"

namespace tandem {

// A counter-based generator: a seed (the Philox key) and an offset (the next
// unused counter, in units of 128-bit Philox outputs). It is not tied to a
// device: the same generator gives the same numbers on every device.
class Generator {
 public:
  static constexpr uint64_t kDefaultSeed = 67280421310721ull;  // torch's default_rng_seed_val

  explicit Generator(uint64_t seed = kDefaultSeed) : seed_(seed) {}
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // Sets the seed and starts again from counter 0.
  void manual_seed(uint64_t seed);
  // Seeds from std::random_device (non-deterministic) and returns the seed,
  // as torch.Generator.seed().
  uint64_t seed();
  uint64_t initial_seed() const;
  uint64_t offset() const;
  void set_offset(uint64_t offset);

  // Reserves `counters` consecutive counters and returns where they start.
  PhiloxState reserve(uint64_t counters);

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The generator rand/randn/randint use for tensors on `device`, one per
// device as in PyTorch (so drawing on the cpu does not move cuda:0's stream).
Generator& default_generator(Device device = Device(kCPU));
// Seeds every default generator (torch.manual_seed).
void manual_seed(uint64_t seed);
// The seed of the cpu default generator (torch.initial_seed).
uint64_t initial_seed();

// The factories of factory.h with an explicit generator.
Tensor rand(IntArrayRef sizes, Generator& gen, const TensorOptions& options = {}, SourceLoc loc = SourceLoc::current());
Tensor randn(IntArrayRef sizes, Generator& gen, const TensorOptions& options = {},
             SourceLoc loc = SourceLoc::current());
Tensor randint(int64_t low, int64_t high, IntArrayRef sizes, Generator& gen, const TensorOptions& options = {},
               SourceLoc loc = SourceLoc::current());

// In-place fills (torch.Tensor.uniform_ / normal_ / random_), for parameter
// initialisation. They draw from gen, or from t's device's default generator
// when gen is null; t may be any strided, non-expanded view.
Tensor& uniform_(Tensor& t, double from = 0, double to = 1, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0, double std = 1, Generator* gen = nullptr);
Tensor& random_(Tensor& t, int64_t low, int64_t high, Generator* gen = nullptr);

}  // namespace tandem
