// The precompiled header of the library's C++ files (meson.build; the .cu
// files are nvcc's and take none): the standard headers and the core ones
// that most of them include, parsed once for the library instead of once a
// file. Every file still includes what it uses: this header only makes that
// cheap (a build with -Db_pch=false checks that it does). Nothing here may
// depend on a macro a file defines before its includes.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tensor/core/errors.h"
#include "tensor/core/grad_mode.h"
#include "tensor/core/shape.h"
#include "tensor/core/tensor.h"
#include "tensor/ops/checks.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/factory.h"
