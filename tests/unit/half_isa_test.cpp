// Each 16-bit conversion variant of the CPU backend this CPU runs (backends/cpu/half.h: AVX-512
// with and without AVX512_BF16, AVX2 + F16C) against the scalar rules of desc.h, over every f16
// / bf16 value and a million f32 bit patterns, at lengths that leave a scalar tail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "half.h"

namespace {

using ctn_cpu::HalfIsa;

class HalfIsaTest : public ::testing::TestWithParam<const char *> {};

TEST_P(HalfIsaTest, MatchesTheScalarRules) {
  const HalfIsa *v = ctn_cpu::half_variant(GetParam());
  if (!v) GTEST_SKIP() << GetParam() << ": not on this CPU (or this build)";
  std::vector<uint16_t> h(65536 + 7);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i);
  std::vector<float> f(h.size());
  for (int32_t dt : {CTN_F16, CTN_BF16}) {
    v->widen(dt)(h.data(), f.data(), static_cast<int64_t>(h.size()));
    for (size_t i = 0; i < h.size(); ++i) {
      const float want = dt == CTN_F16 ? ctn_desc_f16_to_f32(h[i]) : ctn_desc_bf16_to_f32(h[i]);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(f[i])) << i;
      } else {
        ASSERT_EQ(ctn_desc_f32_bits(f[i]), ctn_desc_f32_bits(want)) << dt << " " << i;
      }
    }
  }
  std::mt19937 rng(1);
  std::vector<float> x(1000003);
  for (float &e : x) e = ctn_desc_bits_f32(rng());
  std::vector<uint16_t> y(x.size());
  const bool flushes = std::string(v->name) == "avx512_bf16";  // VCVTNEPS2BF16 (half.h)
  for (int32_t dt : {CTN_F16, CTN_BF16}) {
    v->narrow(dt)(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t want = dt == CTN_F16 ? ctn_desc_f32_to_f16(x[i]) : ctn_desc_f32_to_bf16(x[i]);
      if (std::isnan(x[i])) {
        ASSERT_EQ(y[i] & 0x7fffu, dt == CTN_F16 ? (want & 0x7fffu) | 0x200u : want & 0x7fffu) << i;  // quiet NaN
        continue;
      }
      if (flushes && dt == CTN_BF16 && std::fpclassify(x[i]) == FP_SUBNORMAL) {
        ASSERT_EQ(y[i] & 0x7fffu, 0u) << x[i];
        continue;
      }
      ASSERT_EQ(y[i], want) << v->name << " dtype " << dt << " of " << x[i];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(variants, HalfIsaTest, ::testing::Values("generic", "avx2", "avx512", "avx512_bf16"),
                         [](const auto &info) { return std::string(info.param); });

}  // namespace
