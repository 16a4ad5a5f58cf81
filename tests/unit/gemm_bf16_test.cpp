// The CPU backend's bf16 GEMM (backends/cpu/gemm_bf16.h), each variant this CPU runs, against an
// f64 product of the bf16-rounded operands: odd m, n and k (not multiples of the blocking, k odd,
// k past one K block), transposed and strided operands, bf16 and f32 operands, C = and C +=.
// The f32 sums of at most k products leave an error near k * 2^-24 of the sum of |products|.
#include <gtest/gtest.h>

#include <chutney/desc.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "gemm_bf16.h"

namespace {

using ctn_cpu::Bf16Gemm;
using ctn_cpu::Bf16Operand;

struct Buffers {
  void *a = std::aligned_alloc(64, Bf16Gemm::kBytesA);
  void *b = std::aligned_alloc(64, Bf16Gemm::kBytesB);
  void *t = std::aligned_alloc(64, Bf16Gemm::kBytesTile);
  ~Buffers() {
    std::free(a);
    std::free(b);
    std::free(t);
  }
  ctn_cpu::Bf16Scratch scratch() const {
    return {static_cast<uint16_t *>(a), static_cast<uint16_t *>(b), static_cast<float *>(t)};
  }
};

// A rows x cols matrix stored with element (r, c) at r * rs + c * cs (trans: column-major), as
// bf16 or f32 (f32 values that bf16 does not represent exactly, so that the rounding shows), and
// its bf16-rounded values as doubles for the reference.
struct Matrix {
  int64_t rs, cs;
  std::vector<uint16_t> h;
  std::vector<float> f;
  std::vector<double> ref;  // row-major
  Matrix(int64_t rows, int64_t cols, bool trans, int64_t pad, std::mt19937 &rng) {
    rs = trans ? 1 : cols + pad;
    cs = trans ? rows + pad : 1;
    const size_t size = static_cast<size_t>(trans ? cs * cols : rs * rows);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    h.assign(size, 0x7fc0);  // NaN in the padding: read by mistake, it shows
    f.assign(size, NAN);
    ref.assign(static_cast<size_t>(rows * cols), 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float x = u(rng);
        const size_t o = static_cast<size_t>(r * rs + c * cs);
        f[o] = x;
        h[o] = ctn_desc_f32_to_bf16(x);
        ref[static_cast<size_t>(r * cols + c)] = ctn_desc_bf16_to_f32(h[o]);
      }
  }
  Bf16Operand op(bool f32) const { return {f32 ? static_cast<const void *>(f.data()) : h.data(), f32, rs, cs}; }
};

struct Case {
  int64_t m, n, k;
  bool ta, tb;
};

void check(const Bf16Gemm &v, const Case &cs, bool a32, bool b32, bool accumulate) {
  std::mt19937 rng(static_cast<unsigned>(cs.m * 131 + cs.n * 17 + cs.k));
  const Matrix a(cs.m, cs.k, cs.ta, 3, rng), b(cs.k, cs.n, cs.tb, 5, rng);
  const int64_t ldc = cs.n + 2;
  std::vector<float> c(static_cast<size_t>(cs.m * ldc), 0.5f);
  Buffers buf;
  ctn_cpu::gemm_bf16_serial(v, buf.scratch(), cs.m, cs.n, cs.k, a.op(a32), b.op(b32), c.data(), ldc, accumulate);
  for (int64_t i = 0; i < cs.m; ++i) {
    for (int64_t j = 0; j < cs.n; ++j) {
      double want = accumulate ? 0.5 : 0.0, mag = std::fabs(want);
      for (int64_t p = 0; p < cs.k; ++p) {
        const double t = a.ref[static_cast<size_t>(i * cs.k + p)] * b.ref[static_cast<size_t>(p * cs.n + j)];
        want += t;
        mag += std::fabs(t);
      }
      const double tol = (static_cast<double>(cs.k) + 2) * std::ldexp(mag, -24);
      ASSERT_NEAR(c[static_cast<size_t>(i * ldc + j)], want, tol)
          << v.name << " m " << cs.m << " n " << cs.n << " k " << cs.k << " ta " << cs.ta << " tb " << cs.tb
          << " a32 " << a32 << " b32 " << b32 << " at " << i << "," << j;
    }
    ASSERT_EQ(c[static_cast<size_t>(i * ldc + cs.n)], 0.5f) << "wrote past the row's end";
  }
}

class Bf16GemmTest : public ::testing::TestWithParam<const char *> {};

TEST_P(Bf16GemmTest, MatchesTheF64ProductOfTheRoundedInputs) {
  const Bf16Gemm *v = ctn_cpu::gemm_bf16_variant(GetParam());
  if (!v) GTEST_SKIP() << GetParam() << ": not on this CPU (or this build)";
  const Case cases[] = {{1, 1, 1, false, false},    {7, 33, 5, false, false},   {9, 31, 1, false, true},
                        {17, 65, 27, true, false},  {8, 32, 2, false, false},   {33, 100, 1025, false, false},
                        {150, 70, 37, true, true},  {13, 3100, 9, false, false}, {20, 40, 0, false, false}};
  for (const Case &cs : cases)
    for (int form = 0; form < 4; ++form) check(*v, cs, form & 1, (form & 2) != 0, form == 3);
}

TEST_P(Bf16GemmTest, RoundsF32OperandsToNearestEven) {
  const Bf16Gemm *v = ctn_cpu::gemm_bf16_variant(GetParam());
  if (!v) GTEST_SKIP() << GetParam() << ": not on this CPU (or this build)";
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7 (bf16's spacing at 1): even is 1. 1 + 3 * 2^-8
  // rounds up to 1 + 2^-6.
  const float a[2] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f}, b[2] = {1.0f, 1.0f};
  float c = -1;
  Buffers buf;
  ctn_cpu::gemm_bf16_serial(*v, buf.scratch(), 1, 1, 2, {a, true, 2, 1}, {b, true, 1, 1}, &c, 1, false);
  EXPECT_EQ(c, 1.0f + (1.0f + 0x1p-6f));
}

INSTANTIATE_TEST_SUITE_P(Variants, Bf16GemmTest, ::testing::Values("avx512_bf16", "generic"));

TEST(Bf16GemmVariant, UnknownNamesAreRefused) {
  EXPECT_EQ(ctn_cpu::gemm_bf16_variant("avx3"), nullptr);
  EXPECT_NE(ctn_cpu::gemm_bf16_variant("generic"), nullptr);
  EXPECT_NE(ctn_cpu::gemm_bf16_variant(nullptr), nullptr);
}

}  // namespace
