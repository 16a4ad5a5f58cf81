// Integer matmul and convolution (matmul_integer, qlinear_matmul, conv2d_integer,
// qlinear_conv2d): the operands less their zero points are packed as int16 (igemm.h's layout;
// a convolution's input through im2col, its padding a real zero), igemm's micro-kernel sums the
// products in i32 per 4 x 64 tile, and the tile's epilogue stores the sums (i32) or requantises
// them: saturate(round_half_even(f32(acc + bias) * f32(scale_a * scale_b / scale_y)) + zp_y),
// the formula of onnxruntime's QLinearConv / QLinearMatMul.
#include <algorithm>
#include <vector>

#include "cpu_backend.h"
#include "igemm.h"
#include "k_quant.h"

namespace ctn_cpu {
namespace {

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// ---- epilogue ------------------------------------------------------------------------------------

struct Epilogue {
  const float *mult = nullptr;  // requantisation multipliers, per row or per column
  bool by_row = true;
  const int32_t *bias = nullptr;  // per row or per column, as mult
  bool relu = false;
  int32_t zp = 0;
  void *y = nullptr;  // element (m, n) of the current product at y[m * ldy + n]
  int64_t ldy = 0;
};

using StoreFn = void (*)(const Epilogue &e, const int32_t *acc, int64_t m0, int64_t mb, int64_t n0, int64_t nb);

void store_i32(const Epilogue &e, const int32_t *acc, int64_t m0, int64_t mb, int64_t n0, int64_t nb) {
  auto *y = static_cast<int32_t *>(e.y);
  for (int64_t i = 0; i < mb; ++i) std::copy(acc + i * kIgNr, acc + i * kIgNr + nb, y + (m0 + i) * e.ldy + n0);
}

template <class Q>
void store_q(const Epilogue &e, const int32_t *acc, int64_t m0, int64_t mb, int64_t n0, int64_t nb) {
  Q *y = static_cast<Q *>(e.y);
  for (int64_t i = 0; i < mb; ++i) {
    const int64_t m = m0 + i;
    const int32_t *a = acc + i * kIgNr;
    Q *row = y + m * e.ldy + n0;
    const float *mc = e.mult + n0;
    const int32_t *bc = e.bias + n0;
    const float mr = e.by_row ? e.mult[m] : 0.0f;
    const uint32_t br = e.by_row ? static_cast<uint32_t>(e.bias[m]) : 0u;
    for (int64_t j = 0; j < nb; ++j) {
      const uint32_t b = e.by_row ? br : static_cast<uint32_t>(bc[j]);
      float f = static_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(a[j]) + b)) * (e.by_row ? mr : mc[j]);
      if (e.relu) f = std::max(f, 0.0f);
      row[j] = saturate_round<Q>(f, e.zp);
    }
  }
}

StoreFn store_for(int32_t dtype) {
  return dtype == CTN_U8 ? store_q<uint8_t> : dtype == CTN_I8 ? store_q<int8_t> : store_i32;
}

// ---- the product, tile by tile -------------------------------------------------------------------

struct GemmJob {
  IgemmOperands op;
  int64_t n = 0;  // valid columns of B
  IgemmTileFn tile = nullptr;
  StoreFn store = nullptr;
  const Epilogue *e = nullptr;
  int64_t mblocks = 0;
  void range(int64_t a, int64_t b) const {
    alignas(64) int32_t acc[kIgMr * kIgNr];
    for (int64_t t = a; t < b; ++t) {
      const int64_t m0 = (t % mblocks) * kIgMr, n0 = (t / mblocks) * kIgNr;
      const int64_t mb = std::min(kIgMr, op.m - m0), nb = std::min(kIgNr, n - n0);
      tile(op, m0, mb, n0, acc);
      store(*e, acc, m0, mb, n0, nb);
    }
  }
  static void part(void *ctx, int64_t a, int64_t b, int) { static_cast<const GemmJob *>(ctx)->range(a, b); }
};

// Runs over the tiles, panel-major (the threads' tiles share B panels); parallel when the
// product is large enough to pay for waking the pool.
void run_gemm(Backend *be, GemmJob &job) {
  job.mblocks = (job.op.m + kIgMr - 1) / kIgMr;
  const int64_t tasks = job.mblocks * (job.op.ldb / kIgNr);
  const int64_t work = job.op.m * job.op.ldb * job.op.kp2;
  if (tasks > 1 && work >= 16 * kParallelThreshold && be->pool->size() > 1)
    be->pool->parallel_for(tasks, 1, GemmJob::part, &job);
  else
    job.range(0, tasks);
}

// Parallel over [0, n) when n * cost is large enough.
template <class F>
void for_range(Backend *be, int64_t n, int64_t cost, F &&f) {
  struct Ctx {
    F *f;
    static void part(void *c, int64_t a, int64_t b, int) { (*static_cast<Ctx *>(c)->f)(a, b); }
  } ctx{&f};
  if (n > 1 && n * cost >= kParallelThreshold && be->pool->size() > 1)
    be->pool->parallel_for(n, 1, Ctx::part, &ctx);
  else
    f(0, n);
}

// ---- packing -------------------------------------------------------------------------------------

// A rows [m0, m0 + rows) of src [., k] (ld k) less zp(row) -> dst [rows][2 * kp2].
template <class S>
void pack_a(const S *src, int64_t k, int64_t kp2, int64_t rows, const ctn_tensor_desc &zp, bool zp_per_row,
            int64_t zp_row0, int16_t *dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t z = int_at(zp, zp_per_row ? zp_row0 + r : 0);
    int16_t *d = dst + r * 2 * kp2;
    for (int64_t j = 0; j < k; ++j) d[j] = static_cast<int16_t>(src[r * k + j] - z);
    for (int64_t j = k; j < 2 * kp2; ++j) d[j] = 0;
  }
}

// B [k, n] (ld n) less zp(column) -> pairs [kp2][ldb][2], rows [2 * p0, 2 * p1).
template <class S>
void pack_b(const S *src, int64_t k, int64_t n, int64_t ldb, const ctn_tensor_desc &zp, int64_t p0, int64_t p1,
            int16_t *dst) {
  const bool per_col = desc_numel(zp) > 1;
  for (int64_t p = p0; p < p1; ++p) {
    int16_t *d = dst + p * ldb * 2;
    std::fill(d, d + ldb * 2, int16_t{0});
    for (int64_t h = 0; h < 2 && 2 * p + h < k; ++h) {
      const S *s = src + (2 * p + h) * n;
      for (int64_t j = 0; j < n; ++j) d[2 * j + h] = static_cast<int16_t>(s[j] - int_at(zp, per_col ? j : 0));
    }
  }
}

}  // namespace

// ---- matmul_integer, qlinear_matmul --------------------------------------------------------------

namespace {

struct MatmulState : KernelBase {
  bool qlinear = false;
  int64_t m = 0, k = 0, n = 0, kp2 = 0, ldb = 0;
  std::vector<int64_t> a_off, b_off;  // per output matrix: the a and b matrix it reads (elements)
  bool fold = false;                  // b is one matrix: a's batches are rows of one product
  int32_t a_dt = 0, b_dt = 0, y_dt = 0;
  IgemmTileFn tile = nullptr;
  uint64_t a_bytes = 0, b_bytes = 0;
};

template <class SA, class SB>
ctn_status matmul_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const MatmulState *>(state);
  const ctn_tensor_desc *in = args->inputs;
  const bool q = st->qlinear;
  const ctn_tensor_desc &a = in[0], &b = in[q ? 3 : 1], &za = in[2], &zb = in[q ? 5 : 3];
  auto *ws = static_cast<char *>(args->workspace);
  auto *pa = reinterpret_cast<int16_t *>(ws);
  auto *pb = reinterpret_cast<int16_t *>(ws + st->a_bytes);
  auto *mult = reinterpret_cast<float *>(ws + st->a_bytes + st->b_bytes);
  Epilogue e;
  e.mult = mult;
  e.by_row = false;
  e.ldy = st->n;
  if (q) {
    const float sa = *desc_ptr<const float>(in[1]), sy = *desc_ptr<const float>(in[6]);
    const float *sb = desc_ptr<const float>(in[4]);
    const bool per_col = desc_numel(in[4]) > 1;
    for (int64_t j = 0; j < st->n; ++j) mult[j] = sa * sb[per_col ? j : 0] / sy;
    e.zp = int_at(in[7], 0);
    e.bias = desc_ptr<const int32_t>(in[8]);
  }
  const int64_t rows = st->fold ? st->m * static_cast<int64_t>(st->a_off.size()) : st->m;
  const int64_t count = st->fold ? 1 : static_cast<int64_t>(st->a_off.size());
  const size_t ysz = dtype_size(st->y_dt);
  for (int64_t t = 0; t < count; ++t) {
    const SA *sa = desc_ptr<const SA>(a) + st->a_off[static_cast<size_t>(t)];
    const SB *sb = desc_ptr<const SB>(b) + st->b_off[static_cast<size_t>(t)];
    for_range(st->be, rows, st->k, [&](int64_t r0, int64_t r1) {
      pack_a(sa + r0 * st->k, st->k, st->kp2, r1 - r0, za, false, 0, pa + r0 * 2 * st->kp2);
    });
    for_range(st->be, st->kp2, 2 * st->ldb, [&](int64_t p0, int64_t p1) {
      pack_b(sb, st->k, st->n, st->ldb, zb, p0, p1, pb);
    });
    e.y = static_cast<char *>(args->outputs[0].data) + args->outputs[0].offset +
          static_cast<size_t>(t * st->m * st->n) * ysz;
    GemmJob job{{pa, pb, rows, st->kp2, st->ldb}, st->n, st->tile, store_for(st->y_dt), &e};
    run_gemm(st->be, job);
  }
  return CTN_OK;
}

// Batch offsets of a [..., M, K] and b [..., K, N] for every matrix of y (numpy broadcasting).
void batch_offsets(const ctn_tensor_desc &a, const ctn_tensor_desc &b, const ctn_tensor_desc &y, MatmulState *st) {
  const uint32_t yb = y.ndim - 2;
  int64_t total = 1;
  for (uint32_t d = 0; d < yb; ++d) total *= y.shape[d];
  for (int64_t t = 0; t < total; ++t) {
    int64_t rem = t, ao = 0, bo = 0, as = st->m * st->k, bs = st->k * st->n;
    for (uint32_t d = yb; d-- > 0;) {
      const int64_t i = rem % y.shape[d];
      rem /= y.shape[d];
      const int64_t da = static_cast<int64_t>(d) - static_cast<int64_t>(yb) + static_cast<int64_t>(a.ndim) - 2;
      const int64_t db = static_cast<int64_t>(d) - static_cast<int64_t>(yb) + static_cast<int64_t>(b.ndim) - 2;
      if (da >= 0) {
        if (a.shape[da] != 1) ao += i * as;
        as *= a.shape[da];
      }
      if (db >= 0) {
        if (b.shape[db] != 1) bo += i * bs;
        bs *= b.shape[db];
      }
    }
    st->a_off.push_back(ao);
    st->b_off.push_back(bo);
  }
  int64_t b_mats = 1;
  for (uint32_t d = 0; d + 2 < b.ndim; ++d) b_mats *= b.shape[d];
  int64_t a_mats = 1;
  for (uint32_t d = 0; d + 2 < a.ndim; ++d) a_mats *= a.shape[d];
  st->fold = b_mats == 1 && a_mats == total;
}

template <class SA>
ctn_kernel_fn matmul_fn(int32_t b_dt) {
  return b_dt == CTN_U8 ? matmul_kernel<SA, uint8_t> : matmul_kernel<SA, int8_t>;
}

}  // namespace

ctn_status make_int_matmul(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool qlinear) {
  const ctn_tensor_desc &a = sig->inputs[0], &b = sig->inputs[qlinear ? 3 : 1], &y = *sig->output;
  auto st = new_state<MatmulState>(be);
  st->qlinear = qlinear;
  st->m = a.shape[a.ndim - 2];
  st->k = a.shape[a.ndim - 1];
  st->n = b.shape[b.ndim - 1];
  st->kp2 = (st->k + 1) / 2;
  st->ldb = round_up(std::max<int64_t>(st->n, 1), kIgNr);
  st->y_dt = y.dtype;
  st->tile = igemm_tile_select(be->gemm_isa.load()->name, nullptr);
  batch_offsets(a, b, y, st.get());
  const int64_t rows = st->fold ? st->m * static_cast<int64_t>(st->a_off.size()) : st->m;
  st->a_bytes = static_cast<uint64_t>(round_up(rows * 2 * st->kp2 * 2, 64));
  st->b_bytes = static_cast<uint64_t>(round_up(st->kp2 * st->ldb * 4, 64));
  const uint64_t ws = st->a_bytes + st->b_bytes + static_cast<uint64_t>(st->n) * sizeof(float);
  ctn_kernel_fn fn = a.dtype == CTN_U8 ? matmul_fn<uint8_t>(b.dtype) : matmul_fn<int8_t>(b.dtype);
  kernel_set(out, fn, st.release(), 0, ws);
  return CTN_OK;
}

// ---- conv2d_integer, qlinear_conv2d --------------------------------------------------------------

namespace {

struct ConvState : KernelBase {
  bool qlinear = false;
  int64_t n = 0, c = 0, h = 0, w = 0, o = 0, kh = 0, kw = 0, ho = 0, wo = 0;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  int64_t kg = 0, kp2 = 0, ldb = 0;  // per group: K = C/G * KH * KW
  bool relu = false;
  int32_t y_dt = 0;
  IgemmTileFn tile = nullptr;
  uint64_t a_bytes = 0, b_bytes = 0;
};

// im2col of one image's group (x less its zero point; padding 0) into igemm's pairs layout,
// pair rows [p0, p1).
template <class S>
void pack_im2col(const ConvState &st, const S *x, int32_t zx, int64_t p0, int64_t p1, int16_t *dst) {
  const int64_t khw = st.kh * st.kw;
  for (int64_t p = p0; p < p1; ++p) {
    int16_t *d = dst + p * st.ldb * 2;
    std::fill(d, d + st.ldb * 2, int16_t{0});
    for (int64_t hh = 0; hh < 2 && 2 * p + hh < st.kg; ++hh) {
      const int64_t k = 2 * p + hh, ci = k / khw, ki = (k % khw) / st.kw, kj = k % st.kw;
      const S *plane = x + ci * st.h * st.w;
      for (int64_t oy = 0; oy < st.ho; ++oy) {
        const int64_t iy = oy * st.sh - st.ph + ki * st.dh;
        if (iy < 0 || iy >= st.h) continue;
        const S *row = plane + iy * st.w;
        int16_t *drow = d + oy * st.wo * 2 + hh;
        for (int64_t ox = 0; ox < st.wo; ++ox) {
          const int64_t ix = ox * st.sw - st.pw + kj * st.dw;
          if (ix >= 0 && ix < st.w) drow[2 * ox] = static_cast<int16_t>(row[ix] - zx);
        }
      }
    }
  }
}

// The epilogue's parameters for one call: multipliers x_scale * w_scale[o] / y_scale, bias,
// the output zero point.
void conv_epilogue(const ConvState &st, const ctn_tensor_desc *in, float *mult, Epilogue *e) {
  if (!st.qlinear) return;
  const float sx = *desc_ptr<const float>(in[1]), sy = *desc_ptr<const float>(in[6]);
  const float *sw = desc_ptr<const float>(in[4]);
  const bool per_o = desc_numel(in[4]) > 1;
  for (int64_t o = 0; o < st.o; ++o) mult[o] = sx * sw[per_o ? o : 0] / sy;
  e->mult = mult;
  e->bias = desc_ptr<const int32_t>(in[8]);
  e->relu = st.relu;
  e->zp = int_at(in[7], 0);
}

template <class SX, class SW>
ctn_status conv_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const ConvState *>(state);
  const ctn_tensor_desc *in = args->inputs;
  const bool q = st->qlinear;
  const ctn_tensor_desc &x = in[0], &w = in[q ? 3 : 1], &zx = in[2], &zw = in[q ? 5 : 3];
  auto *ws = static_cast<char *>(args->workspace);
  auto *pa = reinterpret_cast<int16_t *>(ws);
  auto *pb = reinterpret_cast<int16_t *>(ws + st->a_bytes);
  auto *mult = reinterpret_cast<float *>(ws + st->a_bytes + st->b_bytes);
  Epilogue e;
  conv_epilogue(*st, in, mult, &e);
  const int64_t og = st->o / st->groups, cg = st->c / st->groups, npix = st->ho * st->wo;
  const bool zw_per_o = desc_numel(zw) > 1;
  for_range(st->be, st->o, st->kg, [&](int64_t r0, int64_t r1) {
    pack_a(desc_ptr<const SW>(w) + r0 * st->kg, st->kg, st->kp2, r1 - r0, zw, zw_per_o, r0, pa + r0 * 2 * st->kp2);
  });
  const int32_t zxv = int_at(zx, 0);
  const size_t ysz = dtype_size(st->y_dt);
  char *y0 = static_cast<char *>(args->outputs[0].data) + args->outputs[0].offset;
  for (int64_t img = 0; img < st->n; ++img)
    for (int64_t g = 0; g < st->groups; ++g) {
      const SX *xg = desc_ptr<const SX>(x) + (img * st->c + g * cg) * st->h * st->w;
      for_range(st->be, st->kp2, 2 * npix, [&](int64_t p0, int64_t p1) { pack_im2col(*st, xg, zxv, p0, p1, pb); });
      Epilogue eg = e;
      if (eg.mult) eg.mult += g * og;
      if (eg.bias) eg.bias += g * og;
      eg.y = y0 + static_cast<size_t>((img * st->o + g * og) * npix) * ysz;
      eg.ldy = npix;
      GemmJob job{{pa + g * og * 2 * st->kp2, pb, og, st->kp2, st->ldb}, npix, st->tile, store_for(st->y_dt), &eg};
      run_gemm(st->be, job);
    }
  return CTN_OK;
}

template <class SX>
ctn_kernel_fn conv_fn(int32_t w_dt) {
  return w_dt == CTN_U8 ? conv_kernel<SX, uint8_t> : conv_kernel<SX, int8_t>;
}

}  // namespace

ctn_status make_int_conv(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, bool qlinear) {
  const ctn_tensor_desc &x = sig->inputs[0], &w = sig->inputs[qlinear ? 3 : 1], &y = *sig->output;
  const int64_t *at = sig->attrs->i;
  auto st = new_state<ConvState>(be);
  st->qlinear = qlinear;
  st->n = x.shape[0], st->c = x.shape[1], st->h = x.shape[2], st->w = x.shape[3];
  st->o = w.shape[0], st->kh = w.shape[2], st->kw = w.shape[3];
  st->ho = y.shape[2], st->wo = y.shape[3];
  st->sh = at[0], st->sw = at[1], st->ph = at[2], st->pw = at[3], st->dh = at[4], st->dw = at[5], st->groups = at[6];
  st->relu = qlinear && at[7] == CTN_ACT_RELU;
  st->kg = w.shape[1] * st->kh * st->kw;
  st->kp2 = (st->kg + 1) / 2;
  st->ldb = round_up(std::max<int64_t>(st->ho * st->wo, 1), kIgNr);
  st->y_dt = y.dtype;
  st->tile = igemm_tile_select(be->gemm_isa.load()->name, nullptr);
  st->a_bytes = static_cast<uint64_t>(round_up(st->o * 2 * st->kp2 * 2, 64));
  st->b_bytes = static_cast<uint64_t>(round_up(st->kp2 * st->ldb * 4, 64));
  const uint64_t ws = st->a_bytes + st->b_bytes + static_cast<uint64_t>(st->o) * sizeof(float);
  ctn_kernel_fn fn = x.dtype == CTN_U8 ? conv_fn<uint8_t>(w.dtype) : conv_fn<int8_t>(w.dtype);
  kernel_set(out, fn, st.release(), 0, ws);
  return CTN_OK;
}

}  // namespace ctn_cpu
