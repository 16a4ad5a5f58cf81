// Pieces shared by the oneDNN kernels (k_conv_dnnl.cpp, k_matmul_dnnl.cpp); included only when
// the plugin is built with oneDNN.
#ifndef CTN_CPU_K_DNNL_H
#define CTN_CPU_K_DNNL_H

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <mutex>
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
// False, with the reason in *why, when oneDNN picked its reference implementation (`impl`, the
// primitive's implementation name): far slower than the own kernels it would replace.
inline bool dnnl_fast_impl(const std::string &impl, std::string *why) {
  if (impl.rfind("ref", 0) != 0) return true;
  *why = "oneDNN has only its reference implementation (" + impl + ")";
  return false;
}

inline size_t dnnl_align_up(size_t n) { return (n + kDnnlAlign - 1) / kDnnlAlign * kDnnlAlign; }

// The start of the call's workspace on a cache line (the workspace has kDnnlAlign spare bytes).
inline char *dnnl_workspace(void *workspace) {
  const auto base = reinterpret_cast<uintptr_t>(workspace);
  return static_cast<char *>(workspace) + (dnnl_align_up(base) - base);
}

// Hands out a oneDNN kernel of st->parts parts, each using `slot` workspace bytes, and counts it
// (ctn_cpu_onednn_kernels); or, when its primitives are oneDNN's reference implementation
// (`impl`), false with the reason (dnnl_fast_impl).
template <class S>
bool dnnl_kernel_set(Backend *be, ctn_kernel *out, ctn_kernel_fn fn, std::unique_ptr<S> st, size_t slot,
                     const std::string &impl, std::string *why) {
  if (!dnnl_fast_impl(impl, why)) return false;
  const auto parts = static_cast<uint64_t>(st->parts);
  kernel_set(out, fn, st.release(), 0, static_cast<uint64_t>(slot) * parts + kDnnlAlign);
  be->onednn_kernels.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Builds primitives with build() for parts that each run on one OpenMP thread, then restores
// the caller's count. Creation is serialised: oneDNN's primitive cache and JIT are thread-safe by
// their documentation, but their synchronisation is invisible to ThreadSanitizer (the library is
// not instrumented; the tsan stage reported its cache lock as a race). Kernels are made once per
// plan, so nothing waits here in a training loop.
template <class F>
void dnnl_build_primitives(int caller_threads, F &&build) {
  static std::mutex create_mu;
  std::lock_guard<std::mutex> lock(create_mu);
  omp_set_num_threads(1);
  build();
  omp_set_num_threads(caller_threads);
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
