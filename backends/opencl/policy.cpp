// The "auto" placement policy for embedded devices: the GPU of a small board is often slower than
// its CPU, and chutney must never make a model slower by using it. Per op class (GEMM,
// elementwise, reductions) we time the device against a plain host loop at a few sizes, once per
// device + driver, and keep the smallest size from which the device wins at every larger
// measured size. get_kernel declines smaller ops ("placement policy: cpu faster for ..."), so
// they fall to the CPU backend. Results are cached next to the program binaries.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "ocl_backend.h"

namespace ctn_ocl {

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

// Times `reps` calls of the op `name` on device buffers (median of 3 rounds, ms per call).
double time_device(Backend &be, const char *name, const ctn_tensor_desc *ins, uint32_t n_in,
                   const ctn_tensor_desc &out, const ctn_attrs &attrs, int reps) {
  ctn_op_signature sig{};
  sig.struct_size = sizeof sig;
  sig.op = name;
  sig.n_inputs = n_in;
  sig.inputs = ins;
  sig.output = &out;
  sig.attrs = &attrs;
  ctn_kernel k{};
  bool handled = false;
  ctn_status st = CTN_OK;
  for (auto m : {make_elementwise, make_reduce, make_matmul})
    if (st = m(&be, &sig, &k, &handled); handled) break;
  if (!handled || st != CTN_OK) return -1;
  std::vector<cl_mem> bufs;
  std::vector<ctn_tensor_desc> din(ins, ins + n_in);
  ctn_tensor_desc dout = out;
  auto alloc = [&](ctn_tensor_desc &d) {
    size_t bytes = static_cast<size_t>(std::max<int64_t>(desc_numel(d), 1)) * 4;
    cl_int e = CL_SUCCESS;
    cl_mem m = clCreateBuffer(be.context, CL_MEM_READ_WRITE, bytes, nullptr, &e);
    if (e != CL_SUCCESS) return false;
    const cl_float one = 0.5f;
    clEnqueueFillBuffer(be.queue, m, &one, sizeof one, 0, bytes, 0, nullptr, nullptr);
    bufs.push_back(m);
    d.data = m;
    return true;
  };
  bool ok = true;
  for (auto &d : din) ok = ok && alloc(d);
  ok = ok && alloc(dout);
  double best = -1;
  if (ok) {
    ctn_kernel_args args{};
    args.n_inputs = n_in;
    args.n_outputs = 1;
    args.inputs = din.data();
    args.outputs = &dout;
    args.attrs = &attrs;
    ok = k.fn(k.state, &args) == CTN_OK && clFinish(be.queue) == CL_SUCCESS;  // warm-up
    std::vector<double> t;
    for (int round = 0; ok && round < 3; ++round) {
      auto t0 = Clock::now();
      for (int r = 0; ok && r < reps; ++r) ok = k.fn(k.state, &args) == CTN_OK;
      ok = ok && clFinish(be.queue) == CL_SUCCESS;
      t.push_back(ms_since(t0) / reps);
    }
    if (ok) {
      std::sort(t.begin(), t.end());
      best = t[1];
    }
  }
  for (cl_mem m : bufs) clReleaseMemObject(m);
  if (k.release) k.release(k.state);
  return best;
}

// Host references, split over the machine's cores like the CPU backend would.
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
  return t[1];
}

int host_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}

volatile float g_sink;

double host_elementwise(int64_t n) {
  std::vector<float> a(n, 1.5f), b(n, 0.5f), y(n);
  return time_host(5, [&] {
           for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
           g_sink = y[n / 2];
         }) / host_threads();
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
         }) / host_threads();
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
         }) / host_threads();
}

std::string policy_path(const Backend &be) {
  return be.cache_dir + "/opencl-policy-" + device_key(be) + ".txt";
}

bool load_policy(Backend &be) {
  std::ifstream f(policy_path(be));
  std::string line;
  if (!f || !std::getline(f, line) || line != "chutney-opencl-policy 1") return false;
  int seen = 0;
  while (std::getline(f, line)) {
    std::istringstream is(line);
    std::string cls;
    long long min = 0;
    if (!(is >> cls >> min)) return false;
    std::string note;
    std::getline(is, note);
    if (!note.empty() && note[0] == ' ') note.erase(0, 1);
    for (int c = 0; c < kClassCount; ++c)
      if (cls == op_class_name(c)) {
        be.policy[c].min_elements = min;
        be.policy[c].note = note;
        seen |= 1 << c;
      }
  }
  return seen == (1 << kClassCount) - 1;
}

void save_policy(const Backend &be) {
  std::string path = policy_path(be), tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << "chutney-opencl-policy 1\n";
    for (int c = 0; c < kClassCount; ++c)
      f << op_class_name(c) << ' ' << static_cast<long long>(be.policy[c].min_elements) << ' '
        << be.policy[c].note << '\n';
    if (!f) return;
  }
  std::rename(tmp.c_str(), path.c_str());
}

// Smallest measured size from which the device wins at every larger size.
void decide(PolicyEntry &e, const std::vector<int64_t> &sizes, const std::vector<double> &dev,
            const std::vector<double> &cpu) {
  e.min_elements = INT64_MAX;
  std::ostringstream note;
  note.precision(3);
  for (size_t i = sizes.size(); i-- > 0;) {
    if (dev[i] < 0 || dev[i] >= cpu[i]) break;
    e.min_elements = sizes[i];
  }
  for (size_t i = 0; i < sizes.size(); ++i)
    note << (i ? "; " : "") << sizes[i] << ": device " << dev[i] << " ms, cpu " << cpu[i] << " ms";
  e.note = note.str();
}

}  // namespace

void policy_prepare(Backend &be) {
  if (be.policy_ready) return;
  be.policy_ready = true;
  if (!std::getenv("CHUTNEY_OPENCL_REMEASURE") && load_policy(be)) {
    be.policy_origin = "cache";
    return;
  }
  ctn_attrs none{};
  {  // elementwise: add of two vectors
    std::vector<int64_t> sizes = {1 << 12, 1 << 16, 1 << 20};
    std::vector<double> dev, cpu;
    for (int64_t n : sizes) {
      ctn_tensor_desc in[2] = {desc({n}), desc({n})}, out = desc({n});
      dev.push_back(time_device(be, CTN_OP_ADD, in, 2, out, none, 10));
      cpu.push_back(host_elementwise(n));
    }
    decide(be.policy[kClassElementwise], sizes, dev, cpu);
  }
  {  // reductions: row sums of [n/256, 256]
    std::vector<int64_t> sizes = {1 << 12, 1 << 16, 1 << 20};
    std::vector<double> dev, cpu;
    for (int64_t n : sizes) {
      ctn_tensor_desc in = desc({n / 256, 256}), out = desc({n / 256});
      ctn_attrs at{};
      at.i[0] = 2;
      at.ni = 2;
      dev.push_back(time_device(be, CTN_OP_SUM, &in, 1, out, at, 10));
      cpu.push_back(host_reduce(n / 256, 256));
    }
    decide(be.policy[kClassReduce], sizes, dev, cpu);
  }
  {  // GEMM: square n x n x n; size = n^3
    std::vector<int64_t> dims = {64, 256, 512}, sizes;
    std::vector<double> dev, cpu;
    for (int64_t n : dims) {
      ctn_tensor_desc in[2] = {desc({n, n}), desc({n, n})}, out = desc({n, n});
      ctn_attrs at{};
      at.ni = 2;
      dev.push_back(time_device(be, CTN_OP_MATMUL, in, 2, out, at, n >= 512 ? 2 : 5));
      cpu.push_back(host_gemm(n));
      sizes.push_back(n * n * n);
    }
    decide(be.policy[kClassGemm], sizes, dev, cpu);
  }
  be.policy_origin = "measured";
  save_policy(be);
}

std::string policy_report(const Backend &be) {
  std::ostringstream os;
  os << "{\"origin\": \"" << be.policy_origin << "\", \"classes\": [";
  for (int c = 0; c < kClassCount; ++c) {
    const PolicyEntry &e = be.policy[c];
    os << (c ? ", " : "") << "{\"class\": \"" << op_class_name(c) << "\", \"device_from\": "
       << (e.min_elements == INT64_MAX ? std::string("null") : std::to_string(e.min_elements))
       << ", \"measurements\": \"" << e.note << "\"}";
  }
  os << "]}";
  return os.str();
}

}  // namespace ctn_ocl
