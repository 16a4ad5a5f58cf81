// The shared "auto" placement policy of the device backends (see placement_policy.h).
#include "placement_policy.h"

#include <chutney/ops.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <thread>
#include <vector>

#include "desc_util.h"

namespace ctn_backend_util {

const char *op_class_name(int c) {
  static const char *const names[] = {"gemm", "elementwise", "reduce"};
  return c >= 0 && c < kClassCount ? names[c] : "?";
}

int op_class_of(const ctn_op_signature *sig, int64_t *size) {
  const char *op = sig->op;
  const ctn_tensor_desc &y = *sig->output;
  if (!std::strcmp(op, CTN_OP_MATMUL) || !std::strcmp(op, CTN_OP_MATMUL_BIAS_ACT)) {
    const ctn_tensor_desc &a = sig->inputs[0];
    int64_t k = a.ndim >= 2 ? a.shape[a.ndim - (sig->attrs->i[0] ? 2 : 1)] : 1;
    *size = desc_numel(y) * k;
    return kClassGemm;
  }
  static const char *const red[] = {CTN_OP_SUM, CTN_OP_MEAN, CTN_OP_MAX, CTN_OP_SOFTMAX,
                                    CTN_OP_LOG_SOFTMAX, CTN_OP_SOFTMAX_GRAD,
                                    CTN_OP_LOG_SOFTMAX_GRAD, CTN_OP_CROSS_ENTROPY,
                                    CTN_OP_CROSS_ENTROPY_GRAD};
  for (const char *r : red)
    if (!std::strcmp(op, r)) {
      *size = sig->n_inputs ? desc_numel(sig->inputs[0]) : 0;
      return kClassReduce;
    }
  *size = desc_numel(y);
  return kClassElementwise;
}

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

ctn_tensor_desc desc(std::initializer_list<int64_t> shape) {
  ctn_tensor_desc d{};
  d.dtype = CTN_F32;
  for (int64_t s : shape) d.shape[d.ndim++] = s;
  return d;
}

double time_on_device(const DeviceTimer &timer, const char *op, const ctn_tensor_desc *ins,
                      uint32_t n_in, const ctn_tensor_desc &out, const ctn_attrs &attrs,
                      int reps) {
  ctn_op_signature sig{};
  sig.struct_size = sizeof sig;
  sig.op = op;
  sig.n_inputs = n_in;
  sig.inputs = ins;
  sig.output = &out;
  sig.attrs = &attrs;
  return timer(sig, reps);
}

// Host references: single-threaded loops divided by the core count (the CPU backend splits such
// work over its pool), median of three rounds. Simpler than the CPU backend (no OpenBLAS), so the
// policy errs towards the device only where the device clearly beats a naive CPU.
template <class F>
double time_host(int reps, F &&body) {
  body();
  std::vector<double> t;
  for (int round = 0; round < 3; ++round) {
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) body();
    t.push_back(ms_since(t0) / reps);
  }
  std::sort(t.begin(), t.end());
  unsigned n = std::thread::hardware_concurrency();
  return t[1] / (n ? n : 1);
}

volatile float g_sink;

double host_elementwise(int64_t n) {
  std::vector<float> a(n, 1.5f), b(n, 0.5f), y(n);
  return time_host(5, [&] {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
    g_sink = y[n / 2];
  });
}

double host_reduce(int64_t rows, int64_t cols) {
  std::vector<float> x(rows * cols, 0.25f), y(rows);
  return time_host(5, [&] {
    for (int64_t r = 0; r < rows; ++r) {
      float s = 0;
      for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c];
      y[r] = s;
    }
    g_sink = y[0];
  });
}

double host_gemm(int64_t n) {
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  return time_host(2, [&] {
    std::fill(c.begin(), c.end(), 0.0f);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < n; ++p) {
        const float av = a[i * n + p];
        float *__restrict cr = c.data() + i * n;
        const float *__restrict br = b.data() + p * n;
        for (int64_t j = 0; j < n; ++j) cr[j] += av * br[j];
      }
    g_sink = c[0];
  });
}

// Smallest measured size from which the device wins at every larger size.
void decide(PolicyEntry &e, const std::vector<int64_t> &sizes, const std::vector<double> &dev,
            const std::vector<double> &cpu) {
  e.device_from = INT64_MAX;
  std::ostringstream note;
  note.precision(3);
  for (size_t i = sizes.size(); i-- > 0;) {
    if (dev[i] < 0 || dev[i] >= cpu[i]) break;
    e.device_from = sizes[i];
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    note << (i ? "; " : "") << sizes[i] << ": device ";
    if (dev[i] < 0) note << "failed";
    else note << dev[i] << " ms";
    note << ", cpu " << cpu[i] << " ms";
  }
  e.note = note.str();
}

void make_dirs(const std::string &path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') mkdir(path.substr(0, i).c_str(), 0755);
}

constexpr const char *kHeader = "chutney-placement-policy 2";

const char *size_unit(int c) {
  return c == kClassGemm ? "m*n*k" : c == kClassReduce ? "input elements" : "output elements";
}

}  // namespace

void PlacementPolicy::measure(const DeviceTimer &timer) {
  auto t0 = Clock::now();
  ctn_attrs none{};
  {  // elementwise: add of two vectors
    std::vector<int64_t> sizes = {1 << 12, 1 << 16, 1 << 20};
    std::vector<double> dev, cpu;
    for (int64_t n : sizes) {
      ctn_tensor_desc in[2] = {desc({n}), desc({n})}, out = desc({n});
      dev.push_back(time_on_device(timer, CTN_OP_ADD, in, 2, out, none, 10));
      cpu.push_back(host_elementwise(n));
    }
    decide(cls_[kClassElementwise], sizes, dev, cpu);
  }
  {  // reductions: row sums of [n/256, 256] (i[0]: bitmask of reduced axes)
    std::vector<int64_t> sizes = {1 << 12, 1 << 16, 1 << 20};
    std::vector<double> dev, cpu;
    for (int64_t n : sizes) {
      ctn_tensor_desc in = desc({n / 256, 256}), out = desc({n / 256});
      ctn_attrs at{};
      at.i[0] = 2;
      at.ni = 2;
      dev.push_back(time_on_device(timer, CTN_OP_SUM, &in, 1, out, at, 10));
      cpu.push_back(host_reduce(n / 256, 256));
    }
    decide(cls_[kClassReduce], sizes, dev, cpu);
  }
  {  // GEMM: square n x n x n; size = n^3
    std::vector<int64_t> dims = {64, 256, 512}, sizes;
    std::vector<double> dev, cpu;
    for (int64_t n : dims) {
      ctn_tensor_desc in[2] = {desc({n, n}), desc({n, n})}, out = desc({n, n});
      ctn_attrs at{};
      at.ni = 2;
      dev.push_back(time_on_device(timer, CTN_OP_MATMUL, in, 2, out, at, n >= 512 ? 2 : 5));
      cpu.push_back(host_gemm(n));
      sizes.push_back(n * n * n);
    }
    decide(cls_[kClassGemm], sizes, dev, cpu);
  }
  measure_ms_ = ms_since(t0);
}

bool PlacementPolicy::load(const std::string &path) {
  std::ifstream f(path);
  std::string line;
  if (!f || !std::getline(f, line) || line != kHeader) return false;
  int seen = 0;
  while (std::getline(f, line)) {
    std::istringstream is(line);
    std::string name;
    long long from = 0;
    if (!(is >> name >> from)) return false;
    std::string note;
    std::getline(is, note);
    if (!note.empty() && note[0] == ' ') note.erase(0, 1);
    for (int c = 0; c < kClassCount; ++c)
      if (name == op_class_name(c)) {
        cls_[c].device_from = from;
        cls_[c].note = note;
        seen |= 1 << c;
      }
  }
  return seen == (1 << kClassCount) - 1;
}

void PlacementPolicy::save(const std::string &path) const {
  size_t slash = path.rfind('/');
  if (slash != std::string::npos) make_dirs(path.substr(0, slash));
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << kHeader << '\n';
    for (int c = 0; c < kClassCount; ++c)
      f << op_class_name(c) << ' ' << static_cast<long long>(cls_[c].device_from) << ' '
        << cls_[c].note << '\n';
    if (!f) return;
  }
  std::rename(tmp.c_str(), path.c_str());
}

void PlacementPolicy::prepare(const std::string &path, const DeviceTimer &timer, bool remeasure) {
  path_ = path;
  if (!remeasure && !path.empty() && load(path)) {
    origin_ = "cache";
  } else {
    measure(timer);
    origin_ = "measured";
    if (!path.empty()) save(path);
  }
  ready_ = true;
}

std::string PlacementPolicy::decline_reason(const ctn_op_signature *sig) const {
  if (!auto_mode) return "";
  int64_t size = 0;
  int c = op_class_of(sig, &size);
  if (c >= kClassCount || size >= cls_[c].device_from) return "";
  char buf[96];
  std::snprintf(buf, sizeof buf, "placement policy: cpu faster for %s (size %lld; ", op_class_name(c),
                static_cast<long long>(size));
  return buf + cls_[c].note + ")";
}

std::string PlacementPolicy::report_json() const {
  std::ostringstream os;
  os << "{\"origin\": \"" << origin_ << "\", \"classes\": [";
  for (int c = 0; c < kClassCount; ++c) {
    const PolicyEntry &e = cls_[c];
    os << (c ? ", " : "") << "{\"class\": \"" << op_class_name(c) << "\", \"device_from\": "
       << (e.device_from == INT64_MAX ? std::string("null") : std::to_string(e.device_from))
       << ", \"measurements\": \"" << e.note << "\"}";
  }
  os << "]}";
  return os.str();
}

std::string PlacementPolicy::explain(const char *placement_env) const {
  std::ostringstream os;
  if (!auto_mode) {
    os << "always (" << placement_env << " or option placement): every op the backend implements "
       << "runs on the device; the measured policy is not applied";
    return os.str();
  }
  if (!ready_) {
    os << "auto, not measured yet: measured when the first op is offered to the device, then "
          "cached";
    return os.str();
  }
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.0f ms", measure_ms_);
  os << "auto, " << (origin_ == "measured" ? std::string("measured now in ") + ms : "measured earlier")
     << " (" << (path_.empty() ? std::string("not cached: no cache directory") : "cached in " + path_)
     << "): an op class runs on the device only from the size at which the device beat the cpu "
        "at every larger measured size";
  for (int c = 0; c < kClassCount; ++c) {
    const PolicyEntry &e = cls_[c];
    os << "\n  " << op_class_name(c) << ": ";
    if (e.device_from == INT64_MAX) os << "cpu at every size";
    else os << "device from " << e.device_from << ", cpu below";
    os << " (size in " << size_unit(c) << "; " << e.note << ")";
  }
  return os.str();
}

const char *PlacementPolicy::explain_cstr(const char *placement_env) const noexcept {
  static thread_local std::string text;
  try {
    text = explain(placement_env);
  } catch (...) {
    text.clear();
  }
  return text.c_str();
}

}  // namespace ctn_backend_util
