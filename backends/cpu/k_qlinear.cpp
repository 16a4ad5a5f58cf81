// Integer matmul and convolution (matmul_integer, qlinear_matmul, conv2d_integer,
// qlinear_conv2d). The products run in igemm.h's micro-kernels, 4 x 64 tiles of i32 sums: u8 x s8
// with VNNI for convolutions whose weights have zero points 0 (the input's zero point subtracted
// through the weights' row sums), otherwise the operands less their zero points as int16 pairs
// (a convolution's input through im2col, its padding a real zero). Depthwise convolutions and
// matmuls of at most 4 rows have direct kernels. Each tile's epilogue stores the sums (i32) or
// requantises them: saturate(round_half_even(f32(acc + bias) * f32(scale_a * scale_b / scale_y))
// + zp_y), the formula of onnxruntime's QLinearConv / QLinearMatMul.
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu_backend.h"
#include "igemm.h"
#include "k_quant.h"
#include "prep_slot.h"

namespace ctn_cpu {
namespace {

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// The instance of a kernel for the two 8-bit operand dtypes (u8 or i8 each).
ctn_kernel_fn pick_kernel(int32_t a_dt, int32_t b_dt, ctn_kernel_fn uu, ctn_kernel_fn ui, ctn_kernel_fn iu,
                          ctn_kernel_fn ii) {
  if (a_dt == CTN_U8) return b_dt == CTN_U8 ? uu : ui;
  return b_dt == CTN_U8 ? iu : ii;
}

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

// The sums, plus e.bias[row] where set (the u8 x s8 kernel's zero-point correction).
void store_i32(const Epilogue &e, const int32_t *acc, int64_t m0, int64_t mb, int64_t n0, int64_t nb) {
  auto *y = static_cast<int32_t *>(e.y);
  for (int64_t i = 0; i < mb; ++i) {
    const uint32_t b = e.bias ? static_cast<uint32_t>(e.bias[m0 + i]) : 0u;
    const int32_t *a = acc + i * kIgNr;
    int32_t *row = y + (m0 + i) * e.ldy + n0;
    for (int64_t j = 0; j < nb; ++j) row[j] = static_cast<int32_t>(static_cast<uint32_t>(a[j]) + b);
  }
}

// Branch-free per element (the compiler vectorises it): relu is a lower bound of 0 before
// rounding, which commutes with saturating to the integer bounds less the zero point.
template <class Q>
inline __attribute__((always_inline)) void store_q_body(const Epilogue &e, const int32_t *acc, int64_t m0, int64_t mb, int64_t n0, int64_t nb) {
  Q *y = static_cast<Q *>(e.y);
  float lo = static_cast<float>(qmin<Q>() - e.zp);
  const float hi = static_cast<float>(qmax<Q>() - e.zp);
  if (e.relu) lo = std::max(lo, 0.0f);
  const int32_t zp = e.zp;
  for (int64_t i = 0; i < mb; ++i) {
    const int64_t m = m0 + i;
    const int32_t *a = acc + i * kIgNr;
    Q *row = y + m * e.ldy + n0;
    if (e.by_row) {
      const float mr = e.mult[m];
      const uint32_t br = static_cast<uint32_t>(e.bias[m]);
      for (int64_t j = 0; j < nb; ++j) {
        const float f = static_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(a[j]) + br)) * mr;
        row[j] = static_cast<Q>(round_clamped(std::max(lo, std::min(hi, f))) + zp);
      }
    } else {
      const float *mc = e.mult + n0;
      const int32_t *bc = e.bias + n0;
      for (int64_t j = 0; j < nb; ++j) {
        const float f = static_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(a[j]) + static_cast<uint32_t>(bc[j]))) * mc[j];
        row[j] = static_cast<Q>(round_clamped(std::max(lo, std::min(hi, f))) + zp);
      }
    }
  }
}

// The requantising stores compiled per ISA (target attributes; the body is inlined into each).
#define CTN_QSTORE_VARIANT(suffix, ...)                                                                  \
  __VA_ARGS__ void store_u8_##suffix(const Epilogue &e, const int32_t *acc, int64_t m0, int64_t mb, int64_t n0, \
                                     int64_t nb) {                                                      \
    store_q_body<uint8_t>(e, acc, m0, mb, n0, nb);                                                      \
  }                                                                                                     \
  __VA_ARGS__ void store_i8_##suffix(const Epilogue &e, const int32_t *acc, int64_t m0, int64_t mb, int64_t n0, \
                                     int64_t nb) {                                                      \
    store_q_body<int8_t>(e, acc, m0, mb, n0, nb);                                                       \
  }
CTN_QSTORE_VARIANT(generic)
#if defined(__x86_64__)
CTN_QSTORE_VARIANT(avx2, __attribute__((target("avx2,fma"))))

// 16 sums (mask k) plus b, times mul, clamped to [lo, hi], rounded half to even (in the
// conversion itself: the value is in range), plus the zero point, stored as 8-bit.
template <class Q>
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void store16_q(
    const int32_t *a, __m512i b, __m512 mul, __mmask16 k, Q *o, __m512 lo, __m512 hi, __m512i zp) {
  // The maskz forms with an all-ones mask: gcc 12 warns (maybe-uninitialized) about the plain
  // forms' _mm512_undefined_ps.
  const __mmask16 all = 0xFFFF;
  __m512 f = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(all, _mm512_add_epi32(_mm512_maskz_loadu_epi32(k, a), b)), mul);
  f = _mm512_maskz_max_ps(all, _mm512_maskz_min_ps(all, f, hi), lo);
  const __m512i r = _mm512_maskz_cvt_roundps_epi32(all, f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  _mm512_mask_cvtepi32_storeu_epi8(o, k, _mm512_add_epi32(r, zp));
}

// AVX-512: 16 sums per step with masked tails (rows of a depthwise plane are short), the same
// arithmetic as store_q_body (i32 add, f32 convert and multiply, clamp, round half to even); the
// per-row case (a convolution) broadcasts its bias and multiplier once per row.
template <class Q>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void store_q_avx512(const Epilogue &e, const int32_t *acc,
                                                                          int64_t m0, int64_t mb, int64_t n0, int64_t nb) {
  float lo = static_cast<float>(qmin<Q>() - e.zp);
  if (e.relu) lo = std::max(lo, 0.0f);
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(static_cast<float>(qmax<Q>() - e.zp));
  const __m512i vzp = _mm512_set1_epi32(e.zp);
  const __mmask16 all = 0xFFFF;
  const int64_t full = nb / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (nb - full)) - 1);
  for (int64_t i = 0; i < mb; ++i) {
    const int64_t m = m0 + i;
    const int32_t *a = acc + i * kIgNr;
    Q *row = static_cast<Q *>(e.y) + m * e.ldy + n0;
    if (e.by_row) {  // one bias and multiplier per row (a convolution's output channel)
      const __m512i b = _mm512_set1_epi32(e.bias[m]);
      const __m512 mul = _mm512_set1_ps(e.mult[m]);
      for (int64_t j = 0; j < full; j += 16) store16_q(a + j, b, mul, all, row + j, vlo, vhi, vzp);
      if (tail) store16_q(a + full, b, mul, tail, row + full, vlo, vhi, vzp);
    } else {
      for (int64_t j = 0; j < full; j += 16)
        store16_q(a + j, _mm512_loadu_si512(e.bias + n0 + j), _mm512_loadu_ps(e.mult + n0 + j), all, row + j, vlo, vhi, vzp);
      if (tail)
        store16_q(a + full, _mm512_maskz_loadu_epi32(tail, e.bias + n0 + full), _mm512_maskz_loadu_ps(tail, e.mult + n0 + full),
                  tail, row + full, vlo, vhi, vzp);
    }
  }
}
void store_u8_avx512(const Epilogue &e, const int32_t *acc, int64_t m0, int64_t mb, int64_t n0, int64_t nb) {
  store_q_avx512<uint8_t>(e, acc, m0, mb, n0, nb);
}
void store_i8_avx512(const Epilogue &e, const int32_t *acc, int64_t m0, int64_t mb, int64_t n0, int64_t nb) {
  store_q_avx512<int8_t>(e, acc, m0, mb, n0, nb);
}
#endif

// The store for the output dtype at the ISA `isa` (the GEMM ISA name).
StoreFn store_for(int32_t dtype, const char *isa) {
  if (dtype == CTN_U8) return CTN_ISA_VARIANT(StoreFn, isa, store_u8);
  if (dtype == CTN_I8) return CTN_ISA_VARIANT(StoreFn, isa, store_i8);
  return store_i32;
}

// ---- the product, tile by tile -------------------------------------------------------------------

// Ops: IgemmOperands or IgemmQ8Operands; Tile: the matching micro-kernel, MR its rows.
template <class Ops, class Tile, int64_t MR = kIgMr>
struct GemmJob {
  Ops op;
  int64_t n = 0;  // valid columns of B
  Tile tile = nullptr;
  StoreFn store = nullptr;
  const Epilogue *e = nullptr;
  int64_t mblocks = 0;
  static constexpr int64_t kMr = MR;
  void range(int64_t a, int64_t b) const {
    alignas(64) int32_t acc[MR * kIgNr];
    for (int64_t t = a; t < b; ++t) {
      const int64_t m0 = (t % mblocks) * MR, n0 = (t / mblocks) * kIgNr;
      const int64_t mb = std::min(MR, op.m - m0), nb = std::min(kIgNr, n - n0);
      tile(op, m0, mb, n0, acc);
      store(*e, acc, m0, mb, n0, nb);
    }
  }
  static void part(void *ctx, int64_t a, int64_t b, int) { static_cast<const GemmJob *>(ctx)->range(a, b); }
};
using Q8Job = GemmJob<IgemmQ8Operands, IgemmQ8TileFn, kIgQ8Mr>;

// Runs over the tiles, panel-major (the threads' tiles share B panels); parallel when the
// product (depth `k` of packed units) is large enough to pay for waking the pool.
template <class Job>
void run_gemm(Backend *be, Job &job, int64_t k) {
  job.mblocks = (job.op.m + Job::kMr - 1) / Job::kMr;
  const int64_t tasks = job.mblocks * (job.op.ldb / kIgNr);
  const int64_t work = job.op.m * job.op.ldb * k;
  if (tasks > 1 && work >= 16 * kParallelThreshold && be->pool->size() > 1)
    be->pool->parallel_for(tasks, 1, Job::part, &job);
  else
    job.range(0, tasks);
}

// Parallel over [0, n) when n * cost is large enough, in at most `slots` parts (0: no limit);
// f(begin, end, part) with part < slots (a workspace slot of its own).
template <class F>
void for_range(Backend *be, int64_t n, int64_t cost, F &&f, int64_t slots = 0) {
  struct Ctx {
    F *f;
    static void part(void *c, int64_t a, int64_t b, int k) { (*static_cast<Ctx *>(c)->f)(a, b, k); }
  } ctx{&f};
  const int64_t grain = slots > 0 ? (n + slots - 1) / slots : 1;
  if (n > 1 && n * cost >= kParallelThreshold && be->pool->size() > 1 && slots != 1)
    be->pool->parallel_for(n, grain, Ctx::part, &ctx);
  else
    f(0, n, 0);
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

// What a matmul's constant inputs give (ABI 1.7), made once: b packed (one b matrix, more than
// kIgMr rows: the tiled path) and the requantisation multipliers.
struct MatmulPrepared {
  std::vector<int16_t> b16;  // b less its zero points, in pairs (pack_b)
  std::vector<float> mult;   // a_scale * b_scale[n] / y_scale
};

struct MatmulState : KernelBase {
  bool qlinear = false;
  int64_t m = 0, k = 0, n = 0, kp2 = 0, ldb = 0;
  std::vector<int64_t> a_off, b_off;  // per output matrix: the a and b matrix it reads (elements)
  bool fold = false;                  // b is one matrix: a's batches are rows of one product
  int32_t a_dt = 0, b_dt = 0, y_dt = 0;
  IgemmTileFn tile = nullptr;
  uint64_t a_bytes = 0, b_bytes = 0;
  bool b_const = false, mult_const = false;  // which of MatmulPrepared's parts prep makes
  PrepSlot<MatmulPrepared> prep;
};

// The requantisation multipliers a_scale * b_scale[n] / y_scale (qlinear_matmul).
void matmul_mult(const MatmulState &st, const ctn_tensor_desc *in, float *mult) {
  const float sa = *desc_ptr<const float>(in[1]), sy = *desc_ptr<const float>(in[6]);
  const float *sb = desc_ptr<const float>(in[4]);
  const bool per_col = desc_numel(in[4]) > 1;
  for (int64_t j = 0; j < st.n; ++j) mult[j] = sa * sb[per_col ? j : 0] / sy;
}

// A few rows (M <= 4): y[m][n] = sum_k (a[m][k] - za) (b[k][n] - zb[n]) as sum_k (a - za) b[k][n]
// - zb[n] sum_k (a - za): per k one vector pass over the columns [n0, n1) of b's row (no
// packing; the sums stay in cache). Compiled per ISA below.
template <class SB>
inline __attribute__((always_inline)) void gemv_axpy_body(int32_t *__restrict acc, const SB *__restrict brow,
                                                          int64_t n, int32_t av) {
  // i32 sums wrap like the tiles' (unsigned arithmetic: no signed overflow for any K).
  for (int64_t j = 0; j < n; ++j)
    acc[j] = static_cast<int32_t>(static_cast<uint32_t>(acc[j]) + static_cast<uint32_t>(static_cast<int32_t>(brow[j]) * av));
}
template <class SB>
using GemvFn = void (*)(int32_t *, const SB *, int64_t, int32_t);
#define CTN_GEMV_VARIANT(suffix, ...)                                                   \
  __VA_ARGS__ void gemv_u8_##suffix(int32_t *acc, const uint8_t *b, int64_t n, int32_t av) { \
    gemv_axpy_body(acc, b, n, av);                                                       \
  }                                                                                      \
  __VA_ARGS__ void gemv_i8_##suffix(int32_t *acc, const int8_t *b, int64_t n, int32_t av) {  \
    gemv_axpy_body(acc, b, n, av);                                                       \
  }
CTN_GEMV_VARIANT(generic)
#if defined(__x86_64__)
CTN_GEMV_VARIANT(avx512, __attribute__((target("avx512f,avx512bw,avx512vl"))))
CTN_GEMV_VARIANT(avx2, __attribute__((target("avx2"))))
#endif

template <class SA, class SB>
void matmul_rows(const MatmulState &st, const SA *a, const SB *b, int64_t rows, const ctn_tensor_desc &za,
                 const ctn_tensor_desc &zb, const Epilogue &e, int32_t *acc) {
  const char *isa = st.be->gemm_isa.load()->name;
  GemvFn<SB> axpy;
  if constexpr (std::is_same_v<SB, uint8_t>)
    axpy = CTN_ISA_VARIANT(GemvFn<SB>, isa, gemv_u8);
  else
    axpy = CTN_ISA_VARIANT(GemvFn<SB>, isa, gemv_i8);
  const StoreFn store = store_for(st.y_dt, isa);
  const int32_t zav = int_at(za, 0);
  const bool zb_per = desc_numel(zb) > 1;
  // Columns in pieces of 64 over the pool; each piece runs every row and every k.
  for_range(st.be, (st.n + kIgNr - 1) / kIgNr, rows * st.k * kIgNr, [&](int64_t c0, int64_t c1, int) {
    const int64_t n0 = c0 * kIgNr, n1 = std::min(st.n, c1 * kIgNr);
    for (int64_t r = 0; r < rows; ++r) {
      int32_t *ar = acc + r * st.n;
      std::fill(ar + n0, ar + n1, 0);
      uint32_t usum = 0;
      for (int64_t k = 0; k < st.k; ++k) {
        const int32_t av = static_cast<int32_t>(a[r * st.k + k]) - zav;
        usum += static_cast<uint32_t>(av);
        if (av != 0) axpy(ar + n0, b + k * st.n + n0, n1 - n0, av);
      }
      for (int64_t j = n0; j < n1; ++j)
        ar[j] = static_cast<int32_t>(static_cast<uint32_t>(ar[j]) -
                                     static_cast<uint32_t>(int_at(zb, zb_per ? j : 0)) * usum);
      store(e, ar + n0, r, 1, n0, n1 - n0);
    }
  });
}

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
  const MatmulPrepared *pp = st->prep.get(in, [&] {
    auto p = std::make_unique<MatmulPrepared>();
    if (st->mult_const) {
      p->mult.resize(static_cast<size_t>(st->n));
      matmul_mult(*st, in, p->mult.data());
    }
    if (st->b_const) {
      p->b16.resize(static_cast<size_t>(st->kp2 * st->ldb * 2));
      pack_b(desc_ptr<const SB>(b), st->k, st->n, st->ldb, zb, 0, st->kp2, p->b16.data());
    }
    return std::unique_ptr<const MatmulPrepared>(std::move(p));
  });
  Epilogue e;
  e.mult = mult;
  e.by_row = false;
  e.ldy = st->n;
  if (q) {
    if (pp && st->mult_const)
      e.mult = pp->mult.data();
    else
      matmul_mult(*st, in, mult);
    e.zp = int_at(in[7], 0);
    e.bias = desc_ptr<const int32_t>(in[8]);
  }
  const int64_t rows = st->fold ? st->m * static_cast<int64_t>(st->a_off.size()) : st->m;
  const int64_t count = st->fold ? 1 : static_cast<int64_t>(st->a_off.size());
  const size_t ysz = dtype_size(st->y_dt);
  for (int64_t t = 0; t < count; ++t) {
    const SA *sa = desc_ptr<const SA>(a) + st->a_off[static_cast<size_t>(t)];
    const SB *sb = desc_ptr<const SB>(b) + st->b_off[static_cast<size_t>(t)];
    e.y = static_cast<char *>(args->outputs[0].data) + args->outputs[0].offset +
          static_cast<size_t>(t * st->m * st->n) * ysz;
    if (rows <= kIgMr) {
      matmul_rows(*st, sa, sb, rows, za, zb, e, reinterpret_cast<int32_t *>(ws));
      continue;
    }
    for_range(st->be, rows, st->k, [&](int64_t r0, int64_t r1, int) {
      pack_a(sa + r0 * st->k, st->k, st->kp2, r1 - r0, za, false, 0, pa + r0 * 2 * st->kp2);
    });
    const int16_t *bpk = pb;
    if (pp && st->b_const)
      bpk = pp->b16.data();
    else
      for_range(st->be, st->kp2, 2 * st->ldb, [&](int64_t p0, int64_t p1, int) {
        pack_b(sb, st->k, st->n, st->ldb, zb, p0, p1, pb);
      });
    GemmJob<IgemmOperands, IgemmTileFn> job{{pa, bpk, rows, st->kp2, st->ldb}, st->n, st->tile, store_for(st->y_dt, st->be->gemm_isa.load()->name), &e};
    run_gemm(st->be, job, st->kp2);
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
  // Constant inputs (ABI 1.7): b packed once where it is one matrix and the product is tiled,
  // the multipliers once where the scales are constants.
  const uint64_t consts = ctn_sig_const_inputs(sig);
  const uint64_t scales = qlinear ? 0x52u : 0u, bparts = qlinear ? 0x28u : 0xAu;  // {1, 4, 6}; {3, 5} or {1, 3}
  bool one_b = true;
  for (int64_t off : st->b_off) one_b = one_b && off == 0;
  st->mult_const = qlinear && (consts & scales) == scales;
  st->b_const = one_b && rows > kIgMr && (consts & bparts) == bparts;
  st->prep.inputs = (st->mult_const ? scales : 0u) | (st->b_const ? bparts : 0u);
  // A packed, or (rows <= 4, matmul_rows) the i32 sums [rows][N].
  st->a_bytes = static_cast<uint64_t>(round_up(std::max(rows * 2 * st->kp2 * 2, rows * st->n * 4), 64));
  st->b_bytes = static_cast<uint64_t>(round_up(st->kp2 * st->ldb * 4, 64));
  const uint64_t ws = st->a_bytes + st->b_bytes + static_cast<uint64_t>(st->n) * sizeof(float);
  ctn_kernel_fn fn = pick_kernel(a.dtype, b.dtype, matmul_kernel<uint8_t, uint8_t>, matmul_kernel<uint8_t, int8_t>,
                                 matmul_kernel<int8_t, uint8_t>, matmul_kernel<int8_t, int8_t>);
  kernel_set(out, fn, st.release(), 0, ws);
  return CTN_OK;
}

// ---- conv2d_integer, qlinear_conv2d --------------------------------------------------------------

namespace {

// What a convolution's constant inputs give, made once: the path, the weights as the path's A
// operand, the per-channel terms of the epilogue.
struct ConvPrepared {
  bool q8 = false;              // the u8 x s8 VNNI path (weights' zero points all 0)
  std::vector<int8_t> a8;       // q8: the weights padded to kq * 4 (empty: K % 4 == 0, w itself)
  std::vector<int16_t> a16;     // int16 path: the weights less their zero points, in pairs
  std::vector<float> mult;      // x_scale * w_scale[o] / y_scale (qlinear)
  std::vector<int32_t> offset;  // q8: bias[o] - x_zp * sum_k w[o][k]
};

struct ConvState : KernelBase {
  bool qlinear = false;
  int64_t n = 0, c = 0, h = 0, w = 0, o = 0, kh = 0, kw = 0, ho = 0, wo = 0;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  int64_t kg = 0, kp2 = 0, kq = 0, ldb = 0;  // per group: K = C/G * KH * KW, in pairs, in quads
  bool relu = false;
  int32_t y_dt = 0;
  IgemmTileFn tile = nullptr;
  IgemmQ8TileFn q8 = nullptr;  // u8 x s8 VNNI, when the CPU has it
  uint64_t a_bytes = 0, b_bytes = 0;
  int64_t slots = 1;          // per-part scratch slots of the workspace (pool size at get_kernel)
  uint64_t slot_bytes = 0;    // 4 bytes per output pixel: 4 im2col rows of u8 or 2 of int16, or i32 sums
  std::vector<int64_t> dw_tap;  // depthwise: where tap (ki, kj) starts in the phases (DwGeom), per tap
  // Stride-1 convolutions on the u8 x s8 path with C/groups a multiple of 4 (wide): x is padded
  // once per call into planes of 4 channels interleaved (hp x wp positions, pitch wp, a quad of
  // channels each), and K ordered tap-major (k = (ki kw + kj) C/g + c; the weights reordered to
  // match), so that B's row of quads (tap, channel quad) is that plane read in place from
  // position ki wp + kj on: no im2col and no interleave. The product runs over ho * wp columns
  // (wo of each wp valid) into a scratch output whose rows are then compacted into y.
  bool wide = false;
  int64_t hp = 0, wp = 0, ldbw = 0, wplane = 0;
  uint64_t pad_bytes = 0, out_bytes = 0;
  // Inputs that are constants of the plan (ctn_sig_const_inputs, ABI 1.7): what they give
  // (ConvPrepared) is made on the first call and reused while their pointers stay the same.
  // mult_const: the scales (qlinear's inputs 1, 4, 6; f32 initializers of an ONNX model are
  // variables unless imported as constants); w_const: the weights, their zero points, x's zero
  // point and the bias (inputs 2, 3, 5, 8; conv2d_integer's 1, 2, 3).
  bool mult_const = false, w_const = false;
  PrepSlot<ConvPrepared> prep;
};


// Tap column kj reads ix = ox * sw + off, inside the image for ox in [lo, hi).
void tap_columns(const ConvState &st, int64_t kj, int64_t *off, int64_t *lo, int64_t *hi) {
  *off = kj * st.dw - st.pw;
  *lo = std::min(st.wo, *off >= 0 ? 0 : (-*off + st.sw - 1) / st.sw);
  *hi = std::max(*lo, std::min(st.wo, st.w - 1 - *off < 0 ? 0 : (st.w - 1 - *off) / st.sw + 1));
}

// Stride 2 on bytes: o[ox] = cv(row[2 ox]) 16 at a time (the even bytes of two vectors, SSE2)
// while the 32 bytes read stay among the `avail` readable ones of the row; returns where it
// stopped.
template <class S, class D, class Conv>
int64_t even_bytes(const S *row, int64_t avail, int64_t ox, int64_t hi, Conv cv, D *o) {
#if defined(__x86_64__)
  const __m128i mask = _mm_set1_epi16(0x00FF), flip = _mm_set1_epi8(static_cast<char>(cv(S{0})));
  for (; ox + 16 <= hi && 2 * ox + 32 <= avail; ox += 16) {
    const __m128i a = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row + 2 * ox)), mask);
    const __m128i b = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row + 2 * ox + 16)), mask);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(o + ox), _mm_xor_si128(_mm_packus_epi16(a, b), flip));
  }
#else
  (void)row, (void)avail, (void)hi, (void)cv, (void)o;
#endif
  return ox;
}

// Row k of one image's im2col matrix [K][Ho * Wo]: conv(x[ci][iy][ix]) for the taps inside the
// image, `pad` for those in the padding.
template <class S, class D, class Conv>
void im2col_row(const ConvState &st, const S *x, int64_t k, D pad, Conv cv, D *out) {
  const int64_t khw = st.kh * st.kw, ci = k / khw, ki = (k % khw) / st.kw, kj = k % st.kw;
  const S *plane = x + ci * st.h * st.w;
  int64_t off, lo, hi;
  tap_columns(st, kj, &off, &lo, &hi);
  for (int64_t oy = 0; oy < st.ho; ++oy) {
    const int64_t iy = oy * st.sh - st.ph + ki * st.dh;
    D *o = out + oy * st.wo;
    if (iy < 0 || iy >= st.h) {
      std::fill(o, o + st.wo, pad);
      continue;
    }
    const S *row = plane + iy * st.w + off;
    std::fill(o, o + lo, pad);
    int64_t ox = lo;
    if (st.sw == 1) {
      for (; ox < hi; ++ox) o[ox] = cv(row[ox]);
    } else {
      if constexpr (sizeof(S) == 1 && sizeof(D) == 1)
        if (st.sw == 2) ox = even_bytes(row, st.w - off, ox, hi, cv, o);
      for (; ox < hi; ++ox) o[ox] = cv(row[ox * st.sw]);
    }
    std::fill(o + hi, o + st.wo, pad);
  }
}

#if defined(__x86_64__)
// 16 bytes of each of a, b, c, d -> 16 quads (a[i], b[i], c[i], d[i]) at dst (SSE2).
inline void quads16(const uint8_t *a, const uint8_t *b, const uint8_t *c, const uint8_t *d, uint8_t *dst) {
  const __m128i va = _mm_loadu_si128(reinterpret_cast<const __m128i *>(a));
  const __m128i vb = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b));
  const __m128i vc = _mm_loadu_si128(reinterpret_cast<const __m128i *>(c));
  const __m128i vd = _mm_loadu_si128(reinterpret_cast<const __m128i *>(d));
  const __m128i ab0 = _mm_unpacklo_epi8(va, vb), ab1 = _mm_unpackhi_epi8(va, vb);
  const __m128i cd0 = _mm_unpacklo_epi8(vc, vd), cd1 = _mm_unpackhi_epi8(vc, vd);
  auto *o = reinterpret_cast<__m128i *>(dst);
  _mm_storeu_si128(o, _mm_unpacklo_epi16(ab0, cd0));
  _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(ab0, cd0));
  _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(ab1, cd1));
  _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(ab1, cd1));
}
#endif

// dst[n * G + h] = rows[h][n] for n < p; zeros for n in [p, ldb).
template <class D, int G>
void interleave(const D *const *rows, int64_t p, int64_t ldb, D *dst) {
  int64_t n = 0;
#if defined(__x86_64__)
  if constexpr (G == 4 && sizeof(D) == 1) {
    for (; n + 16 <= p; n += 16) quads16(rows[0] + n, rows[1] + n, rows[2] + n, rows[3] + n, dst + n * 4);
  } else if constexpr (G == 2 && sizeof(D) == 2) {
    for (; n + 8 <= p; n += 8) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(rows[0] + n));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(rows[1] + n));
      auto *o = reinterpret_cast<__m128i *>(dst + n * 2);
      _mm_storeu_si128(o, _mm_unpacklo_epi16(a, b));
      _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(a, b));
    }
  }
#endif
  for (; n < p; ++n)
    for (int h = 0; h < G; ++h) dst[n * G + h] = rows[h][n];
  std::fill(dst + p * G, dst + ldb * G, D{0});
}

// B of one image's group: the im2col rows [G q0, G q1) interleaved by G (pairs of int16 less the
// zero point, or quads of u8), rows past K zero.
template <int G, class S, class D, class Conv>
void pack_b_conv(const ConvState &st, const S *x, D pad, Conv cv, int64_t q0, int64_t q1, D *dst, char *slot) {
  const int64_t npix = st.ho * st.wo;
  // A 1 x 1, stride 1, unpadded convolution's im2col row k is x's plane k: read in place when
  // the operand is x's own bytes (S = D = u8: the u8 x s8 path's conversion is the identity).
  const bool direct = std::is_same_v<S, D> && std::is_same_v<D, uint8_t> && st.kh == 1 && st.kw == 1 && st.sh == 1 &&
                      st.sw == 1 && st.ph == 0 && st.pw == 0;
  const D *rows[G];
  for (int64_t q = q0; q < q1; ++q) {
    for (int h = 0; h < G; ++h) {
      D *own = reinterpret_cast<D *>(slot) + h * npix;
      rows[h] = own;
      if (G * q + h >= st.kg)
        std::fill(own, own + npix, D{0});
      else if (direct)
        rows[h] = reinterpret_cast<const D *>(x) + (G * q + h) * npix;
      else
        im2col_row(st, x, G * q + h, pad, cv, own);
    }
    interleave<D, G>(rows, npix, st.ldb, dst + q * st.ldb * G);
  }
}

// A for the u8 x s8 kernel: when rowsum is set, the sums of rows [r0, r1) of w [O, K] s8 and,
// when dst is set, the rows padded to kq * 4 (with K a multiple of 4, w is already that layout).
void pack_a_q8(const int8_t *w, int64_t k, int64_t kq, int64_t r0, int64_t r1, int8_t *dst, int32_t *rowsum) {
  for (int64_t r = r0; r < r1; ++r) {
    const int8_t *src = w + r * k;
    if (rowsum) rowsum[r] = igemm_q8_rowsum(src, k);  // this path runs only where the VNNI tile does
    if (!dst) continue;
    int8_t *d = dst + r * kq * 4;
    std::copy(src, src + k, d);
    std::fill(d + k, d + kq * 4, int8_t{0});
  }
}

// The requantisation multipliers x_scale * w_scale[o] / y_scale (qlinear only).
void conv_mult(const ConvState &st, const ctn_tensor_desc *in, float *mult) {
  if (!st.qlinear) return;
  const float sx = *desc_ptr<const float>(in[1]), sy = *desc_ptr<const float>(in[6]);
  const float *sw = desc_ptr<const float>(in[4]);
  const bool per_o = desc_numel(in[4]) > 1;
  for (int64_t o = 0; o < st.o; ++o) mult[o] = sx * sw[per_o ? o : 0] / sy;
}

// The epilogue's parameters for one call: the multipliers (conv_mult's), bias, the output zero
// point.
void conv_epilogue(const ConvState &st, const ctn_tensor_desc *in, const float *mult, Epilogue *e) {
  if (!st.qlinear) return;
  e->mult = mult;
  e->bias = desc_ptr<const int32_t>(in[8]);
  e->relu = st.relu;
  e->zp = int_at(in[7], 0);
}

// Per-call memory of a convolution (the call's workspace).
struct ConvScratch {
  char *a, *b;
  float *mult;
  int32_t *rowsum, *offset;
  char *slots, *pad, *out;  // pad, out: the wide path's padded planes and scratch output
  ConvScratch(const ConvState &st, void *ws) {
    a = static_cast<char *>(ws);
    b = a + st.a_bytes;
    slots = b + st.b_bytes;
    pad = slots + st.slots * st.slot_bytes;
    out = pad + st.pad_bytes;
    mult = reinterpret_cast<float *>(out + st.out_bytes);
    rowsum = reinterpret_cast<int32_t *>(mult + st.o);
    offset = rowsum + st.o;
  }
  char *slot(const ConvState &st, int k) const { return slots + static_cast<uint64_t>(k) * st.slot_bytes; }
};

bool all_zero(const ctn_tensor_desc &zp) {
  for (int64_t i = 0, n = desc_numel(zp); i < n; ++i)
    if (int_at(zp, i) != 0) return false;
  return true;
}

// The u8 x s8 path's x zero point: x as u8 (i8 flipped by 0x80, its zero point too).
template <class SX>
uint8_t q8_zx(const ctn_tensor_desc *in) {
  constexpr uint8_t flip = std::is_same_v<SX, int8_t> ? 0x80 : 0;
  return static_cast<uint8_t>(static_cast<uint8_t>(int_at(in[2], 0)) ^ flip);
}

// The wide path's A: rows [r0, r1) of w [O][C/g][KH][KW] tap-major, dst[o][t * C/g + c] =
// w[o][c][t] (the order of its B: channel quads per tap).
void wide_pack_a(const ConvState &st, const int8_t *w, int64_t r0, int64_t r1, int8_t *dst) {
  const int64_t khw = st.kh * st.kw, cg = st.kg / khw;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t t = 0; t < khw; ++t)
      for (int64_t c = 0; c < cg; ++c) dst[r * st.kg + t * cg + c] = w[r * st.kg + c * khw + t];
}

// The u8 x s8 path's A and per-channel offsets: A is w itself when K is a multiple of 4, else w
// padded into a8 (o * kq * 4 bytes; the wide path: w reordered tap-major into a8); offset[o] = bias[o] - zx * sum_k w[o][k], the weights' row
// sums (into rowsum, o values) only where zx is not 0 (after a ReLU it is: most of a CNN's
// convolutions skip reading all their weights once more). Returns A.
const int8_t *q8_weights(const ConvState &st, const ctn_tensor_desc *in, const int32_t *bias, uint8_t zx, int8_t *a8,
                         int32_t *rowsum, int32_t *offset) {
  const int8_t *w = desc_ptr<const int8_t>(in[st.qlinear ? 3 : 1]);
  const bool in_place = st.kg % 4 == 0 && !st.wide;
  int32_t *sums = zx != 0 ? rowsum : nullptr;
  if (sums || !in_place)
    for_range(st.be, st.o, st.kg, [&](int64_t r0, int64_t r1, int) {
      pack_a_q8(w, st.kg, st.kq, r0, r1, in_place || st.wide ? nullptr : a8, sums);
      if (st.wide) wide_pack_a(st, w, r0, r1, a8);
    });
  for (int64_t o = 0; o < st.o; ++o)
    offset[o] = static_cast<int32_t>((bias ? static_cast<uint32_t>(bias[o]) : 0u) -
                                     (sums ? static_cast<uint32_t>(zx) * static_cast<uint32_t>(sums[o]) : 0u));
  return in_place ? w : a8;
}

// The int16 path's A: the weights less their zero points, in pairs (o * 2 * kp2 values).
template <class SW>
void i16_weights(const ConvState &st, const ctn_tensor_desc *in, int16_t *pa) {
  const ctn_tensor_desc &w = in[st.qlinear ? 3 : 1], &zw = in[st.qlinear ? 5 : 3];
  const bool zw_per_o = desc_numel(zw) > 1;
  for_range(st.be, st.o, st.kg, [&](int64_t r0, int64_t r1, int) {
    pack_a(desc_ptr<const SW>(w) + r0 * st.kg, st.kg, st.kp2, r1 - r0, zw, zw_per_o, r0, pa + r0 * 2 * st.kp2);
  });
}

// The wide path's padded input: channel quads [q0, q1) of one group's x, converted to u8 by cv,
// into planes of st.wplane positions of 4 bytes (channels 4q..4q+3), padded with zx (hp x wp,
// pitch wp, then zx up to st.wplane: read by the last rows' unused columns).
template <class SX, class Conv>
void wide_pad(const ConvState &st, const SX *x, uint8_t zx, Conv cv, int64_t q0, int64_t q1, uint8_t *pad) {
  const int64_t hw = st.h * st.w;
  for (int64_t q = q0; q < q1; ++q) {
    uint8_t *p = pad + q * st.wplane * 4;
    std::fill(p, p + st.wplane * 4, zx);
    const SX *src[4] = {x + 4 * q * hw, x + (4 * q + 1) * hw, x + (4 * q + 2) * hw, x + (4 * q + 3) * hw};
    for (int64_t iy = 0; iy < st.h; ++iy) {
      uint8_t *o = p + ((iy + st.ph) * st.wp + st.pw) * 4;
      const int64_t r = iy * st.w;
      int64_t c = 0;
#if defined(__x86_64__)
      if constexpr (std::is_same_v<SX, uint8_t>) {
        for (; c + 16 <= st.w; c += 16)
          quads16(src[0] + r + c, src[1] + r + c, src[2] + r + c, src[3] + r + c, o + c * 4);
      }
#endif
      for (; c < st.w; ++c)
        for (int h = 0; h < 4; ++h) o[c * 4 + h] = cv(src[h][r + c]);
    }
  }
}

// One image's group on the wide path: pad, pack, the product into sc.out (pitch ho * wp), then
// the valid wo columns of each row into y (eg.y: the group's first output plane).
template <class SX, class Conv>
void conv_q8_wide(const ConvState &st, ConvScratch &sc, const SX *xg, uint8_t zx, Conv cv, Epilogue eg,
                  const int8_t *pa, int64_t og) {
  const int64_t cq = st.c / st.groups / 4, khw = st.kh * st.kw, cols = st.ho * st.wp, npix = st.ho * st.wo;
  auto *pad = reinterpret_cast<uint8_t *>(sc.pad);
  for_range(st.be, cq, st.wplane * 4, [&](int64_t q0, int64_t q1, int) { wide_pad(st, xg, zx, cv, q0, q1, pad); });
  // B's rows: (tap t, channel quad q) -> the quad plane q from tap t's offset on.
  auto *brow = reinterpret_cast<const uint8_t **>(sc.b);
  for (int64_t t = 0; t < khw; ++t)
    for (int64_t q = 0; q < cq; ++q) brow[t * cq + q] = pad + (q * st.wplane + (t / st.kw) * st.wp + t % st.kw) * 4;
  char *y = static_cast<char *>(eg.y);
  eg.y = sc.out;
  eg.ldy = cols;
  Q8Job job{{pa, nullptr, og, st.kq, st.ldbw, cols, brow}, cols, st.q8, store_for(st.y_dt, st.be->gemm_isa.load()->name),
            &eg};
  run_gemm(st.be, job, st.kq);
  const size_t ysz = dtype_size(st.y_dt);
  for (int64_t o = 0; o < og; ++o)
    for (int64_t oy = 0; oy < st.ho; ++oy)
      std::copy(sc.out + (o * cols + oy * st.wp) * static_cast<int64_t>(ysz),
                sc.out + (o * cols + oy * st.wp + st.wo) * static_cast<int64_t>(ysz), y + (o * npix + oy * st.wo) * static_cast<int64_t>(ysz));
}

// u8 x s8 VNNI path (weights' zero points 0): x as u8 (q8_zx), padding x_zp, A from q8_weights
// and e.bias its offsets (the bias less x_zp times the weights' row sums).
template <class SX>
void conv_q8(const ConvState &st, const ctn_kernel_args *args, ConvScratch &sc, const Epilogue &e, const int8_t *pa) {
  const ctn_tensor_desc &x = args->inputs[0];
  constexpr uint8_t flip = std::is_same_v<SX, int8_t> ? 0x80 : 0;
  const uint8_t zx = q8_zx<SX>(args->inputs);
  auto *pb = reinterpret_cast<uint8_t *>(sc.b);
  const int64_t og = st.o / st.groups, cg = st.c / st.groups, npix = st.ho * st.wo;
  const size_t ysz = dtype_size(st.y_dt);
  char *y0 = static_cast<char *>(args->outputs[0].data) + args->outputs[0].offset;
  auto cv = [](SX v) { return static_cast<uint8_t>(static_cast<uint8_t>(v) ^ flip); };
  for (int64_t img = 0; img < st.n; ++img)
    for (int64_t g = 0; g < st.groups; ++g) {
      const SX *xg = desc_ptr<const SX>(x) + (img * st.c + g * cg) * st.h * st.w;
      Epilogue eg = e;
      if (eg.mult) eg.mult += g * og;
      eg.bias += g * og;
      eg.y = y0 + static_cast<size_t>((img * st.o + g * og) * npix) * ysz;
      eg.ldy = npix;
      if (st.wide) {
        conv_q8_wide(st, sc, xg, zx, cv, eg, pa + g * og * st.kq * 4, og);
        continue;
      }
      for_range(
          st.be, st.kq, 4 * npix,
          [&](int64_t q0, int64_t q1, int k) { pack_b_conv<4>(st, xg, zx, cv, q0, q1, pb, sc.slot(st, k)); }, st.slots);
      Q8Job job{
          {pa + g * og * st.kq * 4, pb, og, st.kq, st.ldb, npix}, npix, st.q8, store_for(st.y_dt, st.be->gemm_isa.load()->name), &eg};
      run_gemm(st.be, job, st.kq);
    }
}

// int16 path: any dtypes and zero points; A from i16_weights.
template <class SX>
void conv_i16(const ConvState &st, const ctn_kernel_args *args, ConvScratch &sc, const Epilogue &e, const int16_t *pa) {
  const ctn_tensor_desc *in = args->inputs;
  const ctn_tensor_desc &x = in[0];
  auto *pb = reinterpret_cast<int16_t *>(sc.b);
  const int32_t zx = int_at(in[2], 0);
  const int64_t og = st.o / st.groups, cg = st.c / st.groups, npix = st.ho * st.wo;
  const size_t ysz = dtype_size(st.y_dt);
  char *y0 = static_cast<char *>(args->outputs[0].data) + args->outputs[0].offset;
  auto cv = [zx](SX v) { return static_cast<int16_t>(v - zx); };
  for (int64_t img = 0; img < st.n; ++img)
    for (int64_t g = 0; g < st.groups; ++g) {
      const SX *xg = desc_ptr<const SX>(x) + (img * st.c + g * cg) * st.h * st.w;
      for_range(
          st.be, st.kp2, 2 * npix,
          [&](int64_t q0, int64_t q1, int k) { pack_b_conv<2>(st, xg, int16_t{0}, cv, q0, q1, pb, sc.slot(st, k)); },
          st.slots);
      Epilogue eg = e;
      if (eg.mult) eg.mult += g * og;
      if (eg.bias) eg.bias += g * og;
      eg.y = y0 + static_cast<size_t>((img * st.o + g * og) * npix) * ysz;
      eg.ldy = npix;
      GemmJob<IgemmOperands, IgemmTileFn> job{
          {pa + g * og * 2 * st.kp2, pb, og, st.kp2, st.ldb}, npix, st.tile, store_for(st.y_dt, st.be->gemm_isa.load()->name), &eg};
      run_gemm(st.be, job, st.kp2);
    }
}

// a[i] = (add ? a[i] : 0) + sum over taps t < nt of p[t][i] * wv[t], for i < n: in strips of
// kTapStrip sums that stay in L1 while every tap adds to them (one pass over the plane's sums,
// not one per tap); the inner loop vectorises (compiled per ISA below).
constexpr int64_t kTapStrip = 256;
constexpr int64_t kTapsMax = 32;  // taps per call (dw_sums splits larger kernels)
// s[i] += q[i] * w (restrict parameters: gcc honours restrict on parameters, also inlined).
inline __attribute__((always_inline)) void tap_strip(int32_t *__restrict s, const int16_t *__restrict q, int64_t len,
                                                     int32_t w) {
  for (int64_t i = 0; i < len; ++i) s[i] += static_cast<int32_t>(q[i]) * w;
}
inline __attribute__((always_inline)) void taps_body(int32_t *__restrict a, const int16_t *const *p, const int32_t *wv,
                                                     int64_t nt, int64_t n, bool add) {
  for (int64_t i0 = 0; i0 < n; i0 += kTapStrip) {
    const int64_t len = std::min(kTapStrip, n - i0);
    if (!add) std::fill(a + i0, a + i0 + len, 0);
    for (int64_t t = 0; t < nt; ++t) tap_strip(a + i0, p[t] + i0, len, wv[t]);
  }
}
using TapsFn = void (*)(int32_t *, const int16_t *const *, const int32_t *, int64_t, int64_t, bool);
#define CTN_TAPS_VARIANT(suffix, ...)                                                                            \
  __VA_ARGS__ void taps_##suffix(int32_t *a, const int16_t *const *p, const int32_t *wv, int64_t nt, int64_t n, \
                                 bool add) {                                                                   \
    taps_body(a, p, wv, nt, n, add);                                                                           \
  }
CTN_TAPS_VARIANT(generic)
#if defined(__x86_64__)
CTN_TAPS_VARIANT(avx2, __attribute__((target("avx2"))))

// A tap's weight (|w| < 2^15: an 8-bit weight less its zero point) as the int16 pair (w, 0) in
// every lane: pmaddwd of a sign-extended int16 x with it is x * w, one instruction where vpmulld
// takes two.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512i tap_weight_pair(int32_t w) {
  return _mm512_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(w) & 0xFFFFu));
}

// AVX-512 by hand: 64 sums in four registers while every tap adds to them, masked tail.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void taps_avx512(int32_t *a, const int16_t *const *p,
                                                                      const int32_t *wv, int64_t nt, int64_t n, bool add) {
  const __mmask16 all = 0xFFFF;  // maskz forms: gcc 12 warns about the plain ones' undefined halves
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512i c[4];
    for (int j = 0; j < 4; ++j) c[j] = add ? _mm512_loadu_si512(a + i + 16 * j) : _mm512_setzero_si512();
    for (int64_t t = 0; t < nt; ++t) {
      const __m512i w = tap_weight_pair(wv[t]);
      const int16_t *q = p[t] + i;
      for (int j = 0; j < 4; ++j) {
        const __m512i x = _mm512_maskz_cvtepi16_epi32(all, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + 16 * j)));
        c[j] = _mm512_add_epi32(c[j], _mm512_madd_epi16(x, w));
      }
    }
    for (int j = 0; j < 4; ++j) _mm512_storeu_si512(a + i + 16 * j, c[j]);
  }
  for (; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512i c = add ? _mm512_maskz_loadu_epi32(k, a + i) : _mm512_setzero_si512();
    for (int64_t t = 0; t < nt; ++t) {
      const __m512i x = _mm512_maskz_cvtepi16_epi32(all, _mm256_maskz_loadu_epi16(k, p[t] + i));
      c = _mm512_add_epi32(c, _mm512_madd_epi16(x, tap_weight_pair(wv[t])));
    }
    _mm512_mask_storeu_epi32(a + i, k, c);
  }
}
#endif

// Depthwise geometry: the padded input split into sh x sw phases (phase (py, px) holds the
// padded input's rows py, py + sh, ... and columns px, px + sw, ...), each hq x wq, so that tap
// (ki, kj) reads phase ((ki dh) % sh, (kj dw) % sw) at a fixed offset: the sums of a whole plane
// (pitch wq) are long vector operations over the taps (taps_*).
struct DwGeom {
  int64_t hq, wq;
  explicit DwGeom(const ConvState &st)
      : hq(st.ho + (st.kh - 1) * st.dh / st.sh), wq(st.wo + (st.kw - 1) * st.dw / st.sw) {}
  int64_t phase_elems() const { return hq * wq; }
  // int16 phases then i32 sums [ho][wq], in bytes.
  static uint64_t bytes(const ConvState &st) {
    const DwGeom g(st);
    return static_cast<uint64_t>(st.sh * st.sw * g.phase_elems() * 2 + st.ho * g.wq * 4 + 64);
  }
};

// One phase row: o[c] = row[c * stride] - zx for c < n (compiled per ISA below: the stride-1
// form vectorises).
template <class SX>
inline __attribute__((always_inline)) void phase_row_body(const SX *__restrict row, int64_t stride, int64_t n,
                                                          int32_t zx, int16_t *__restrict o) {
  if (stride == 1)
    for (int64_t c = 0; c < n; ++c) o[c] = static_cast<int16_t>(static_cast<int32_t>(row[c]) - zx);
  else
    for (int64_t c = 0; c < n; ++c) o[c] = static_cast<int16_t>(static_cast<int32_t>(row[c * stride]) - zx);
}
template <class SX>
using PhaseRowFn = void (*)(const SX *, int64_t, int64_t, int32_t, int16_t *);
#define CTN_PHASE_ROW_VARIANT(suffix, ...)                                                                     \
  __VA_ARGS__ void phase_row_u8_##suffix(const uint8_t *r, int64_t s, int64_t n, int32_t zx, int16_t *o) { \
    phase_row_body(r, s, n, zx, o);                                                                         \
  }                                                                                                         \
  __VA_ARGS__ void phase_row_i8_##suffix(const int8_t *r, int64_t s, int64_t n, int32_t zx, int16_t *o) {  \
    phase_row_body(r, s, n, zx, o);                                                                         \
  }
CTN_PHASE_ROW_VARIANT(generic)
#if defined(__x86_64__)
CTN_PHASE_ROW_VARIANT(avx512, __attribute__((target("avx512f,avx512bw,avx512vl"))))
CTN_PHASE_ROW_VARIANT(avx2, __attribute__((target("avx2"))))
#endif

#if defined(__x86_64__)
// Stride 2 at AVX-512 (the compiler leaves the strided loop scalar): 32 outputs from 64 bytes,
// the low bytes of 16-bit words. A vector reads row[2 c + 63], one past its last element, so
// the vector loop stops while one more element follows.
template <class SX>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void phase_row_s2_avx512(const SX *row, int64_t, int64_t n,
                                                                               int32_t zx, int16_t *o) {
  const __m512i vzx = _mm512_set1_epi16(static_cast<int16_t>(zx));
  int64_t c = 0;
  for (; c + 33 <= n; c += 32) {
    const __m512i v = _mm512_loadu_si512(row + 2 * c);
    const __m512i lo = std::is_same_v<SX, int8_t> ? _mm512_srai_epi16(_mm512_slli_epi16(v, 8), 8)
                                                  : _mm512_and_si512(v, _mm512_set1_epi16(0xFF));
    _mm512_storeu_si512(o + c, _mm512_sub_epi16(lo, vzx));
  }
  for (; c < n; ++c) o[c] = static_cast<int16_t>(static_cast<int32_t>(row[2 * c]) - zx);
}
#endif

template <class SX>
PhaseRowFn<SX> phase_row_for(const char *isa, int64_t stride) {
  PhaseRowFn<SX> f;
  if constexpr (std::is_same_v<SX, uint8_t>)
    f = CTN_ISA_VARIANT(PhaseRowFn<SX>, isa, phase_row_u8);
  else
    f = CTN_ISA_VARIANT(PhaseRowFn<SX>, isa, phase_row_i8);
#if defined(__x86_64__)
  PhaseRowFn<SX> wide;
  if constexpr (std::is_same_v<SX, uint8_t>)
    wide = phase_row_u8_avx512;
  else
    wide = phase_row_i8_avx512;
  if (stride == 2 && f == wide) return phase_row_s2_avx512<SX>;
#else
  (void)stride;
#endif
  return f;
}

// The phases of one plane, x less its zero point, into ph: only the positions that read x are
// written (the same for every plane), so the padding's zeros, written once per part of the
// planes (the caller zeroes ph before its first plane), stay (no fills per row: they were
// memset calls of a few bytes on short rows).
template <class SX>
void dw_phases(const ConvState &st, const DwGeom &g, PhaseRowFn<SX> prow, const SX *plane, int32_t zx, int16_t *ph) {
  for (int64_t py = 0; py < st.sh; ++py)
    for (int64_t px = 0; px < st.sw; ++px) {
      int16_t *d = ph + (py * st.sw + px) * g.phase_elems();
      // Columns c whose ix = c sw + px - pw lies in [0, w): [c0, c1), the same for every row
      // (computed once: the divisions would dominate short rows).
      const int64_t off = px - st.pw;
      const int64_t c0 = std::min(g.wq, off >= 0 ? 0 : (-off + st.sw - 1) / st.sw);
      const int64_t c1 = std::max(c0, std::min(g.wq, st.w - 1 - off < 0 ? 0 : (st.w - 1 - off) / st.sw + 1));
      for (int64_t r = 0; r < g.hq; ++r) {
        const int64_t iy = r * st.sh + py - st.ph;
        if (iy >= 0 && iy < st.h) prow(plane + iy * st.w + off + c0 * st.sw, st.sw, c1 - c0, zx, d + r * g.wq + c0);
      }
    }
}

// One depthwise plane into acc [ho][wq] (columns past wo unused): per tap, the weight less its
// zero point times the tap's phase, added over the whole plane.
template <class SW>
void dw_sums(const ConvState &st, const DwGeom &g, TapsFn taps, const int16_t *ph, const SW *wk, int32_t zw,
             int32_t *acc) {
  // Tap (ki, kj) reads phase ((ki dh) % sh, (kj dw) % sw) from row (ki dh) / sh, column
  // (kj dw) / sw: st.dw_tap, computed once by make_int_conv.
  const int64_t n = (st.ho - 1) * g.wq + st.wo;
  const int16_t *p[kTapsMax];
  int32_t wv[kTapsMax];
  int64_t nt = 0;
  bool add = false;
  for (int64_t ki = 0; ki < st.kh; ++ki)
    for (int64_t kj = 0; kj < st.kw; ++kj) {
      const int32_t v = static_cast<int32_t>(wk[ki * st.kw + kj]) - zw;
      if (v == 0) continue;
      p[nt] = ph + st.dw_tap[ki * st.kw + kj];
      wv[nt++] = v;
      if (nt == kTapsMax) {
        taps(acc, p, wv, nt, n, add);
        nt = 0;
        add = true;
      }
    }
  if (nt > 0 || !add) taps(acc, p, wv, nt, n, add);
}

// Depthwise convolutions (groups = C = O) directly, without im2col: a GEMM per channel would
// have one row. The (image, channel) planes are split over the pool; each plane's sums go
// through the epilogue in one call as row ch of the image's output.
template <class SX, class SW>
void conv_depthwise(const ConvState &st, const ctn_kernel_args *args, const Epilogue &e) {
  const ctn_tensor_desc *in = args->inputs;
  const ctn_tensor_desc &zw = in[st.qlinear ? 5 : 3];
  const SX *x = desc_ptr<const SX>(in[0]);
  const SW *w = desc_ptr<const SW>(in[st.qlinear ? 3 : 1]);
  const int32_t zx = int_at(in[2], 0);
  const bool zw_per = desc_numel(zw) > 1;
  const int64_t npix = st.ho * st.wo, khw = st.kh * st.kw;
  const size_t ysz = dtype_size(st.y_dt);
  char *y0 = static_cast<char *>(args->outputs[0].data) + args->outputs[0].offset;
  const char *isa = st.be->gemm_isa.load()->name;
  const StoreFn store = store_for(st.y_dt, isa);
  const TapsFn taps = CTN_ISA_VARIANT(TapsFn, isa, taps);
  const PhaseRowFn<SX> prow = phase_row_for<SX>(isa, st.sw);
  const DwGeom g(st);
  ConvScratch sc(st, args->workspace);
  for_range(
      st.be, st.n * st.c, npix * khw,
      [&](int64_t p0, int64_t p1, int k) {
        auto *ph = reinterpret_cast<int16_t *>(sc.slot(st, k));
        auto *acc = reinterpret_cast<int32_t *>(sc.slot(st, k) + round_up(st.sh * st.sw * g.phase_elems() * 2, 64));
        std::fill(ph, ph + st.sh * st.sw * g.phase_elems(), int16_t{0});  // the padding (dw_phases)
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t img = p / st.c, ch = p % st.c;
          dw_phases(st, g, prow, x + p * st.h * st.w, zx, ph);
          dw_sums(st, g, taps, ph, w + ch * khw, int_at(zw, zw_per ? ch : 0), acc);
          // The rows' sums packed to pitch wo (forward: each row moves down), then the plane
          // through the epilogue in one call (row ch of the image's output).
          if (g.wq != st.wo)
            for (int64_t oy = 1; oy < st.ho; ++oy) std::copy(acc + oy * g.wq, acc + oy * g.wq + st.wo, acc + oy * st.wo);
          Epilogue eg = e;
          eg.y = y0 + static_cast<size_t>(img * st.o * npix) * ysz;
          eg.ldy = npix;
          store(eg, acc, ch, 1, 0, npix);
        }
      },
      st.slots);
}

// Makes what the constant inputs give (ConvPrepared) for these inputs.
template <class SX, class SW>
std::unique_ptr<const ConvPrepared> prepare_conv(const ConvState &st, const ctn_tensor_desc *in) {
  auto p = std::make_unique<ConvPrepared>();
  if (st.mult_const) {
    p->mult.resize(static_cast<size_t>(st.o));
    conv_mult(st, in, p->mult.data());
  }
  const bool depthwise = st.groups == st.c && st.o == st.c && st.groups > 1;
  if constexpr (std::is_same_v<SW, int8_t>) p->q8 = !depthwise && st.q8 && all_zero(in[st.qlinear ? 5 : 3]);
  if (depthwise || !st.w_const) return p;
  if (p->q8) {
    if (st.kg % 4 != 0 || st.wide) p->a8.resize(static_cast<size_t>(st.o * st.kq * 4));
    std::vector<int32_t> rowsum(static_cast<size_t>(st.o));
    p->offset.resize(static_cast<size_t>(st.o));
    q8_weights(st, in, st.qlinear ? desc_ptr<const int32_t>(in[8]) : nullptr, q8_zx<SX>(in), p->a8.data(),
               rowsum.data(), p->offset.data());
  } else {
    p->a16.resize(static_cast<size_t>(st.o * 2 * st.kp2));
    i16_weights<SW>(st, in, p->a16.data());
  }
  return p;
}

template <class SX, class SW>
ctn_status conv_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const ConvState *>(state);
  const ctn_tensor_desc *in = args->inputs;
  ConvScratch sc(*st, args->workspace);
  const ConvPrepared *pp = st->prep.get(in, [&] { return prepare_conv<SX, SW>(*st, in); });
  const bool mult_ready = pp && st->mult_const;
  if (!mult_ready) conv_mult(*st, in, sc.mult);
  Epilogue e;
  conv_epilogue(*st, in, mult_ready ? pp->mult.data() : sc.mult, &e);
  if (!st->w_const) pp = nullptr;  // the weights' terms: per call
  if (st->groups == st->c && st->o == st->c && st->groups > 1) {
    conv_depthwise<SX, SW>(*st, args, e);
    return CTN_OK;
  }
  if constexpr (std::is_same_v<SW, int8_t>) {
    if (pp ? pp->q8 : st->q8 && all_zero(in[st->qlinear ? 5 : 3])) {
      const int8_t *pa = nullptr;
      if (pp) {
        pa = pp->a8.empty() ? desc_ptr<const int8_t>(in[st->qlinear ? 3 : 1]) : pp->a8.data();
        e.bias = pp->offset.data();
      } else {
        pa = q8_weights(*st, in, e.bias, q8_zx<SX>(in), reinterpret_cast<int8_t *>(sc.a), sc.rowsum, sc.offset);
        e.bias = sc.offset;
      }
      conv_q8<SX>(*st, args, sc, e, pa);
      return CTN_OK;
    }
  }
  const int16_t *pa = pp ? pp->a16.data() : reinterpret_cast<int16_t *>(sc.a);
  if (!pp) i16_weights<SW>(*st, in, reinterpret_cast<int16_t *>(sc.a));
  conv_i16<SX>(*st, args, sc, e, pa);
  return CTN_OK;
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
  const uint64_t consts = ctn_sig_const_inputs(sig);
  const uint64_t scales = qlinear ? 0x52u : 0u, weights = qlinear ? 0x12Cu : 0xEu;  // {1, 4, 6}; {2, 3, 5, 8} or {1, 2, 3}
  st->mult_const = qlinear && (consts & scales) == scales;
  st->w_const = (consts & weights) == weights;
  st->prep.inputs = (st->mult_const ? scales : 0u) | (st->w_const ? weights : 0u);
  st->kg = w.shape[1] * st->kh * st->kw;
  st->kp2 = (st->kg + 1) / 2;
  st->kq = (st->kg + 3) / 4;
  st->ldb = round_up(std::max<int64_t>(st->ho * st->wo, 1), kIgNr);
  st->y_dt = y.dtype;
  const char *isa = be->gemm_isa.load()->name;
  st->tile = igemm_tile_select(isa, nullptr);
  st->q8 = igemm_q8_tile_select(isa);
  // Room for either path: A as int16 pairs (the larger), B as int16 pairs (kp2 * ldb * 4 bytes,
  // at least the quads' kq * ldb * 4).
  st->a_bytes = static_cast<uint64_t>(round_up(st->o * 2 * st->kp2 * 2, 64));
  st->b_bytes = static_cast<uint64_t>(round_up(st->kp2 * st->ldb * 4, 64));
  st->slots = std::max(1, be->pool->size());
  // 4 bytes per output pixel (4 im2col rows of u8 or 2 of int16), or a depthwise plane's phases
  // and sums.
  st->slot_bytes = static_cast<uint64_t>(round_up(4 * st->ho * st->wo, 64));
  if (st->groups == st->c && st->o == st->c && st->groups > 1) {
    st->slot_bytes = std::max(st->slot_bytes, static_cast<uint64_t>(round_up(static_cast<int64_t>(DwGeom::bytes(*st)), 64)));
    const DwGeom g(*st);
    for (int64_t ki = 0; ki < st->kh; ++ki)
      for (int64_t kj = 0; kj < st->kw; ++kj) {
        const int64_t dy = ki * st->dh, dx = kj * st->dw;
        st->dw_tap.push_back(((dy % st->sh) * st->sw + dx % st->sw) * g.phase_elems() + (dy / st->sh) * g.wq + dx / st->sw);
      }
  }
  const bool depthwise = st->groups == st->c && st->o == st->c && st->groups > 1;
  st->wide = st->q8 && w.dtype == CTN_I8 && !depthwise && st->sh == 1 && st->sw == 1 && st->dh == 1 && st->dw == 1 &&
             !(st->kh == 1 && st->kw == 1 && st->ph == 0 && st->pw == 0) && (st->c / st->groups) % 4 == 0;
  if (st->wide) {
    st->hp = st->h + 2 * st->ph, st->wp = st->w + 2 * st->pw;
    st->ldbw = round_up(st->ho * st->wp, kIgNr);
    // A quad plane: the hp x wp positions and what a tap's row reads past them (its panel's
    // columns up to ldbw from offset (kh - 1) wp + kw - 1).
    st->wplane = std::max(st->hp * st->wp, (st->kh - 1) * st->wp + st->kw - 1 + st->ldbw);
    st->b_bytes = std::max(st->b_bytes, static_cast<uint64_t>(round_up(st->kq * static_cast<int64_t>(sizeof(void *)), 64)));
    st->pad_bytes = static_cast<uint64_t>(round_up((st->c / st->groups) * st->wplane, 64));
    st->out_bytes = static_cast<uint64_t>(round_up((st->o / st->groups) * st->ho * st->wp * static_cast<int64_t>(dtype_size(y.dtype)), 64));
  }
  const uint64_t ws = st->a_bytes + st->b_bytes + static_cast<uint64_t>(st->slots) * st->slot_bytes + st->pad_bytes +
                      st->out_bytes + static_cast<uint64_t>(st->o) * (sizeof(float) + 2 * sizeof(int32_t));
  ctn_kernel_fn fn = pick_kernel(x.dtype, w.dtype, conv_kernel<uint8_t, uint8_t>, conv_kernel<uint8_t, int8_t>,
                                 conv_kernel<int8_t, uint8_t>, conv_kernel<int8_t, int8_t>);
  kernel_set(out, fn, st.release(), 0, ws);
  return CTN_OK;
}

}  // namespace ctn_cpu
