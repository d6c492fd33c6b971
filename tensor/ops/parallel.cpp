// tandem::set_num_threads / get_num_threads over the CPU backend's setting.
#include "tensor/ops/parallel.h"

#include "kernels/cpu/parallel.h"
#include "tensor/core/errors.h"

namespace tandem {

void set_num_threads(int n) {
  TANDEM_CHECK(n >= 0, ValueError, "set_num_threads: expected a thread count >= 0 (0 for the default), but got ", n);
  cpu::set_num_threads(n);
}

int get_num_threads() { return cpu::num_threads(); }

}  // namespace tandem
