// Pieces shared by the oneDNN kernels (k_conv_dnnl.cpp, k_matmul_dnnl.cpp); included only when
// the plugin is built with oneDNN.
#ifndef CTN_CPU_K_DNNL_H
#define CTN_CPU_K_DNNL_H

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <string>

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

// Hands out a oneDNN kernel of `parts` parts, each using `slot` workspace bytes, and counts it
// (ctn_cpu_onednn_kernels).
template <class S>
void dnnl_kernel_set(Backend *be, ctn_kernel *out, ctn_kernel_fn fn, std::unique_ptr<S> st, size_t slot,
                     int64_t parts) {
  kernel_set(out, fn, st.release(), 0, static_cast<uint64_t>(slot) * static_cast<uint64_t>(parts) + kDnnlAlign);
  be->onednn_kernels.fetch_add(1, std::memory_order_relaxed);
}

// Kernel creation: body(caller_threads) with the caller's OpenMP thread count at hand; a oneDNN
// error restores that count and becomes *why ("oneDNN: ..."), false.
template <class F>
bool dnnl_make(std::string *why, F &&body) {
  const int caller_threads = omp_get_max_threads();
  try {
    return body(caller_threads);
  } catch (const dnnl::error &e) {
    omp_set_num_threads(caller_threads);
    *why = std::string("oneDNN: ") + e.what();
    return false;
  }
}

// Runs part_fn(ctx, p, p + 1) for the kernel's `parts` parts over the pool (each part sets
// one OpenMP thread for itself), then gives the calling thread back its OpenMP setting (it may
// belong to an application that uses OpenMP).
inline void dnnl_run_parts(Backend &be, int64_t parts, void (*part_fn)(void *, int64_t, int64_t, int), void *ctx) {
  const int caller_threads = omp_get_max_threads();
  if (parts > 1) be.pool->parallel_for(parts, 1, part_fn, ctx);
  else part_fn(ctx, 0, 1, 0);
  omp_set_num_threads(caller_threads);
}

}  // namespace ctn_cpu

#endif
