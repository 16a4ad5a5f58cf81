// The 16-bit floats (issue 27): desc.h's scalar conversions (rounding to nearest even, NaN,
// infinities, f16 subnormals and overflow, no double rounding from f64), the CPU backend's casts
// against them over every f16 value and many f32 bit patterns (run once per CPU ISA variant by
// meson: CHUTNEY_CPU_ISA), casts to i8, and gradients through an f16 graph against f32's.
#include <chutney/chutney.h>
#include <chutney/desc.h>
#include <chutney/ops.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_helpers.h"

namespace {

float bits_f32(uint32_t u) { return ctn_desc_bits_f32(u); }
bool f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16_is_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

TEST(HalfConvert, F16RoundsToNearestEven) {
  EXPECT_EQ(ctn_desc_f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(ctn_desc_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);           // tie: to even (down)
  EXPECT_EQ(ctn_desc_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);       // tie: to even (up)
  EXPECT_EQ(ctn_desc_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // past the tie: up
  EXPECT_EQ(ctn_desc_f32_to_f16(-2.5f), 0xc100);
  EXPECT_EQ(ctn_desc_f32_to_f16(65504.f), 0x7bff);    // the largest f16
  EXPECT_EQ(ctn_desc_f32_to_f16(65519.f), 0x7bff);    // below the midpoint to 2^16
  EXPECT_EQ(ctn_desc_f32_to_f16(65520.f), 0x7c00);    // the midpoint: to even, which is inf
  EXPECT_EQ(ctn_desc_f32_to_f16(-1e10f), 0xfc00);     // overflow: -inf
  EXPECT_EQ(ctn_desc_f32_to_f16(INFINITY), 0x7c00);
  EXPECT_EQ(ctn_desc_f32_to_f16(-INFINITY), 0xfc00);
  EXPECT_TRUE(f16_is_nan(ctn_desc_f32_to_f16(NAN)));
  EXPECT_TRUE(f16_is_nan(ctn_desc_f32_to_f16(bits_f32(0x7f800001u))));  // a payload in the low bits only
  EXPECT_EQ(ctn_desc_f32_to_f16(-0.0f), 0x8000);
  // Subnormals: 2^-24 is the smallest; 2^-25 ties to even (zero), just above rounds up.
  EXPECT_EQ(ctn_desc_f32_to_f16(0x1p-24f), 0x0001);
  EXPECT_EQ(ctn_desc_f32_to_f16(0x1p-25f), 0x0000);
  EXPECT_EQ(ctn_desc_f32_to_f16(0x1.8p-24f), 0x0002);  // 1.5 ulp: tie, to even
  EXPECT_EQ(ctn_desc_f32_to_f16(0x1.4p-24f), 0x0001);
  EXPECT_EQ(ctn_desc_f32_to_f16(-0x1p-14f), 0x8400);   // the smallest normal
  EXPECT_EQ(ctn_desc_f32_to_f16(0x1.ff8p-15f), 0x03ff);  // the largest subnormal
  EXPECT_EQ(ctn_desc_f32_to_f16(0x1.ffcp-15f), 0x0400);  // half an ulp above: a tie, up to the normal
  EXPECT_EQ(ctn_desc_f16_to_f32(0x0001), 0x1p-24f);
  EXPECT_EQ(ctn_desc_f16_to_f32(0x03ff), 0x1.ff8p-15f);
  EXPECT_EQ(ctn_desc_f16_to_f32(0x7bff), 65504.f);
  // Every f16 comes back through f32 unchanged (NaNs stay NaN).
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t back = ctn_desc_f32_to_f16(ctn_desc_f16_to_f32(static_cast<uint16_t>(h)));
    if (f16_is_nan(static_cast<uint16_t>(h))) {
      EXPECT_TRUE(f16_is_nan(back)) << h;
    } else {
      ASSERT_EQ(back, h);
    }
  }
}

TEST(HalfConvert, Bf16RoundsToNearestEven) {
  EXPECT_EQ(ctn_desc_f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(ctn_desc_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);      // tie: down to even
  EXPECT_EQ(ctn_desc_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie: up to even
  EXPECT_EQ(ctn_desc_f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // past bf16's max: inf
  EXPECT_EQ(ctn_desc_f32_to_bf16(-INFINITY), 0xff80);
  EXPECT_TRUE(bf16_is_nan(ctn_desc_f32_to_bf16(NAN)));
  EXPECT_TRUE(bf16_is_nan(ctn_desc_f32_to_bf16(bits_f32(0x7f800001u))));  // would round to inf
  EXPECT_EQ(ctn_desc_bf16_to_f32(0x4049), 3.140625f);
  EXPECT_EQ(ctn_desc_f32_to_bf16(bits_f32(0x00010000u)), 0x0001);  // an f32 subnormal: kept
}

TEST(HalfConvert, F64RoundsOnce) {
  // Just above the f16 tie between 1 and 1 + 2^-10: through a plain f32 it would become the tie
  // and then round down; the right answer is up.
  const double d = 1.0 + 0x1p-11 + 0x1p-40;
  EXPECT_EQ(ctn_desc_f32_to_f16(static_cast<float>(d)), 0x3c00);  // double rounding
  EXPECT_EQ(ctn_desc_f64_to_f16(d), 0x3c01);
  EXPECT_EQ(ctn_desc_f64_to_bf16(1.0 + 0x1p-8 + 0x1p-40), 0x3f81);
  EXPECT_EQ(ctn_desc_f64_to_f16(1e300), 0x7c00);
  EXPECT_EQ(ctn_desc_f64_to_bf16(-1e300), 0xff80);
  EXPECT_EQ(ctn_desc_f64_to_f16(0x1p-25), 0x0000);  // exact tie stays a tie
  EXPECT_EQ(ctn_desc_f64_to_f16(0x1p-25 + 0x1p-60), 0x0001);
  EXPECT_TRUE(f16_is_nan(ctn_desc_f64_to_f16(NAN)));
}

// ---- through the CPU backend ------------------------------------------------------------------

struct Cpu : ::testing::Test {
  Ctx c;
  // The graph y = cast(x, to) run on x (n elements of `from`, bytes `x`); y's bytes.
  std::vector<unsigned char> cast(ctn_dtype from, ctn_dtype to, const void *x, int64_t n) {
    std::vector<unsigned char> y(static_cast<size_t>(n) * ctn_dtype_size(to));
    ctn_graph *g = nullptr;
    EXPECT_EQ(ctn_graph_create(c.ctx, 0, &g), CTN_OK) << ctn_last_error();
    ctn_node in, out;
    EXPECT_EQ(ctn_input(g, "x", from, 1, &n, &in), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_cast(g, in, to, &out), CTN_OK) << ctn_last_error();
    ctn_plan *p = nullptr;
    EXPECT_EQ(ctn_plan_compile(g, 1, &out, nullptr, &p), CTN_OK) << ctn_last_error();
    ctn_tensor *xt = nullptr, *yt = nullptr;
    EXPECT_EQ(ctn_tensor_create(from, 1, &n, x, &xt), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_plan_output_create(p, 0, &yt), CTN_OK) << ctn_last_error();
    const ctn_tensor *feeds[] = {xt};
    ctn_tensor *const outs[] = {yt};
    EXPECT_EQ(ctn_plan_run(p, 1, &in, feeds, 1, outs), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_tensor_read(yt, y.data(), y.size()), CTN_OK) << ctn_last_error();
    ctn_tensor_release(xt);
    ctn_tensor_release(yt);
    ctn_plan_release(p);
    ctn_graph_release(g);
    return y;
  }
  template <class T>
  std::vector<T> as(const std::vector<unsigned char> &b) {
    std::vector<T> v(b.size() / sizeof(T));
    std::memcpy(v.data(), b.data(), b.size());
    return v;
  }
};

TEST_F(Cpu, EveryF16WidensExactly) {
  std::vector<uint16_t> h(65536);
  for (uint32_t i = 0; i < 65536; ++i) h[i] = static_cast<uint16_t>(i);
  for (ctn_dtype dt : {CTN_F16, CTN_BF16}) {
    const auto f = as<float>(cast(dt, CTN_F32, h.data(), 65536));
    ASSERT_EQ(f.size(), 65536u);
    for (uint32_t i = 0; i < 65536; ++i) {
      const float want = dt == CTN_F16 ? ctn_desc_f16_to_f32(h[i]) : ctn_desc_bf16_to_f32(h[i]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(f[i])) << i;
      } else {
        ASSERT_EQ(ctn_desc_f32_bits(f[i]), ctn_desc_f32_bits(want)) << ctn_desc_dtype_name(dt) << " " << i;
      }
    }
  }
}

TEST_F(Cpu, F32NarrowsAsTheScalarRule) {
  // Random bit patterns (every exponent) and the edge values, long enough for the vector loops.
  std::mt19937 rng(27);
  std::vector<float> x;
  for (float v : {0.f, -0.f, 1.f + 0x1p-11f, 1.f + 0x1p-8f, 65504.f, 65520.f, 0x1p-25f, 0x1p-24f,
                  0x1.8p-24f, INFINITY, -INFINITY, NAN, std::numeric_limits<float>::max()})
    x.push_back(v);
  while (x.size() < 200003) x.push_back(bits_f32(rng()));
  const int64_t n = static_cast<int64_t>(x.size());
  const auto h = as<uint16_t>(cast(CTN_F32, CTN_F16, x.data(), n));
  const auto b = as<uint16_t>(cast(CTN_F32, CTN_BF16, x.data(), n));
  ASSERT_EQ(h.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(f16_is_nan(h[i]) && bf16_is_nan(b[i])) << i;
      continue;
    }
    ASSERT_EQ(h[i], ctn_desc_f32_to_f16(x[i])) << "f16 of " << x[i];
    // AVX512_BF16's instruction flushes f32 subnormal inputs to zero (half.h): allowed there.
    const bool subnormal = std::fpclassify(x[i]) == FP_SUBNORMAL;
    if (!(subnormal && (b[i] & 0x7fffu) == 0)) {
      ASSERT_EQ(b[i], ctn_desc_f32_to_bf16(x[i])) << "bf16 of " << x[i];
    }
  }
}

TEST_F(Cpu, HalfToHalfAndF64) {
  const std::vector<double> d = {1.0 + 0x1p-11 + 0x1p-40, 1e300, -3.25, 0x1p-25 + 0x1p-60};
  const auto h = as<uint16_t>(cast(CTN_F64, CTN_F16, d.data(), 4));
  EXPECT_EQ(h, (std::vector<uint16_t>{0x3c01, 0x7c00, 0xc280, 0x0001}));
  // f16 -> bf16 rounds the f16 value once: 1 + 2^-10 is a bf16 tie (down to 1).
  const auto b = as<uint16_t>(cast(CTN_F16, CTN_BF16, h.data(), 4));
  EXPECT_EQ(b, (std::vector<uint16_t>{0x3f80, 0x7f80, 0xc050, 0x3380}));
}

TEST_F(Cpu, CastsToI8SaturateOrWrap) {
  const std::vector<float> f = {-300.f, -128.5f, -1.5f, 0.7f, 127.9f, 300.f, NAN, INFINITY};
  std::vector<uint16_t> h;
  for (float v : f) h.push_back(ctn_desc_f32_to_f16(v));
  const std::vector<int8_t> want = {-128, -128, -1, 0, 127, 127, 0, 127};
  EXPECT_EQ(as<int8_t>(cast(CTN_F32, CTN_I8, f.data(), 8)), want);
  EXPECT_EQ(as<int8_t>(cast(CTN_F16, CTN_I8, h.data(), 8)), want);  // -128.5 is -128.5 in f16 too
  const std::vector<int32_t> i = {300, -129, 127, -5};
  EXPECT_EQ(as<int8_t>(cast(CTN_I32, CTN_I8, i.data(), 4)), (std::vector<int8_t>{44, 127, 127, -5}));
  const std::vector<int8_t> back = {-128, -1, 0, 127};
  const auto bh = as<uint16_t>(cast(CTN_I8, CTN_BF16, back.data(), 4));
  EXPECT_EQ(bh, (std::vector<uint16_t>{0xc300, 0xbf80, 0x0000, 0x42fe}));
}

// i8 and f16 through the bit-moving and comparing kernels: lt on signed bytes (a u8 compare
// would call -1 greater than 1), where and permute on 2-byte elements.
TEST_F(Cpu, I8CompareAndHalfWherePermute) {
  ctn_graph *g = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
  const int64_t s4 = 4, s23[2] = {2, 3};
  ctn_node a, b, lt, h, z, w, p;
  CTN_ASSERT_OK(ctn_input(g, "a", CTN_I8, 1, &s4, &a));
  CTN_ASSERT_OK(ctn_input(g, "b", CTN_I8, 1, &s4, &b));
  CTN_ASSERT_OK(ctn_compare(g, "lt", a, b, &lt));
  CTN_ASSERT_OK(ctn_input(g, "h", CTN_F16, 1, &s4, &h));
  CTN_ASSERT_OK(ctn_scalar(g, CTN_F16, -0.5, &z));
  CTN_ASSERT_OK(ctn_where(g, lt, h, z, &w));
  ctn_node m;
  CTN_ASSERT_OK(ctn_input(g, "m", CTN_F16, 2, s23, &m));
  const int32_t perm[2] = {1, 0};
  CTN_ASSERT_OK(ctn_permute(g, m, perm, &p));
  const ctn_node outs_n[2] = {w, p};
  ctn_plan *plan = nullptr;
  CTN_ASSERT_OK(ctn_plan_compile(g, 2, outs_n, nullptr, &plan));
  const int8_t av[4] = {-1, 5, -128, 3}, bv[4] = {1, -5, 127, 3};
  uint16_t hv[4], mv[6];
  for (int i = 0; i < 4; ++i) hv[i] = ctn_desc_f32_to_f16(static_cast<float>(i) + 0.25f);
  for (int i = 0; i < 6; ++i) mv[i] = ctn_desc_f32_to_f16(static_cast<float>(10 * i));
  ctn_tensor *at = nullptr, *bt = nullptr, *ht = nullptr, *mt = nullptr, *wt = nullptr, *pt = nullptr;
  CTN_ASSERT_OK(ctn_tensor_create(CTN_I8, 1, &s4, av, &at));
  CTN_ASSERT_OK(ctn_tensor_create(CTN_I8, 1, &s4, bv, &bt));
  CTN_ASSERT_OK(ctn_tensor_create(CTN_F16, 1, &s4, hv, &ht));
  CTN_ASSERT_OK(ctn_tensor_create(CTN_F16, 2, s23, mv, &mt));
  CTN_ASSERT_OK(ctn_plan_output_create(plan, 0, &wt));
  CTN_ASSERT_OK(ctn_plan_output_create(plan, 1, &pt));
  const ctn_node in[4] = {a, b, h, m};
  const ctn_tensor *fv[4] = {at, bt, ht, mt};
  ctn_tensor *const outs[2] = {wt, pt};
  CTN_ASSERT_OK(ctn_plan_run(plan, 4, in, fv, 2, outs));
  uint16_t wv[4], pv[6];
  CTN_ASSERT_OK(ctn_tensor_read(wt, wv, sizeof wv));
  CTN_ASSERT_OK(ctn_tensor_read(pt, pv, sizeof pv));
  const float want_w[4] = {0.25f, -0.5f, 2.25f, -0.5f};  // lt: -1<1, 5<-5 no, -128<127, 3<3 no
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ctn_desc_f16_to_f32(wv[i]), want_w[i]) << i;
  const float want_p[6] = {0, 30, 10, 40, 20, 50};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(ctn_desc_f16_to_f32(pv[i]), want_p[i]) << i;
  for (ctn_tensor *t : {at, bt, ht, mt, wt, pt}) ctn_tensor_release(t);
  ctn_plan_release(plan);
  ctn_graph_release(g);
}

// An eager bf16 graph: softmax (widened) of x * 2 (native) on the CPU, its gradient too.
TEST_F(Cpu, EagerBf16) {
  ctn_graph *g = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, CTN_GRAPH_EAGER, &g));
  const int64_t shape[2] = {2, 3};
  const float xv[6] = {0.5f, -1.f, 2.f, 0.f, 0.25f, -0.75f};  // exact in bf16
  uint16_t xb[6];
  for (int i = 0; i < 6; ++i) xb[i] = ctn_desc_f32_to_bf16(xv[i]);
  ctn_tensor *xt = nullptr;
  CTN_ASSERT_OK(ctn_tensor_create(CTN_BF16, 2, shape, xb, &xt));
  ctn_node x, two, y, s, loss, dx;
  CTN_ASSERT_OK(ctn_variable(g, "x", xt, &x));
  CTN_ASSERT_OK(ctn_scalar(g, CTN_BF16, 2.0, &two));
  CTN_ASSERT_OK(ctn_mul(g, x, two, &y));
  CTN_ASSERT_OK(ctn_softmax(g, y, -1, &s));
  CTN_ASSERT_OK(ctn_sum(g, s, 0, nullptr, 0, &loss));
  CTN_ASSERT_OK(ctn_grad(g, loss, 1, &x, &dx));
  const char *where = nullptr;
  CTN_ASSERT_OK(ctn_graph_node_backend(g, s, &where));
  EXPECT_STREQ(where, "cpu");
  ctn_tensor *st = nullptr, *dt = nullptr;
  CTN_ASSERT_OK(ctn_graph_value(g, s, &st));
  CTN_ASSERT_OK(ctn_graph_value(g, dx, &dt));
  uint16_t sv[6], dv[6];
  CTN_ASSERT_OK(ctn_tensor_read(st, sv, sizeof sv));
  CTN_ASSERT_OK(ctn_tensor_read(dt, dv, sizeof dv));
  for (int r = 0; r < 2; ++r) {
    double den = 0;
    for (int j = 0; j < 3; ++j) den += std::exp(2.0 * xv[r * 3 + j]);
    for (int j = 0; j < 3; ++j) {
      const double want = std::exp(2.0 * xv[r * 3 + j]) / den;
      EXPECT_NEAR(ctn_desc_bf16_to_f32(sv[r * 3 + j]), want, 8e-3 * want + 1e-6) << r << "," << j;
      EXPECT_NEAR(ctn_desc_bf16_to_f32(dv[r * 3 + j]), 0.0, 1e-2);  // the rows sum to 1 whatever x is
    }
  }
  ctn_tensor_release(xt);
  ctn_tensor_release(st);
  ctn_tensor_release(dt);
  ctn_graph_release(g);
}

// CTN_RUN_CHECK_NUMERICS reads 16-bit tensors: an f16 overflow (300 * 300 > 65504) is found.
TEST_F(Cpu, NumericsCheckSeesF16Infinity) {
  ctn_graph *g = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
  const int64_t n = 3;
  ctn_node x, y;
  CTN_ASSERT_OK(ctn_input(g, "x", CTN_F16, 1, &n, &x));
  CTN_ASSERT_OK(ctn_mul(g, x, x, &y));
  ctn_plan *p = nullptr;
  CTN_ASSERT_OK(ctn_plan_compile(g, 1, &y, nullptr, &p));
  const uint16_t xv[3] = {ctn_desc_f32_to_f16(2.f), ctn_desc_f32_to_f16(300.f), ctn_desc_f32_to_f16(-1.f)};
  ctn_tensor *xt = nullptr, *yt = nullptr;
  CTN_ASSERT_OK(ctn_tensor_create(CTN_F16, 1, &n, xv, &xt));
  CTN_ASSERT_OK(ctn_plan_output_create(p, 0, &yt));
  const ctn_tensor *fv[1] = {xt};
  ctn_tensor *const outs[] = {yt};
  ctn_run_options o{};
  o.struct_size = sizeof o;
  CTN_EXPECT_OK(ctn_plan_run_with_options(p, &o, 1, &x, fv, 1, outs));  // unchecked: runs
  uint16_t yv[3] = {};
  CTN_ASSERT_OK(ctn_tensor_read(yt, yv, sizeof yv));
  EXPECT_EQ(yv[0], ctn_desc_f32_to_f16(4.f));
  EXPECT_EQ(yv[1], 0x7c00);  // inf
  o.flags = CTN_RUN_CHECK_NUMERICS;
  EXPECT_EQ(ctn_plan_run_with_options(p, &o, 1, &x, fv, 1, outs), CTN_ERR_NUMERICS);
  EXPECT_NE(std::string(ctn_last_error()).find("mul"), std::string::npos) << ctn_last_error();
  ctn_tensor_release(xt);
  ctn_tensor_release(yt);
  ctn_plan_release(p);
  ctn_graph_release(g);
}

// A bf16 / f16 matmul (plain and transposed operands) on each path of the half_matmul option,
// against the f64 product of the same 16-bit inputs.
TEST_F(Cpu, HalfMatmulPaths) {
  EXPECT_EQ(ctn_context_set_option(c.ctx, "cpu", "half_matmul", "fast"), CTN_ERR_INVALID_ARGUMENT);
  const int64_t m = 37, k = 48, n = 40;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const char *path : {"auto", "convert", "own", "onednn"}) {
    if (ctn_context_set_option(c.ctx, "cpu", "half_matmul", path) != CTN_OK) {
      std::printf("half_matmul=%s: %s (skipped)\n", path, ctn_last_error());
      continue;
    }
    for (ctn_dtype dt : {CTN_BF16, CTN_F16})
      for (int t = 0; t < 4; ++t) {
        const int ta = t & 1, tb = t >> 1;
        SCOPED_TRACE(std::string(path) + " " + ctn_desc_dtype_name(dt) + " ta " + std::to_string(ta) + " tb " + std::to_string(tb));
        std::vector<uint16_t> a(m * k), b(k * n);
        for (auto &e : a) e = dt == CTN_F16 ? ctn_desc_f32_to_f16(u(rng)) : ctn_desc_f32_to_bf16(u(rng));
        for (auto &e : b) e = dt == CTN_F16 ? ctn_desc_f32_to_f16(u(rng)) : ctn_desc_f32_to_bf16(u(rng));
        auto val = [&](uint16_t h) { return double(dt == CTN_F16 ? ctn_desc_f16_to_f32(h) : ctn_desc_bf16_to_f32(h)); };
        ctn_graph *g = nullptr;
        CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
        const int64_t as[2] = {ta ? k : m, ta ? m : k}, bs[2] = {tb ? n : k, tb ? k : n};
        ctn_node an, bn, y;
        CTN_ASSERT_OK(ctn_input(g, "a", dt, 2, as, &an));
        CTN_ASSERT_OK(ctn_input(g, "b", dt, 2, bs, &bn));
        CTN_ASSERT_OK(ctn_matmul(g, an, bn, ta, tb, &y));
        ctn_plan *p = nullptr;
        CTN_ASSERT_OK(ctn_plan_compile(g, 1, &y, nullptr, &p));
        ctn_tensor *at = nullptr, *bt = nullptr, *yt = nullptr;
        CTN_ASSERT_OK(ctn_tensor_create(dt, 2, as, a.data(), &at));
        CTN_ASSERT_OK(ctn_tensor_create(dt, 2, bs, b.data(), &bt));
        CTN_ASSERT_OK(ctn_plan_output_create(p, 0, &yt));
        const ctn_node in[2] = {an, bn};
        const ctn_tensor *fv[2] = {at, bt};
        ctn_tensor *const outs[] = {yt};
        CTN_ASSERT_OK(ctn_plan_run(p, 2, in, fv, 1, outs));
        std::vector<uint16_t> yv(m * n);
        CTN_ASSERT_OK(ctn_tensor_read(yt, yv.data(), yv.size() * 2));
        double num = 0, den = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double r = 0;
            for (int64_t q = 0; q < k; ++q)
              r += val(a[ta ? q * m + i : i * k + q]) * val(b[tb ? j * k + q : q * n + j]);
            const double d = val(yv[i * n + j]) - r;
            num += d * d;
            den += r * r;
          }
        EXPECT_LT(num / den, dt == CTN_F16 ? 4e-6 : 1e-4);  // one rounding of the f32 sum
        ctn_tensor_release(at);
        ctn_tensor_release(bt);
        ctn_tensor_release(yt);
        ctn_plan_release(p);
        ctn_graph_release(g);
      }
  }
}

// Runs `op` on bf16 inputs (their shapes and values) with half_matmul set to `path`; the bf16
// output's values.
std::vector<float> run_bf16_op(ctn_context *ctx, const char *path, const char *op, const ctn_attrs &at,
                               const std::vector<std::vector<int64_t>> &shapes,
                               const std::vector<std::vector<uint16_t>> &vals) {
  EXPECT_EQ(ctn_context_set_option(ctx, "cpu", "half_matmul", path), CTN_OK) << ctn_last_error();
  ctn_graph *g = nullptr;
  EXPECT_EQ(ctn_graph_create(ctx, 0, &g), CTN_OK) << ctn_last_error();
  std::vector<ctn_node> in(shapes.size());
  std::vector<ctn_tensor *> ts(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    EXPECT_EQ(ctn_input(g, name.c_str(), CTN_BF16, static_cast<uint32_t>(shapes[i].size()), shapes[i].data(), &in[i]),
              CTN_OK);
    EXPECT_EQ(ctn_tensor_create(CTN_BF16, static_cast<uint32_t>(shapes[i].size()), shapes[i].data(), vals[i].data(), &ts[i]),
              CTN_OK);
  }
  ctn_node y;
  EXPECT_EQ(ctn_op(g, op, static_cast<uint32_t>(in.size()), in.data(), &at, &y), CTN_OK) << op << ": " << ctn_last_error();
  ctn_plan *p = nullptr;
  EXPECT_EQ(ctn_plan_compile(g, 1, &y, nullptr, &p), CTN_OK) << ctn_last_error();
  ctn_tensor *yt = nullptr;
  EXPECT_EQ(ctn_plan_output_create(p, 0, &yt), CTN_OK);
  std::vector<const ctn_tensor *> fv(ts.begin(), ts.end());
  ctn_tensor *const outs[] = {yt};
  EXPECT_EQ(ctn_plan_run(p, static_cast<uint32_t>(in.size()), in.data(), fv.data(), 1, outs), CTN_OK) << ctn_last_error();
  int64_t numel = 0;
  EXPECT_EQ(ctn_tensor_numel(yt, &numel), CTN_OK);
  std::vector<uint16_t> h(static_cast<size_t>(numel));
  EXPECT_EQ(ctn_tensor_read(yt, h.data(), h.size() * 2), CTN_OK);
  std::vector<float> r;
  for (uint16_t e : h) r.push_back(ctn_desc_bf16_to_f32(e));
  for (ctn_tensor *t : ts) ctn_tensor_release(t);
  ctn_tensor_release(yt);
  ctn_plan_release(p);
  ctn_graph_release(g);
  return r;
}

// The bf16 convolutions and their gradients on half_matmul = own (the own bf16 GEMM where the
// CPU has AVX512_BF16, k_conv.cpp) against the f32 kernels between conversions (half_matmul =
// convert): the same bf16 products summed in f32 in another order, so each result is within a
// bf16 rounding or two of the other's (and both of the exact value).
TEST_F(Cpu, Bf16ConvolutionsAgreeWithTheConvertPath) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  auto rand = [&](const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (auto &e : v) e = ctn_desc_f32_to_bf16(u(rng));
    return v;
  };
  // x [3,5,9,9], w [7,5,3,3], stride 2, pad 1 -> y [3,7,5,5]; groups 1.
  const std::vector<int64_t> xs = {3, 5, 9, 9}, ws = {7, 5, 3, 3}, ys = {3, 7, 5, 5}, bs = {7};
  const auto x = rand(xs), w = rand(ws), dy = rand(ys), bias = rand(bs), wt = rand({5, 7, 3, 3});
  auto conv_attrs = [](std::initializer_list<int64_t> extra) {
    ctn_attrs a{};
    const int64_t base[7] = {2, 2, 1, 1, 1, 1, 1};
    for (int i = 0; i < 7; ++i) a.i[a.ni++] = base[i];
    for (int64_t e : extra) a.i[a.ni++] = e;
    return a;
  };
  struct Case {
    const char *op;
    ctn_attrs at;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<std::vector<uint16_t>> vals;
  };
  const Case cases[] = {
      {CTN_OP_CONV2D, conv_attrs({}), {xs, ws}, {x, w}},
      {CTN_OP_CONV2D_BIAS_ACT, conv_attrs({CTN_ACT_RELU}), {xs, ws, bs}, {x, w, bias}},
      {CTN_OP_CONV2D_GRAD_INPUT, conv_attrs({9, 9}), {ys, ws}, {dy, w}},
      {CTN_OP_CONV2D_GRAD_WEIGHT, conv_attrs({3, 3}), {xs, ys}, {x, dy}},
      {CTN_OP_CONV_TRANSPOSE2D, conv_attrs({0, 0}), {xs, {5, 7, 3, 3}}, {x, wt}},
  };
  for (const Case &cs : cases) {
    SCOPED_TRACE(cs.op);
    const auto own = run_bf16_op(c.ctx, "own", cs.op, cs.at, cs.shapes, cs.vals);
    const auto ref = run_bf16_op(c.ctx, "convert", cs.op, cs.at, cs.shapes, cs.vals);
    ASSERT_EQ(own.size(), ref.size());
    ASSERT_FALSE(own.empty());
    float scale = 0;
    for (float r : ref) scale = std::max(scale, std::fabs(r));
    ASSERT_GT(scale, 0.5f);
    for (size_t i = 0; i < own.size(); ++i)
      ASSERT_NEAR(own[i], ref[i], std::fabs(ref[i]) * 0x1p-7f + scale * 0x1p-12f) << i;
  }
  EXPECT_EQ(ctn_context_set_option(c.ctx, "cpu", "half_matmul", "auto"), CTN_OK);
}

// loss = sum(tanh(x @ w) * c) in f16 and in f32; the gradient wrt w agrees to f16 accuracy.
TEST_F(Cpu, GradientThroughAnF16Graph) {
  const int64_t xs[2] = {8, 16}, ws[2] = {16, 4}, cs[2] = {8, 4};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> xv(128), wv(64), cv(32);
  for (auto *v : {&xv, &wv, &cv})
    for (float &e : *v) e = ctn_desc_f16_to_f32(ctn_desc_f32_to_f16(u(rng) * 0.5f));  // exact in f16
  std::vector<std::vector<float>> grads;
  for (ctn_dtype dt : {CTN_F32, CTN_F16}) {
    ctn_graph *g = nullptr;
    CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
    ctn_node x, w, cc, xw, t, m, loss, dw;
    CTN_ASSERT_OK(ctn_input(g, "x", dt, 2, xs, &x));
    CTN_ASSERT_OK(ctn_input(g, "w", dt, 2, ws, &w));
    CTN_ASSERT_OK(ctn_input(g, "c", dt, 2, cs, &cc));
    CTN_ASSERT_OK(ctn_matmul(g, x, w, 0, 0, &xw));
    CTN_ASSERT_OK(ctn_tanh(g, xw, &t));
    CTN_ASSERT_OK(ctn_mul(g, t, cc, &m));
    CTN_ASSERT_OK(ctn_sum(g, m, 0, nullptr, 0, &loss));
    CTN_ASSERT_OK(ctn_grad(g, loss, 1, &w, &dw));
    ctn_dtype gdt = CTN_F32;
    CTN_ASSERT_OK(ctn_node_info(g, dw, &gdt, nullptr, nullptr));
    EXPECT_EQ(gdt, dt);
    ctn_plan *p = nullptr;
    CTN_ASSERT_OK(ctn_plan_compile(g, 1, &dw, nullptr, &p));
    std::vector<ctn_tensor *> feeds;
    const std::vector<float> *vals[3] = {&xv, &wv, &cv};
    const int64_t *shapes[3] = {xs, ws, cs};
    for (int k = 0; k < 3; ++k) {
      std::vector<uint16_t> h;
      for (float v : *vals[k]) h.push_back(ctn_desc_f32_to_f16(v));
      ctn_tensor *tt = nullptr;
      CTN_ASSERT_OK(ctn_tensor_create(dt, 2, shapes[k], dt == CTN_F16 ? static_cast<const void *>(h.data()) : vals[k]->data(), &tt));
      feeds.push_back(tt);
    }
    ctn_tensor *out = nullptr;
    CTN_ASSERT_OK(ctn_plan_output_create(p, 0, &out));
    const ctn_node in[3] = {x, w, cc};
    const ctn_tensor *fv[3] = {feeds[0], feeds[1], feeds[2]};
    ctn_tensor *const outs[] = {out};
    CTN_ASSERT_OK(ctn_plan_run(p, 3, in, fv, 1, outs));
    std::vector<float> gv(64);
    if (dt == CTN_F16) {
      std::vector<uint16_t> h(64);
      CTN_ASSERT_OK(ctn_tensor_read(out, h.data(), 128));
      for (int k = 0; k < 64; ++k) gv[k] = ctn_desc_f16_to_f32(h[k]);
    } else {
      CTN_ASSERT_OK(ctn_tensor_read(out, gv.data(), 256));
    }
    grads.push_back(gv);
    for (ctn_tensor *tt : feeds) ctn_tensor_release(tt);
    ctn_tensor_release(out);
    ctn_plan_release(p);
    ctn_graph_release(g);
  }
  double num = 0, den = 0;
  for (int k = 0; k < 64; ++k) {
    num += (grads[1][k] - grads[0][k]) * (grads[1][k] - grads[0][k]);
    den += grads[0][k] * grads[0][k];
  }
  EXPECT_GT(den, 0.1);
  EXPECT_LT(std::sqrt(num / den), 5e-3) << "relative error of the f16 gradient";
}

}  // namespace
