// Helpers shared by the ABI suite: RAII handles over the C API and a small graph that proves a
// backend works. Everything goes through <chutney/chutney.h> only, as an application would.
#pragma once

#include <chutney/chutney.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace ctn_test {

struct ContextDeleter {
  void operator()(ctn_context *c) const { ctn_context_release(c); }
};
struct GraphDeleter {
  void operator()(ctn_graph *g) const { ctn_graph_release(g); }
};
struct PlanDeleter {
  void operator()(ctn_plan *p) const { ctn_plan_release(p); }
};
struct TensorDeleter {
  void operator()(ctn_tensor *t) const { ctn_tensor_release(t); }
};
using Context = std::unique_ptr<ctn_context, ContextDeleter>;
using Graph = std::unique_ptr<ctn_graph, GraphDeleter>;
using Plan = std::unique_ptr<ctn_plan, PlanDeleter>;
using Tensor = std::unique_ptr<ctn_tensor, TensorDeleter>;

// "CTN_ERR_SHAPE: <message>" for assertion output.
std::string Describe(ctn_status st);

// A context that loads nothing by itself (CTN_CONTEXT_NO_AUTOLOAD); nullptr on failure.
Context IsolatedContext();
// An isolated context with `plugins` loaded in order; nullptr, with a gtest failure naming the
// plugin and the status, when one does not load.
Context ContextWith(std::initializer_list<const char *> plugins);
// A context with the default search (build tree, CHUTNEY_PLUGIN_PATH...).
Context DefaultContext();

Graph NewGraph(ctn_context *ctx, uint32_t flags = 0);

Tensor MakeTensor(ctn_dtype dtype, const std::vector<int64_t> &shape, const void *data);
Tensor MakeF32(const std::vector<int64_t> &shape, const std::vector<float> &values);
Tensor MakeF64(const std::vector<int64_t> &shape, const std::vector<double> &values);
std::vector<float> ReadF32(const ctn_tensor *t);
std::vector<double> ReadF64(const ctn_tensor *t);

// Base name of a path ("ctn-cpu.so").
std::string BaseName(const std::string &path);

// The line of the plugin report that mentions `file` (base name), or "" if none does.
std::string ReportLine(ctn_context *ctx, const std::string &file);

bool FileExists(const std::string &path);

// Expects the context's plugin report (ctn_context_plugin_report) to contain `text`.
void ExpectReportHas(ctn_context *ctx, const std::string &text);

// Expects ctn_last_error() to mention every one of `parts` (failures show the whole message).
void ExpectLastErrorHas(std::initializer_list<const char *> parts);

// Compiles `outputs` of `g`, for `backends` (ctn_compile_options.backends) when not nullptr.
// A null Plan on failure, with a gtest failure naming the status.
Plan Compile(ctn_graph *g, const std::vector<ctn_node> &outputs, const char *backends = nullptr);

// Runs `plan` once, feeds[i] fed to inputs[i], and returns its first `n_outputs` outputs (new
// tensors from ctn_plan_output_create). Empty on failure, with a gtest failure naming the call.
std::vector<Tensor> RunOnce(ctn_plan *plan, const std::vector<ctn_node> &inputs,
                            const std::vector<const ctn_tensor *> &feeds, uint32_t n_outputs = 1);

// Compiles relu(a + b) (f32, [2, 3] + [3]) for `backend`, runs it, and checks the values and
// that every step ran on `backend` (gtest failures are reported at the caller's line).
// `with_relu` false leaves out relu for backends that only have "add".
void ExpectSmallGraphRunsOn(ctn_context *ctx, const char *backend, bool with_relu = true);

}  // namespace ctn_test
