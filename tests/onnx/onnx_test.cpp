// ONNX import through the public C API: the wire reader on hand-built bytes (negative varints,
// packed and unpacked fields, unknown fields, truncations, external data), error messages that
// name the node and what is missing, the PyTorch-exported models against onnxruntime, ctn_grad
// on imported models against PyTorch, training and checkpoints on an imported model, an opset-24
// Attention against a reference computed here, the CLI's .npy/.npz reader, and DLPack from C.
#include <chutney/checkpoint.h>
#include <chutney/dlpack.h>
#include <chutney/onnx.h>
#include <chutney/oplib.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "../../tools/chutney/npy.h"
#include "pb_writer.h"
#include "../unit/test_helpers.h"

#define CTN_ASSERT_OK(expr) ASSERT_EQ((expr), CTN_OK) << #expr << ": " << ctn_last_error()

namespace {

using ctn_cli::TensorPtr;

const std::string kModels = CTN_ONNX_TEST_DIR "/models/";

struct Env {
  ctn_context *ctx = nullptr;
  Env() { EXPECT_EQ(ctn_context_create(nullptr, &ctx), CTN_OK) << ctn_last_error(); }
  ~Env() { ctn_context_release(ctx); }
};

std::string tmp_dir() {
  static std::string dir = scratch_dir("ctn-onnx-test");
  return dir;
}

std::string write_file(const std::string &name, const std::string &bytes) {
  std::string p = tmp_dir() + "/" + name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

struct Loaded {
  ctn_graph *g = nullptr;
  ctn_onnx_model *m = nullptr;
  ctn_status st = CTN_OK;
  std::string err;
  ~Loaded() {
    ctn_onnx_model_release(m);
    ctn_graph_release(g);
  }
  ctn_node node(int kind, uint32_t i) const {
    ctn_node n = CTN_NODE_NONE;
    EXPECT_EQ(ctn_onnx_model_entry(m, kind, i, nullptr, &n), CTN_OK) << ctn_last_error();
    return n;
  }
};

void load(Loaded &l, ctn_context *ctx, const std::string &path, uint32_t flags = 0,
          std::vector<ctn_onnx_input_spec> specs = {}) {
  ctn_onnx_options o{};
  o.struct_size = sizeof o;
  o.flags = flags;
  o.n_inputs = static_cast<uint32_t>(specs.size());
  o.inputs = specs.data();
  l.st = ctn_onnx_load(ctx, path.c_str(), &o, &l.g, &l.m);
  if (l.st != CTN_OK) l.err = ctn_last_error();
}

std::vector<float> values(const ctn_tensor *t) {
  int64_t n = 0;
  ctn_tensor_numel(t, &n);
  std::vector<float> v(static_cast<size_t>(n));
  EXPECT_EQ(ctn_tensor_read(t, v.data(), v.size() * 4), CTN_OK) << ctn_last_error();
  return v;
}

// Runs `outs` with the given feeds; returns the outputs' values.
std::vector<std::vector<float>> run(ctn_graph *g, std::vector<ctn_node> outs, std::vector<ctn_node> feeds,
                                    std::vector<const ctn_tensor *> vals) {
  ctn_plan *p = nullptr;
  EXPECT_EQ(ctn_plan_compile(g, static_cast<uint32_t>(outs.size()), outs.data(), nullptr, &p), CTN_OK) << ctn_last_error();
  if (!p) return {};
  std::vector<ctn_tensor *> res(outs.size());
  for (size_t k = 0; k < outs.size(); ++k) ctn_plan_output_create(p, static_cast<uint32_t>(k), &res[k]);
  EXPECT_EQ(ctn_plan_run(p, static_cast<uint32_t>(feeds.size()), feeds.data(), vals.data(), static_cast<uint32_t>(res.size()),
                         res.data()),
            CTN_OK)
      << ctn_last_error();
  std::vector<std::vector<float>> r;
  for (ctn_tensor *t : res) {
    r.push_back(values(t));
    ctn_tensor_release(t);
  }
  ctn_plan_release(p);
  return r;
}

void expect_close(const std::vector<float> &got, const std::vector<float> &ref, double rtol, double atol, const std::string &what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  int bad = 0;
  for (size_t k = 0; k < got.size(); ++k)
    if (!(std::fabs(got[k] - ref[k]) <= atol + rtol * std::fabs(ref[k])) && bad++ < 5)
      ADD_FAILURE() << what << "[" << k << "]: " << got[k] << " vs " << ref[k];
}

// y = Transpose(Reshape(x, shape), perm) with `shape` an INT64 initializer [-1, 2] written with
// 10-byte negative varints, packed or unpacked, and unknown fields at every level.
std::string reshape_model(bool packed) {
  Pb shape;
  shape.i(2, 7).s(8, "shape").unknown();
  shape.packed(1, {2});
  if (packed) shape.packed(7, {-1, 2});
  else shape.unpacked(7, {-1, 2});
  Pb g;
  g.m(1, node("Reshape", {"x", "shape"}, {"r"}, "reshape1").unknown())
      .m(1, node("Transpose", {"r"}, {"y"}, "transpose1", {attr_ints("perm", {1, 0}).unknown()}))
      .s(2, "g")
      .m(5, shape)
      .m(11, value_info("x", 1, {2, 3}))
      .m(12, value_info("y", 1, {2, 3}))
      .unknown();
  return model(g).unknown().b;
}

TEST(OnnxWire, NegativeVarintsPackedUnpackedAndUnknownFields) {
  Env e;
  std::vector<float> x = {0, 1, 2, 3, 4, 5};
  TensorPtr xt = ctn_cli::make_tensor(CTN_F32, {2, 3}, x.data());
  for (bool packed : {true, false}) {
    Loaded l;
    load(l, e.ctx, write_file(packed ? "packed.onnx" : "unpacked.onnx", reshape_model(packed)));
    ASSERT_EQ(l.st, CTN_OK) << l.err;
    auto r = run(l.g, {l.node(CTN_ONNX_OUTPUTS, 0)}, {l.node(CTN_ONNX_INPUTS, 0)}, {xt.get()});
    ASSERT_EQ(r.size(), 1u);
    // reshape to [3, 2] then transpose: [[0, 2, 4], [1, 3, 5]]
    EXPECT_EQ(r[0], (std::vector<float>{0, 2, 4, 1, 3, 5})) << (packed ? "packed" : "unpacked");
  }
}

TEST(OnnxWire, EveryTruncationIsRefusedCleanly) {
  Env e;
  const std::string full = reshape_model(true);
  int refused = 0;
  for (size_t n = 0; n < full.size(); ++n) {
    Loaded l;
    load(l, e.ctx, write_file("trunc.onnx", full.substr(0, n)));
    if (l.st != CTN_OK) {
      ++refused;
      EXPECT_TRUE(l.st == CTN_ERR_CORRUPT || l.st == CTN_ERR_INVALID_ARGUMENT || l.st == CTN_ERR_UNSUPPORTED) << n << ": " << l.err;
      EXPECT_EQ(l.g, nullptr);
      EXPECT_EQ(l.m, nullptr);
    }
  }
  EXPECT_GT(refused, static_cast<int>(full.size()) / 2);
  // A length prefix beyond the end, and an 11-byte varint.
  Loaded l1, l2;
  load(l1, e.ctx, write_file("len.onnx", std::string("\x3a\xff\xff\x03", 4) + "abc"));
  EXPECT_EQ(l1.st, CTN_ERR_CORRUPT);
  EXPECT_NE(l1.err.find("exceeds"), std::string::npos) << l1.err;
  load(l2, e.ctx, write_file("varint.onnx", std::string("\x08") + std::string(10, '\xff') + "\x01"));
  EXPECT_EQ(l2.st, CTN_ERR_CORRUPT);
  EXPECT_NE(l2.err.find("varint"), std::string::npos) << l2.err;
}

Pb one_node_graph(const Pb &n, int32_t elem = 1, std::vector<int64_t> dims = {2, 3}, std::vector<std::string> params = {}) {
  Pb g;
  g.m(1, n).s(2, "g").m(11, value_info("x", elem, dims, params)).m(12, value_info("y", elem, dims));
  return g;
}

TEST(OnnxErrors, NameTheNodeTheOpAndWhatIsMissing) {
  Env e;
  struct Case {
    const char *file;
    std::string bytes;
    ctn_status code;
    std::vector<std::string> says;
  };
  Pb bad_attr;
  bad_attr.s(1, "flavour").i(20, 2).i(3, 1);
  Pb conv_w = tensor_f32("w", {1, 1, 1, 1, 1}, {1}, true);
  Pb conv_g;
  conv_g.m(1, node("Conv", {"x", "w"}, {"y"}, "conv3d")).m(5, conv_w).m(11, value_info("x", 1, {1, 1, 2, 2, 2}))
      .m(12, value_info("y", 1, {1, 1, 2, 2, 2}));
  auto equation = [](const char *eq) {
    Pb a;
    a.s(1, "equation").s(4, eq).i(20, 3);
    return a;
  };
  std::vector<Case> cases = {
      {"einsum_out.onnx", model(one_node_graph(node("Einsum", {"x"}, {"y"}, "ein1", {equation("ab->bb")}))).b,
       CTN_ERR_INVALID_ARGUMENT, {"node 'ein1' (Einsum)", "output label 'b' appears more than once"}},
      {"einsum_diag.onnx", model(one_node_graph(node("Einsum", {"x"}, {"y"}, "ein2", {equation("aa->a")}))).b,
       CTN_ERR_SHAPE, {"node 'ein2' (Einsum)", "label 'a' is repeated over dims of 2 and 3"}},
      {"einsum_rank.onnx", model(one_node_graph(node("Einsum", {"x"}, {"y"}, "ein3", {equation("abc->a")}))).b,
       CTN_ERR_INVALID_ARGUMENT, {"node 'ein3' (Einsum)", "names 3 dims, its input has 2"}},
      {"op.onnx", model(one_node_graph(node("FancyOp", {"x"}, {"y"}, "fancy1"))).b, CTN_ERR_UNSUPPORTED,
       {"node 'fancy1' (FancyOp)", "no converter"}},
      {"attr.onnx", model(one_node_graph(node("Relu", {"x"}, {"y"}, "relu1", {bad_attr}))).b, CTN_ERR_UNSUPPORTED,
       {"node 'relu1' (Relu)", "attribute 'flavour'"}},
      {"dtype.onnx", model(one_node_graph(node("Relu", {"x"}, {"y"}, "relu2"), 14)).b, CTN_ERR_UNSUPPORTED,
       {"'x'", "COMPLEX64"}},
      {"conv3d.onnx", model(conv_g).b, CTN_ERR_UNSUPPORTED, {"node 'conv3d' (Conv)", "5-d input"}},
      {"symbolic.onnx", model(one_node_graph(node("Relu", {"x"}, {"y"}, "relu3"), 1, {0, 3}, {"batch"})).b,
       CTN_ERR_INVALID_ARGUMENT, {"'x'", "'batch'", "ctn_onnx_options.inputs"}},
      {"undef.onnx", model(one_node_graph(node("Relu", {"nope"}, {"y"}, "relu4"))).b, CTN_ERR_CORRUPT,
       {"node 'relu4' (Relu)", "'nope'"}},
      {"opset.onnx", model(one_node_graph(node("Relu", {"x"}, {"y"}, "relu5")), 99).b, CTN_ERR_UNSUPPORTED, {"opset 99"}},
      // A pad of 2^62 (found by mutating the backend cases) is refused, not computed with.
      {"hugepad.onnx", model(one_node_graph(node("Pad", {"x"}, {"y"}, "pad1", {attr_ints("pads", {0, int64_t{1} << 62, 0, 0})})), 10).b,
       CTN_ERR_SHAPE, {"node 'pad1' (Pad)", "more elements than a tensor can hold"}},
  };
  for (const Case &c : cases) {
    Loaded l;
    load(l, e.ctx, write_file(c.file, c.bytes));
    EXPECT_EQ(l.st, c.code) << c.file << ": " << l.err;
    for (const std::string &s : c.says) EXPECT_NE(l.err.find(s), std::string::npos) << c.file << ": '" << s << "' not in: " << l.err;
    EXPECT_EQ(l.g, nullptr);
  }
  Loaded missing;
  load(missing, e.ctx, tmp_dir() + "/does-not-exist.onnx");
  EXPECT_EQ(missing.st, CTN_ERR_IO);
}

TEST(OnnxErrors, SymbolicDimensionGivenByAnInputValue) {
  Env e;
  const std::string path = write_file("sym.onnx", model(one_node_graph(node("Relu", {"x"}, {"y"}, "r"), 1, {0, 3}, {"batch"})).b);
  std::vector<float> x = {-1, 2, -3, 4, -5, 6, -7, 8, -9, 10, -11, 12};
  TensorPtr xt = ctn_cli::make_tensor(CTN_F32, {4, 3}, x.data());
  Loaded l;
  load(l, e.ctx, path, 0, {{"x", xt.get(), 0, 0}});
  ASSERT_EQ(l.st, CTN_OK) << l.err;
  auto r = run(l.g, {l.node(CTN_ONNX_OUTPUTS, 0)}, {l.node(CTN_ONNX_INPUTS, 0)}, {xt.get()});
  EXPECT_EQ(r.at(0), (std::vector<float>{0, 2, 0, 4, 0, 6, 0, 8, 0, 10, 0, 12}));
  Loaded wrong;
  load(wrong, e.ctx, path, 0, {{"y", xt.get(), 0, 0}});
  EXPECT_EQ(wrong.st, CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(wrong.err.find("no graph input named 'y'"), std::string::npos) << wrong.err;
  // A value that does not fit is refused with the model's own shape, symbolic dims by name.
  TensorPtr bad = ctn_cli::make_tensor(CTN_F32, {3, 4}, x.data());
  Loaded misfit;
  load(misfit, e.ctx, path, 0, {{"x", bad.get(), 0, 0}});
  EXPECT_EQ(misfit.st, CTN_ERR_SHAPE);
  EXPECT_NE(misfit.err.find("input 'x' has shape [3, 4], which does not fit the model's [batch, 3]"), std::string::npos)
      << misfit.err;
  // Without a value, CTN_ONNX_SYMBOLIC_DIMS_AS_ONE takes the batch as 1.
  Loaded one;
  load(one, e.ctx, path, CTN_ONNX_SYMBOLIC_DIMS_AS_ONE);
  ASSERT_EQ(one.st, CTN_OK) << one.err;
  ctn_dtype dt;
  uint32_t nd = 0;
  int64_t dims[CTN_MAX_DIMS];
  ASSERT_EQ(ctn_node_info(one.g, one.node(CTN_ONNX_INPUTS, 0), &dt, &nd, dims), CTN_OK) << ctn_last_error();
  ASSERT_EQ(nd, 2u);
  EXPECT_EQ(dims[0], 1);
  EXPECT_EQ(dims[1], 3);
  TensorPtr x1 = ctn_cli::make_tensor(CTN_F32, {1, 3}, x.data());
  auto r1 = run(one.g, {one.node(CTN_ONNX_OUTPUTS, 0)}, {one.node(CTN_ONNX_INPUTS, 0)}, {x1.get()});
  EXPECT_EQ(r1.at(0), (std::vector<float>{0, 2, 0}));
}

// ---- Attention (opset 24) ---------------------------------------------------------------------------
Pb attr_int(std::string_view name, int64_t v) {
  Pb a;
  a.s(1, name).i(3, v).i(20, 2);
  return a;
}

Pb attr_float(std::string_view name, float v) {
  Pb a;
  a.s(1, name).f(2, v).i(20, 1);
  return a;
}

// Grouped-query attention on 3-d inputs (4 query heads of size 2 share 2 key/value heads; value
// heads of size 3), with a key/value cache of 1 token, is_causal (query i sees keys j <= i + 1),
// softcap 2 and a boolean mask that masks every key of query 2 (a zero row).
constexpr int64_t kB = 2, kSq = 3, kHq = 4, kHkv = 2, kD = 2, kDv = 3, kSkv = 2, kSpast = 1, kTot = kSpast + kSkv;

std::string attention_model(std::vector<Pb> attrs) {
  Pb g;
  g.m(1, node("Attention", {"Q", "K", "V", "mask", "past_k", "past_v"}, {"Y", "present_k", "present_v"}, "attn1", attrs))
      .s(2, "g")
      .m(11, value_info("Q", 1, {kB, kSq, kHq * kD}))
      .m(11, value_info("K", 1, {kB, kSkv, kHkv * kD}))
      .m(11, value_info("V", 1, {kB, kSkv, kHkv * kDv}))
      .m(11, value_info("mask", 9, {kSq, kTot}))
      .m(11, value_info("past_k", 1, {kB, kHkv, kSpast, kD}))
      .m(11, value_info("past_v", 1, {kB, kHkv, kSpast, kDv}))
      .m(12, value_info("Y", 1, {kB, kSq, kHq * kDv}))
      .m(12, value_info("present_k", 1, {kB, kHkv, kTot, kD}))
      .m(12, value_info("present_v", 1, {kB, kHkv, kTot, kDv}));
  return model(g, 24).b;
}

std::vector<float> wave(size_t n, double seed) {
  std::vector<float> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = static_cast<float>(std::sin(0.7 * static_cast<double>(k) + seed) * 1.5);
  return v;
}

TEST(OnnxTransformer, AttentionMatchesAReferenceComputedHere) {
  Env e;
  const std::string path = write_file("attention.onnx", attention_model({attr_int("q_num_heads", kHq), attr_int("kv_num_heads", kHkv),
                                                                        attr_int("is_causal", 1), attr_float("softcap", 2.0f)}));
  Loaded l;
  load(l, e.ctx, path);
  ASSERT_EQ(l.st, CTN_OK) << l.err;
  const std::vector<float> q = wave(kB * kSq * kHq * kD, 0.1), k = wave(kB * kSkv * kHkv * kD, 1.3), v = wave(kB * kSkv * kHkv * kDv, 2.2),
                           pk = wave(kB * kHkv * kSpast * kD, 3.1), pv = wave(kB * kHkv * kSpast * kDv, 4.4);
  const uint8_t mask[kSq][kTot] = {{1, 1, 1}, {1, 0, 1}, {0, 0, 0}};
  TensorPtr qt = ctn_cli::make_tensor(CTN_F32, {kB, kSq, kHq * kD}, q.data()), kt = ctn_cli::make_tensor(CTN_F32, {kB, kSkv, kHkv * kD}, k.data()),
            vt = ctn_cli::make_tensor(CTN_F32, {kB, kSkv, kHkv * kDv}, v.data()), mt = ctn_cli::make_tensor(CTN_BOOL, {kSq, kTot}, mask),
            pkt = ctn_cli::make_tensor(CTN_F32, {kB, kHkv, kSpast, kD}, pk.data()), pvt = ctn_cli::make_tensor(CTN_F32, {kB, kHkv, kSpast, kDv}, pv.data());
  std::vector<ctn_node> feeds;
  for (uint32_t i = 0; i < 6; ++i) feeds.push_back(l.node(CTN_ONNX_INPUTS, i));
  auto r = run(l.g, {l.node(CTN_ONNX_OUTPUTS, 0), l.node(CTN_ONNX_OUTPUTS, 1), l.node(CTN_ONNX_OUTPUTS, 2)}, feeds,
               {qt.get(), kt.get(), vt.get(), mt.get(), pkt.get(), pvt.get()});
  ASSERT_EQ(r.size(), 3u);
  // The cache: present[b, h, j] is past[b, h, j] for j < 2, then token j - 2 of head h of K / V.
  auto key = [&](int64_t b, int64_t h, int64_t j, int64_t d) {
    return j < kSpast ? pk[static_cast<size_t>(((b * kHkv + h) * kSpast + j) * kD + d)]
                      : k[static_cast<size_t>((b * kSkv + j - kSpast) * kHkv * kD + h * kD + d)];
  };
  auto value = [&](int64_t b, int64_t h, int64_t j, int64_t d) {
    return j < kSpast ? pv[static_cast<size_t>(((b * kHkv + h) * kSpast + j) * kDv + d)]
                      : v[static_cast<size_t>((b * kSkv + j - kSpast) * kHkv * kDv + h * kDv + d)];
  };
  std::vector<float> y(kB * kSq * kHq * kDv, 0.0f), pres_k, pres_v;
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t h = 0; h < kHkv; ++h)
      for (int64_t j = 0; j < kTot; ++j) {
        for (int64_t d = 0; d < kD; ++d) pres_k.push_back(key(b, h, j, d));
        for (int64_t d = 0; d < kDv; ++d) pres_v.push_back(value(b, h, j, d));
      }
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t h = 0; h < kHq; ++h)
      for (int64_t i = 0; i < kSq; ++i) {
        const int64_t g = h / (kHq / kHkv);
        double s[kTot], top = -INFINITY;
        bool any = false;
        for (int64_t j = 0; j < kTot; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < kD; ++d) dot += q[static_cast<size_t>((b * kSq + i) * kHq * kD + h * kD + d)] * static_cast<double>(key(b, g, j, d));
          const bool allowed = j <= i + kSpast && mask[i][j];
          s[j] = allowed ? std::tanh(dot / std::sqrt(double(kD)) / 2.0) * 2.0 : -INFINITY;
          if (allowed) any = true, top = std::max(top, s[j]);
        }
        if (!any) continue;  // a fully masked row is zero
        double total = 0;
        for (double &x : s) total += (x = std::exp(x - top));
        for (int64_t dv = 0; dv < kDv; ++dv) {
          double acc = 0;
          for (int64_t j = 0; j < kTot; ++j) acc += s[j] / total * value(b, g, j, dv);
          y[static_cast<size_t>((b * kSq + i) * kHq * kDv + h * kDv + dv)] = static_cast<float>(acc);
        }
      }
  expect_close(r[0], y, 1e-5, 1e-6, "Y");
  EXPECT_EQ(r[1], pres_k);
  EXPECT_EQ(r[2], pres_v);
  for (size_t n = 2 * kHq * kDv; n < static_cast<size_t>(3 * kHq * kDv); ++n) EXPECT_EQ(r[0][n], 0.0f) << "query 2 sees no key";

  // Refusals name the node and the attribute.
  Loaded no_heads, bad_mode;
  load(no_heads, e.ctx, write_file("attention_noheads.onnx", attention_model({attr_int("is_causal", 1)})));
  EXPECT_EQ(no_heads.st, CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(no_heads.err.find("node 'attn1' (Attention)"), std::string::npos) << no_heads.err;
  EXPECT_NE(no_heads.err.find("q_num_heads and kv_num_heads"), std::string::npos) << no_heads.err;
  load(bad_mode, e.ctx, write_file("attention_mode.onnx", attention_model({attr_int("q_num_heads", kHq), attr_int("kv_num_heads", kHkv),
                                                                          attr_int("qk_matmul_output_mode", 7)})));
  EXPECT_EQ(bad_mode.st, CTN_ERR_UNSUPPORTED);
  EXPECT_NE(bad_mode.err.find("qk_matmul_output_mode 7"), std::string::npos) << bad_mode.err;
}

// y = Loop(M, "", x) whose body adds the outer-scope x to the carried value: y = (M + 1) x.
std::string loop_model() {
  Pb body;
  body.m(1, node("Identity", {"c"}, {"c2"}, "keep")).m(1, node("Add", {"a", "x"}, {"a2"}, "acc")).s(2, "body")
      .m(11, value_info("i", 7, {})).m(11, value_info("c", 9, {})).m(11, value_info("a", 1, {2}))
      .m(12, value_info("c2", 9, {})).m(12, value_info("a2", 1, {2}));
  Pb battr;
  battr.s(1, "body").m(6, body).i(20, 5);
  Pb g;
  g.m(1, node("Loop", {"M", "", "x"}, {"y"}, "loop1", {battr})).s(2, "g")
      .m(11, value_info("M", 7, {})).m(11, value_info("x", 1, {2})).m(12, value_info("y", 1, {2}));
  return model(g).b;
}

TEST(OnnxControlFlow, LoopIsUnrolledWhenItsTripCountIsAConstant) {
  Env e;
  const std::string path = write_file("loop.onnx", loop_model());
  Loaded open;
  load(open, e.ctx, path);
  EXPECT_EQ(open.st, CTN_ERR_UNSUPPORTED);
  EXPECT_NE(open.err.find("node 'loop1' (Loop)"), std::string::npos) << open.err;
  EXPECT_NE(open.err.find("trip count M must be a constant"), std::string::npos) << open.err;
  const int64_t trips = 3;
  TensorPtr m = ctn_cli::make_tensor(CTN_I64, {}, &trips);
  std::vector<float> x = {1.5f, -2};
  TensorPtr xt = ctn_cli::make_tensor(CTN_F32, {2}, x.data());
  Loaded l;
  load(l, e.ctx, path, 0, {{"M", m.get(), 1, 0}, {"x", xt.get(), 0, 0}});
  ASSERT_EQ(l.st, CTN_OK) << l.err;
  auto r = run(l.g, {l.node(CTN_ONNX_OUTPUTS, 0)}, {l.node(CTN_ONNX_INPUTS, 1)}, {xt.get()});
  EXPECT_EQ(r.at(0), (std::vector<float>{6, -8}));
}

// ai.onnx.ml (models/ml_linear.onnx, written with onnx.helper): Scaler -> LinearClassifier
// (3 classes, softmax), Normalizer (L2), LinearRegressor (2 targets) and a binary
// LinearClassifier (logistic); the expected values are onnxruntime 1.32's outputs.
TEST(OnnxMl, LinearModelsMatchOnnxRuntime) {
  Env e;
  Loaded l;
  load(l, e.ctx, kModels + "ml_linear.onnx");
  ASSERT_EQ(l.st, CTN_OK) << l.err;
  const std::vector<float> x = {1.5f, -2, 0.5f, 0, 3, -1};
  TensorPtr xt = ctn_cli::make_tensor(CTN_F32, {2, 3}, x.data());
  std::vector<ctn_node> outs;
  for (uint32_t k = 0; k < 6; ++k) outs.push_back(l.node(CTN_ONNX_OUTPUTS, k));
  // The int64 labels are compared through a float cast.
  for (uint32_t k : {0u, 4u}) {
    ctn_node f = CTN_NODE_NONE;
    ASSERT_EQ(ctn_cast(l.g, outs[k], CTN_F32, &f), CTN_OK) << ctn_last_error();
    outs[k] = f;
  }
  auto r = run(l.g, outs, {l.node(CTN_ONNX_INPUTS, 0)}, {xt.get()});
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(r[0], (std::vector<float>{10, 30}));
  expect_close(r[1], {0.88907719f, 0.08373727f, 0.02718551f, 0.00095272f, 0.00521515f, 0.99383211f}, 1e-5, 1e-7, "prob");
  expect_close(r[2], {0.42399916f, -0.84799832f, 0.31799936f, -0.55470020f, 0.83205032f, 0}, 1e-5, 1e-7, "normalizer");
  EXPECT_EQ(r[3], (std::vector<float>{4.25f, -0.5f, -4.5f, 1.5f}));
  EXPECT_EQ(r[4], (std::vector<float>{1, 0}));
  expect_close(r[5], {0.00247258f, 0.99752742f, 0.99807322f, 0.00192678f}, 1e-4, 1e-7, "binary prob");
}

// Tree ensembles (models/ml_trees.onnx, two hand-written trees with LEQ/LT/GT tests and a NaN
// routed by missing_value_tracks_true): a 2-target AVERAGE regressor, a 3-class SOFTMAX
// classifier and a binary classifier, against onnxruntime 1.32's outputs (ml_trees.ort.npz).
TEST(OnnxMl, TreeEnsemblesMatchOnnxRuntime) {
  Env e;
  Loaded l;
  load(l, e.ctx, kModels + "ml_trees.onnx");
  ASSERT_EQ(l.st, CTN_OK) << l.err;
  auto in = ctn_cli::npz_read(kModels + "ml_trees.in.npz");
  auto ref = ctn_cli::npz_read(kModels + "ml_trees.ort.npz");
  ASSERT_EQ(ref.size(), 5u);
  std::vector<ctn_node> outs;
  for (uint32_t k = 0; k < 5; ++k) {
    ctn_node o = l.node(CTN_ONNX_OUTPUTS, k), f = CTN_NODE_NONE;
    ASSERT_EQ(ctn_cast(l.g, o, CTN_F32, &f), CTN_OK) << ctn_last_error();  // labels are int64
    outs.push_back(f);
  }
  auto r = run(l.g, outs, {l.node(CTN_ONNX_INPUTS, 0)}, {in.at(0).second.get()});
  ASSERT_EQ(r.size(), 5u);
  for (size_t k = 0; k < 5; ++k) {
    std::string name = ref[k].first;
    for (const char *want : {"r", "label", "prob", "blabel", "bprob"})
      if (name == want) expect_close(r[k], values(ref[k].second.get()), 1e-5, 1e-6, name);
  }
}

// y = x + b with b [3] an external-data initializer stored at byte 8 of w.bin.
std::string external_model(const std::string &location, int64_t offset, int64_t length) {
  Pb b;
  b.packed(1, {3}).i(2, 1).s(8, "b").i(14, 1);
  Pb loc, off, len;
  loc.s(1, "location").s(2, location);
  off.s(1, "offset").s(2, std::to_string(offset));
  len.s(1, "length").s(2, std::to_string(length));
  b.m(13, loc).m(13, off).m(13, len);
  Pb g;
  g.m(1, node("Add", {"x", "b"}, {"y"}, "add")).m(5, b).m(11, value_info("x", 1, {2, 3})).m(12, value_info("y", 1, {2, 3}));
  return model(g).b;
}

TEST(OnnxWire, ExternalDataIsReadAndConfined) {
  Env e;
  std::string blob(8, 'x');
  const float b[3] = {10, 20, 30};
  blob.append(reinterpret_cast<const char *>(b), sizeof b);
  write_file("w.bin", blob);
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  TensorPtr xt = ctn_cli::make_tensor(CTN_F32, {2, 3}, x.data());
  Loaded ok;
  load(ok, e.ctx, write_file("ext.onnx", external_model("w.bin", 8, 12)));
  ASSERT_EQ(ok.st, CTN_OK) << ok.err;
  EXPECT_EQ(run(ok.g, {ok.node(CTN_ONNX_OUTPUTS, 0)}, {ok.node(CTN_ONNX_INPUTS, 0)}, {xt.get()}).at(0),
            (std::vector<float>{11, 22, 33, 14, 25, 36}));
  for (auto [loc, off, len, code] : {std::tuple<const char *, int, int, ctn_status>{"../w.bin", 8, 12, CTN_ERR_CORRUPT},
                                     {"/etc/passwd", 0, 12, CTN_ERR_CORRUPT},
                                     {"w.bin", 16, 12, CTN_ERR_CORRUPT},
                                     {"w.bin", 8, 8, CTN_ERR_CORRUPT},
                                     {"missing.bin", 0, 12, CTN_ERR_IO}}) {
    Loaded l;
    load(l, e.ctx, write_file("ext-bad.onnx", external_model(loc, off, len)));
    EXPECT_EQ(l.st, code) << loc << " " << off << " " << len << ": " << l.err;
  }
}

// ---- PyTorch-exported models ------------------------------------------------------------------
const char *const kTorchModels[] = {"mlp",           "cnn_bn", "residual",  "depthwise_dilated", "conv_transpose",
                                    "lstm",          "attention", "layernorm_gelu", "embedding"};

TEST(OnnxTorch, OutputsMatchOnnxRuntime) {
  Env e;
  for (const char *name : kTorchModels) {
    for (uint32_t flags : {0u, static_cast<uint32_t>(CTN_ONNX_INITIALIZERS_AS_CONSTANTS)}) {
      SCOPED_TRACE(std::string(name) + (flags ? " (constants)" : " (variables)"));
      auto in = ctn_cli::npz_read(kModels + name + ".in.npz");
      Loaded l;
      load(l, e.ctx, kModels + name + ".onnx", flags);
      ASSERT_EQ(l.st, CTN_OK) << l.err;
      std::vector<ctn_node> feeds;
      std::vector<const ctn_tensor *> vals;
      uint32_t n_in = 0;
      ctn_onnx_model_count(l.m, CTN_ONNX_INPUTS, &n_in);
      ASSERT_EQ(n_in, in.size());
      for (uint32_t k = 0; k < n_in; ++k) {
        const char *iname = nullptr;
        ctn_node node;
        ctn_onnx_model_entry(l.m, CTN_ONNX_INPUTS, k, &iname, &node);
        for (auto &[n, t] : in)
          if (n == iname) feeds.push_back(node), vals.push_back(t.get());
      }
      ASSERT_EQ(feeds.size(), in.size());
      auto out = run(l.g, {l.node(CTN_ONNX_OUTPUTS, 0)}, feeds, vals);
      ASSERT_EQ(out.size(), 1u);
      expect_close(out[0], values(ctn_cli::npy_read(kModels + name + ".ort.npy").get()), 1e-3, 1e-5, "vs onnxruntime");
    }
  }
}

TEST(OnnxTorch, GradientsMatchPyTorch) {
  Env e;
  for (const char *name : {"mlp", "cnn_bn"}) {
    SCOPED_TRACE(name);
    auto in = ctn_cli::npz_read(kModels + name + ".in.npz");
    auto grads = ctn_cli::npz_read(kModels + name + ".grad.npz");
    TensorPtr w = ctn_cli::npy_read(kModels + name + ".w.npy");
    Loaded l;
    load(l, e.ctx, kModels + name + ".onnx");
    ASSERT_EQ(l.st, CTN_OK) << l.err;
    ctn_node y = l.node(CTN_ONNX_OUTPUTS, 0), wc, prod, loss;
    CTN_ASSERT_OK(ctn_constant(l.g, w.get(), &wc));
    CTN_ASSERT_OK(ctn_mul(l.g, y, wc, &prod));
    CTN_ASSERT_OK(ctn_sum(l.g, prod, 0, nullptr, 0, &loss));
    uint32_t n_init = 0;
    ctn_onnx_model_count(l.m, CTN_ONNX_INITIALIZERS, &n_init);
    std::vector<ctn_node> wrt;
    std::vector<const ctn_tensor *> want;
    for (uint32_t k = 0; k < n_init; ++k) {
      const char *iname;
      ctn_node node;
      ctn_onnx_model_entry(l.m, CTN_ONNX_INITIALIZERS, k, &iname, &node);
      for (auto &[n, t] : grads)
        if (n == iname) wrt.push_back(node), want.push_back(t.get());
    }
    ASSERT_EQ(wrt.size(), grads.size()) << "every PyTorch parameter is an initializer";
    std::vector<ctn_node> dw(wrt.size());
    CTN_ASSERT_OK(ctn_grad(l.g, loss, static_cast<uint32_t>(wrt.size()), wrt.data(), dw.data()));
    auto got = run(l.g, dw, {l.node(CTN_ONNX_INPUTS, 0)}, {in.at(0).second.get()});
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      std::vector<float> ref = values(want[k]);
      double scale = 0;
      for (float v : ref) scale = std::max(scale, static_cast<double>(std::fabs(v)));
      expect_close(got[k], ref, 1e-3, 1e-5 * std::max(1.0, scale), "gradient " + std::to_string(k));
    }
  }
}

TEST(OnnxTorch, ImportedMlpTrainsAndCheckpoints) {
  Env e;
  auto in = ctn_cli::npz_read(kModels + "mlp.in.npz");
  Loaded l;
  load(l, e.ctx, kModels + "mlp.onnx");
  ASSERT_EQ(l.st, CTN_OK) << l.err;
  ctn_node y = l.node(CTN_ONNX_OUTPUTS, 0), sq, loss, lr;
  CTN_ASSERT_OK(ctn_mul(l.g, y, y, &sq));
  CTN_ASSERT_OK(ctn_mean(l.g, sq, 0, nullptr, 0, &loss));  // drive the outputs to 0
  uint32_t n = 0;
  ctn_onnx_model_count(l.m, CTN_ONNX_INITIALIZERS, &n);
  std::vector<ctn_node> vars(n), grads(n);
  for (uint32_t k = 0; k < n; ++k) vars[k] = l.node(CTN_ONNX_INITIALIZERS, k);
  CTN_ASSERT_OK(ctn_grad(l.g, loss, n, vars.data(), grads.data()));
  CTN_ASSERT_OK(ctn_scalar(l.g, CTN_F32, 0.05, &lr));
  for (uint32_t k = 0; k < n; ++k) {
    ctn_node step, upd, a;
    CTN_ASSERT_OK(ctn_mul(l.g, grads[k], lr, &step));
    CTN_ASSERT_OK(ctn_sub(l.g, vars[k], step, &upd));
    CTN_ASSERT_OK(ctn_assign(l.g, vars[k], upd, &a));
  }
  ctn_plan *p = nullptr;
  CTN_ASSERT_OK(ctn_plan_compile(l.g, 1, &loss, nullptr, &p));
  ctn_tensor *lv = nullptr;
  ctn_plan_output_create(p, 0, &lv);
  ctn_node xin = l.node(CTN_ONNX_INPUTS, 0);
  const ctn_tensor *xv = in.at(0).second.get();
  float first = 0, last = 0;
  for (int it = 0; it < 30; ++it) {
    CTN_ASSERT_OK(ctn_plan_run(p, 1, &xin, &xv, 1, &lv));
    (it == 0 ? first : last) = values(lv)[0];
  }
  EXPECT_LT(last, first / 2) << "SGD on the imported MLP's initializers lowers the loss";
  // The trained initializers go to a checkpoint under their ONNX names and come back intact.
  std::vector<ctn_tensor *> ts(n);
  std::vector<std::string> names(n);
  std::vector<const char *> cnames(n);
  for (uint32_t k = 0; k < n; ++k) {
    const char *nm;
    ctn_onnx_model_entry(l.m, CTN_ONNX_INITIALIZERS, k, &nm, nullptr);
    names[k] = nm;
    cnames[k] = names[k].c_str();
    CTN_ASSERT_OK(ctn_plan_variable_read(p, vars[k], &ts[k]));
  }
  const std::string ck = tmp_dir() + "/mlp.safetensors";
  CTN_ASSERT_OK(ctn_checkpoint_save(ck.c_str(), n, cnames.data(), ts.data(), nullptr));
  ctn_checkpoint *c = nullptr;
  CTN_ASSERT_OK(ctn_checkpoint_load(ck.c_str(), &c));
  for (uint32_t k = 0; k < n; ++k) {
    ctn_tensor *back = nullptr;
    CTN_ASSERT_OK(ctn_checkpoint_get(c, cnames[k], &back));
    EXPECT_EQ(values(back), values(ts[k])) << cnames[k];
    ctn_tensor_release(back);
    ctn_tensor_release(ts[k]);
  }
  ctn_checkpoint_release(c);
  ctn_tensor_release(lv);
  ctn_plan_release(p);
}

TEST(OnnxInspect, ListsOpTypesOfAModelThatDoesNotImport) {
  Env e;
  Pb g;
  g.m(1, node("Relu", {"x"}, {"r"}, "a")).m(1, node("Unique", {"r"}, {"s"}, "b")).m(1, node("Relu", {"s"}, {"y"}, "c"))
      .m(11, value_info("x", 1, {2})).m(12, value_info("y", 1, {2}));
  const std::string path = write_file("inspect.onnx", model(g).b);
  Loaded full, insp;
  load(full, e.ctx, path);
  EXPECT_EQ(full.st, CTN_ERR_UNSUPPORTED);
  EXPECT_NE(full.err.find("node 'b' (Unique)"), std::string::npos) << full.err;
  load(insp, e.ctx, path, CTN_ONNX_INSPECT_ONLY);
  ASSERT_EQ(insp.st, CTN_OK) << insp.err;
  EXPECT_EQ(insp.g, nullptr);
  uint32_t n = 0, uses = 0;
  int32_t supported = -1;
  const char *nm = nullptr;
  ctn_onnx_model_count(insp.m, CTN_ONNX_OP_TYPES, &n);
  ASSERT_EQ(n, 2u);
  ctn_onnx_model_entry(insp.m, CTN_ONNX_OP_TYPES, 0, &nm, nullptr);
  ctn_onnx_model_op_type(insp.m, 0, &uses, &supported, nullptr);
  EXPECT_STREQ(nm, "Relu");
  EXPECT_EQ(uses, 2u);
  EXPECT_EQ(supported, 1);
  ctn_onnx_model_entry(insp.m, CTN_ONNX_OP_TYPES, 1, &nm, nullptr);
  ctn_onnx_model_op_type(insp.m, 1, &uses, &supported, nullptr);
  EXPECT_STREQ(nm, "Unique");
  EXPECT_EQ(supported, 0);
}

// ---- .npy / .npz ------------------------------------------------------------------------------
TEST(Npy, RoundTripsFortranOrderAndCompressedNpz) {
  std::vector<int64_t> v = {1, -2, 3, 1LL << 40};
  TensorPtr t = ctn_cli::make_tensor(CTN_I64, {2, 2}, v.data());
  const std::string p = tmp_dir() + "/i64.npy";
  ctn_cli::npy_write(p, t.get());
  TensorPtr back = ctn_cli::npy_read(p);
  std::vector<int64_t> got(4);
  ASSERT_EQ(ctn_tensor_read(back.get(), got.data(), 32), CTN_OK);
  EXPECT_EQ(got, v);
  TensorPtr f = ctn_cli::npy_read(CTN_ONNX_TEST_DIR "/data_fortran.npy");  // arange(6).reshape(2, 3), Fortran order
  std::vector<double> fd(6);
  ASSERT_EQ(ctn_tensor_read(f.get(), fd.data(), 48), CTN_OK);
  EXPECT_EQ(fd, (std::vector<double>{0, 1, 2, 3, 4, 5}));
  auto z = ctn_cli::npz_read(CTN_ONNX_TEST_DIR "/data_compressed.npz");  // savez_compressed: deflate
  ASSERT_EQ(z.size(), 2u);
  EXPECT_EQ(z[0].first, "a");
  std::vector<int64_t> a(6);
  ASSERT_EQ(ctn_tensor_read(z[0].second.get(), a.data(), 48), CTN_OK);
  EXPECT_EQ(a, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_THROW(ctn_cli::npy_parse(std::string("\x93NUMPY\x01\x00\x20\x00{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", 42), "c8"),
               ctn_cli::Failure);
  EXPECT_THROW(ctn_cli::npy_parse("junk", "junk"), ctn_cli::Failure);
}

template <class T>
std::string bytes_of(const std::vector<T> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(T));
}

// float16, int8, int16, uint16, uint32 and uint64 files written by numpy.save read as f16, i8,
// i16, u16, u32 and u64 with numpy's bits and write back byte for byte; a bf16 tensor (numpy has
// no bfloat16) is refused naming the dtype.
TEST(Npy, Float16AndIntegersFromNumpyRoundTrip) {
  const std::vector<uint16_t> h = {0x3c00, 0xc100, 0x7bff, 0x0001, 0x8000, 0x7c00};  // numpy's bits
  const std::vector<int8_t> q = {-128, -1, 0, 127};
  struct File {
    const char *name;
    ctn_dtype dt;
    std::vector<int64_t> shape;
    std::string bits;
  } files[] = {{"data_f16.npy", CTN_F16, {2, 3}, std::string(reinterpret_cast<const char *>(h.data()), 12)},
               {"data_i8.npy", CTN_I8, {4}, std::string(reinterpret_cast<const char *>(q.data()), 4)},
               // The 1.6 integers (numpy.save of int16, uint16, uint32, uint64: their extremes).
               {"data_i16.npy", CTN_I16, {2, 3}, bytes_of(std::vector<int16_t>{-32768, -1, 0, 1, 300, 32767})},
               {"data_u16.npy", CTN_U16, {4}, bytes_of(std::vector<uint16_t>{0, 1, 65535, 40000})},
               {"data_u32.npy", CTN_U32, {3}, bytes_of(std::vector<uint32_t>{0, 4294967295u, 3000000000u})},
               {"data_u64.npy", CTN_U64, {3},
                bytes_of(std::vector<uint64_t>{0, 18446744073709551615ull, 9223372036854775808ull})}};
  for (const File &f : files) {
    SCOPED_TRACE(f.name);
    const std::string src = CTN_ONNX_TEST_DIR + std::string("/") + f.name;
    TensorPtr t = ctn_cli::npy_read(src);
    ctn_dtype dt{};
    ctn_tensor_dtype(t.get(), &dt);
    EXPECT_EQ(dt, f.dt);
    EXPECT_EQ(shape_of(t.get()), f.shape);
    std::string got(f.bits.size(), '\0');
    ASSERT_EQ(ctn_tensor_read(t.get(), got.data(), got.size()), CTN_OK) << ctn_last_error();
    EXPECT_EQ(got, f.bits);
    const std::string out = tmp_dir() + "/" + f.name;
    ctn_cli::npy_write(out, t.get());
    std::ifstream a(src, std::ios::binary), b(out, std::ios::binary);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(a), {}), std::string(std::istreambuf_iterator<char>(b), {}));
  }
  const uint16_t one = 0x3f80;
  TensorPtr bf = ctn_cli::make_tensor(CTN_BF16, {1}, &one);
  try {
    ctn_cli::npy_write(tmp_dir() + "/bf16.npy", bf.get());
    ADD_FAILURE() << "a bf16 tensor was written as .npy";
  } catch (const ctn_cli::Failure &e) {
    EXPECT_NE(std::string(e.what()).find("bf16 tensor has no .npy dtype"), std::string::npos) << e.what();
  }
}

// ---- DLPack from C --------------------------------------------------------------------------
int g_deleted = 0;
void count_deleter(DLManagedTensorVersioned *) { ++g_deleted; }

TEST(DlpackC, ZeroCopyDeleterOnceReadOnlyAndRefusals) {
  float data[6] = {0, 1, 2, 3, 4, 5};
  int64_t shape[2] = {2, 2}, strides[2] = {3, 1};  // a [2, 2] window of a [2, 3] buffer, from column 1
  DLManagedTensorVersioned m{};
  m.version = {1, 1};
  m.deleter = count_deleter;
  m.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  m.dl_tensor = DLTensor{data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, strides, sizeof(float)};
  g_deleted = 0;
  ctn_tensor *t = nullptr;
  CTN_ASSERT_OK(ctn_tensor_from_dlpack(&m, &t));
  EXPECT_EQ(values(t), (std::vector<float>{1, 2, 4, 5}));
  float junk[4] = {9, 9, 9, 9};
  EXPECT_EQ(ctn_tensor_write(t, junk, sizeof junk), CTN_ERR_STATE);
  EXPECT_EQ(data[1], 1.0f);
  DLManagedTensorVersioned *out = nullptr;
  CTN_ASSERT_OK(ctn_tensor_to_dlpack(t, 0, &out));
  EXPECT_EQ(static_cast<char *>(out->dl_tensor.data) + out->dl_tensor.byte_offset, reinterpret_cast<char *>(data + 1));
  EXPECT_TRUE(out->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
  ctn_tensor_release(t);
  EXPECT_EQ(g_deleted, 0) << "the export still holds the storage";
  out->deleter(out);
  EXPECT_EQ(g_deleted, 1);
  for (int which = 0; which < 3; ++which) {
    DLManagedTensorVersioned b = m;
    if (which == 0) b.version.major = 2;
    if (which == 1) b.dl_tensor.dtype.lanes = 2;
    if (which == 2) b.dl_tensor.dtype = {kDLComplex, 64, 1};  // (lowp_test.cpp: f16, bf16, i8 and more refusals)
    g_deleted = 0;
    ctn_tensor *bad = nullptr;
    EXPECT_EQ(ctn_tensor_from_dlpack(&b, &bad), CTN_ERR_UNSUPPORTED);
    EXPECT_EQ(bad, nullptr);
    EXPECT_EQ(g_deleted, 1) << "refusal " << which << " still calls the deleter: " << ctn_last_error();
  }
}

}  // namespace

// Custom domains map to op libraries' domains (docs/ABI.md, "Op namespaces"): a node of domain
// com.example runs op com.example::twice of the library below; an unknown domain is refused by
// name.
namespace {
ctn_status twice_infer(const ctn_host_api *, uint32_t, const ctn_tensor_desc *in, const ctn_attrs *, ctn_tensor_desc *out) {
  *out = in[0];
  return CTN_OK;
}
ctn_status twice_run(void *, const ctn_kernel_args *a) {
  const ctn_tensor_desc &x = a->inputs[0], &y = a->outputs[0];
  int64_t n = 1;
  for (uint32_t k = 0; k < y.ndim; ++k) n *= y.shape[k];
  const float *xp = reinterpret_cast<const float *>(static_cast<const char *>(x.data) + x.offset);
  float *yp = reinterpret_cast<float *>(static_cast<char *>(y.data) + y.offset);
  for (int64_t i = 0; i < n; ++i) yp[i] = 2 * xp[i];
  return CTN_OK;
}
ctn_status twice_kernel(const ctn_host_api *, uint32_t, const ctn_tensor_desc *, const ctn_tensor_desc *, const ctn_attrs *,
                        ctn_kernel *out) {
  *out = ctn_kernel{};
  out->fn = twice_run;
  return CTN_OK;
}
const ctn_oplib_kernel kTwiceKernels[] = {{"cpu", twice_kernel}};
ctn_op_def TwiceDef() {
  ctn_op_def d{};
  d.struct_size = sizeof d;
  d.n_inputs = 1;
  d.name = "com.example::twice";
  d.doc = "2 x";
  d.infer = twice_infer;
  d.n_kernels = 1;
  d.kernels = kTwiceKernels;
  return d;
}
const ctn_op_def kTwiceOps[] = {TwiceDef()};
ctn_oplib_desc TwiceLib() {
  ctn_oplib_desc d{};
  d.header = {sizeof d, CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_OPLIB, 0, "example-ops"};
  d.n_ops = 1;
  d.ops = kTwiceOps;
  return d;
}
const ctn_oplib_desc kTwiceLib = TwiceLib();
const ctn_plugin_header *twice_query(uint32_t, const ctn_host_api *) { return &kTwiceLib.header; }
}  // namespace

TEST(OnnxCustomDomain, MapsToTheOpLibraryOfThatDomain) {
  Env e;
  const std::string unknown = model(one_node_graph(node("twice", {"x"}, {"y"}, "tw1").s(7, "com.example"))).b;
  Loaded before;
  load(before, e.ctx, write_file("custom0.onnx", unknown));
  EXPECT_EQ(before.st, CTN_ERR_UNSUPPORTED) << before.err;
  EXPECT_NE(before.err.find("op domain 'com.example'"), std::string::npos) << before.err;
  // Inspecting (no graph) asks the context about the domain: unsupported now, supported below.
  auto inspect_supported = [&](const char *file) {
    Loaded insp;
    load(insp, e.ctx, write_file(file, unknown), CTN_ONNX_INSPECT_ONLY);
    EXPECT_EQ(insp.st, CTN_OK) << insp.err;
    int32_t supported = -1;
    if (insp.m) ctn_onnx_model_op_type(insp.m, 0, nullptr, &supported, nullptr);
    return supported;
  };
  EXPECT_EQ(inspect_supported("custom0i.onnx"), 0);
  ASSERT_EQ(ctn_context_add_oplib(e.ctx, twice_query), CTN_OK) << ctn_last_error();
  EXPECT_EQ(inspect_supported("custom1i.onnx"), 1);
  Loaded l;
  load(l, e.ctx, write_file("custom1.onnx", unknown));
  ASSERT_EQ(l.st, CTN_OK) << l.err;
  ctn_tensor *x = nullptr;
  const int64_t shape[] = {2, 3};
  const float xv[] = {1, -2, 3, 0.5f, 0, 7};
  ASSERT_EQ(ctn_tensor_create(CTN_F32, 2, shape, xv, &x), CTN_OK) << ctn_last_error();
  const auto r = run(l.g, {l.node(CTN_ONNX_OUTPUTS, 0)}, {l.node(CTN_ONNX_INPUTS, 0)}, {x});
  ctn_tensor_release(x);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0], (std::vector<float>{2, -4, 6, 1, 0, 14}));
}
