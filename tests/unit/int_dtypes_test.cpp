// The ABI 1.6 integer dtypes i16, u16, u32, u64 (issue 27) through graphs on the CPU backend:
// sizes and names, ctn_scalar's range checks, casts between them and every other dtype (integer
// casts wrap modulo 2^bits, float -> integer saturates with NaN -> 0, integer -> 16-bit float
// rounds to nearest even), comparisons that read each dtype exactly, the bit-moving ops, and the
// core's refusal of float-only ops. The integer arithmetic kernels (which the core's float-only
// arithmetic ops do not reach, as for i32) are tested on the plugin in cpu_plugin_test.cpp.
#include <chutney/chutney.h>
#include <chutney/desc.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "test_helpers.h"

namespace {

template <class T>
std::vector<T> as(const std::vector<unsigned char> &b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

TEST(IntDtypes, SizesNamesAndScalars) {
  const struct {
    ctn_dtype dt;
    size_t size;
    const char *name;
    double lo, hi;  // the smallest and largest value ctn_scalar takes
  } kinds[] = {{CTN_I16, 2, "i16", -32768, 32767},
               {CTN_U16, 2, "u16", 0, 65535},
               {CTN_U32, 4, "u32", 0, 4294967295.0},
               {CTN_U64, 8, "u64", 0, 18446744073709549568.0 /* the largest double below 2^64 */}};
  Ctx c;
  ctn_graph *g = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
  for (const auto &k : kinds) {
    SCOPED_TRACE(k.name);
    EXPECT_EQ(ctn_dtype_size(k.dt), k.size);
    EXPECT_STREQ(ctn_dtype_name(k.dt), k.name);
    EXPECT_EQ(ctn_desc_dtype_size(k.dt), k.size);
    EXPECT_STREQ(ctn_desc_dtype_name(k.dt), k.name);
    ctn_node n = CTN_NODE_NONE;
    EXPECT_EQ(ctn_scalar(g, k.dt, k.lo, &n), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_scalar(g, k.dt, k.hi, &n), CTN_OK) << ctn_last_error();
    for (double bad : {k.lo - 1, k.dt == CTN_U64 ? 18446744073709551616.0 : k.hi + 1, double(NAN)}) {
      n = CTN_NODE_NONE;
      EXPECT_EQ(ctn_scalar(g, k.dt, bad, &n), CTN_ERR_INVALID_ARGUMENT) << bad;
      EXPECT_NE(std::string(ctn_last_error()).find(std::string("does not fit in ") + k.name), std::string::npos)
          << ctn_last_error();
      EXPECT_EQ(n, CTN_NODE_NONE);
    }
  }
  EXPECT_EQ(ctn_dtype_size(static_cast<ctn_dtype>(CTN_DTYPE_COUNT_V6)), 0u);
  ctn_graph_release(g);
}

struct CpuInt : ::testing::Test {
  Ctx c;
  // y = cast(x, to) on n elements of `from`; y's bytes.
  std::vector<unsigned char> cast(ctn_dtype from, ctn_dtype to, const void *x, int64_t n) {
    ctn_graph *g = nullptr;
    EXPECT_EQ(ctn_graph_create(c.ctx, 0, &g), CTN_OK) << ctn_last_error();
    ctn_node in = CTN_NODE_NONE, out = CTN_NODE_NONE;
    EXPECT_EQ(ctn_input(g, "x", from, 1, &n, &in), CTN_OK) << ctn_last_error();
    EXPECT_EQ(ctn_cast(g, in, to, &out), CTN_OK) << ctn_last_error();
    ctn_tensor *xt = nullptr;
    EXPECT_EQ(ctn_tensor_create(from, 1, &n, x, &xt), CTN_OK) << ctn_last_error();
    auto r = run_once_as(tensor_bytes, g, {out}, {in}, {xt});
    ctn_tensor_release(xt);
    ctn_graph_release(g);
    return r.empty() ? std::vector<unsigned char>{} : r[0];
  }
  // The outputs of op (by name) over inputs of dtype dt: a (n elements) and, for two-input
  // ops, b (n elements, or one broadcast over a).
  std::vector<unsigned char> run(const char *op, ctn_dtype dt, const void *a, int64_t n, const void *b = nullptr,
                                 int64_t nb = 0) {
    ctn_graph *g = nullptr;
    EXPECT_EQ(ctn_graph_create(c.ctx, 0, &g), CTN_OK) << ctn_last_error();
    ctn_node in[2] = {CTN_NODE_NONE, CTN_NODE_NONE}, out = CTN_NODE_NONE;
    EXPECT_EQ(ctn_input(g, "a", dt, 1, &n, &in[0]), CTN_OK) << ctn_last_error();
    if (b) {
      EXPECT_EQ(ctn_input(g, "b", dt, 1, &nb, &in[1]), CTN_OK) << ctn_last_error();
    }
    EXPECT_EQ(ctn_op(g, op, b ? 2 : 1, in, nullptr, &out), CTN_OK) << ctn_last_error();
    ctn_tensor *at = nullptr, *bt = nullptr;
    EXPECT_EQ(ctn_tensor_create(dt, 1, &n, a, &at), CTN_OK) << ctn_last_error();
    if (b) {
      EXPECT_EQ(ctn_tensor_create(dt, 1, &nb, b, &bt), CTN_OK) << ctn_last_error();
    }
    std::vector<ctn_node> feeds = {in[0]};
    std::vector<const ctn_tensor *> vals = {at};
    if (b) {
      feeds.push_back(in[1]);
      vals.push_back(bt);
    }
    auto r = run_once_as(tensor_bytes, g, {out}, feeds, vals);
    ctn_tensor_release(at);
    ctn_tensor_release(bt);
    ctn_graph_release(g);
    return r.empty() ? std::vector<unsigned char>{} : r[0];
  }
};

// Float -> integer: truncation toward zero, saturation at the dtype's ends, NaN -> 0 (ONNX leaves
// out-of-range casts undefined; chutney saturates as it does for i32 and i64).
TEST_F(CpuInt, CastsFromFloatSaturate) {
  const std::vector<float> f = {-1.5f, 0.5f, 65535.9f, 70000.f, NAN, -INFINITY, INFINITY, 3.7f};
  EXPECT_EQ(as<uint16_t>(cast(CTN_F32, CTN_U16, f.data(), 8)),
            (std::vector<uint16_t>{0, 0, 65535, 65535, 0, 0, 65535, 3}));
  EXPECT_EQ(as<int16_t>(cast(CTN_F32, CTN_I16, f.data(), 8)),
            (std::vector<int16_t>{-1, 0, 32767, 32767, 0, -32768, 32767, 3}));
  EXPECT_EQ(as<uint32_t>(cast(CTN_F32, CTN_U32, f.data(), 8)),
            (std::vector<uint32_t>{0, 0, 65535, 70000, 0, 0, 4294967295u, 3}));
  // The largest f32 below 2^32 converts exactly; 2^32 itself saturates.
  const std::vector<float> big = {4294967040.f, 4294967296.f};
  EXPECT_EQ(as<uint32_t>(cast(CTN_F32, CTN_U32, big.data(), 2)), (std::vector<uint32_t>{4294967040u, 4294967295u}));
  const std::vector<double> d = {1e20, 9223372036854775808.0, -0.5, 18446744073709549568.0};
  EXPECT_EQ(as<uint64_t>(cast(CTN_F64, CTN_U64, d.data(), 4)),
            (std::vector<uint64_t>{UINT64_MAX, 9223372036854775808ull, 0, 18446744073709549568ull}));
  const std::vector<uint16_t> h = {ctn_desc_f32_to_f16(-2.f), ctn_desc_f32_to_f16(65504.f),
                                   ctn_desc_f32_to_f16(INFINITY), ctn_desc_f32_to_f16(1000.5f)};
  EXPECT_EQ(as<int16_t>(cast(CTN_F16, CTN_I16, h.data(), 4)), (std::vector<int16_t>{-2, 32767, 32767, 1000}));
  EXPECT_EQ(as<uint16_t>(cast(CTN_F16, CTN_U16, h.data(), 4)), (std::vector<uint16_t>{0, 65504, 65535, 1000}));
}

// Integer -> integer keeps the low bits (two's complement), as ONNX's Cast, numpy's astype and C's
// conversions to unsigned types do.
TEST_F(CpuInt, IntegerCastsWrap) {
  const std::vector<int32_t> i = {70000, -1, 65536, -32769};
  EXPECT_EQ(as<uint16_t>(cast(CTN_I32, CTN_U16, i.data(), 4)), (std::vector<uint16_t>{4464, 65535, 0, 32767}));
  EXPECT_EQ(as<int16_t>(cast(CTN_I32, CTN_I16, i.data(), 4)), (std::vector<int16_t>{4464, -1, 0, 32767}));
  EXPECT_EQ(as<uint64_t>(cast(CTN_I32, CTN_U64, i.data(), 4)),
            (std::vector<uint64_t>{70000, UINT64_MAX, 65536, 18446744073709518847ull}));
  const std::vector<int64_t> l = {-1, 4294967301LL};
  EXPECT_EQ(as<uint32_t>(cast(CTN_I64, CTN_U32, l.data(), 2)), (std::vector<uint32_t>{4294967295u, 5}));
  const std::vector<uint64_t> u = {UINT64_MAX, 9223372036854775808ull, 65537};
  EXPECT_EQ(as<int64_t>(cast(CTN_U64, CTN_I64, u.data(), 3)), (std::vector<int64_t>{-1, INT64_MIN, 65537}));
  EXPECT_EQ(as<uint16_t>(cast(CTN_U64, CTN_U16, u.data(), 3)), (std::vector<uint16_t>{65535, 0, 1}));
  const std::vector<int8_t> q = {-1, -128, 127};
  EXPECT_EQ(as<uint16_t>(cast(CTN_I8, CTN_U16, q.data(), 3)), (std::vector<uint16_t>{65535, 65408, 127}));
  const std::vector<uint16_t> w = {65535, 32768, 7};
  EXPECT_EQ(as<int16_t>(cast(CTN_U16, CTN_I16, w.data(), 3)), (std::vector<int16_t>{-1, -32768, 7}));
  EXPECT_EQ(as<uint8_t>(cast(CTN_U16, CTN_U8, w.data(), 3)), (std::vector<uint8_t>{255, 0, 7}));
  EXPECT_EQ(as<int32_t>(cast(CTN_U16, CTN_I32, w.data(), 3)), (std::vector<int32_t>{65535, 32768, 7}));
  const std::vector<uint32_t> x = {4294967295u, 2147483648u};
  EXPECT_EQ(as<int32_t>(cast(CTN_U32, CTN_I32, x.data(), 2)), (std::vector<int32_t>{-1, INT32_MIN}));
  EXPECT_EQ(as<int64_t>(cast(CTN_U32, CTN_I64, x.data(), 2)), (std::vector<int64_t>{4294967295LL, 2147483648LL}));
}

// Integer -> float rounds to nearest even (u64 past 2^53, u16 past the f16 range to infinity);
// to and from bool: nonzero is true, true is 1.
TEST_F(CpuInt, CastsToFloatsAndBool) {
  const std::vector<uint64_t> u = {UINT64_MAX, 9007199254740993ull, 3};
  EXPECT_EQ(as<double>(cast(CTN_U64, CTN_F64, u.data(), 3)),
            (std::vector<double>{18446744073709551616.0, 9007199254740992.0, 3.0}));
  EXPECT_EQ(as<float>(cast(CTN_U64, CTN_F32, u.data(), 3)), (std::vector<float>{18446744073709551616.f, 9007199254740992.f, 3.f}));
  const std::vector<uint16_t> w = {65535, 2049, 65504, 1};
  EXPECT_EQ(as<uint16_t>(cast(CTN_U16, CTN_F16, w.data(), 4)), (std::vector<uint16_t>{0x7c00, 0x6800, 0x7bff, 0x3c00}));
  const std::vector<int16_t> s = {-32768, 257, -1};
  EXPECT_EQ(as<uint16_t>(cast(CTN_I16, CTN_BF16, s.data(), 3)), (std::vector<uint16_t>{0xc700, 0x4380, 0xbf80}));
  EXPECT_EQ(as<float>(cast(CTN_I16, CTN_F32, s.data(), 3)), (std::vector<float>{-32768.f, 257.f, -1.f}));
  const std::vector<uint32_t> x = {0, 7, 4294967295u};
  EXPECT_EQ(as<uint8_t>(cast(CTN_U32, CTN_BOOL, x.data(), 3)), (std::vector<uint8_t>{0, 1, 1}));
  const std::vector<uint8_t> b = {1, 0, 1};
  EXPECT_EQ(as<uint64_t>(cast(CTN_BOOL, CTN_U64, b.data(), 3)), (std::vector<uint64_t>{1, 0, 1}));
  EXPECT_EQ(as<int16_t>(cast(CTN_BOOL, CTN_I16, b.data(), 3)), (std::vector<int16_t>{1, 0, 1}));
}

// Comparisons read each dtype exactly: 65535 > 1 in u16 (a signed read says -1), -1 < 1 in i16,
// 2^63 + 1 != 2^63 in u64 (an f64 read rounds them together).
TEST_F(CpuInt, ComparisonsReadEachDtype) {
  const std::vector<uint16_t> ua = {65535, 1, 5}, ub = {1, 65535, 5};
  EXPECT_EQ(as<uint8_t>(run("lt", CTN_U16, ua.data(), 3, ub.data(), 3)), (std::vector<uint8_t>{0, 1, 0}));
  const std::vector<int16_t> sa = {-1, 1, -32768}, sb = {1, -1, 32767};
  EXPECT_EQ(as<uint8_t>(run("lt", CTN_I16, sa.data(), 3, sb.data(), 3)), (std::vector<uint8_t>{1, 0, 1}));
  const std::vector<uint32_t> wa = {4294967295u, 0}, wb = {2147483648u, 0};
  EXPECT_EQ(as<uint8_t>(run("gt", CTN_U32, wa.data(), 2, wb.data(), 2)), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(as<uint8_t>(run("ge", CTN_U32, wa.data(), 2, wb.data(), 2)), (std::vector<uint8_t>{1, 1}));
  const std::vector<uint64_t> la = {9223372036854775809ull, 9223372036854775808ull}, lb = {9223372036854775808ull};
  EXPECT_EQ(as<uint8_t>(run("ne", CTN_U64, la.data(), 2, lb.data(), 1)), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(as<uint8_t>(run("eq", CTN_U64, la.data(), 2, lb.data(), 1)), (std::vector<uint8_t>{0, 1}));
}

// where and permute move the bits of any dtype of 2, 4 or 8 bytes.
TEST_F(CpuInt, WhereAndPermuteMoveBits) {
  ctn_graph *g = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
  const int64_t s3 = 3, s23[2] = {2, 3};
  ctn_node cond, a, b, w, m, p;
  CTN_ASSERT_OK(ctn_input(g, "c", CTN_BOOL, 1, &s3, &cond));
  CTN_ASSERT_OK(ctn_input(g, "a", CTN_U64, 1, &s3, &a));
  CTN_ASSERT_OK(ctn_scalar(g, CTN_U64, 7, &b));
  CTN_ASSERT_OK(ctn_where(g, cond, a, b, &w));
  CTN_ASSERT_OK(ctn_input(g, "m", CTN_I16, 2, s23, &m));
  const int32_t perm[2] = {1, 0};
  CTN_ASSERT_OK(ctn_permute(g, m, perm, &p));
  const uint8_t cv[3] = {1, 0, 1};
  const uint64_t av[3] = {UINT64_MAX, 1, 9223372036854775808ull};
  const int16_t mv[6] = {-1, 2, -3, 4, -5, 32767};
  ctn_tensor *ct = nullptr, *at = nullptr, *mt = nullptr;
  CTN_ASSERT_OK(ctn_tensor_create(CTN_BOOL, 1, &s3, cv, &ct));
  CTN_ASSERT_OK(ctn_tensor_create(CTN_U64, 1, &s3, av, &at));
  CTN_ASSERT_OK(ctn_tensor_create(CTN_I16, 2, s23, mv, &mt));
  auto r = run_once_as(tensor_bytes, g, {w, p}, {cond, a, m}, {ct, at, mt});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(as<uint64_t>(r[0]), (std::vector<uint64_t>{UINT64_MAX, 7, 9223372036854775808ull}));
  EXPECT_EQ(as<int16_t>(r[1]), (std::vector<int16_t>{-1, 4, 2, -5, -3, 32767}));
  ctn_tensor_release(ct);
  ctn_tensor_release(at);
  ctn_tensor_release(mt);
  ctn_graph_release(g);
}

// Arithmetic ops are float ops in the graph (as for i32 and i64): an integer operand is refused
// when the node is made, naming the op and the dtype, and the graph is unchanged.
TEST_F(CpuInt, GraphArithmeticIsFloatOnly) {
  for (const char *op : {"exp", "add", "relu"}) {
    for (ctn_dtype dt : {CTN_I16, CTN_U16, CTN_U32, CTN_U64}) {
      SCOPED_TRACE(std::string(op) + " " + ctn_dtype_name(dt));
      ctn_graph *g = nullptr;
      CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
      const int64_t n = 2;
      ctn_node in[2], y = CTN_NODE_NONE;
      CTN_ASSERT_OK(ctn_input(g, "a", dt, 1, &n, &in[0]));
      CTN_ASSERT_OK(ctn_input(g, "b", dt, 1, &n, &in[1]));
      EXPECT_EQ(ctn_op(g, op, std::strcmp(op, "add") ? 1 : 2, in, nullptr, &y), CTN_ERR_DTYPE);
      const std::string msg = ctn_last_error();
      EXPECT_NE(msg.find(op), std::string::npos) << msg;
      EXPECT_NE(msg.find(ctn_dtype_name(dt)), std::string::npos) << msg;
      EXPECT_EQ(y, CTN_NODE_NONE);
      uint32_t count = 0;
      CTN_ASSERT_OK(ctn_graph_node_count(g, &count));
      EXPECT_EQ(count, 2u);
      ctn_graph_release(g);
    }
  }
}

}  // namespace
