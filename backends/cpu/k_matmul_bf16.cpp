// bf16 matmul and matmul_bias_act on the own bf16 GEMM (gemm_bf16.h): the operands are packed
// straight from their bf16 storage, the products summed in f32 into the call's workspace, and
// each part of the result gets its bias and activation in f32 and is rounded to bf16 (nearest
// even) by the participant that computed it. Only where the CPU has AVX512_BF16 and the backend
// runs its AVX-512 GEMM; elsewhere bf16 matmuls take the f32 GEMM between conversions
// (k_widen.cpp).
#include <chutney/desc.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_backend.h"
#include "half.h"

namespace ctn_cpu {
namespace {

struct Bf16MatmulState : KernelBase, MatmulShape {
  const Bf16Gemm *v = nullptr;
  const HalfIsa *hi = nullptr;
};

// One batch's C = A B, split over rows (or columns when there are more of them) into one block
// per pool participant.
struct Bf16MatmulCall {
  const Bf16MatmulState *st;
  const uint16_t *a, *b, *bias;
  uint16_t *y;
  float *acc;  // [m, n] f32 sums
  bool split_n;
  int64_t parts;

  int64_t bound(int64_t p) const {
    const int64_t extent = split_n ? st->n : st->m, tile = split_n ? st->v->nr : st->v->mr;
    if (p >= parts) return extent;
    return std::min(extent, (extent * p / parts + tile - 1) / tile * tile);
  }

  void epilogue(float *row, int64_t j0, int64_t j1) const {
    if (st->act < 0) return;
    for (int64_t j = j0; j < j1; ++j) {
      float v = row[j] + ctn_desc_bf16_to_f32(bias[j]);
      if (st->act == CTN_ACT_RELU) v = v > 0.0f ? v : 0.0f;
      else if (st->act == CTN_ACT_GELU) v = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752440f));
      row[j] = v;
    }
  }

  void run(int64_t p) const {
    const Bf16MatmulState &s = *st;
    const int64_t lo = bound(p), hi = bound(p + 1);
    if (lo >= hi) return;
    const int64_t i0 = split_n ? 0 : lo, i1 = split_n ? s.m : hi;
    const int64_t j0 = split_n ? lo : 0, j1 = split_n ? hi : s.n;
    const Bf16Operand oa{a + i0 * s.rsa, false, s.rsa, s.csa}, ob{b + j0 * s.csb, false, s.rsb, s.csb};
    gemm_bf16_serial(*s.v, gemm_bf16_scratch(), i1 - i0, j1 - j0, s.k, oa, ob, acc + i0 * s.n + j0, s.n, false);
    for (int64_t i = i0; i < i1; ++i) {
      float *row = acc + i * s.n;
      epilogue(row, j0, j1);
      s.hi->f32_to_bf16(row + j0, y + i * s.n + j0, j1 - j0);
    }
  }
  static void part_fn(void *ctx, int64_t p0, int64_t p1, int) {
    for (int64_t p = p0; p < p1; ++p) static_cast<const Bf16MatmulCall *>(ctx)->run(p);
  }
};

ctn_status bf16_matmul_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const Bf16MatmulState *>(state);
  Backend &be = *st->be;
  if (!gemm_scratch_ready()) return st->host->set_error(CTN_ERR_OUT_OF_MEMORY, "cpu matmul (bf16): no memory for GEMM scratch");
  if (st->m == 0 || st->n == 0 || st->batches == 0) return CTN_OK;
  Bf16MatmulCall call{st, desc_ptr<const uint16_t>(args->inputs[0]), desc_ptr<const uint16_t>(args->inputs[1]),
                      st->act >= 0 ? desc_ptr<const uint16_t>(args->inputs[2]) : nullptr, nullptr,
                      static_cast<float *>(args->workspace), st->n >= st->m, 1};
  const int threads = be.pool ? be.pool->size() : 1;
  const int64_t extent = call.split_n ? st->n : st->m, tile = call.split_n ? st->v->nr : st->v->mr;
  // Below ~1 MFLOP a fork costs more than it saves.
  if (threads > 1 && st->m * st->n * st->k >= 64 * 64 * 64)
    call.parts = std::max<int64_t>(1, std::min<int64_t>(threads, (extent + tile - 1) / tile));
  const auto *a = call.a, *b = call.b;
  uint16_t *y = desc_ptr<uint16_t>(args->outputs[0]);
  for (int64_t i = 0; i < st->batches; ++i) {
    int64_t oa, ob;
    st->dims.offsets(i, &oa, &ob);
    call.a = a + oa;
    call.b = b + ob;
    call.y = y + i * st->c_step;
    if (call.parts > 1) be.pool->parallel_for(call.parts, 1, Bf16MatmulCall::part_fn, &call);
    else Bf16MatmulCall::part_fn(&call, 0, 1, 0);
  }
  return CTN_OK;
}

}  // namespace

const Bf16Gemm *bf16_gemm_for(const Backend &be) {
  const GemmIsa *isa = be.gemm_isa.load();
  if (!isa || std::strcmp(isa->name, "avx512") != 0) return nullptr;
  return gemm_bf16_variant("avx512_bf16");
}

bool make_bf16_matmul(Backend *be, const ctn_op_signature *sig, ctn_kernel *out) {
  bool fused = false;
  const Bf16Gemm *v = bf16_gemm_for(*be);
  if (!v || !is_matmul_op(sig->op, &fused) || sig->output->dtype != CTN_BF16) return false;
  for (uint32_t i = 0; i < sig->n_inputs; ++i)
    if (sig->inputs[i].dtype != CTN_BF16) return false;
  MatmulDims d = matmul_dims(sig);
  if (fused && (d.act != CTN_ACT_NONE && d.act != CTN_ACT_RELU && d.act != CTN_ACT_GELU)) return false;
  auto st = new_state<Bf16MatmulState>(be);
  st->v = v;
  st->hi = &half_for("avx512");
  st->set_shape(d, fused, *sig->output);
  const uint64_t ws = static_cast<uint64_t>(st->m * st->n) * sizeof(float);
  kernel_set(out, bf16_matmul_kernel, st.release(), 0, ws);
  return true;
}

}  // namespace ctn_cpu
