// The backend's own GEMM: cache-blocked with packed panels and a register-blocked micro-kernel
// written with GCC vector extensions, so the same source builds for x86-64 (an AVX-512 / AVX2 /
// baseline variant chosen once at init) and for aarch64 NEON.
#ifndef CTN_CPU_GEMM_H
#define CTN_CPU_GEMM_H

#include <cstddef>
#include <cstdint>

#include "gemm_bf16.h"

namespace ctn_cpu {

struct Backend;

using MicroKernelF32 = void (*)(int64_t k, const float *pa, const float *pb, float *c,
                                int64_t ldc, int accumulate);
using MicroKernelF64 = void (*)(int64_t k, const double *pa, const double *pb, double *c,
                                int64_t ldc, int accumulate);

// One instruction-set variant of the micro-kernels and its blocking.
struct GemmIsa {
  const char *name;  // "avx512", "avx2", "generic"
  MicroKernelF32 f32;
  int mr32, nr32, mc32, kc32, nc32;
  MicroKernelF64 f64;
  int mr64, nr64, mc64, kc64, nc64;
  // Packs one full nr32-column panel of a transposed f32 B (B(p, j) = b[p + j * csb], kc rows)
  // into dst[p * nr32 + j]; NULL: the generic loop does it.
  void (*pack_bt32)(const float *b, int64_t csb, int64_t kc, float *dst);
};

// The best variant this CPU runs; `name` may force a lower one ("avx2", "generic"). NULL when
// the named variant does not exist or the CPU lacks it.
const GemmIsa *gemm_isa_select(const char *name);

// Makes sure the calling thread has its packing scratch (allocated on its first call, freed
// when the thread exits); false when out of memory. The own GEMM packs into the scratch of the
// thread it runs on: kernels call this on entry, pool workers when they start.
bool gemm_scratch_ready();
// A pool worker's scratch, allocated at its start and freed at its end without a thread_local
// destructor (whose registration glibc turns into an abort when memory is short).
bool gemm_worker_init();
// The calling thread's packing memory as the bf16 GEMM's scratch (gemm_bf16.h: its blocks are
// sized to fit); gemm_scratch_ready must have returned true on this thread.
Bf16Scratch gemm_bf16_scratch();
void gemm_worker_fini();

// C[M, N] (row-major, leading dimension ldc) = A * B where A(i, p) = A[i * rsa + p * csa] and
// B(p, j) = B[p * rsb + j * csb]; transposes are expressed through the strides. Runs on the
// backend's pool when the problem is big enough.
void own_gemm_f32(Backend &be, int64_t m, int64_t n, int64_t k, const float *a, int64_t rsa,
                  int64_t csa, const float *b, int64_t rsb, int64_t csb, float *c, int64_t ldc);
void own_gemm_f64(Backend &be, int64_t m, int64_t n, int64_t k, const double *a, int64_t rsa,
                  int64_t csa, const double *b, int64_t rsb, int64_t csb, double *c,
                  int64_t ldc);

// The own GEMM on the calling thread only, with that thread's packing scratch: for kernels that
// split the work themselves (convolutions over the images of a batch).
// accumulate: C += A * B instead of C = A * B.
void gemm_serial_f32(Backend &be, int64_t m, int64_t n, int64_t k, const float *a,
                     int64_t rsa, int64_t csa, const float *b, int64_t rsb, int64_t csb, float *c,
                     int64_t ldc, bool accumulate);
void gemm_serial_f64(Backend &be, int64_t m, int64_t n, int64_t k, const double *a,
                     int64_t rsa, int64_t csa, const double *b, int64_t rsb, int64_t csb,
                     double *c, int64_t ldc, bool accumulate);

}  // namespace ctn_cpu

#endif
