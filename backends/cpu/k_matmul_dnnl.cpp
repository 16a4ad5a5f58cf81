// bf16 / f16 matmul through oneDNN: 16-bit inputs and output, f32 accumulation, on the CPU's
// AVX512_BF16 (AVX512_FP16, AMX) instructions where oneDNN has a JIT kernel for them. The rows
// of the result are split into one part per pool participant, each a single-threaded primitive
// (the convolutions' rule, k_conv_dnnl.cpp: oneDNN's OpenMP team is never used), with its
// scratchpad in the call's workspace. Shapes oneDNN runs only with its reference code, batched
// or fused matmuls, and builds without oneDNN take the f32 GEMM between conversions (k_widen.cpp).
#include "cpu_backend.h"

#include <chutney/desc.h>

#ifdef CTN_CPU_HAVE_DNNL

#include <omp.h>

#include "k_dnnl.h"

#include <algorithm>
#include <mutex>

namespace ctn_cpu {
namespace {

using dnnl::memory;

dnnl::engine &engine() { return onednn_engine(); }

// The primitive for `rows` rows of the result.
struct Part {
  int64_t rows = 0;
  dnnl::matmul prim;
  memory::desc a, b, y, scratch;
  std::string impl;  // oneDNN's implementation name
};

struct DnnlMatmulState : KernelBase {
  int64_t m = 0, n = 0, k = 0, parts = 1, esize = 2;
  bool ta = false;
  Part v[2];  // the rows of the smaller parts, and of the larger ones when they differ
  size_t slot = 0;
};

Part make_part(int64_t rows, const MatmulDims &d, memory::data_type dt) {
  Part p;
  p.rows = rows;
  // a's rows [r0, r0 + rows): a [M, K] row-major, or a^T stored as [K, M]; b [K, N] or [N, K].
  p.a = memory::desc({rows, d.k}, dt, d.ta ? memory::dims{1, d.m} : memory::dims{d.k, 1});
  p.b = memory::desc({d.k, d.n}, dt, d.tb ? memory::dims{1, d.k} : memory::dims{d.n, 1});
  p.y = memory::desc({rows, d.n}, dt, memory::dims{d.n, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, p.b, p.y), attr, engine());
  p.prim = dnnl::matmul(pd);
  p.scratch = pd.scratchpad_desc();
  p.impl = pd.impl_info_str();
  return p;
}

struct Call {
  const DnnlMatmulState *st;
  const char *a, *b;
  char *y, *ws;
  std::mutex mu;
  std::string error;

  void run(int64_t p) {
    const DnnlMatmulState &s = *st;
    const int64_t r0 = s.m * p / s.parts, r1 = s.m * (p + 1) / s.parts;
    const Part &v = s.v[r1 - r0 == s.v[0].rows ? 0 : 1];
    char *slot = ws + static_cast<size_t>(p) * s.slot;
    try {
      dnnl::engine &eng = engine();
      dnnl::stream strm(eng);
      const int64_t a_off = s.ta ? r0 : r0 * s.k;  // elements
      v.prim.execute(strm, {{DNNL_ARG_SRC, memory(v.a, eng, const_cast<char *>(a) + a_off * s.esize)},
                            {DNNL_ARG_WEIGHTS, memory(v.b, eng, const_cast<char *>(b))},
                            {DNNL_ARG_DST, memory(v.y, eng, y + r0 * s.n * s.esize)},
                            {DNNL_ARG_SCRATCHPAD, memory(v.scratch, eng, v.scratch.get_size() ? slot : nullptr)}});
      strm.wait();
    } catch (const std::exception &e) {
      std::lock_guard<std::mutex> lock(mu);
      if (error.empty()) error = e.what();
    }
  }
  static void part_fn(void *ctx, int64_t p0, int64_t p1, int) {
    omp_set_num_threads(1);  // a pool worker: oneDNN stays on this thread
    for (int64_t p = p0; p < p1; ++p) static_cast<Call *>(ctx)->run(p);
  }
};

ctn_status dnnl_matmul_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const DnnlMatmulState *>(state);
  Call call;
  call.st = st;
  call.a = desc_ptr<const char>(args->inputs[0]);
  call.b = desc_ptr<const char>(args->inputs[1]);
  call.y = desc_ptr<char>(args->outputs[0]);
  call.ws = dnnl_workspace(args->workspace);
  dnnl_run_parts(*st->be, st->parts, Call::part_fn, &call);
  if (!call.error.empty())
    return st->host->set_error(CTN_ERR_INTERNAL, "cpu matmul (oneDNN, %s): %s", ctn_desc_dtype_name(args->inputs[0].dtype),
                               call.error.c_str());
  return CTN_OK;
}

}  // namespace

bool make_onednn_matmul_half(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, std::string *why) {
  bool fused = false;
  const int32_t dt = sig->inputs[0].dtype;
  if (!is_matmul_op(sig->op, &fused) || fused || !ctn_desc_is_half(dt) || sig->inputs[1].dtype != dt ||
      sig->output->dtype != dt) {
    *why = "not a plain 16-bit matmul";
    return false;
  }
  MatmulDims d = matmul_dims(sig);
  fold_batches(d);
  if (d.batches != 1 || d.m == 0 || d.n == 0 || d.k == 0) {
    *why = "batched or empty";
    return false;
  }
  return dnnl_make(why, [&](int caller_threads) {
    auto st = new_state<DnnlMatmulState>(be);
    st->m = d.m, st->n = d.n, st->k = d.k, st->ta = d.ta;
    // Parts of at least 16 rows.
    st->parts = std::max<int64_t>(1, std::min<int64_t>(be->num_threads.load(), d.m / 16));
    const int64_t lo = d.m / st->parts, hi = (d.m + st->parts - 1) / st->parts;
    const auto mdt = dt == CTN_BF16 ? memory::data_type::bf16 : memory::data_type::f16;
    dnnl_build_primitives(caller_threads, [&] {
      st->v[0] = make_part(lo, d, mdt);
      if (hi != lo) st->v[1] = make_part(hi, d, mdt);
    });
    st->slot = dnnl_align_up(std::max(st->v[0].scratch.get_size(), st->v[1].rows ? st->v[1].scratch.get_size() : 0));
    const size_t slot = st->slot;
    const std::string impl = st->v[0].impl;  // a reference implementation: slower than the f32 GEMM
    return dnnl_kernel_set(be, out, dnnl_matmul_kernel, std::move(st), slot, impl, why);
  });
}

}  // namespace ctn_cpu

#else  // !CTN_CPU_HAVE_DNNL

namespace ctn_cpu {
bool make_onednn_matmul_half(Backend *, const ctn_op_signature *, ctn_kernel *, std::string *why) {
  *why = "oneDNN is not built in";
  return false;
}
}  // namespace ctn_cpu

#endif
