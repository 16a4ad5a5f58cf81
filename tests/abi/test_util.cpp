#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <sys/stat.h>

namespace ctn_test {

std::string Describe(ctn_status st) {
  return std::string(ctn_status_name(st)) + ": " + ctn_last_error();
}

static Context CreateContext(uint32_t flags) {
  ctn_context_options opts{};
  opts.struct_size = sizeof opts;
  opts.flags = flags;
  ctn_context *ctx = nullptr;
  ctn_status st = ctn_context_create(&opts, &ctx);
  EXPECT_EQ(st, CTN_OK) << Describe(st);
  return Context(st == CTN_OK ? ctx : nullptr);
}

Context IsolatedContext() { return CreateContext(CTN_CONTEXT_NO_AUTOLOAD); }
Context DefaultContext() { return CreateContext(0); }

void ExpectReportHas(ctn_context *ctx, const std::string &text) {
  const char *report = nullptr;
  ASSERT_EQ(ctn_context_plugin_report(ctx, &report), CTN_OK) << ctn_last_error();
  EXPECT_NE(std::string(report).find(text), std::string::npos) << "no '" << text << "' in:\n" << report;
}

void ExpectLastErrorHas(std::initializer_list<const char *> parts) {
  const std::string msg = ctn_last_error();
  for (const char *p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "no '" << p << "' in: " << msg;
}

Context ContextWith(std::initializer_list<const char *> plugins) {
  Context ctx = IsolatedContext();
  EXPECT_TRUE(ctx) << "no isolated context: " << ctn_last_error();
  if (!ctx) return ctx;
  for (const char *p : plugins) {
    ctn_status st = ctn_context_load_plugin(ctx.get(), p);
    if (st != CTN_OK) {
      ADD_FAILURE() << "loading " << p << ": " << Describe(st);
      return Context();
    }
  }
  return ctx;
}

Graph NewGraph(ctn_context *ctx, uint32_t flags) {
  ctn_graph *g = nullptr;
  ctn_status st = ctn_graph_create(ctx, flags, &g);
  EXPECT_EQ(st, CTN_OK) << Describe(st);
  return Graph(st == CTN_OK ? g : nullptr);
}

Tensor MakeTensor(ctn_dtype dtype, const std::vector<int64_t> &shape, const void *data) {
  ctn_tensor *t = nullptr;
  ctn_status st = ctn_tensor_create(dtype, static_cast<uint32_t>(shape.size()),
                                    shape.empty() ? nullptr : shape.data(), data, &t);
  EXPECT_EQ(st, CTN_OK) << Describe(st);
  return Tensor(st == CTN_OK ? t : nullptr);
}

Tensor MakeF32(const std::vector<int64_t> &shape, const std::vector<float> &values) {
  return MakeTensor(CTN_F32, shape, values.data());
}

Tensor MakeF64(const std::vector<int64_t> &shape, const std::vector<double> &values) {
  return MakeTensor(CTN_F64, shape, values.data());
}

template <typename T>
static std::vector<T> ReadAs(const ctn_tensor *t) {
  int64_t n = 0;
  ctn_status st = ctn_tensor_numel(t, &n);
  EXPECT_EQ(st, CTN_OK) << Describe(st);
  std::vector<T> out(static_cast<size_t>(n > 0 ? n : 0));
  st = ctn_tensor_read(t, out.data(), out.size() * sizeof(T));
  EXPECT_EQ(st, CTN_OK) << Describe(st);
  return out;
}

std::vector<float> ReadF32(const ctn_tensor *t) { return ReadAs<float>(t); }
std::vector<double> ReadF64(const ctn_tensor *t) { return ReadAs<double>(t); }

std::string BaseName(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string ReportLine(ctn_context *ctx, const std::string &file) {
  const char *text = nullptr;
  ctn_status st = ctn_context_plugin_report(ctx, &text);
  EXPECT_EQ(st, CTN_OK) << Describe(st);
  if (st != CTN_OK || text == nullptr) return "";
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line))
    if (line.find(file) != std::string::npos) return line;
  return "";
}

bool FileExists(const std::string &path) {
  struct stat sb;
  return stat(path.c_str(), &sb) == 0;
}

Plan Compile(ctn_graph *g, const std::vector<ctn_node> &outputs, const char *backends) {
  ctn_compile_options opts{};
  opts.struct_size = sizeof opts;
  opts.backends = backends;
  ctn_plan *raw = nullptr;
  ctn_status st = ctn_plan_compile(g, static_cast<uint32_t>(outputs.size()), outputs.data(),
                                   backends ? &opts : nullptr, &raw);
  EXPECT_EQ(st, CTN_OK) << "ctn_plan_compile: " << Describe(st);
  return Plan(st == CTN_OK ? raw : nullptr);
}

std::vector<Tensor> RunOnce(ctn_plan *plan, const std::vector<ctn_node> &inputs,
                            const std::vector<const ctn_tensor *> &feeds, uint32_t n_outputs) {
  std::vector<Tensor> outs;
  std::vector<ctn_tensor *> raw;
  for (uint32_t i = 0; i < n_outputs; ++i) {
    ctn_tensor *t = nullptr;
    ctn_status st = ctn_plan_output_create(plan, i, &t);
    EXPECT_EQ(st, CTN_OK) << "ctn_plan_output_create(" << i << "): " << Describe(st);
    if (st != CTN_OK) return {};
    outs.emplace_back(t);
    raw.push_back(t);
  }
  EXPECT_EQ(inputs.size(), feeds.size());
  ctn_status st = ctn_plan_run(plan, static_cast<uint32_t>(inputs.size()), inputs.data(), feeds.data(),
                               n_outputs, raw.data());
  EXPECT_EQ(st, CTN_OK) << "ctn_plan_run: " << Describe(st);
  if (st != CTN_OK) return {};
  return outs;
}

void ExpectSmallGraphRunsOn(ctn_context *ctx, const char *backend, bool with_relu) {
  SCOPED_TRACE(std::string("small graph on backend ") + backend);
  Graph g = NewGraph(ctx);
  ASSERT_TRUE(g);
  const int64_t sa[2] = {2, 3}, sb[1] = {3};
  ctn_node a, b, sum, y;
  ASSERT_EQ(ctn_input(g.get(), "a", CTN_F32, 2, sa, &a), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_input(g.get(), "b", CTN_F32, 1, sb, &b), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_add(g.get(), a, b, &sum), CTN_OK) << ctn_last_error();
  y = sum;
  if (with_relu) {
    ASSERT_EQ(ctn_relu(g.get(), sum, &y), CTN_OK) << ctn_last_error();
  }

  Plan plan = Compile(g.get(), {y}, backend);
  ASSERT_TRUE(plan);

  const std::vector<float> av = {1.f, -2.f, 3.f, -4.f, 5.f, -6.f}, bv = {0.5f, 1.f, -1.f};
  Tensor at = MakeF32({2, 3}, av), bt = MakeF32({3}, bv);
  std::vector<Tensor> outs = RunOnce(plan.get(), {a, b}, {at.get(), bt.get()});
  ASSERT_EQ(outs.size(), 1u);

  std::vector<float> got = ReadF32(outs[0].get());
  ASSERT_EQ(got.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    float want = av[i] + bv[i % 3];
    if (with_relu && want < 0) want = 0;
    EXPECT_FLOAT_EQ(got[i], want) << "element " << i;
  }

  ctn_plan_stats stats{};
  stats.struct_size = sizeof stats;
  ASSERT_EQ(ctn_plan_stats_get(plan.get(), &stats), CTN_OK) << ctn_last_error();
  uint32_t on_backend = 0, adds = 0;
  ASSERT_EQ(ctn_plan_backend_steps(plan.get(), backend, nullptr, &on_backend), CTN_OK);
  ASSERT_EQ(ctn_plan_backend_steps(plan.get(), backend, "add", &adds), CTN_OK);
  EXPECT_GE(on_backend, with_relu ? 2u : 1u);
  EXPECT_EQ(on_backend, stats.n_steps) << "some steps ran elsewhere";
  EXPECT_EQ(adds, 1u);
}

}  // namespace ctn_test
