// Pieces shared by the oneDNN kernels (k_conv_dnnl.cpp, k_matmul_dnnl.cpp); included only when
// the plugin is built with oneDNN.
#ifndef CTN_CPU_K_DNNL_H
#define CTN_CPU_K_DNNL_H

#include <oneapi/dnnl/dnnl.hpp>

#include "cpu_backend.h"

namespace ctn_cpu {

// The one CPU engine of the plugin.
inline dnnl::engine &onednn_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

// oneDNN's buffers start on a cache line.
constexpr size_t kDnnlAlign = 64;
inline size_t dnnl_align_up(size_t n) { return (n + kDnnlAlign - 1) / kDnnlAlign * kDnnlAlign; }

// The start of the call's workspace on a cache line (the workspace has kDnnlAlign spare bytes).
inline char *dnnl_workspace(void *workspace) {
  const auto base = reinterpret_cast<uintptr_t>(workspace);
  return static_cast<char *>(workspace) + (dnnl_align_up(base) - base);
}

// Hands out a oneDNN kernel whose parts each use `slot` workspace bytes, and counts it
// (ctn_cpu_onednn_kernels).
inline void dnnl_kernel_set(Backend *be, ctn_kernel *out, ctn_kernel_fn fn, KernelBase *state, size_t slot,
                            int64_t parts) {
  kernel_set(out, fn, state, 0, static_cast<uint64_t>(slot) * static_cast<uint64_t>(parts) + kDnnlAlign);
  be->onednn_kernels.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace ctn_cpu

#endif
