// The process-wide context, backend discovery (incl. vendor mode), the op x backend matrix and
// tensor helpers.
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include "case_helpers.hpp"

#ifndef CTN_CONF_CPU_PLUGIN
#define CTN_CONF_CPU_PLUGIN ""
#endif

namespace conf {
namespace {

struct Global {
  ctn_context *ctx = nullptr;
  std::string error;
  std::vector<BackendEntry> backends;
  std::string plugin_report;
  bool vendor_mode = false;
  std::string vendor_path;
};

std::string real_path(const std::string &p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) != nullptr) return buf;
  return p;
}

std::string env(const char *name) {
  const char *v = std::getenv(name);
  return v != nullptr ? v : "";
}

Global &global() {
  static Global g;
  static std::once_flag once;
  std::call_once(once, [] {
    ctn_context_options o{};
    o.struct_size = sizeof o;
    g.vendor_path = env("CTN_CONFORMANCE_PLUGIN");
    g.vendor_mode = !g.vendor_path.empty();
    if (g.vendor_mode) o.flags = CTN_CONTEXT_NO_AUTOLOAD;
    ctn_status s = ctn_context_create(&o, &g.ctx);
    if (s != CTN_OK) {
      g.error = "ctn_context_create failed: " + status_text(s);
      g.ctx = nullptr;
      return;
    }
    if (g.vendor_mode) {
      // The CPU plugin comes from the build tree (or CTN_CONFORMANCE_CPU_PLUGIN) so the vendor's
      // backend has a host backend beside it, exactly as in an installed runtime.
      std::string cpu = env("CTN_CONFORMANCE_CPU_PLUGIN");
      if (cpu.empty()) cpu = CTN_CONF_CPU_PLUGIN;
      if (real_path(cpu) != real_path(g.vendor_path)) {
        s = ctn_context_load_plugin(g.ctx, cpu.c_str());
        if (s != CTN_OK) g.error += "loading the cpu plugin " + cpu + ": " + status_text(s) + "\n";
      }
      s = ctn_context_load_plugin(g.ctx, g.vendor_path.c_str());
      // CTN_ERR_UNAVAILABLE: the plugin loaded but its device is absent; the backend is listed
      // as unavailable and its tests are skipped with the reason.
      if (s != CTN_OK && s != CTN_ERR_UNAVAILABLE)
        g.error += "loading " + g.vendor_path + ": " + status_text(s) + "\n";
    }
    const char *report = nullptr;
    if (ctn_context_plugin_report(g.ctx, &report) == CTN_OK && report != nullptr)
      g.plugin_report = report;
    uint32_t n = 0;
    if ((s = ctn_context_backend_count(g.ctx, &n)) != CTN_OK) {
      g.error += "ctn_context_backend_count: " + status_text(s) + "\n";
      return;
    }
    for (uint32_t i = 0; i < n; ++i) {
      ctn_backend_info info{};
      info.struct_size = sizeof info;
      if ((s = ctn_context_backend_info(g.ctx, i, &info)) != CTN_OK) {
        g.error += "ctn_context_backend_info: " + status_text(s) + "\n";
        continue;
      }
      BackendEntry e;
      e.name = info.name != nullptr ? info.name : "?";
      e.available = info.available != 0;
      e.description = info.description != nullptr ? info.description : "";
      e.path = info.path != nullptr ? info.path : "";
      // Device backends may keep ops on the CPU when that is faster ("placement" = "auto");
      // the suite tests the backend itself. Backends without the option reject the key.
      if (e.available && e.name != "cpu")
        (void)ctn_context_set_option(g.ctx, e.name.c_str(), "placement", "always");
      g.backends.push_back(e);
    }
  });
  return g;
}

// ---- matrix -------------------------------------------------------------------------------------

struct Matrix {
  std::mutex mu;
  std::vector<std::string> rows;
  std::map<std::string, std::map<std::string, std::string>> cells;
};

Matrix &matrix() {
  static Matrix m;
  return m;
}

int rank(const std::string &cell) {
  if (cell.rfind("FAIL", 0) == 0) return 3;
  if (cell.rfind("unsupported", 0) == 0) return 2;
  if (cell.rfind("pass", 0) == 0) return 1;
  return 0;
}

std::string md_escape(std::string s) {
  for (char &c : s)
    if (c == '|' || c == '\n') c = ' ';
  return s;
}

void print_matrix(std::ostream &os, bool markdown) {
  Matrix &m = matrix();
  std::lock_guard<std::mutex> lock(m.mu);
  std::vector<std::string> cols;
  for (const auto &b : global().backends) cols.push_back(b.name);
  // Every op of the registry gets a row, so an op nobody tests shows up as "untested".
  std::vector<std::string> rows;
  for (const RegisteredOp &op : registered_ops()) rows.push_back(op.name);
  for (const auto &r : m.rows)
    if (std::find(rows.begin(), rows.end(), r) == rows.end()) rows.push_back(r);
  auto cell_of = [&](const std::string &r, const std::string &c) -> std::string {
    auto it = m.cells.find(r);
    if (it == m.cells.end()) return "untested";
    auto jt = it->second.find(c);
    return jt == it->second.end() ? "-" : jt->second;
  };
  if (markdown) {
    os << "# chutney op x backend conformance matrix\n\n| op |";
    for (const auto &c : cols) os << ' ' << c << " |";
    os << "\n|---|";
    for (size_t i = 0; i < cols.size(); ++i) os << "---|";
    os << '\n';
    for (const auto &r : rows) {
      os << "| " << r << " |";
      for (const auto &c : cols) os << ' ' << md_escape(cell_of(r, c)) << " |";
      os << '\n';
    }
    os << "\nBackends:\n\n";
    for (const auto &b : global().backends)
      os << "- " << b.name << ": " << (b.available ? "available" : "unavailable") << ", "
         << md_escape(b.description) << " (" << b.path << ")\n";
    os << "\nCells: pass / FAIL / unsupported(reason) / skip(reason); '-' not run (filtered); "
          "'untested' no case covers the op. Rows 'grad:<op>' are finite-difference gradient "
          "checks (compiled plan and eager mode).\n";
    return;
  }
  size_t w0 = 4;
  for (const auto &r : rows) w0 = std::max(w0, r.size());
  os << "\n=== chutney conformance matrix (op x backend) ===\n";
  os << std::string(w0, ' ');
  for (const auto &c : cols) os << "  " << c;
  os << '\n';
  for (const auto &r : rows) {
    os << r << std::string(w0 - r.size(), ' ');
    for (const auto &c : cols) os << "  [" << c << "] " << cell_of(r, c);
    os << '\n';
  }
  for (const auto &b : global().backends)
    os << "backend " << b.name << ": " << with_state(b) << " (" << b.path << ")\n";
}

class MatrixEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    Global &g = global();
    std::cout << "[conformance] " << (g.vendor_mode ? "vendor mode: " + g.vendor_path : "autoload")
              << '\n';
    for (const auto &b : g.backends)
      std::cout << "[conformance] backend " << b.name << ": "
                << (b.available ? "available (" : "UNAVAILABLE, skipped: ") << b.description
                << (b.available ? ")" : "") << '\n';
    if (!g.error.empty()) std::cout << "[conformance] setup errors:\n" << g.error;
  }
  void TearDown() override {
    print_matrix(std::cout, false);
    std::string path = env("CTN_CONFORMANCE_MATRIX");
    if (!path.empty()) {
      std::ofstream f(path);
      print_matrix(f, true);
      if (!f) std::cerr << "[conformance] could not write " << path << '\n';
    }
    Global &g = global();
    ctn_context_release(g.ctx);
    g.ctx = nullptr;
  }
};

[[maybe_unused]] ::testing::Environment *const kEnv =
    ::testing::AddGlobalTestEnvironment(new MatrixEnvironment);

}  // namespace

ctn_context *context() { return global().ctx; }
const std::string &setup_error() { return global().error; }
const std::vector<BackendEntry> &backend_entries() { return global().backends; }

std::vector<std::string> backend_names() {
  std::vector<std::string> out;
  for (const auto &b : global().backends) out.push_back(b.name);
  if (out.empty()) out.push_back("no_backend");
  return out;
}

const BackendEntry *find_backend(const std::string &name) {
  for (const auto &b : global().backends)
    if (b.name == name) return &b;
  return nullptr;
}

std::string param_name(const std::string &s) {
  std::string r;
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return r;
}

void matrix_declare_row(const std::string &row) {
  Matrix &m = matrix();
  std::lock_guard<std::mutex> lock(m.mu);
  if (std::find(m.rows.begin(), m.rows.end(), row) == m.rows.end()) m.rows.push_back(row);
}

void matrix_record(const std::string &row, const std::string &backend, const std::string &cell) {
  matrix_declare_row(row);
  Matrix &m = matrix();
  std::lock_guard<std::mutex> lock(m.mu);
  auto &slot = m.cells[row][backend];
  if (slot.empty() || rank(cell) > rank(slot)) slot = cell;
}

std::string status_text(ctn_status s) {
  return std::string(ctn_status_name(s)) + ": " + ctn_last_error();
}

// ---- tensors ------------------------------------------------------------------------------------

ctn_tensor *make_tensor(ctn_dtype dtype, const Shape &shape, const std::vector<double> &values) {
  size_t n = values.size();
  std::vector<unsigned char> bytes(n * ctn_dtype_size(dtype) + 1);
  for (size_t i = 0; i < n; ++i) {
    double x = values[i];
    switch (dtype) {
      case CTN_F32: reinterpret_cast<float *>(bytes.data())[i] = static_cast<float>(x); break;
      case CTN_F64: reinterpret_cast<double *>(bytes.data())[i] = x; break;
      case CTN_I32: reinterpret_cast<int32_t *>(bytes.data())[i] = static_cast<int32_t>(x); break;
      case CTN_I64: reinterpret_cast<int64_t *>(bytes.data())[i] = static_cast<int64_t>(x); break;
      case CTN_U8: bytes[i] = static_cast<unsigned char>(x); break;
      case CTN_BOOL: bytes[i] = x != 0.0 ? 1 : 0; break;
      case CTN_I8: reinterpret_cast<int8_t *>(bytes.data())[i] = static_cast<int8_t>(x); break;
      case CTN_F16: reinterpret_cast<uint16_t *>(bytes.data())[i] = ctn_desc_f64_to_f16(x); break;
      case CTN_BF16: reinterpret_cast<uint16_t *>(bytes.data())[i] = ctn_desc_f64_to_bf16(x); break;
      default: return nullptr;
    }
  }
  ctn_tensor *t = nullptr;
  if (ctn_tensor_create(dtype, static_cast<uint32_t>(shape.size()), shape.data(), bytes.data(),
                        &t) != CTN_OK)
    return nullptr;
  return t;
}

Arr read_tensor(const ctn_tensor *t, ctn_dtype *out_dtype) {
  Arr a;
  ctn_dtype dt = CTN_F32;
  uint32_t nd = 0;
  int64_t shape[CTN_MAX_DIMS] = {};
  if (ctn_tensor_dtype(t, &dt) != CTN_OK || ctn_tensor_shape(t, &nd, shape) != CTN_OK) return a;
  a.shape.assign(shape, shape + nd);
  size_t n = static_cast<size_t>(numel(a.shape));
  std::vector<unsigned char> bytes(n * ctn_dtype_size(dt) + 1);
  if (ctn_tensor_read(t, bytes.data(), n * ctn_dtype_size(dt)) != CTN_OK) return Arr{};
  a.v.resize(n);
  for (size_t i = 0; i < n; ++i) {
    switch (dt) {
      case CTN_F32: a.v[i] = reinterpret_cast<const float *>(bytes.data())[i]; break;
      case CTN_F64: a.v[i] = reinterpret_cast<const double *>(bytes.data())[i]; break;
      case CTN_I32: a.v[i] = reinterpret_cast<const int32_t *>(bytes.data())[i]; break;
      case CTN_I64:
        a.v[i] = static_cast<double>(reinterpret_cast<const int64_t *>(bytes.data())[i]);
        break;
      case CTN_U8:
      case CTN_BOOL: a.v[i] = bytes[i]; break;
      case CTN_I8: a.v[i] = reinterpret_cast<const int8_t *>(bytes.data())[i]; break;
      case CTN_F16: a.v[i] = ctn_desc_f16_to_f32(reinterpret_cast<const uint16_t *>(bytes.data())[i]); break;
      case CTN_BF16: a.v[i] = ctn_desc_bf16_to_f32(reinterpret_cast<const uint16_t *>(bytes.data())[i]); break;
      default: break;
    }
  }
  if (out_dtype != nullptr) *out_dtype = dt;
  return a;
}

double nmse(const Arr &y, const Arr &r) {
  double num = 0, den = 0;
  for (size_t i = 0; i < r.v.size(); ++i) {
    double d = y.v[i] - r.v[i];
    num += d * d;
    den += r.v[i] * r.v[i];
  }
  if (std::isnan(num)) return INFINITY;
  return num / std::max(den, 1e-300);
}

ctn_compile_options compile_options(const std::string &backend, bool all_passes) {
  ctn_compile_options o{};
  o.struct_size = sizeof o;
  o.disable = all_passes ? 0u : (CTN_PASS_SIMPLIFY | CTN_PASS_CONSTANT_FOLDING | CTN_PASS_FUSION);
  // Points into the static registry of backend names, which outlives every plan.
  const BackendEntry *b = find_backend(backend);
  o.backends = b != nullptr ? b->name.c_str() : "no_backend";
  return o;
}

// ---- fixture ------------------------------------------------------------------------------------

void BackendTest::begin(const std::string &backend, const std::string &row) {
  backend_ = backend;
  row_ = row;
  matrix_declare_row(row);
  if (context() == nullptr) {
    FAIL() << "no context: " << setup_error();
  }
  const BackendEntry *b = find_backend(backend);
  if (b == nullptr) {
    FAIL() << "no backend found: " << setup_error();
  }
  if (!b->available) {
    skip_reason_ = with_state(*b);
    GTEST_SKIP() << "backend " << backend << " " << skip_reason_;
  }
}

void BackendTest::note_unsupported(const std::string &msg) {
  // The matrix keeps the first reason and a count; gtest's log keeps every one.
  std::cout << "[conformance] unsupported on " << backend_ << ": " << msg << '\n';
  if (n_unsupported_++ == 0) unsupported_ = msg;
}

void BackendTest::TearDown() {
  if (row_.empty() || backend_.empty()) return;
  std::string cell;
  if (HasFailure())
    cell = "FAIL";
  else if (!unsupported_.empty())
    cell = "unsupported(" + unsupported_ +
           (n_unsupported_ > 1 ? " [+" + std::to_string(n_unsupported_ - 1) + " more]" : "") +
           ")";
  else if (IsSkipped())
    cell = "skip(" + skip_reason_ + ")";
  else
    cell = "pass" + pass_note_;
  matrix_record(row_, backend_, cell);
  // Vendor mode: a case the backend declines is reported as skipped with the reason, never as a
  // failure and never as a pass (gtest and meson count it as skipped, as the matrix does).
  if (!HasFailure() && !IsSkipped() && !unsupported_.empty() && n_ran_ == 0)
    GTEST_SKIP() << "unsupported on " << backend_ << ": " << unsupported_
                 << (n_unsupported_ > 1 ? " [+" + std::to_string(n_unsupported_ - 1) + " more]" : "");
}

const OpCase *CaseTest::begin_case(const std::vector<OpCase> &cases) {
  const OpCase &c = cases.at(std::get<1>(GetParam()));
  begin(std::get<0>(GetParam()), c.row);
  return IsSkipped() || HasFatalFailure() ? nullptr : &c;
}

// Whether `backend` has 16-bit float kernels for the op of `c`.
static bool half_kernels(const std::string &backend, const OpCase &c) {
  if (backend == "cpu") return true;
  if (backend != "opencl" && backend != "vulkan") return false;
  // A composite op runs as its parts: every part of the composites of the suite (softsign,
  // softplus, elu, selu, hardsigmoid, hardswish, mish, reciprocal) has 16-bit kernels on both.
  if (c.composite) return true;
  static const std::set<std::string> kOps = {
      // the generated elementwise formulas (backends/common/ew_ops.py)
      "neg", "exp", "log", "sqrt", "abs", "sign", "tanh", "sigmoid", "relu", "gelu", "leaky_relu",
      "clamp", "erf", "atan", "sin", "cos", "tan", "add", "sub", "mul", "div", "pow", "maximum",
      "minimum", "relu_grad", "leaky_relu_grad", "gelu_grad", "clamp_grad", "tanh_grad",
      "sigmoid_grad",
      // comparisons, where, casts and the data movement of the shape ops
      "eq", "ne", "lt", "le", "gt", "ge", "where", "cast", "reshape", "permute", "slice", "concat",
      "broadcast_to",
      // reductions and the softmax family (16-bit storage, f32 sums)
      "sum", "mean", "max", "softmax", "log_softmax", "softmax_grad", "log_softmax_grad"};
  // Vulkan's gather shader does not scatter 1- or 2-byte elements; its matmul, convolution,
  // pooling and norm shaders take 16-bit storage too (OpenCL's GEMM is CLBlast's, f32/f64).
  static const std::set<std::string> kVulkan = {
      "matmul", "matmul_bias_act", "conv2d", "conv2d_grad_input", "conv2d_grad_weight",
      "conv_transpose2d", "max_pool2d", "max_pool2d_grad", "avg_pool2d", "avg_pool2d_grad",
      "batch_norm", "batch_norm_grad_input", "batch_norm_grad_gamma", "batch_norm_inference",
      "layer_norm", "layer_norm_grad_input", "layer_norm_grad_gamma"};
  if (backend == "opencl") return kOps.count(c.op) > 0 || c.op == "slice_grad";
  return kOps.count(c.op) > 0 || kVulkan.count(c.op) > 0;
}

void CaseTest::check_forward(const std::vector<OpCase> &cases) {
  const OpCase *c = begin_case(cases);
  if (c == nullptr) return;
  for (const Variant &v : c->variants) {
    if (v.cpu_only && backend_ != "cpu") continue;
    // The 16-bit floats: on the CPU backend every op (native and widened kernels); on OpenCL and
    // Vulkan the ops with 16-bit kernels (half_kernels), where they must run unless the device
    // lacks a feature (then the reason names it). Every other op declines them there
    // (GpuHalfFallback in tests.cpp checks that they fall back).
    std::vector<ctn_dtype> fdts = {CTN_F32, CTN_F64};
    const bool half = !v.only_f64 && !v.no_half && half_kernels(backend_, *c);
    if (half) fdts.insert(fdts.end(), {CTN_F16, CTN_BF16});
    for (ctn_dtype fdt : fdts) {
      if (v.only_f64 && fdt == CTN_F32) continue;
      uint64_t seed = seed_of(c->row + "/" + v.label + "/" + ctn_dtype_name(fdt));
      for (bool all_passes : {false, true}) {
        std::string u = run_forward_variant(backend_, *c, v, fdt, seed, all_passes);
        if (!u.empty() && backend_ != "cpu" && (fdt == CTN_F16 || fdt == CTN_BF16)) {
          // "the device lacks storageBuffer16BitAccess", "f64 needs shaderFloat64, which <device>
          // lacks", "f64 needs cl_khr_fp64, which <device> does not offer"
          EXPECT_TRUE(u.find(" lacks") != std::string::npos || u.find("does not offer") != std::string::npos)
              << "a 16-bit op with device kernels was declined: " << u;
        }
        if (!u.empty()) {
          note_unsupported(u);
          break;
        }
        note_ran();
      }
    }
  }
}

void CaseTest::check_gradients(const std::vector<OpCase> &cases) {
  const OpCase *c = begin_case(cases);
  if (c == nullptr) return;
  for (const Variant &v : c->variants) {
    std::string u = run_grad_variant(backend_, *c, v, seed_of(c->row + "/" + v.label));
    if (!u.empty()) note_unsupported(u);
    else note_ran();
  }
}

std::vector<CaseParam> case_params(const std::vector<OpCase> &cases) {
  std::vector<CaseParam> out;
  for (const std::string &b : backend_names())
    for (size_t i = 0; i < cases.size(); ++i) out.emplace_back(b, i);
  return out;
}

std::function<std::string(const ::testing::TestParamInfo<CaseParam> &)> case_param_name(
    const std::vector<OpCase> &(*cases)()) {
  return [cases](const ::testing::TestParamInfo<CaseParam> &info) {
    return param_name(std::get<0>(info.param)) + "_" + param_name(cases().at(std::get<1>(info.param)).row);
  };
}

}  // namespace conf
