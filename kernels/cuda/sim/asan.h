// TANDEM_SIM_ASAN: 1 when the simulator's device memory and fibers must be
// told to AddressSanitizer. Meson sets it for the scheduler, which is built
// uninstrumented for instrumented kernels; elsewhere the compiler says.
#pragma once

#if !defined(TANDEM_SIM_ASAN)
#if defined(__SANITIZE_ADDRESS__)
#define TANDEM_SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TANDEM_SIM_ASAN 1
#endif
#endif
#endif
#ifndef TANDEM_SIM_ASAN
#define TANDEM_SIM_ASAN 0
#endif
#if TANDEM_SIM_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
