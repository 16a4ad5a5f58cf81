// The NEON GEMM micro-kernel of 32-bit ARM builds (see gemm_arm32.h). Only this function is
// compiled for NEON (target attribute), so nothing else in the plugin can pick up a NEON
// instruction, and it uses multiply-accumulate (vmla), not vfma: fused multiply-add needs VFPv4,
// which Cortex-A8/A9 lack.
#include "gemm_arm32.h"

#if defined(__arm__)
#include <arm_neon.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>

namespace ctn_cpu {
namespace {

constexpr int kMR = 6, kNR = 8;  // 12 accumulators + 2 B vectors + 3 A pairs = 16 q registers

// C[6 x 8] (+)= A-panel x B-panel: pa holds k columns of 6 values, pb k rows of 8.
__attribute__((target("fpu=neon"))) void uk_f32_neon(int64_t k, const float *pa,
                                                     const float *pb, float *c, int64_t ldc,
                                                     int accumulate) {
  float32x4_t acc[kMR][2];
#pragma GCC unroll 6
  for (int i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = vdupq_n_f32(0.0f);
  for (int64_t p = 0; p < k; ++p) {
    const float32x4_t b0 = vld1q_f32(pb), b1 = vld1q_f32(pb + 4);
    const float32x2_t a[3] = {vld1_f32(pa), vld1_f32(pa + 2), vld1_f32(pa + 4)};
#pragma GCC unroll 3
    for (int i = 0; i < 3; ++i) {
      acc[2 * i][0] = vmlaq_lane_f32(acc[2 * i][0], b0, a[i], 0);
      acc[2 * i][1] = vmlaq_lane_f32(acc[2 * i][1], b1, a[i], 0);
      acc[2 * i + 1][0] = vmlaq_lane_f32(acc[2 * i + 1][0], b0, a[i], 1);
      acc[2 * i + 1][1] = vmlaq_lane_f32(acc[2 * i + 1][1], b1, a[i], 1);
    }
    pa += kMR;
    pb += kNR;
  }
#pragma GCC unroll 6
  for (int i = 0; i < kMR; ++i) {
    float *row = c + i * ldc;
    if (accumulate) {
      acc[i][0] = vaddq_f32(acc[i][0], vld1q_f32(row));
      acc[i][1] = vaddq_f32(acc[i][1], vld1q_f32(row + 4));
    }
    vst1q_f32(row, acc[i][0]);
    vst1q_f32(row + 4, acc[i][1]);
  }
}

}  // namespace

const GemmIsa *gemm_isa_arm32_neon(const GemmIsa &generic) {
  if (!(getauxval(AT_HWCAP) & HWCAP_NEON)) return nullptr;
  // Built on first use (not at dlopen): the blocking is generic's, which has the same 6 x 8 tile.
  static const GemmIsa isa = [&] {
    GemmIsa v = generic;
    v.name = "neon";
    v.f32 = uk_f32_neon;
    v.mr32 = kMR;
    v.nr32 = kNR;
    return v;
  }();
  return &isa;
}

}  // namespace ctn_cpu

#endif  // __arm__
