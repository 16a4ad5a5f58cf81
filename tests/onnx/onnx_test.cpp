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
  Pb conv_w = tensor_f32("w", {1, 1, 1, 1, 1, 1}, {1}, true);
  Pb conv_g;
  conv_g.m(1, node("Conv", {"x", "w"}, {"y"}, "conv4d")).m(5, conv_w).m(11, value_info("x", 1, {1, 1, 2, 2, 2, 2}))
      .m(12, value_info("y", 1, {1, 1, 2, 2, 2, 2}));
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
      {"conv4d.onnx", model(conv_g).b, CTN_ERR_UNSUPPORTED, {"node 'conv4d' (Conv)", "6-d input"}},
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
const char *const kTorchModels[] = {"mlp",  "cnn_bn",    "residual",       "depthwise_dilated", "conv_transpose",
                                    "lstm", "attention", "layernorm_gelu", "embedding",         "llama_ts"};

TEST(OnnxTorch, OutputsMatchOnnxRuntime) {
  Env e;
  for (const char *name : kTorchModels) {
    for (uint32_t flags : {0u, static_cast<uint32_t>(CTN_ONNX_INITIALIZERS_AS_CONSTANTS)}) {
      SCOPED_TRACE(std::string(name) + (flags ? " (constants)" : " (variables)"));
      auto in = ctn_cli::npz_read(kModels + name + ".in.npz");
      std::vector<ctn_onnx_input_spec> specs;  // the inputs' shapes fix symbolic dims (llama_ts: batch, seq)
      for (auto &[n, t] : in) specs.push_back({n.c_str(), t.get(), 0, 0});
      Loaded l;
      load(l, e.ctx, kModels + name + ".onnx", flags, specs);
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

// The TorchScript-exported Llama-like decoder (make_models.py: rotary Cos/Sin from positions,
// Einsum, Trilu, GQA) at another sequence length than the one it was exported and checked with:
// it is causal, so the logits of the first 5 tokens alone equal the first 5 positions' logits
// of the whole 9-token sequence (and those matched onnxruntime above).
TEST(OnnxTorch, LlamaTorchScriptIsCausalAtAnyLength) {
  Env e;
  auto in = ctn_cli::npz_read(kModels + "llama_ts.in.npz");
  ASSERT_EQ(in.size(), 1u);
  std::vector<int64_t> ids(18);
  ASSERT_EQ(ctn_tensor_read(in[0].second.get(), ids.data(), ids.size() * 8), CTN_OK) << ctn_last_error();
  std::vector<int64_t> head;
  for (int b = 0; b < 2; ++b) head.insert(head.end(), ids.begin() + b * 9, ids.begin() + b * 9 + 5);
  const int64_t shape[2] = {2, 5};
  ctn_tensor *t = nullptr;
  ASSERT_EQ(ctn_tensor_create(CTN_I64, 2, shape, head.data(), &t), CTN_OK) << ctn_last_error();
  Loaded l;
  load(l, e.ctx, kModels + "llama_ts.onnx", 0, {{"input_ids", t, 0, 0}});
  ASSERT_EQ(l.st, CTN_OK) << l.err;
  auto out = run(l.g, {l.node(CTN_ONNX_OUTPUTS, 0)}, {l.node(CTN_ONNX_INPUTS, 0)}, {t});
  ctn_tensor_release(t);
  ASSERT_EQ(out.size(), 1u);
  const std::vector<float> full = values(ctn_cli::npy_read(kModels + "llama_ts.ort.npy").get());  // [2, 9, 128]
  ASSERT_EQ(full.size(), 2u * 9 * 128);
  std::vector<float> ref;
  for (size_t b = 0; b < 2; ++b) ref.insert(ref.end(), full.begin() + static_cast<std::ptrdiff_t>(b * 9 * 128),
                                            full.begin() + static_cast<std::ptrdiff_t>((b * 9 + 5) * 128));
  expect_close(out[0], ref, 1e-3, 1e-5, "first 5 positions");
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
  g.m(1, node("Relu", {"x"}, {"r"}, "a")).m(1, node("TfIdfVectorizer", {"r"}, {"s"}, "b")).m(1, node("Relu", {"s"}, {"y"}, "c"))
      .m(11, value_info("x", 1, {2})).m(12, value_info("y", 1, {2}));
  const std::string path = write_file("inspect.onnx", model(g).b);
  Loaded full, insp;
  load(full, e.ctx, path);
  EXPECT_EQ(full.st, CTN_ERR_UNSUPPORTED);
  EXPECT_NE(full.err.find("node 'b' (TfIdfVectorizer)"), std::string::npos) << full.err;
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
  EXPECT_STREQ(nm, "TfIdfVectorizer");
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
const ctn_op_def kTwiceOps[] = {unary_op_def("com.example::twice", "2 x", twice_infer, kTwiceKernels, 1)};
ctn_oplib_desc TwiceLib() {
  ctn_oplib_desc d{};
  d.header = {sizeof d, CTN_ABI_MAJOR, CTN_ABI_MINOR, CTN_PLUGIN_OPLIB, 0, "example-ops"};
  d.n_ops = 1;
  d.ops = kTwiceOps;
  return d;
}
const ctn_oplib_desc kTwiceLib = TwiceLib();
const ctn_plugin_header *twice_query(uint32_t, const ctn_host_api *) { return &kTwiceLib.header; }

// ---- data-dependent shapes and sequences (ABI 1.6) --------------------------------------------

Pb tensor_i64(std::string_view name, std::vector<int64_t> dims, const std::vector<int64_t> &v) {
  Pb t;
  t.packed(1, dims).i(2, 7).s(8, name).packed(7, v);
  return t;
}

std::vector<int64_t> values_i64(const ctn_tensor *t) {
  int64_t n = 0;
  ctn_tensor_numel(t, &n);
  std::vector<int64_t> v(static_cast<size_t>(n));
  if (n) {
    EXPECT_EQ(ctn_tensor_read(t, v.data(), v.size() * 8), CTN_OK) << ctn_last_error();
  }
  return v;
}

// y = Gather(table, NonZero(x)) + 1, x fed at run time: one plan, run on two inputs whose
// non-zero counts (and so y's shapes) differ.
TEST(OnnxDynamic, NonZeroGatherAddRunsTwiceWithDifferentShapes) {
  Pb g;
  g.m(1, node("NonZero", {"x"}, {"nz"}, "nz1")).m(1, node("Gather", {"table", "nz"}, {"t"}, "gather1"))
      .m(1, node("Add", {"t", "one"}, {"y"}, "add1")).s(2, "g")
      .m(5, tensor_f32("table", {5}, {10, 20, 30, 40, 50}, true)).m(5, tensor_f32("one", {}, {1}, true))
      .m(11, value_info("x", 1, {5})).m(12, value_info("y", 1, {1, 5}));
  Env e;
  Loaded l;
  load(l, e.ctx, write_file("nonzero.onnx", model(g).b));
  ASSERT_EQ(l.st, CTN_OK) << l.err;
  ctn_node x = l.node(CTN_ONNX_INPUTS, 0), y = l.node(CTN_ONNX_OUTPUTS, 0);
  ctn_plan *p = nullptr;
  ASSERT_EQ(ctn_plan_compile(l.g, 1, &y, nullptr, &p), CTN_OK) << ctn_last_error();
  for (const auto &[in, want] : std::vector<std::pair<std::vector<float>, std::vector<float>>>{
           {{0, 1, 0, 1, 1}, {21, 41, 51}}, {{2, 0, 0, 0, 0}, {11}}}) {
    TensorPtr xt = ctn_cli::make_tensor(CTN_F32, {5}, in.data());
    ctn_tensor *out = nullptr;
    ASSERT_EQ(ctn_plan_output_create(p, 0, &out), CTN_OK);
    const ctn_tensor *feeds[1] = {xt.get()};
    EXPECT_EQ(ctn_plan_run(p, 1, &x, feeds, 1, &out), CTN_OK) << ctn_last_error();
    uint32_t nd = 0;
    int64_t dims[CTN_MAX_DIMS];
    ASSERT_EQ(ctn_tensor_shape(out, &nd, dims), CTN_OK);
    EXPECT_EQ(std::vector<int64_t>(dims, dims + nd), (std::vector<int64_t>{1, static_cast<int64_t>(want.size())}));
    EXPECT_EQ(values(out), want);
    ctn_tensor_release(out);
  }
  ctn_plan_release(p);
}

// Shape of a data-dependent value would fold to the upper bound: refused at import, by name.
TEST(OnnxDynamic, ShapeOfADataDependentValueIsRefused) {
  Pb g;
  g.m(1, node("NonZero", {"x"}, {"nz"}, "nz1")).m(1, node("Shape", {"nz"}, {"s"}, "shape1")).s(2, "g")
      .m(11, value_info("x", 1, {4})).m(12, value_info("s", 7, {2}));
  Env e;
  Loaded l;
  load(l, e.ctx, write_file("nonzero_shape.onnx", model(g).b));
  EXPECT_EQ(l.st, CTN_ERR_UNSUPPORTED);
  EXPECT_NE(l.err.find("node 'shape1' (Shape)"), std::string::npos) << l.err;
  EXPECT_NE(l.err.find("depends on data"), std::string::npos) << l.err;
}

// Sequences lowered at import: split [4, 2] into [1, 2] and [3, 2], append y, erase the first,
// then the length, the concatenation and the last element.
TEST(OnnxSequences, SplitInsertEraseConcatAtAndLength) {
  Pb g;
  g.m(1, node("SplitToSequence", {"x", "split"}, {"s1"}, "split1"))
      .m(1, node("SequenceInsert", {"s1", "y"}, {"s2"}, "insert1"))
      .m(1, node("SequenceErase", {"s2", "zero"}, {"s3"}, "erase1"))
      .m(1, node("SequenceLength", {"s3"}, {"len"}, "len1"))
      .m(1, node("ConcatFromSequence", {"s3"}, {"cat"}, "cat1", {attr_int("axis", 0)}))
      .m(1, node("SequenceAt", {"s3", "last"}, {"at"}, "at1"))
      .s(2, "g")
      .m(5, tensor_i64("split", {2}, {1, 3})).m(5, tensor_i64("zero", {}, {0})).m(5, tensor_i64("last", {}, {-1}))
      .m(11, value_info("x", 1, {4, 2})).m(11, value_info("y", 1, {2, 2}))
      .m(12, value_info("cat", 1, {5, 2})).m(12, value_info("at", 1, {2, 2})).m(12, value_info("len", 7, {}));
  Env e;
  Loaded l;
  load(l, e.ctx, write_file("sequences.onnx", model(g, 13).b), CTN_ONNX_INITIALIZERS_AS_CONSTANTS);
  ASSERT_EQ(l.st, CTN_OK) << l.err;
  std::vector<float> xv = {1, 2, 3, 4, 5, 6, 7, 8}, yv = {-1, -2, -3, -4};
  TensorPtr xt = ctn_cli::make_tensor(CTN_F32, {4, 2}, xv.data()), yt = ctn_cli::make_tensor(CTN_F32, {2, 2}, yv.data());
  auto r = run(l.g, {l.node(CTN_ONNX_OUTPUTS, 0), l.node(CTN_ONNX_OUTPUTS, 1)},
               {l.node(CTN_ONNX_INPUTS, 0), l.node(CTN_ONNX_INPUTS, 1)}, {xt.get(), yt.get()});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], (std::vector<float>{3, 4, 5, 6, 7, 8, -1, -2, -3, -4}));
  EXPECT_EQ(r[1], yv);
  ctn_tensor *len = nullptr;
  ASSERT_EQ(ctn_graph_value(l.g, l.node(CTN_ONNX_OUTPUTS, 2), &len), CTN_OK) << ctn_last_error();
  EXPECT_EQ(values_i64(len), (std::vector<int64_t>{2}));
  ctn_tensor_release(len);
}

// A position past the end, and a sequence where a tensor is expected: errors naming the node.
TEST(OnnxSequences, BadPositionsAndSequencesAsTensorsAreRefused) {
  Env e;
  for (const bool as_tensor : {false, true}) {
    Pb g;
    g.m(1, node("SequenceConstruct", {"x", "x"}, {"s"}, "make1"));
    if (as_tensor) g.m(1, node("Relu", {"s"}, {"out"}, "relu1"));
    else g.m(1, node("SequenceAt", {"s", "two"}, {"out"}, "at1"));
    g.s(2, "g").m(5, tensor_i64("two", {}, {2})).m(11, value_info("x", 1, {3})).m(12, value_info("out", 1, {3}));
    Loaded l;
    load(l, e.ctx, write_file("seq_bad.onnx", model(g, 13).b), CTN_ONNX_INITIALIZERS_AS_CONSTANTS);
    EXPECT_NE(l.st, CTN_OK);
    if (as_tensor) {
      EXPECT_NE(l.err.find("node 'relu1' (Relu)"), std::string::npos) << l.err;
      EXPECT_NE(l.err.find("input 's' is a sequence, not a tensor"), std::string::npos) << l.err;
    } else {
      EXPECT_NE(l.err.find("node 'at1' (SequenceAt)"), std::string::npos) << l.err;
      EXPECT_NE(l.err.find("position 2 is out of range for a sequence of 2"), std::string::npos) << l.err;
    }
  }
}

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

// ---- signal, sampling and 3-d ops (composed at import) -----------------------------------------------
namespace {

Pb attr_str(std::string_view name, std::string_view v) {
  Pb a;
  a.s(1, name).s(4, v).i(20, 3);
  return a;
}

std::vector<float> ramp_values(size_t n, double seed) {
  std::vector<float> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = static_cast<float>(std::sin(seed + 1.7 * static_cast<double>(k)) + 0.1 * static_cast<double>(k % 3));
  return v;
}

// A graph of one node with f32 inputs `ins` (their shapes) and output y of shape `ys`.
Pb f32_graph(const Pb &nd, const std::vector<std::pair<std::string, std::vector<int64_t>>> &ins, const std::vector<int64_t> &ys) {
  Pb g;
  g.m(1, nd).s(2, "g");
  for (auto &[n, s] : ins) g.m(11, value_info(n, 1, s));
  g.m(12, value_info("y", 1, ys));
  return g;
}

// Imports a one-node model of inputs `ins` (f32, their shapes) and output y of shape `ys`, runs it.
std::vector<float> run_one(Env &e, const std::string &file, const Pb &nd, const std::vector<std::pair<std::string, std::vector<int64_t>>> &ins,
                           const std::vector<int64_t> &ys, const std::vector<std::vector<float>> &vals, int64_t opset = 17) {
  Loaded l;
  load(l, e.ctx, write_file(file, model(f32_graph(nd, ins, ys), opset).b));
  EXPECT_EQ(l.st, CTN_OK) << l.err;
  if (l.st != CTN_OK) return {};
  std::vector<TensorPtr> ts;
  std::vector<ctn_node> feeds;
  std::vector<const ctn_tensor *> tv;
  for (size_t k = 0; k < ins.size(); ++k) {
    ts.push_back(ctn_cli::make_tensor(CTN_F32, ins[k].second, vals[k].data()));
    feeds.push_back(l.node(CTN_ONNX_INPUTS, static_cast<uint32_t>(k)));
    tv.push_back(ts.back().get());
  }
  auto r = run(l.g, {l.node(CTN_ONNX_OUTPUTS, 0)}, feeds, tv);
  return r.empty() ? std::vector<float>{} : r[0];
}

TEST(OnnxSignal, DftMatchesTheDefinitionForwardAndInverse) {
  Env e;
  constexpr int64_t n = 7;  // odd: no bin is its own mirror
  const std::vector<float> x = ramp_values(2 * n * 2, 0.3);  // [2, n, 2] complex
  for (int inverse = 0; inverse < 2; ++inverse) {
    SCOPED_TRACE(inverse);
    const auto y = run_one(e, "dft" + std::to_string(inverse) + ".onnx",
                           node("DFT", {"x"}, {"y"}, "dft1", {attr_int("inverse", inverse), attr_int("axis", 1)}), {{"x", {2, n, 2}}},
                           {2, n, 2}, {x});
    std::vector<float> ref(x.size());
    const double sign = inverse ? 1 : -1, scale = inverse ? 1.0 / n : 1.0;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t k = 0; k < n; ++k) {
        double re = 0, im = 0;
        for (int64_t t = 0; t < n; ++t) {
          const double a = sign * 2 * M_PI * static_cast<double>(k * t) / n, xr = x[static_cast<size_t>((b * n + t) * 2)],
                       xi = x[static_cast<size_t>((b * n + t) * 2 + 1)];
          re += xr * std::cos(a) - xi * std::sin(a), im += xr * std::sin(a) + xi * std::cos(a);
        }
        ref[static_cast<size_t>((b * n + k) * 2)] = static_cast<float>(re * scale);
        ref[static_cast<size_t>((b * n + k) * 2 + 1)] = static_cast<float>(im * scale);
      }
    expect_close(y, ref, 1e-5, 1e-6, "DFT");
  }
}

// ctn_grad of sum(y * w) for a one-node model (f32 inputs `ins`, output shape `ys`) against
// central differences of the forward run, for every input.
void expect_grads_match_differences(Env &e, const std::string &file, const Pb &nd,
                                    const std::vector<std::pair<std::string, std::vector<int64_t>>> &ins,
                                    const std::vector<int64_t> &ys, std::vector<std::vector<float>> vals, int64_t opset) {
  Loaded l;
  load(l, e.ctx, write_file(file, model(f32_graph(nd, ins, ys), opset).b));
  ASSERT_EQ(l.st, CTN_OK) << l.err;
  int64_t ny = 1;
  for (int64_t d : ys) ny *= d;
  const std::vector<float> w = ramp_values(static_cast<size_t>(ny), 5.0);
  ctn_node wc, prod, loss;
  TensorPtr wt = ctn_cli::make_tensor(CTN_F32, ys, w.data());
  CTN_ASSERT_OK(ctn_constant(l.g, wt.get(), &wc));
  CTN_ASSERT_OK(ctn_mul(l.g, l.node(CTN_ONNX_OUTPUTS, 0), wc, &prod));
  CTN_ASSERT_OK(ctn_sum(l.g, prod, 0, nullptr, 0, &loss));
  std::vector<ctn_node> feeds, d(ins.size());
  for (size_t k = 0; k < ins.size(); ++k) feeds.push_back(l.node(CTN_ONNX_INPUTS, static_cast<uint32_t>(k)));
  CTN_ASSERT_OK(ctn_grad(l.g, loss, static_cast<uint32_t>(feeds.size()), feeds.data(), d.data()));
  auto at = [&](std::vector<ctn_node> outs) {
    std::vector<TensorPtr> ts;
    std::vector<const ctn_tensor *> tv;
    for (size_t k = 0; k < ins.size(); ++k) ts.push_back(ctn_cli::make_tensor(CTN_F32, ins[k].second, vals[k].data())), tv.push_back(ts.back().get());
    return run(l.g, outs, feeds, tv);
  };
  const auto grads = at(d);
  ASSERT_EQ(grads.size(), ins.size());
  for (size_t k = 0; k < ins.size(); ++k) {
    std::vector<float> fd(vals[k].size());
    for (size_t j = 0; j < fd.size(); ++j) {
      const float h = 1e-3f, keep = vals[k][j];
      vals[k][j] = keep + h;
      const double up = at({loss}).at(0).at(0);
      vals[k][j] = keep - h;
      const double down = at({loss}).at(0).at(0);
      vals[k][j] = keep;
      fd[j] = static_cast<float>((up - down) / (2 * h));
    }
    expect_close(grads[k], fd, 1e-2, 2e-3, file + ": d loss / d " + ins[k].first);
  }
}

TEST(OnnxSampling, GridSampleGradientsMatchFiniteDifferences) {
  Env e;
  std::vector<float> grid = ramp_values(12, 2.0);
  for (float &v : grid) v *= 1.3f;  // some coordinates reflect
  expect_grads_match_differences(
      e, "gridsample_grad.onnx",
      node("GridSample", {"x", "grid"}, {"y"}, "gs1", {attr_str("mode", "bilinear"), attr_str("padding_mode", "reflection")}),
      {{"x", {1, 2, 3, 4}}, {"grid", {1, 2, 3, 2}}}, {1, 2, 2, 3}, {ramp_values(24, 0.1), grid}, 16);
}

// The 3-d compositions differentiate through their parts: Conv (strided, dilated, padded),
// ConvTranspose and a dilated 3-d AveragePool.
TEST(OnnxConv3d, GradientsMatchFiniteDifferences) {
  Env e;
  expect_grads_match_differences(
      e, "conv3d_grad.onnx",
      node("Conv", {"x", "w"}, {"y"}, "c3g", {attr_ints("strides", {2, 1, 1}), attr_ints("dilations", {1, 1, 2}), attr_ints("pads", {1, 0, 0, 0, 1, 0})}),
      {{"x", {1, 2, 3, 3, 4}}, {"w", {2, 2, 2, 2, 2}}}, {1, 2, 2, 3, 2}, {ramp_values(72, 0.4), ramp_values(32, 1.7)}, 17);
  expect_grads_match_differences(e, "convt3d_grad.onnx", node("ConvTranspose", {"x", "w"}, {"y"}, "ct3g", {attr_ints("strides", {2, 1, 1})}),
                                 {{"x", {1, 2, 2, 2, 2}}, {"w", {2, 1, 2, 2, 1}}}, {1, 1, 4, 3, 2},
                                 {ramp_values(16, 0.9), ramp_values(8, 2.2)}, 17);
  expect_grads_match_differences(
      e, "avgpool3d_grad.onnx",
      node("AveragePool", {"x"}, {"y"}, "ap3g", {attr_ints("kernel_shape", {2, 2, 2}), attr_ints("dilations", {1, 2, 1}), attr_ints("pads", {0, 1, 0, 1, 1, 0})}),
      {{"x", {1, 1, 3, 3, 3}}}, {1, 1, 3, 3, 2}, {ramp_values(27, 0.6)}, 19);
}

// Every tap of a 3-d convolution's geometry: output position `out` (dims `od`) reads input
// position `in` (dims `id`) = out * stride + k * dilation - pad through kernel offset k (dims `kd`);
// fn(out_flat, in_flat, k_flat) for the taps inside the input.
template <class Fn>
void conv3d_taps(const int64_t *od, const int64_t *id, const int64_t *kd, const std::vector<int64_t> &st, const std::vector<int64_t> &di,
                 const std::vector<int64_t> &pads, Fn fn) {
  for (int64_t o = 0; o < od[0] * od[1] * od[2]; ++o)
    for (int64_t k = 0; k < kd[0] * kd[1] * kd[2]; ++k) {
      const int64_t op[3] = {o / (od[1] * od[2]), o / od[2] % od[1], o % od[2]}, kp[3] = {k / (kd[1] * kd[2]), k / kd[2] % kd[1], k % kd[2]};
      int64_t in = 0;
      bool inside = true;
      for (int a = 0; a < 3; ++a) {
        const int64_t p = op[a] * st[static_cast<size_t>(a)] + kp[a] * di[static_cast<size_t>(a)] - pads[static_cast<size_t>(a)];
        inside = inside && p >= 0 && p < id[a];
        in = in * id[a] + p;
      }
      if (inside) fn(o, in, k);
    }
}

// Conv and ConvTranspose with 3 spatial dims (strides, dilations, asymmetric pads, output
// padding) against direct loops.
TEST(OnnxConv3d, MatchesDirectLoops) {
  Env e;
  const std::vector<int64_t> xs = {1, 2, 4, 5, 5}, ws = {3, 2, 2, 3, 2}, st = {2, 1, 2}, di = {1, 2, 1}, pads = {1, 0, 1, 0, 1, 1};
  const std::vector<float> x = ramp_values(200, 0.2), w = ramp_values(72, 1.1);
  int64_t od[3];
  for (int i = 0; i < 3; ++i) od[i] = (xs[2 + i] + pads[i] + pads[3 + i] - ((ws[2 + i] - 1) * di[i] + 1)) / st[i] + 1;
  const int64_t n_out = od[0] * od[1] * od[2], n_in = xs[2] * xs[3] * xs[4], n_k = ws[2] * ws[3] * ws[4];
  std::vector<double> conv(static_cast<size_t>(3 * n_out), 0.0);
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t c = 0; c < 2; ++c)
      conv3d_taps(od, &xs[2], &ws[2], st, di, pads, [&](int64_t out, int64_t in, int64_t k) {
        conv[static_cast<size_t>(o * n_out + out)] += x[static_cast<size_t>(c * n_in + in)] * w[static_cast<size_t>((o * 2 + c) * n_k + k)];
      });
  const std::vector<float> ref(conv.begin(), conv.end());
  const auto y = run_one(e, "conv3d_ok.onnx",
                         node("Conv", {"x", "w"}, {"y"}, "c3", {attr_ints("strides", st), attr_ints("dilations", di), attr_ints("pads", pads)}),
                         {{"x", xs}, {"w", ws}}, {1, 3, od[0], od[1], od[2]}, {x, w});
  expect_close(y, ref, 1e-4, 1e-5, "Conv 3-d");
  // ConvTranspose of x [1, 3, od...] with the same weight read as [C=3, O=2, k...]: its output
  // position j takes x[z] where j = z * stride + k * dilation - pad, a convolution's taps reversed.
  const std::vector<int64_t> opad = {1, 0, 0}, tp = {1, 0, 0, 0, 1, 1};
  int64_t td[3];
  for (int i = 0; i < 3; ++i) td[i] = st[i] * (od[i] - 1) + opad[i] + (ws[2 + i] - 1) * di[i] + 1 - tp[i] - tp[3 + i];
  const int64_t n_t = td[0] * td[1] * td[2];
  std::vector<double> acc(static_cast<size_t>(2 * n_t), 0.0);
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t o = 0; o < 2; ++o)
      conv3d_taps(od, td, &ws[2], st, di, tp, [&](int64_t z, int64_t j, int64_t k) {
        acc[static_cast<size_t>(o * n_t + j)] += ref[static_cast<size_t>(c * n_out + z)] * w[static_cast<size_t>((c * 2 + o) * n_k + k)];
      });
  const auto yt = run_one(e, "convt3d.onnx",
                          node("ConvTranspose", {"x", "w"}, {"y"}, "ct3",
                               {attr_ints("strides", st), attr_ints("dilations", di), attr_ints("pads", tp), attr_ints("output_padding", opad)}),
                          {{"x", {1, 3, od[0], od[1], od[2]}}, {"w", {3, 2, ws[2], ws[3], ws[4]}}}, {1, 2, td[0], td[1], td[2]}, {ref, w});
  expect_close(yt, std::vector<float>(acc.begin(), acc.end()), 1e-4, 1e-4, "ConvTranspose 3-d");
}

TEST(OnnxErrors, SignalSamplingAndDetRefuseBadInputsNamingTheNode) {
  Env e;
  struct Case {
    const char *file;
    Pb nd;
    std::vector<std::pair<std::string, std::vector<int64_t>>> ins;
    ctn_status code;
    std::vector<std::string> says;
  };
  std::vector<Case> cases = {
      {"gs_bad.onnx", node("GridSample", {"x", "grid"}, {"y"}, "gs2"), {{"x", {1, 1, 3, 3}}, {"grid", {1, 2, 2, 3}}},
       CTN_ERR_INVALID_ARGUMENT, {"node 'gs2' (GridSample)", "does not fit"}},
      {"gs_mode.onnx", node("GridSample", {"x", "grid"}, {"y"}, "gs3", {attr_str("mode", "sinc")}), {{"x", {1, 1, 3, 3}}, {"grid", {1, 2, 2, 2}}},
       CTN_ERR_INVALID_ARGUMENT, {"node 'gs3' (GridSample)", "unknown mode 'sinc'"}},
      {"dft_len.onnx", node("DFT", {"x", "n"}, {"y"}, "dft2"), {{"x", {1, 4, 1}}, {"n", {}}}, CTN_ERR_UNSUPPORTED,
       {"node 'dft2' (DFT)", "dft_length", "must be a constant"}},
      {"dft_ch.onnx", node("DFT", {"x"}, {"y"}, "dft3"), {{"x", {1, 4, 3}}}, CTN_ERR_INVALID_ARGUMENT,
       {"node 'dft3' (DFT)", "1 (real) or 2 (complex)"}},
      {"det.onnx", node("Det", {"x"}, {"y"}, "det1"), {{"x", {2, 3}}}, CTN_ERR_INVALID_ARGUMENT, {"node 'det1' (Det)", "[..., n, n]"}},
      {"pool6d.onnx", node("MaxPool", {"x"}, {"y"}, "mp1", {attr_ints("kernel_shape", {1, 1, 1, 1})}), {{"x", {1, 1, 2, 2, 2, 2}}},
       CTN_ERR_UNSUPPORTED, {"node 'mp1' (MaxPool)", "6-d input"}},
  };
  for (const Case &c : cases) {
    Pb g;
    g.m(1, c.nd).s(2, "g");
    for (auto &[n, s] : c.ins) g.m(11, value_info(n, n == "n" ? 7 : 1, s));
    g.m(12, value_info("y", 1, {1}));
    Loaded l;
    load(l, e.ctx, write_file(c.file, model(g, 17).b));
    EXPECT_EQ(l.st, c.code) << c.file << ": " << l.err;
    for (const std::string &s : c.says) EXPECT_NE(l.err.find(s), std::string::npos) << c.file << ": '" << s << "' not in: " << l.err;
    EXPECT_EQ(l.g, nullptr);
  }
}

}  // namespace

namespace {

// x [2, 3, 6, 7], rois [3, 4] (f32) and batch indices "bi" [3] (int64) into `nd`, output y.
Pb roi_graph(const Pb &nd, const std::vector<int64_t> &ys) {
  Pb g;
  g.m(1, nd).s(2, "g").m(11, value_info("x", 1, {2, 3, 6, 7})).m(11, value_info("rois", 1, {3, 4})).m(11, value_info("bi", 7, {3}));
  g.m(12, value_info("y", 1, ys));
  return g;
}

// RoiAlign's two paths agree: rois bound as constants with adaptive sampling (sampling_ratio 0,
// here 2 x 2 samples per bin for every roi) and rois as data with sampling_ratio 2.
TEST(OnnxSampling, RoiAlignConstantAndDataRoisAgree) {
  Env e;
  const std::vector<float> x = ramp_values(2 * 3 * 6 * 7, 0.8);
  const std::vector<float> rois = {0.5f, 1.0f, 4.5f, 4.8f, 1.2f, 0.3f, 5.0f, 3.9f, -0.5f, 2.0f, 3.0f, 5.5f};  // [x1, y1, x2, y2]
  const std::vector<int64_t> bi = {1, 0, 1};
  TensorPtr xt = ctn_cli::make_tensor(CTN_F32, {2, 3, 6, 7}, x.data()), rt = ctn_cli::make_tensor(CTN_F32, {3, 4}, rois.data()),
            bt = ctn_cli::make_tensor(CTN_I64, {3}, bi.data());
  for (const char *mode : {"avg", "max"}) {
    SCOPED_TRACE(mode);
    std::vector<std::vector<float>> got;
    for (int64_t ratio : {0, 2}) {
      Pb g = roi_graph(node("RoiAlign", {"x", "rois", "bi"}, {"y"}, "roi1",
                            {attr_str("mode", mode), attr_int("output_height", 2), attr_int("output_width", 2), attr_int("sampling_ratio", ratio)}),
                       {3, 3, 2, 2});
      Loaded l;
      std::vector<ctn_onnx_input_spec> specs;
      if (ratio == 0) specs = {{"rois", rt.get(), 1, 0}, {"bi", bt.get(), 1, 0}};
      load(l, e.ctx, write_file("roialign" + std::to_string(ratio) + ".onnx", model(g, 16).b), 0, specs);
      ASSERT_EQ(l.st, CTN_OK) << l.err;
      got.push_back(ratio == 0 ? run(l.g, {l.node(CTN_ONNX_OUTPUTS, 0)}, {l.node(CTN_ONNX_INPUTS, 0)}, {xt.get()}).at(0)
                               : run(l.g, {l.node(CTN_ONNX_OUTPUTS, 0)}, {l.node(CTN_ONNX_INPUTS, 0), l.node(CTN_ONNX_INPUTS, 1), l.node(CTN_ONNX_INPUTS, 2)},
                                     {xt.get(), rt.get(), bt.get()})
                                     .at(0));
    }
    ASSERT_EQ(got[0].size(), 36u);
    expect_close(got[0], got[1], 1e-5, 1e-6, "adaptive (constant rois) vs sampling_ratio 2 (data rois)");
    // Without constant rois, adaptive sampling is refused naming the reason.
    Pb g = roi_graph(node("RoiAlign", {"x", "rois", "bi"}, {"y"}, "roi2", {attr_str("mode", mode)}), {3, 3, 1, 1});
    Loaded l;
    load(l, e.ctx, write_file("roialign_adaptive.onnx", model(g, 16).b));
    EXPECT_EQ(l.st, CTN_ERR_UNSUPPORTED);
    EXPECT_NE(l.err.find("node 'roi2' (RoiAlign)"), std::string::npos) << l.err;
    EXPECT_NE(l.err.find("must be a constant"), std::string::npos) << l.err;
  }
}

}  // namespace
