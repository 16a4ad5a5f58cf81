// The ABI 1.5 dtypes (f16, bf16, i8) through the doors tensors enter and leave by, apart from
// checkpoints (tests/unit/checkpoint_test.cpp): DLPack both ways, ONNX TensorProtos (raw_data
// and int32_data as the ONNX spec packs them), graph inputs and outputs of those types, Cast's
// target types, ctn_onnx_export of such tensors read back by the importer, and graph files.
// Everything is bit for bit: no door converts. Then the same for the ABI 1.6 integers (i16, u16,
// u32, u64), and the ONNX float8 types, which the importer carries as f16 (exact decoding, Cast
// rounding to the float8 grid as ONNX's reference does).
#include <chutney/checkpoint.h>
#include <chutney/desc.h>
#include <chutney/dlpack.h>
#include <chutney/onnx.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "../unit/test_helpers.h"
#include "pb_writer.h"

namespace {

using Bytes = std::vector<unsigned char>;

std::string tmp_path(const std::string &name) {
  static std::string dir = scratch_dir("ctn-lowp-test");
  return dir + "/" + name;
}

std::string write_file(const std::string &name, const std::string &bytes) {
  std::string p = tmp_path(name);
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

Bytes contents(const ctn_tensor *t) { return tensor_bytes(t); }

template <class T>
Bytes bytes_of(const std::vector<T> &v) {
  Bytes b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Bit patterns with every kind of value: normal, negative, largest finite, smallest subnormal,
// -0, infinity and a NaN with a payload, which no conversion may disturb.
const std::vector<uint16_t> kF16 = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7c00, 0x7e01};
const std::vector<uint16_t> kBF16 = {0x3f80, 0xc000, 0x7f7f, 0x0001, 0x8000, 0xff80, 0x7f81};
const std::vector<int8_t> kI8 = {-128, -1, 0, 1, 127, 42};

struct Case {
  ctn_dtype dt;
  uint8_t dl_code, dl_bits;
  int32_t onnx;  // TensorProto.DataType
  Bytes bits;
  std::vector<int32_t> int32_data;  // the same values as ONNX's int32_data holds them
};

std::vector<Case> cases() {
  std::vector<Case> c = {{CTN_F16, kDLFloat, 16, 10, bytes_of(kF16), {}},
                         {CTN_BF16, kDLBfloat, 16, 16, bytes_of(kBF16), {}},
                         {CTN_I8, kDLInt, 8, 3, bytes_of(kI8), {}}};
  for (uint16_t h : kF16) c[0].int32_data.push_back(h);   // bit patterns, zero-extended
  for (uint16_t h : kBF16) c[1].int32_data.push_back(h);
  for (int8_t q : kI8) c[2].int32_data.push_back(q);      // values, sign-extended
  return c;
}

// A constant of each case in `g`, in cases() order.
std::vector<ctn_node> case_constants(ctn_graph *g) {
  std::vector<ctn_node> out;
  for (const Case &c : cases()) {
    int64_t n = static_cast<int64_t>(c.int32_data.size());
    ctn_tensor *t = nullptr;
    EXPECT_EQ(ctn_tensor_create(c.dt, 1, &n, c.bits.data(), &t), CTN_OK) << ctn_last_error();
    ctn_node k = CTN_NODE_NONE;
    EXPECT_EQ(ctn_constant(g, t, &k), CTN_OK) << ctn_last_error();
    ctn_tensor_release(t);
    out.push_back(k);
  }
  return out;
}

// Runs the first three of `outs` (one per case, in cases() order): each must hold its case's
// bits. No kernel computes in the new dtypes here: the values only move.
void expect_case_bits(ctn_graph *g, std::vector<ctn_node> outs) {
  outs.resize(3);
  const auto got = run_once_as(tensor_bytes, g, outs);
  ASSERT_EQ(got.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(got[k], cases()[k].bits) << "output " << k << " (" << ctn_dtype_name(cases()[k].dt) << ")";
}

int g_deleted = 0;
void count_deleter(DLManagedTensorVersioned *) { ++g_deleted; }

// `data` (shape[0] elements of `type`) imported through `m`, whose deleter counts its calls
// (g_deleted reset): the tensor has dtype `want` and shares the memory.
ctn_tensor *import_counted(DLManagedTensorVersioned &m, int64_t *shape, void *data, DLDataType type, ctn_dtype want) {
  m = DLManagedTensorVersioned{};
  m.version = {1, 1};
  m.deleter = count_deleter;
  m.dl_tensor = DLTensor{data, {kDLCPU, 0}, 1, type, shape, nullptr, 0};
  g_deleted = 0;
  ctn_tensor *t = nullptr;
  EXPECT_EQ(ctn_tensor_from_dlpack(&m, &t), CTN_OK) << ctn_last_error();
  ctn_dtype dt{};
  EXPECT_EQ(ctn_tensor_dtype(t, &dt), CTN_OK);
  EXPECT_EQ(dt, want);
  void *p = nullptr;
  EXPECT_EQ(ctn_tensor_data(t, &p), CTN_OK);
  EXPECT_EQ(p, data) << "imported without a copy";
  return t;
}

}  // namespace

TEST(LowpDlpack, ImportAndExportKeepDtypeBitsAndStorage) {
  for (Case c : cases()) {
    SCOPED_TRACE(ctn_dtype_name(c.dt));
    const int64_t n = static_cast<int64_t>(c.bits.size() * 8 / c.dl_bits);
    int64_t shape[1] = {n};
    DLManagedTensorVersioned m;
    ctn_tensor *t = import_counted(m, shape, c.bits.data(), {c.dl_code, c.dl_bits, 1}, c.dt);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(contents(t), c.bits);

    // A strided view (every other element) exports with its strides and element offset.
    ctn_tensor *odd = nullptr;
    CTN_ASSERT_OK(ctn_tensor_slice(t, 0, 1, n, 2, &odd));
    DLManagedTensorVersioned *out = nullptr;
    CTN_ASSERT_OK(ctn_tensor_to_dlpack(odd, 0, &out));
    EXPECT_EQ(out->dl_tensor.dtype.code, c.dl_code);
    EXPECT_EQ(out->dl_tensor.dtype.bits, c.dl_bits);
    EXPECT_EQ(out->dl_tensor.dtype.lanes, 1);
    EXPECT_EQ(out->dl_tensor.strides[0], 2);
    EXPECT_EQ(static_cast<unsigned char *>(out->dl_tensor.data) + out->dl_tensor.byte_offset, c.bits.data() + c.dl_bits / 8);
    ctn_tensor_release(odd);
    ctn_tensor_release(t);
    EXPECT_EQ(g_deleted, 0) << "the export still holds the storage";
    // ... and imports back as the same dtype and elements.
    ctn_tensor *back = nullptr;
    CTN_ASSERT_OK(ctn_tensor_from_dlpack(out, &back));
    Bytes want;
    for (int64_t k = 1; k < n; k += 2)
      want.insert(want.end(), c.bits.begin() + k * c.dl_bits / 8, c.bits.begin() + (k + 1) * c.dl_bits / 8);
    EXPECT_EQ(contents(back), want);
    ctn_tensor_release(back);
    EXPECT_EQ(g_deleted, 1);
  }
}

TEST(LowpDlpack, WidthsChutneyLacksAreRefusedByName) {
  const DLDataType bad[] = {{kDLFloat, 8, 1}, {kDLBfloat, 32, 1}, {kDLInt, 4, 1}, {kDLUInt, 4, 1}, {kDLComplex, 64, 1}};
  uint16_t data[2] = {0, 0};
  int64_t shape[1] = {2};
  for (DLDataType d : bad) {
    SCOPED_TRACE(std::to_string(d.code) + "/" + std::to_string(d.bits));
    DLManagedTensorVersioned m{};
    m.version = {1, 0};
    m.deleter = count_deleter;
    m.dl_tensor = DLTensor{data, {kDLCPU, 0}, 1, d, shape, nullptr, 0};
    g_deleted = 0;
    ctn_tensor *t = nullptr;
    EXPECT_EQ(ctn_tensor_from_dlpack(&m, &t), CTN_ERR_UNSUPPORTED);
    EXPECT_EQ(t, nullptr);
    const std::string msg = ctn_last_error();
    EXPECT_NE(msg.find("dtype code " + std::to_string(d.code) + " with " + std::to_string(d.bits) + " bits"),
              std::string::npos) << msg;
    EXPECT_EQ(g_deleted, 1);
  }
}

namespace {

// A TensorProto of case `c`, its data in raw_data or in int32_data (packed or not).
Pb tensor_proto(const Case &c, std::string_view name, int how) {
  Pb t;
  t.packed(1, {static_cast<int64_t>(c.int32_data.size())}).i(2, c.onnx).s(8, name);
  std::vector<int64_t> v(c.int32_data.begin(), c.int32_data.end());
  if (how == 0) t.s(9, std::string_view(reinterpret_cast<const char *>(c.bits.data()), c.bits.size()));
  else if (how == 1) t.packed(5, v);
  else t.unpacked(5, v);
  return t;
}

}  // namespace

TEST(LowpOnnx, TensorProtosInRawAndInt32DataLoadBitForBit) {
  for (const Case &c : cases()) {
    for (int how = 0; how < 3; ++how) {
      SCOPED_TRACE(std::string(ctn_dtype_name(c.dt)) + (how == 0 ? " raw_data" : how == 1 ? " int32_data packed" : " int32_data"));
      std::string path = write_file("t.pb", tensor_proto(c, "w", how).b);
      ctn_tensor *t = nullptr;
      const char *name = nullptr;
      CTN_ASSERT_OK(ctn_onnx_tensor_load(path.c_str(), &t, &name));
      EXPECT_STREQ(name, "w");
      ctn_dtype dt{};
      ctn_tensor_dtype(t, &dt);
      EXPECT_EQ(dt, c.dt);
      EXPECT_EQ(contents(t), c.bits);
      ctn_tensor_release(t);
    }
    // One value short: the message names the tensor, the type and the shape.
    Case short_case = c;
    short_case.bits.resize(short_case.bits.size() - ctn_dtype_size(c.dt));
    std::string path = write_file("short.pb", tensor_proto(short_case, "w", 0).b);
    ctn_tensor *t = nullptr;
    EXPECT_EQ(ctn_onnx_tensor_load(path.c_str(), &t, nullptr), CTN_ERR_CORRUPT);
    EXPECT_NE(std::string(ctn_last_error()).find("tensor 'w'"), std::string::npos) << ctn_last_error();
  }
  // Types chutney still lacks are refused naming them.
  Pb c64;
  c64.packed(1, {1}).i(2, 14).s(8, "u").packed(5, {7});
  std::string path = write_file("c64.pb", c64.b);
  ctn_tensor *t = nullptr;
  EXPECT_EQ(ctn_onnx_tensor_load(path.c_str(), &t, nullptr), CTN_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(ctn_last_error()).find("COMPLEX64"), std::string::npos) << ctn_last_error();
}

namespace {

struct Onnx {
  ctn_context *ctx = nullptr;
  ctn_graph *g = nullptr;
  ctn_onnx_model *m = nullptr;
  Onnx() { EXPECT_EQ(ctn_context_create(nullptr, &ctx), CTN_OK) << ctn_last_error(); }
  ~Onnx() {
    ctn_onnx_model_release(m);
    ctn_graph_release(g);
    ctn_context_release(ctx);
  }
  ctn_status load(const std::string &path) { return ctn_onnx_load(ctx, path.c_str(), nullptr, &g, &m); }
  ctn_node entry(int kind, uint32_t i) const {
    ctn_node n = CTN_NODE_NONE;
    EXPECT_EQ(ctn_onnx_model_entry(m, kind, i, nullptr, &n), CTN_OK) << ctn_last_error();
    return n;
  }
  ctn_dtype dtype(ctn_node n) const {
    ctn_dtype dt{};
    uint32_t nd = 0;
    EXPECT_EQ(ctn_node_info(g, n, &dt, &nd, nullptr), CTN_OK) << ctn_last_error();
    return dt;
  }
};

// y_i = Identity(w_i) for an initializer w_i of each case, x passed through to xo (a graph input
// and output of type `input_type`), and c = Cast(x, to = cast_to).
std::string passthrough_model(int32_t input_type, int32_t cast_to) {
  Pb g;
  g.s(2, "lowp");
  int k = 0;
  for (const Case &c : cases()) {
    std::string w = "w" + std::to_string(k), y = "y" + std::to_string(k);
    g.m(5, tensor_proto(c, w, k)).m(1, node("Identity", {w}, {y}, "id" + std::to_string(k)));
    g.m(12, value_info(y, c.onnx, {static_cast<int64_t>(c.int32_data.size())}));
    ++k;
  }
  Pb to;
  to.s(1, "to").i(20, 2).i(3, cast_to);
  g.m(1, node("Identity", {"x"}, {"xo"}, "idx")).m(1, node("Cast", {"x"}, {"c"}, "cast", {to}));
  g.m(11, value_info("x", input_type, {2, 3})).m(12, value_info("xo", input_type, {2, 3}))
      .m(12, value_info("c", cast_to, {2, 3}));
  return model(g, 17).b;
}

}  // namespace

// The importer keeps every dtype as it is (no silent widening to f32): initializers, graph
// inputs and outputs, and Cast's target.
TEST(LowpOnnx, ModelsKeepTheirDtypes) {
  const int32_t types[] = {10, 16, 3};
  const ctn_dtype dts[] = {CTN_F16, CTN_BF16, CTN_I8};
  for (int in = 0; in < 3; ++in) {
    const int out = (in + 1) % 3;
    SCOPED_TRACE(std::string("input ") + ctn_dtype_name(dts[in]) + ", cast to " + ctn_dtype_name(dts[out]));
    Onnx o;
    CTN_ASSERT_OK(o.load(write_file("pass.onnx", passthrough_model(types[in], types[out]))));
    uint32_t n_out = 0;
    CTN_ASSERT_OK(ctn_onnx_model_count(o.m, CTN_ONNX_OUTPUTS, &n_out));
    ASSERT_EQ(n_out, 5u);
    for (uint32_t k = 0; k < 3; ++k) EXPECT_EQ(o.dtype(o.entry(CTN_ONNX_OUTPUTS, k)), dts[k]) << "y" << k;
    EXPECT_EQ(o.dtype(o.entry(CTN_ONNX_INPUTS, 0)), dts[in]);
    EXPECT_EQ(o.dtype(o.entry(CTN_ONNX_OUTPUTS, 3)), dts[in]);
    EXPECT_EQ(o.dtype(o.entry(CTN_ONNX_OUTPUTS, 4)), dts[out]);
    // The initializers hold the file's bits.
    expect_case_bits(o.g, {o.entry(CTN_ONNX_OUTPUTS, 0), o.entry(CTN_ONNX_OUTPUTS, 1), o.entry(CTN_ONNX_OUTPUTS, 2)});
  }
}

// A given input value must have the model's dtype: an f32 tensor for an f16 input is refused
// naming both (no conversion on the way in).
TEST(LowpOnnx, AnInputValueOfAnotherDtypeIsRefused) {
  Onnx o;
  ctn_tensor *x = make_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  ctn_onnx_input_spec spec{};
  spec.name = "x";
  spec.value = x;
  ctn_onnx_options opts{};
  opts.struct_size = sizeof opts;
  opts.n_inputs = 1;
  opts.inputs = &spec;
  const std::string path = write_file("pass.onnx", passthrough_model(10, 1));
  EXPECT_EQ(ctn_onnx_load(o.ctx, path.c_str(), &opts, &o.g, &o.m), CTN_ERR_DTYPE);
  const std::string msg = ctn_last_error();
  EXPECT_NE(msg.find("FLOAT16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f32"), std::string::npos) << msg;
  ctn_tensor_release(x);
}

// ctn_onnx_export writes f16/bf16/i8 initializers, inputs, outputs and Casts with their ONNX
// types; importing the file gives back the same dtypes and the same bits.
TEST(LowpOnnx, ExportRoundTripsTheDtypes) {
  Onnx o;
  CTN_ASSERT_OK(ctn_graph_create(o.ctx, 0, &o.g));
  std::vector<ctn_node> outs = case_constants(o.g);
  int64_t shape[2] = {2, 3};
  ctn_node x = CTN_NODE_NONE, c = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_input(o.g, "x", CTN_BF16, 2, shape, &x));
  CTN_ASSERT_OK(ctn_cast(o.g, x, CTN_F16, &c));
  outs.push_back(c);
  const char *names[] = {"h", "b", "q", "c"};
  const std::string path = tmp_path("export.onnx");
  CTN_ASSERT_OK(ctn_onnx_export(o.g, nullptr, 4, outs.data(), names, path.c_str()));

  Onnx back;
  CTN_ASSERT_OK(back.load(path));
  EXPECT_EQ(back.dtype(back.entry(CTN_ONNX_INPUTS, 0)), CTN_BF16);
  const ctn_dtype want[] = {CTN_F16, CTN_BF16, CTN_I8, CTN_F16};
  for (uint32_t k = 0; k < 4; ++k) EXPECT_EQ(back.dtype(back.entry(CTN_ONNX_OUTPUTS, k)), want[k]) << names[k];
  expect_case_bits(back.g, {back.entry(CTN_ONNX_OUTPUTS, 0), back.entry(CTN_ONNX_OUTPUTS, 1), back.entry(CTN_ONNX_OUTPUTS, 2)});
}

// Graph files (ctn_graph_save / ctn_graph_load, safetensors inside) keep f16/bf16/i8 constants,
// inputs and cast nodes: same dtypes, same bits.
TEST(LowpGraphFile, SaveAndLoadKeepTheDtypes) {
  Onnx o;
  CTN_ASSERT_OK(ctn_graph_create(o.ctx, 0, &o.g));
  std::vector<ctn_node> outs = case_constants(o.g);
  int64_t shape[1] = {4};
  ctn_node x = CTN_NODE_NONE, c = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_input(o.g, "x", CTN_I8, 1, shape, &x));
  CTN_ASSERT_OK(ctn_cast(o.g, x, CTN_BF16, &c));
  outs.push_back(c);
  const std::string path = tmp_path("lowp.ctn");
  CTN_ASSERT_OK(ctn_graph_save(o.g, nullptr, 4, outs.data(), nullptr, nullptr, path.c_str()));

  Onnx back;  // (its graph comes from the file; no model handle)
  ctn_saved_graph *saved = nullptr;
  CTN_ASSERT_OK(ctn_graph_load(back.ctx, path.c_str(), &back.g, &saved));
  const ctn_dtype want[] = {CTN_F16, CTN_BF16, CTN_I8, CTN_BF16};
  std::vector<ctn_node> louts(4);
  for (uint32_t k = 0; k < 4; ++k) {
    CTN_ASSERT_OK(ctn_saved_graph_entry(saved, CTN_SAVED_OUTPUTS, k, nullptr, &louts[k]));
    EXPECT_EQ(back.dtype(louts[k]), want[k]) << "output " << k;
  }
  ctn_node lx = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_saved_graph_entry(saved, CTN_SAVED_INPUTS, 0, nullptr, &lx));
  EXPECT_EQ(back.dtype(lx), CTN_I8);
  expect_case_bits(back.g, louts);
  ctn_saved_graph_release(saved);
}

// Cast f32 -> f16 / bf16 -> f32 through an imported model, against PyTorch's rounding (round to
// nearest even: 65520 overflows f16 to inf, 1.00390625 is a bf16 tie rounding to 1, 1e-8
// underflows f16 to 0 and stays a bf16 normal). The casts run on the CPU backend.
TEST(LowpOnnx, CastChainMatchesPyTorch) {
  auto cast = [](const char *in, const char *out, int64_t to) {
    Pb a;
    a.s(1, "to").i(20, 2).i(3, to);
    return node("Cast", {in}, {out}, std::string("cast_") + out, {a});
  };
  Pb g;
  g.s(2, "casts").m(1, cast("x", "h", 10)).m(1, cast("h", "hf", 1)).m(1, cast("x", "b", 16)).m(1, cast("b", "bf", 1));
  g.m(11, value_info("x", 1, {6}));
  for (auto [name, type] : {std::pair<const char *, int32_t>{"h", 10}, {"hf", 1}, {"b", 16}, {"bf", 1}})
    g.m(12, value_info(name, type, {6}));
  Onnx o;
  CTN_ASSERT_OK(o.load(write_file("casts.onnx", model(g, 17).b)));
  std::vector<ctn_node> outs;
  for (uint32_t k = 0; k < 4; ++k) outs.push_back(o.entry(CTN_ONNX_OUTPUTS, k));
  ctn_node x = o.entry(CTN_ONNX_INPUTS, 0);
  ctn_tensor *xv = make_f32({6}, {1, 0.1f, 65520, -2.5f, 1e-8f, 1.00390625f});
  ctn_plan *p = nullptr;
  CTN_ASSERT_OK(ctn_plan_compile(o.g, 4, outs.data(), nullptr, &p));
  std::vector<ctn_tensor *> res(4);
  for (uint32_t k = 0; k < 4; ++k) CTN_ASSERT_OK(ctn_plan_output_create(p, k, &res[k]));
  const ctn_tensor *feeds[1] = {xv};
  CTN_ASSERT_OK(ctn_plan_run(p, 1, &x, feeds, 4, res.data()));
  EXPECT_EQ(contents(res[0]), bytes_of(std::vector<uint16_t>{0x3c00, 0x2e66, 0x7c00, 0xc100, 0x0000, 0x3c04}));
  EXPECT_EQ(read_f32(res[1]), (std::vector<float>{1, 0.0999755859375f, INFINITY, -2.5f, 0, 1.00390625f}));
  EXPECT_EQ(contents(res[2]), bytes_of(std::vector<uint16_t>{0x3f80, 0x3dcd, 0x4780, 0xc020, 0x322c, 0x3f80}));
  EXPECT_EQ(read_f32(res[3]), (std::vector<float>{1, 0.10009765625f, 65536, -2.5f, 1.0011717677116394e-08f, 1}));
  for (auto *t : res) ctn_tensor_release(t);
  ctn_plan_release(p);
  ctn_tensor_release(xv);
}

// An f16 clamp exports as Clip with f16 bounds (rounded once from the op's double bounds) and
// the re-imported model clamps the same.
TEST(LowpOnnx, F16ClampExportsWithF16Bounds) {
  Onnx o;
  CTN_ASSERT_OK(ctn_graph_create(o.ctx, 0, &o.g));
  int64_t shape[1] = {4};
  ctn_node x = CTN_NODE_NONE, y = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_input(o.g, "x", CTN_F16, 1, shape, &x));
  CTN_ASSERT_OK(ctn_clamp(o.g, x, -1.0, 2.5, &y));
  const char *names[] = {"y"};
  const std::string path = tmp_path("clamp16.onnx");
  CTN_ASSERT_OK(ctn_onnx_export(o.g, nullptr, 1, &y, names, path.c_str()));
  Onnx back;
  CTN_ASSERT_OK(back.load(path));
  const std::vector<uint16_t> in = {0xc200, 0x3800, 0x4200, 0x70e2};  // -3, 0.5, 3, 10000
  ctn_tensor *xv = nullptr;
  CTN_ASSERT_OK(ctn_tensor_create(CTN_F16, 1, shape, in.data(), &xv));
  const auto got = run_once_as(tensor_bytes, back.g, {back.entry(CTN_ONNX_OUTPUTS, 0)}, {back.entry(CTN_ONNX_INPUTS, 0)}, {xv});
  ctn_tensor_release(xv);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], bytes_of(std::vector<uint16_t>{0xbc00, 0x3800, 0x4100, 0x4100}));  // -1, 0.5, 2.5, 2.5
}

// ---- the 1.6 integer dtypes (i16, u16, u32, u64) -------------------------------------------------

namespace {

struct IntCase {
  ctn_dtype dt;
  uint8_t dl_code, dl_bits;
  int32_t onnx;   // TensorProto.DataType
  int field;      // the typed field ONNX keeps the values in: int32_data (5) or uint64_data (11)
  std::vector<int64_t> values;  // as that field holds them (u64 bit-cast)
  Bytes bits;
};

template <class T>
IntCase int_case(ctn_dtype dt, uint8_t code, int32_t onnx, int field, const std::vector<T> &v) {
  IntCase c{dt, code, static_cast<uint8_t>(8 * sizeof(T)), onnx, field, {}, bytes_of(v)};
  for (T x : v) c.values.push_back(static_cast<int64_t>(x));
  return c;
}

std::vector<IntCase> int_cases() {
  return {int_case<int16_t>(CTN_I16, kDLInt, 5, 5, {-32768, -1, 0, 32767}),
          int_case<uint16_t>(CTN_U16, kDLUInt, 4, 5, {0, 1, 65535, 40000}),
          int_case<uint32_t>(CTN_U32, kDLUInt, 12, 11, {0, 1, 4294967295u, 3000000000u}),
          int_case<uint64_t>(CTN_U64, kDLUInt, 13, 11, {0, 1, UINT64_MAX, 9223372036854775808ull})};
}

Pb int_tensor_proto(const IntCase &c, std::string_view name, bool raw) {
  Pb t;
  t.packed(1, {static_cast<int64_t>(c.values.size())}).i(2, c.onnx).s(8, name);
  if (raw) t.s(9, std::string_view(reinterpret_cast<const char *>(c.bits.data()), c.bits.size()));
  else t.packed(c.field, c.values);
  return t;
}

}  // namespace

// INT16/UINT16 (int32_data), UINT32/UINT64 (uint64_data) and all four in raw_data load as i16,
// u16, u32, u64 with the values' bits; a model's initializers, inputs and outputs keep them.
TEST(IntOnnx, TensorProtosAndModelsKeepTheIntegerDtypes) {
  Pb g;
  g.s(2, "ints");
  int k = 0;
  for (const IntCase &c : int_cases()) {
    for (bool raw : {true, false}) {
      SCOPED_TRACE(std::string(ctn_dtype_name(c.dt)) + (raw ? " raw_data" : " typed field"));
      ctn_tensor *t = nullptr;
      CTN_ASSERT_OK(ctn_onnx_tensor_load(write_file("int.pb", int_tensor_proto(c, "w", raw).b).c_str(), &t, nullptr));
      ctn_dtype dt{};
      ctn_tensor_dtype(t, &dt);
      EXPECT_EQ(dt, c.dt);
      EXPECT_EQ(contents(t), c.bits);
      ctn_tensor_release(t);
    }
    const std::string w = "w" + std::to_string(k), y = "y" + std::to_string(k), x = "x" + std::to_string(k);
    g.m(5, int_tensor_proto(c, w, k % 2 == 0)).m(1, node("Identity", {w}, {y}, "id" + std::to_string(k)));
    g.m(1, node("Identity", {x}, {x + "o"}, "idx" + std::to_string(k)));
    g.m(11, value_info(x, c.onnx, {4}));
    g.m(12, value_info(y, c.onnx, {4})).m(12, value_info(x + "o", c.onnx, {4}));
    ++k;
  }
  Onnx o;
  CTN_ASSERT_OK(o.load(write_file("ints.onnx", model(g, 17).b)));
  std::vector<ctn_node> outs, ins;
  std::vector<ctn_tensor *> vals;
  for (uint32_t i = 0; i < 4; ++i) {
    const IntCase c = int_cases()[i];
    outs.push_back(o.entry(CTN_ONNX_OUTPUTS, 2 * i));
    outs.push_back(o.entry(CTN_ONNX_OUTPUTS, 2 * i + 1));
    ins.push_back(o.entry(CTN_ONNX_INPUTS, i));
    EXPECT_EQ(o.dtype(ins.back()), c.dt);
    EXPECT_EQ(o.dtype(outs.back()), c.dt);
    int64_t n = 4;
    vals.push_back(nullptr);
    CTN_ASSERT_OK(ctn_tensor_create(c.dt, 1, &n, c.bits.data(), &vals.back()));
  }
  const auto got = run_once_as(tensor_bytes, o.g, outs, ins, {vals.begin(), vals.end()});
  ASSERT_EQ(got.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(got[i], int_cases()[i / 2].bits) << "output " << i;
  for (auto *v : vals) ctn_tensor_release(v);
}

// DLPack: int16/uint16/uint32/uint64 import without a copy and export with their codes and widths.
TEST(IntDlpack, ImportAndExportKeepDtypeAndBits) {
  for (IntCase c : int_cases()) {
    SCOPED_TRACE(ctn_dtype_name(c.dt));
    int64_t shape[1] = {4};
    DLManagedTensorVersioned m;
    ctn_tensor *t = import_counted(m, shape, c.bits.data(), {c.dl_code, c.dl_bits, 1}, c.dt);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(contents(t), c.bits);
    DLManagedTensorVersioned *out = nullptr;
    CTN_ASSERT_OK(ctn_tensor_to_dlpack(t, 0, &out));
    EXPECT_EQ(out->dl_tensor.dtype.code, c.dl_code);
    EXPECT_EQ(out->dl_tensor.dtype.bits, c.dl_bits);
    ctn_tensor_release(t);
    out->deleter(out);
    EXPECT_EQ(g_deleted, 1);
  }
}

// ctn_onnx_export writes i16/u16/u32/u64 constants and a cast with their ONNX types; the importer
// reads back the same dtypes and bits.
TEST(IntOnnx, ExportRoundTripsTheIntegerDtypes) {
  Onnx o;
  CTN_ASSERT_OK(ctn_graph_create(o.ctx, 0, &o.g));
  std::vector<ctn_node> outs;
  for (const IntCase &c : int_cases()) {
    int64_t n = 4;
    ctn_tensor *t = nullptr;
    CTN_ASSERT_OK(ctn_tensor_create(c.dt, 1, &n, c.bits.data(), &t));
    outs.push_back(CTN_NODE_NONE);
    CTN_ASSERT_OK(ctn_constant(o.g, t, &outs.back()));
    ctn_tensor_release(t);
  }
  int64_t n = 4;
  ctn_node x = CTN_NODE_NONE, cst = CTN_NODE_NONE;
  CTN_ASSERT_OK(ctn_input(o.g, "x", CTN_U32, 1, &n, &x));
  CTN_ASSERT_OK(ctn_cast(o.g, x, CTN_I16, &cst));
  outs.push_back(cst);
  const char *names[] = {"a", "b", "c", "d", "e"};
  const std::string path = tmp_path("export_ints.onnx");
  CTN_ASSERT_OK(ctn_onnx_export(o.g, nullptr, 5, outs.data(), names, path.c_str()));
  Onnx back;
  CTN_ASSERT_OK(back.load(path));
  ctn_node bx = back.entry(CTN_ONNX_INPUTS, 0);
  EXPECT_EQ(back.dtype(bx), CTN_U32);
  std::vector<ctn_node> bouts;
  for (uint32_t k = 0; k < 5; ++k) bouts.push_back(back.entry(CTN_ONNX_OUTPUTS, k));
  EXPECT_EQ(back.dtype(bouts[4]), CTN_I16);
  ctn_tensor *xv = nullptr;
  const uint32_t xs[4] = {4294967295u, 65536, 32768, 5};
  CTN_ASSERT_OK(ctn_tensor_create(CTN_U32, 1, &n, xs, &xv));
  const auto got = run_once_as(tensor_bytes, back.g, bouts, {bx}, {xv});
  ctn_tensor_release(xv);
  ASSERT_EQ(got.size(), 5u);
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(got[k], int_cases()[k].bits) << names[k];
  EXPECT_EQ(got[4], bytes_of(std::vector<int16_t>{-1, 0, -32768, 5}));  // the low 16 bits
}

// Integer Div runs in f64 and casts back (as for int32): a zero divisor gives the dtype's limit
// (the infinity saturates), 0 / 0 gives 0 (NaN casts to 0), never a trap; others truncate.
TEST(IntOnnx, DivisionByZeroDoesNotTrap) {
  for (const auto &[onnx, dt] : {std::pair<int32_t, ctn_dtype>{4, CTN_U16}, {5, CTN_I16}}) {
    SCOPED_TRACE(ctn_dtype_name(dt));
    Pb g;
    g.s(2, "div").m(1, node("Div", {"a", "b"}, {"y"}, "div"));
    g.m(11, value_info("a", onnx, {4})).m(11, value_info("b", onnx, {4})).m(12, value_info("y", onnx, {4}));
    Onnx o;
    CTN_ASSERT_OK(o.load(write_file("div.onnx", model(g, 17).b)));
    int64_t n = 4;
    const int16_t sa[4] = {7, -7, 0, 9}, sb[4] = {0, 0, 0, 2};  // u16 reads -7 as 65529
    ctn_tensor *at = nullptr, *bt = nullptr;
    CTN_ASSERT_OK(ctn_tensor_create(dt, 1, &n, sa, &at));
    CTN_ASSERT_OK(ctn_tensor_create(dt, 1, &n, sb, &bt));
    const auto got = run_once_as(tensor_bytes, o.g, {o.entry(CTN_ONNX_OUTPUTS, 0)},
                                 {o.entry(CTN_ONNX_INPUTS, 0), o.entry(CTN_ONNX_INPUTS, 1)}, {at, bt});
    ctn_tensor_release(at);
    ctn_tensor_release(bt);
    ASSERT_EQ(got.size(), 1u);
    if (dt == CTN_U16) EXPECT_EQ(got[0], bytes_of(std::vector<uint16_t>{65535, 65535, 0, 4}));
    else EXPECT_EQ(got[0], bytes_of(std::vector<int16_t>{32767, -32768, 0, 4}));
  }
}

// ---- float8, carried as f16 (docs/ONNX.md, "Float8") ---------------------------------------------

namespace {

std::vector<float> f16_values(const ctn_tensor *t) {
  std::vector<float> v;
  const Bytes b = contents(t);
  for (size_t k = 0; k + 1 < b.size(); k += 2) v.push_back(ctn_desc_f16_to_f32(static_cast<uint16_t>(b[k] | b[k + 1] << 8)));
  return v;
}

void expect_same_values(const std::vector<float> &got, const std::vector<float> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    if (std::isnan(want[k])) EXPECT_TRUE(std::isnan(got[k])) << k << ": " << got[k];
    else EXPECT_EQ(got[k], want[k]) << k;
  }
}

}  // namespace

// FLOAT8E4M3FN (17), E4M3FNUZ (18), E5M2 (19), E5M2FNUZ (20) TensorProtos load as f16 tensors
// holding each byte's exact value: the largest finite values, the smallest subnormals, -0 and
// the NaN / infinity encodings, from raw_data and from int32_data.
TEST(Float8Onnx, TensorProtosDecodeExactlyToF16) {
  const float nan = NAN, inf = INFINITY;
  const struct {
    int32_t onnx;
    std::vector<unsigned char> bits;
    std::vector<float> values;
  } cases[] = {
      {17, {0x7e, 0x7f, 0x01, 0x80, 0xb8, 0x08}, {448, nan, 0x1p-9f, -0.0f, -1, 0x1p-6f}},
      {18, {0x7f, 0x80, 0x01, 0x00, 0xc0, 0x08}, {240, nan, 0x1p-10f, 0, -1, 0x1p-7f}},
      {19, {0x7b, 0x7c, 0xfc, 0x7e, 0x01, 0x3c}, {57344, inf, -inf, nan, 0x1p-16f, 1}},
      {20, {0x7f, 0x80, 0x01, 0xc0, 0x40, 0x04}, {57344, nan, 0x1p-17f, -1, 1, 0x1p-15f}},
  };
  for (const auto &c : cases) {
    for (bool raw : {true, false}) {
      SCOPED_TRACE(std::to_string(c.onnx) + (raw ? " raw_data" : " int32_data"));
      Pb t;
      t.packed(1, {static_cast<int64_t>(c.bits.size())}).i(2, c.onnx).s(8, "f8");
      if (raw) t.s(9, std::string_view(reinterpret_cast<const char *>(c.bits.data()), c.bits.size()));
      else t.packed(5, std::vector<int64_t>(c.bits.begin(), c.bits.end()));
      ctn_tensor *x = nullptr;
      CTN_ASSERT_OK(ctn_onnx_tensor_load(write_file("f8.pb", t.b).c_str(), &x, nullptr));
      ctn_dtype dt{};
      ctn_tensor_dtype(x, &dt);
      EXPECT_EQ(dt, CTN_F16);
      expect_same_values(f16_values(x), c.values);
      ctn_tensor_release(x);
    }
  }
  // One byte short of the shape is refused naming the tensor.
  Pb t;
  t.packed(1, {3}).i(2, 17).s(8, "short").s(9, std::string_view("\x01\x02", 2));
  ctn_tensor *x = nullptr;
  EXPECT_EQ(ctn_onnx_tensor_load(write_file("f8s.pb", t.b).c_str(), &x, nullptr), CTN_ERR_CORRUPT);
  EXPECT_NE(std::string(ctn_last_error()).find("tensor 'short'"), std::string::npos) << ctn_last_error();
  EXPECT_EQ(x, nullptr);
}

// Cast(to = float8, saturate) rounds to nearest even on the format's grid, as ONNX's reference
// (numpy clip, then ml_dtypes 0.5's astype; the expected values below are what that printed):
// ties, the top binade, overflow (saturated, else NaN or E5M2's infinity), subnormals, NaN.
TEST(Float8Onnx, CastRoundsToTheGridLikeTheReference) {
  const float nan = NAN, inf = INFINITY;
  const std::vector<float> x = {0, -0.0f, 1, 1.0625f, 1.1875f, 300, 460, 470, 1e6f, inf, -inf, nan, 0x1p-10f, 3 * 0x1p-11f, -5.5f};
  const struct {
    int32_t onnx;
    bool saturate;
    std::vector<float> want;
  } cases[] = {
      {17, true, {0, -0.0f, 1, 1, 1.25f, 288, 448, 448, 448, 448, -448, nan, 0, 0x1p-9f, -5.5f}},
      {17, false, {0, -0.0f, 1, 1, 1.25f, 288, 448, nan, nan, nan, nan, nan, 0, 0x1p-9f, -5.5f}},
      {18, true, {0, 0, 1, 1, 1.25f, 240, 240, 240, 240, 240, -240, nan, 0x1p-10f, 0x1p-9f, -5.5f}},
      {18, false, {0, 0, 1, 1, 1.25f, nan, nan, nan, nan, nan, nan, nan, 0x1p-10f, 0x1p-9f, -5.5f}},
      {19, true, {0, -0.0f, 1, 1, 1.25f, 320, 448, 448, 57344, 57344, -57344, nan, 0x1p-10f, 1.5f * 0x1p-10f, -6}},
      {19, false, {0, -0.0f, 1, 1, 1.25f, 320, 448, 448, inf, inf, -inf, nan, 0x1p-10f, 1.5f * 0x1p-10f, -6}},
      {20, true, {0, 0, 1, 1, 1.25f, 320, 448, 448, 57344, 57344, -57344, nan, 0x1p-10f, 1.5f * 0x1p-10f, -6}},
      {20, false, {0, 0, 1, 1, 1.25f, 320, 448, 448, nan, nan, nan, nan, 0x1p-10f, 1.5f * 0x1p-10f, -6}},
  };
  for (const auto &c : cases) {
    SCOPED_TRACE(std::to_string(c.onnx) + (c.saturate ? " saturate" : " no saturate"));
    Pb to, sat;
    to.s(1, "to").i(20, 2).i(3, c.onnx);
    sat.s(1, "saturate").i(20, 2).i(3, c.saturate ? 1 : 0);
    Pb g;
    g.s(2, "f8").m(1, node("Cast", {"x"}, {"y"}, "cast", {to, sat}));
    g.m(11, value_info("x", 1, {15})).m(12, value_info("y", c.onnx, {15}));
    Onnx o;
    CTN_ASSERT_OK(o.load(write_file("cast8.onnx", model(g, 21).b)));
    ctn_node xin = o.entry(CTN_ONNX_INPUTS, 0), y = o.entry(CTN_ONNX_OUTPUTS, 0);
    EXPECT_EQ(o.dtype(y), CTN_F16);
    ctn_tensor *xv = make_f32({15}, x);
    const auto got = run_once_as(f16_values, o.g, {y}, {xin}, {xv});
    ctn_tensor_release(xv);
    ASSERT_EQ(got.size(), 1u);
    expect_same_values(got[0], c.want);
  }
}

// CastLike reads its target's declared ONNX type: a float8 graph input (an f16 here) makes it
// round to that format's grid, as Cast(to = float8) does.
TEST(Float8Onnx, CastLikeToAFloat8InputRounds) {
  Pb g;
  g.s(2, "like8").m(1, node("CastLike", {"x", "like"}, {"y"}, "castlike"));
  g.m(11, value_info("x", 1, {3})).m(11, value_info("like", 19, {1})).m(12, value_info("y", 19, {3}));
  Onnx o;
  CTN_ASSERT_OK(o.load(write_file("castlike8.onnx", model(g, 21).b)));
  ctn_tensor *xv = make_f32({3}, {300, 1e6f, 1.1875f});
  int64_t one = 1;
  const uint16_t h = 0x3c00;
  ctn_tensor *lv = nullptr;
  CTN_ASSERT_OK(ctn_tensor_create(CTN_F16, 1, &one, &h, &lv));
  const auto got = run_once_as(f16_values, o.g, {o.entry(CTN_ONNX_OUTPUTS, 0)},
                               {o.entry(CTN_ONNX_INPUTS, 0), o.entry(CTN_ONNX_INPUTS, 1)}, {xv, lv});
  ctn_tensor_release(xv);
  ctn_tensor_release(lv);
  ASSERT_EQ(got.size(), 1u);
  expect_same_values(got[0], {320, 57344, 1.25f});  // E5M2, saturating (the default)
}
