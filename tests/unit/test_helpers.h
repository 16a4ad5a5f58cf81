// Small helpers shared by the core unit tests (C API only).
#pragma once

#include <chutney/chutney.h>
#include <chutney/nn.h>
#include <chutney/oplib.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <system_error>
#include <string>
#include <vector>

#define CTN_ASSERT_OK(expr) ASSERT_EQ((expr), CTN_OK) << #expr << ": " << ctn_last_error()
#define CTN_EXPECT_OK(expr) EXPECT_EQ((expr), CTN_OK) << #expr << ": " << ctn_last_error()

struct Ctx {
  ctn_context *ctx = nullptr;
  Ctx() {
    if (ctn_context_create(nullptr, &ctx) != CTN_OK) ADD_FAILURE() << ctn_last_error();
  }
  ~Ctx() { ctn_context_release(ctx); }
};

// The start of the small image classifiers of the unit tests: inputs x f32 [n, 1, hw, hw] and
// labels i32 [n], then conv 3x3 (1 -> channels, pad 1) + batch norm + relu + 2x2 max-pool.
// Returns the pooled [n, channels, hw/2, hw/2] node.
inline ctn_node image_classifier_stem(ctn_graph *g, ctn_model *m, int64_t n, int64_t hw, int64_t channels,
                                      ctn_node *x, ctn_node *labels) {
  const int64_t xs[4] = {n, 1, hw, hw}, ls[1] = {n};
  EXPECT_EQ(ctn_input(g, "x", CTN_F32, 4, xs, x), CTN_OK);
  EXPECT_EQ(ctn_input(g, "labels", CTN_I32, 1, ls, labels), CTN_OK);
  ctn_node h = CTN_NODE_NONE;
  EXPECT_EQ(ctn_nn_conv2d(m, *x, 1, channels, 3, 1, 1, &h), CTN_OK) << ctn_last_error();
  EXPECT_EQ(ctn_nn_batch_norm(m, h, channels, 0.1, 1e-5, &h), CTN_OK) << ctn_last_error();
  EXPECT_EQ(ctn_nn_relu(m, h, &h), CTN_OK);
  EXPECT_EQ(ctn_nn_max_pool2d(m, h, 2, 2, &h), CTN_OK);
  return h;
}

// n values drawn from N(0, scale^2) by a generator seeded with `seed` (the same on every machine
// for a given standard library).
template <class T = double>
std::vector<T> random_normal(size_t n, uint64_t seed, T scale = T(1)) {
  std::mt19937_64 r(seed);
  std::normal_distribution<T> d(T(0), scale);
  std::vector<T> v(n);
  for (T &x : v) x = d(r);
  return v;
}

// A mkstemp/mkdtemp template under $TMPDIR (else /tmp): the test command points TMPDIR at a
// scratch folder of its own and reports what a stage leaves there.
inline std::string temp_template(const char *name) {
  const char *tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/" + name + "-XXXXXX";
}

// A new directory from temp_template(name), removed with its contents when the process exits.
inline std::string scratch_dir(const char *name) {
  static std::vector<std::string> made;
  std::string t = temp_template(name);
  if (!mkdtemp(t.data())) {
    ADD_FAILURE() << "mkdtemp " << t << " failed";
    return "/nonexistent";
  }
  if (made.empty())
    std::atexit([] {
      std::error_code ec;
      for (const std::string &d : made) std::filesystem::remove_all(d, ec);
    });
  made.push_back(t);
  return t;
}

inline ctn_tensor *make_f32(std::vector<int64_t> shape, std::vector<float> data) {
  ctn_tensor *t = nullptr;
  if (ctn_tensor_create(CTN_F32, static_cast<uint32_t>(shape.size()), shape.data(), data.empty() ? nullptr : data.data(),
                        &t) != CTN_OK)
    ADD_FAILURE() << ctn_last_error();
  return t;
}

// The dims of `t` (empty, with a gtest failure, when ctn_tensor_shape fails).
inline std::vector<int64_t> shape_of(const ctn_tensor *t) {
  uint32_t nd = 0;
  int64_t dims[CTN_MAX_DIMS];
  ctn_status st = ctn_tensor_shape(t, &nd, dims);
  EXPECT_EQ(st, CTN_OK) << ctn_last_error();
  if (st != CTN_OK) return {};
  return std::vector<int64_t>(dims, dims + nd);
}

inline std::vector<float> read_f32(const ctn_tensor *t) {
  int64_t n = 0;
  ctn_tensor_numel(t, &n);
  std::vector<float> v(static_cast<size_t>(n));
  if (ctn_tensor_read(t, v.data(), v.size() * 4) != CTN_OK) ADD_FAILURE() << ctn_last_error();
  return v;
}

// The value variable `v` holds in `p` now (ctn_plan_variable_read), as f32.
inline std::vector<float> read_variable(ctn_plan *p, ctn_node v) {
  ctn_tensor *t = nullptr;
  if (ctn_plan_variable_read(p, v, &t) != CTN_OK) {
    ADD_FAILURE() << "ctn_plan_variable_read: " << ctn_last_error();
    return {};
  }
  std::vector<float> r = read_f32(t);
  ctn_tensor_release(t);
  return r;
}

// The elements of `t` (row-major) as raw bytes, whatever the dtype.
inline std::vector<unsigned char> tensor_bytes(const ctn_tensor *t) {
  int64_t n = 0;
  ctn_dtype dt{};
  ctn_tensor_numel(t, &n);
  ctn_tensor_dtype(t, &dt);
  std::vector<unsigned char> b(static_cast<size_t>(n) * ctn_dtype_size(dt));
  if (!b.empty() && ctn_tensor_read(t, b.data(), b.size()) != CTN_OK) ADD_FAILURE() << ctn_last_error();
  return b;
}

// Compiles and runs `outputs` of a lazy graph once with the given feeds; returns each output
// as `read` gives it (read_f32, tensor_bytes...).
template <class Read>
inline auto run_once_as(Read read, ctn_graph *g, std::vector<ctn_node> outputs, std::vector<ctn_node> feed_nodes = {},
                        std::vector<const ctn_tensor *> feeds = {}, const ctn_compile_options *opts = nullptr,
                        ctn_plan_stats *stats = nullptr) {
  std::vector<decltype(read(static_cast<const ctn_tensor *>(nullptr)))> res;
  ctn_plan *p = nullptr;
  if (ctn_plan_compile(g, static_cast<uint32_t>(outputs.size()), outputs.data(), opts, &p) != CTN_OK) {
    ADD_FAILURE() << "compile: " << ctn_last_error();
    return res;
  }
  std::vector<ctn_tensor *> outs(outputs.size());
  for (uint32_t i = 0; i < outputs.size(); ++i) ctn_plan_output_create(p, i, &outs[i]);
  if (ctn_plan_run(p, static_cast<uint32_t>(feeds.size()), feed_nodes.data(), feeds.data(),
                   static_cast<uint32_t>(outs.size()), outs.data()) != CTN_OK)
    ADD_FAILURE() << "run: " << ctn_last_error();
  for (auto *t : outs) {
    res.push_back(read(t));
    ctn_tensor_release(t);
  }
  if (stats) {
    stats->struct_size = sizeof *stats;
    ctn_plan_stats_get(p, stats);
  }
  ctn_plan_release(p);
  return res;
}

// run_once_as with the outputs read as f32.
inline std::vector<std::vector<float>> run_once(ctn_graph *g, std::vector<ctn_node> outputs,
                                                std::vector<ctn_node> feed_nodes = {},
                                                std::vector<const ctn_tensor *> feeds = {},
                                                const ctn_compile_options *opts = nullptr, ctn_plan_stats *stats = nullptr) {
  return run_once_as(read_f32, g, std::move(outputs), std::move(feed_nodes), std::move(feeds), opts, stats);
}

// An op library's row for a one-input op with the given kernels, as an op library writes it:
// value-initialised, then filled, so that slots later minors append stay zero.
inline ctn_op_def unary_op_def(const char *name, const char *doc, ctn_infer_fn infer, const ctn_oplib_kernel *kernels,
                               uint32_t n_kernels) {
  ctn_op_def d{};
  d.struct_size = sizeof d;
  d.n_inputs = 1;
  d.name = name;
  d.doc = doc;
  d.infer = infer;
  d.n_kernels = n_kernels;
  d.kernels = kernels;
  return d;
}
