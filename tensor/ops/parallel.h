// The CPU backend's thread count, as libtorch's torch::set_num_threads and
// torch::get_num_threads: one setting for Tandem's OpenMP loops and for
// OpenBLAS's GEMMs. On small tensors one thread is often fastest (see
// docs/nn.md); tandem train chooses per model from measurement.
#pragma once

namespace tandem {

// n > 0: at most n threads per CPU op; 0: back to the default (OpenMP's and
// OpenBLAS's own, e.g. OMP_NUM_THREADS, or one per core).
void set_num_threads(int n);
// The threads a large CPU op uses now.
int get_num_threads();

}  // namespace tandem
