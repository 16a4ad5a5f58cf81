// Shared pieces of the conformance suite: a naive double-precision reference (Arr + ref_*),
// the backends under test, the op x backend matrix, and the case runners.
//
// The suite sees chutney only through the public C API (chutney.h / ops.h): it is the same
// binary a vendor runs against their own backend plugin (see docs/OPS.md, "vendor mode").
#pragma once

#include <chutney/chutney.h>
#include <chutney/desc.h>
#include <chutney/ops.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace conf {

// ---- reference arrays ------------------------------------------------------------------------

using Shape = std::vector<int64_t>;

// A dense row-major array of doubles: the reference never touches chutney.
struct Arr {
  Shape shape;
  std::vector<double> v;
};

int64_t numel(const Shape &s);
Arr make_arr(Shape shape, double fill = 0.0);
Shape broadcast_shapes(const std::vector<Shape> &shapes);
// Element of `a` seen through numpy broadcasting at multi-index `idx` of shape `out`.
double bget(const Arr &a, const Shape &out, const std::vector<int64_t> &idx);
// Flat index into an array of shape `a_shape` broadcast to `out` at multi-index `idx`.
int64_t bindex(const Shape &a_shape, const Shape &out, const std::vector<int64_t> &idx);
std::vector<int64_t> unravel(int64_t flat, const Shape &shape);

Arr ref_map1(const Arr &a, const std::function<double(double)> &f);
Arr ref_map2(const Arr &a, const Arr &b, const std::function<double(double, double)> &f);
Arr ref_map3(const Arr &a, const Arr &b, const Arr &c,
             const std::function<double(double, double, double)> &f);
Arr ref_matmul(const Arr &a, const Arr &b, bool ta, bool tb);
enum class Red { Sum, Mean, Max };
// `axes` as given to the user API (may be negative; empty: all axes).
Arr ref_reduce(const Arr &x, std::vector<int32_t> axes, bool keepdims, Red kind);
Arr ref_permute(const Arr &x, const std::vector<int32_t> &perm);
Arr ref_reshape(const Arr &x, Shape shape);  // one -1 allowed
// numpy slicing semantics (negative bounds count from the end, clamped), step > 0.
Arr ref_slice(const Arr &x, int32_t axis, int64_t start, int64_t stop, int64_t step);
// The normalised (start, stop, count) that numpy would use for `n` elements.
std::tuple<int64_t, int64_t, int64_t> norm_slice(int64_t n, int64_t start, int64_t stop,
                                                  int64_t step);
Arr ref_slice_grad(const Arr &dy, int32_t axis, int64_t start, int64_t step, int64_t src_size);
Arr ref_concat(const std::vector<Arr> &xs, int32_t axis);
Arr ref_broadcast_to(const Arr &x, const Shape &shape);
Arr ref_softmax(const Arr &x, int32_t axis, bool log);
Arr ref_cross_entropy(const Arr &logits, const Arr &labels);
Arr ref_cross_entropy_grad(const Arr &logits, const Arr &labels, double dy);
Arr ref_softmax_grad(const Arr &y, const Arr &dy, int32_t axis, bool log);
double ref_gelu(double x);
double ref_gelu_grad(double x);
double ref_sigmoid(double x);
// Value as stored in `dtype` (f32 rounding, integer truncation toward zero, bool: != 0).
double round_to(double x, ctn_dtype dtype);

// ---- backends under test ----------------------------------------------------------------------

struct BackendEntry {
  std::string name;
  bool available = false;
  std::string description;  // device, or the reason it is unavailable
  std::string path;
};

// "available: <device>" or "unavailable: <reason>" (a plugin's reason may already start with
// "unavailable", which is not repeated).
inline std::string with_state(const BackendEntry &b) {
  const char *state = b.available ? "available" : "unavailable";
  if (b.description.rfind(state, 0) == 0) return b.description;
  return std::string(state) + ": " + b.description;
}

// The process-wide context (created on first use; vendor mode honoured). NULL when creation
// failed: setup_error() says why.
ctn_context *context();
const std::string &setup_error();
const std::vector<BackendEntry> &backend_entries();
// Names to instantiate the parameterised tests with (never empty: a placeholder when the context
// could not be created, so the failure is visible as a test).
std::vector<std::string> backend_names();
const BackendEntry *find_backend(const std::string &name);
std::string param_name(const std::string &s);  // gtest-safe identifier

// ---- matrix -------------------------------------------------------------------------------------

// Records the cell (row, backend). Precedence when a cell is written twice: FAIL > unsupported >
// pass > skip.
void matrix_record(const std::string &row, const std::string &backend, const std::string &cell);
void matrix_declare_row(const std::string &row);

// The ops of the context's registry (ctn_context_op_info), in registry order: the matrix's rows.
struct RegisteredOp {
  std::string name;
  std::string origin;  // "builtin" or the op library's name
};
std::vector<RegisteredOp> registered_ops();

// ---- cases --------------------------------------------------------------------------------------

using Rng = std::mt19937_64;
using Gen = std::function<double(Rng &)>;
Gen uni(double lo, double hi);
Gen away(double lo, double hi, double gap);  // uniform in [lo,hi] with |x| >= gap
Gen ints(int lo, int hi);                    // integer values in [lo, hi]
Gen with_zeros(Gen g, double p_zero = 0.25);
Gen choice(std::vector<double> values);

// One input of a case. dtype -1: the floating dtype under test.
struct InSpec {
  Shape shape;
  Gen gen;
  int dtype = -1;
};

using Nodes = std::vector<ctn_node>;
using Build = std::function<ctn_status(ctn_graph *, const Nodes &, ctn_dtype fdt, ctn_node *)>;
using Ref = std::function<Arr(const std::vector<Arr> &, ctn_dtype fdt)>;

struct Variant {
  std::string label;
  std::vector<InSpec> ins;
  Build build;
  Ref ref;                                      // forward reference (unused by grad cases)
  std::function<ctn_dtype(ctn_dtype)> out_dtype;  // NULL: the floating dtype under test
  double tol32 = 1e-7;  // normalised MSE bounds
  double tol64 = 1e-20;
  // The 16-bit floats (cpu; opencl and vulkan for the ops with 16-bit kernels): a relative error of ~2e-3 (f16) and ~1e-2 (bf16) per element
  // against the f64 reference of the same (rounded) inputs, squared.
  double tol16 = 4e-6;
  double tolbf16 = 1e-4;
  bool no_half = false;  // the case's values do not fit a 16-bit float
  bool cpu_only = false;  // uses a dtype only the CPU backend has kernels for (i8)
  bool only_f64 = false;
  // gradient checks: central-difference step and relative error bound
  double eps = 1e-6;
  double grad_tol = 1e-6;
};

struct OpCase {
  std::string row;  // matrix row
  std::string op;   // op name asserted with ctn_plan_backend_steps
  std::vector<Variant> variants;
  // The core may lower the op to a view of its input (no kernel, no step): placement is then
  // only checked as "no step on another backend".
  bool view_ok = false;
  // A composite op (ops.h): the core adds its parts instead, so no step carries its name;
  // placement is checked as "at least one step on the backend, none on another".
  bool composite = false;
};

const std::vector<OpCase> &forward_cases();
const std::vector<OpCase> &grad_cases();

// Outcome of one run on one backend: "" when it ran (check gtest failures), else the
// "unsupported: ..." note for the matrix.
std::string run_forward_variant(const std::string &backend, const OpCase &c, const Variant &v,
                                ctn_dtype fdt, uint64_t seed, bool all_passes);
std::string run_grad_variant(const std::string &backend, const OpCase &c, const Variant &v,
                             uint64_t seed);

// Compile options restricted to one backend; `all_passes` false disables the passes that could
// rewrite the op under test away (simplify, folding, fusion).
ctn_compile_options compile_options(const std::string &backend, bool all_passes);

// A tensor of `dtype` holding `values` (converted), and back.
ctn_tensor *make_tensor(ctn_dtype dtype, const Shape &shape, const std::vector<double> &values);
Arr read_tensor(const ctn_tensor *t, ctn_dtype *out_dtype = nullptr);

double nmse(const Arr &y, const Arr &r);
std::string status_text(ctn_status s);  // "CTN_ERR_SHAPE: message"

// Base fixture: skips unavailable backends (with their reason) and records matrix cells.
class BackendTest : public ::testing::Test {
 protected:
  void begin(const std::string &backend, const std::string &row);
  void TearDown() override;
  void note_unsupported(const std::string &msg);
  // A check of the case ran on the backend. A case with unsupported notes and no check that ran
  // is reported as skipped (the reason in gtest's output); one where some checks ran and others
  // were declined (f64 on a device without it) passes, its matrix cell reads unsupported(...).
  void note_ran() { ++n_ran_; }
  std::string backend_;
  std::string row_;
  std::string skip_reason_;
  std::string unsupported_;  // the first reason
  int n_unsupported_ = 0;
  int n_ran_ = 0;
  std::string pass_note_;  // appended to "pass" in the matrix, e.g. " (fused)"
};

// A test of one case of a case table on one backend: (backend name, index into the table).
using CaseParam = std::tuple<std::string, size_t>;
class CaseTest : public BackendTest, public ::testing::WithParamInterface<CaseParam> {
 protected:
  // Starts the test of the parameter's case: NULL when the backend is skipped or setup failed.
  const OpCase *begin_case(const std::vector<OpCase> &cases);
  // Every variant of the case, forward against its reference in f32 and f64 (f64 only where the
  // variant says so), with and without the rewriting passes.
  void check_forward(const std::vector<OpCase> &cases);
  // Every variant of the case, gradients against central finite differences.
  void check_gradients(const std::vector<OpCase> &cases);
};

// Every backend x every case of `cases`, and the test names for them ("cpu_add").
std::vector<CaseParam> case_params(const std::vector<OpCase> &cases);
std::function<std::string(const ::testing::TestParamInfo<CaseParam> &)> case_param_name(
    const std::vector<OpCase> &(*cases)());

// Owning handles for the C API objects a test creates.
struct GraphDel {
  void operator()(ctn_graph *g) const { ctn_graph_release(g); }
};
struct PlanDel {
  void operator()(ctn_plan *p) const { ctn_plan_release(p); }
};
struct TensorDel {
  void operator()(ctn_tensor *t) const { ctn_tensor_release(t); }
};
using GraphPtr = std::unique_ptr<ctn_graph, GraphDel>;
using PlanPtr = std::unique_ptr<ctn_plan, PlanDel>;
using TensorPtr = std::unique_ptr<ctn_tensor, TensorDel>;

}  // namespace conf

// Asserts a chutney call returned CTN_OK, printing the status name and ctn_last_error().
#define CTN_ASSERT_OK(expr)                                                                  \
  do {                                                                                       \
    ctn_status ctn_s_ = (expr);                                                              \
    ASSERT_EQ(ctn_s_, CTN_OK) << #expr << " -> " << ::conf::status_text(ctn_s_);             \
  } while (0)
