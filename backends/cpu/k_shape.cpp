// Shape ops: reshape, permute, slice, slice_grad, concat, broadcast_to. They move bits only, so
// each kernel is instantiated per element size rather than per dtype.
#include "cpu_backend.h"

namespace ctn_cpu {
namespace {

// out[i] = in[base + sum idx_k * str_k] over the output's row-major index (gather), or the
// reverse (scatter, for slice_grad). Dims are coalesced at get_kernel time.
struct WalkState : KernelBase, ctn_backend_util::DimWalk {
  bool scatter = false;
  bool transpose = false;  // a gather whose last two dims swap: TransposeCall
  int64_t n = 0;        // elements walked
  int64_t zero_bytes = 0;  // scatter: bytes of the destination cleared first
  int64_t base = 0;
};

template <class E>
struct WalkCall {
  const WalkState *st;
  const E *src;
  E *dst;

  void range(int64_t i0, int64_t i1) const {
    const int nd = st->nd;
    int64_t idx[CTN_MAX_DIMS];
    ctn_backend_util::unravel(i0, nd, st->shape, idx);
    const int64_t inner = st->shape[nd - 1], s = st->str[nd - 1];
    int64_t pos = i0;
    while (pos < i1) {
      int64_t off = st->base;
      for (int k = 0; k < nd; ++k) off += idx[k] * st->str[k];
      int64_t len = inner - idx[nd - 1];
      if (len > i1 - pos) len = i1 - pos;
      if (st->scatter) {
        for (int64_t t = 0; t < len; ++t) dst[off + t * s] = src[pos + t];
      } else if (s == 1) {
        std::memcpy(dst + pos, src + off, static_cast<size_t>(len) * sizeof(E));
      } else {
        for (int64_t t = 0; t < len; ++t) dst[pos + t] = src[off + t * s];
      }
      pos += len;
      idx[nd - 1] += len;
      for (int k = nd - 1; k > 0 && idx[k] >= st->shape[k]; --k) {
        idx[k] = 0;
        ++idx[k - 1];
      }
    }
  }
  static void part(void *ctx, int64_t a, int64_t b, int) {
    static_cast<const WalkCall *>(ctx)->range(a, b);
  }
};

// A gather whose source is contiguous along the output's second-last dim and strided along its
// last (the NCHW <-> NHWC permutes of the layout stage: batches of 2-d transposes) in tiles of
// kTile x kTile, so that reads and writes both stay in a few cache lines; the element-wise walk
// above reads such a source one strided element at a time.
template <class E>
struct TransposeCall {
  static constexpr int64_t kTile = 16;
  const WalkState *st;
  const E *src;
  E *dst;

  static bool applies(const ctn_backend_util::DimWalk &w) {
    return w.nd >= 2 && w.str[w.nd - 2] == 1 && w.str[w.nd - 1] > 1 && w.shape[w.nd - 1] >= 4 && w.shape[w.nd - 2] >= 4;
  }
  int64_t bands() const { return (st->shape[st->nd - 2] + kTile - 1) / kTile; }
  // Unit u: kTile rows of the output (all its columns) of one outer block.
  void unit(int64_t u) const {
    const int nd = st->nd;
    const int64_t rows = st->shape[nd - 2], cols = st->shape[nd - 1], s = st->str[nd - 1];
    const int64_t outer = u / bands(), r0 = (u % bands()) * kTile, r1 = std::min(rows, r0 + kTile);
    int64_t idx[CTN_MAX_DIMS];
    ctn_backend_util::unravel(outer, nd - 2, st->shape, idx);
    int64_t off = st->base;
    for (int k = 0; k < nd - 2; ++k) off += idx[k] * st->str[k];
    E *out = dst + outer * rows * cols;
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) out[r * cols + c] = src[off + r + c * s];
    }
  }
  static void part(void *ctx, int64_t a, int64_t b, int) {
    for (int64_t u = a; u < b; ++u) static_cast<const TransposeCall *>(ctx)->unit(u);
  }
  void run() const {
    const int64_t units = st->n / (st->shape[st->nd - 2] * st->shape[st->nd - 1]) * bands();
    const int64_t per_unit = kTile * st->shape[st->nd - 1];
    if (st->n >= kParallelThreshold && st->be->pool->size() > 1)
      st->be->pool->parallel_for(units, std::max<int64_t>(1, kParallelThreshold / 2 / per_unit), part,
                                 const_cast<TransposeCall *>(this));
    else
      part(const_cast<TransposeCall *>(this), 0, units, 0);
  }
};

template <class E>
ctn_status walk_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const WalkState *>(state);
  if (st->transpose && st->n) {
    TransposeCall<E>{st, desc_ptr<const E>(args->inputs[0]), desc_ptr<E>(args->outputs[0])}.run();
    return CTN_OK;
  }
  WalkCall<E> call{st, desc_ptr<const E>(args->inputs[0]), desc_ptr<E>(args->outputs[0])};
  if (st->scatter) std::memset(call.dst, 0, static_cast<size_t>(st->zero_bytes));
  if (st->n == 0) return CTN_OK;
  // Scatter writes are disjoint per output position too (step > 0), so both split safely.
  if (st->n >= kParallelThreshold && st->be->pool->size() > 1)
    st->be->pool->parallel_for(st->n, kParallelThreshold / 2, WalkCall<E>::part, &call);
  else
    call.range(0, st->n);
  return CTN_OK;
}

ctn_kernel_fn walk_fn(int32_t dtype) {
  switch (dtype_size(dtype)) {
    case 1: return walk_kernel<uint8_t>;
    case 2: return walk_kernel<uint16_t>;  // f16, bf16
    case 4: return walk_kernel<uint32_t>;
    default: return walk_kernel<uint64_t>;
  }
}

struct ConcatState : KernelBase {
  int64_t outer = 0;
  int64_t out_row = 0;              // bytes of one outer row of the output
  std::vector<int64_t> chunk;       // bytes of one outer row of each input
};

ctn_status concat_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const ConcatState *>(state);
  char *dst = desc_ptr<char>(args->outputs[0]);
  int64_t col = 0;
  for (size_t i = 0; i < st->chunk.size(); ++i) {
    const char *src = desc_ptr<const char>(args->inputs[i]);
    const int64_t c = st->chunk[i];
    for (int64_t o = 0; o < st->outer; ++o)
      std::memcpy(dst + o * st->out_row + col, src + o * c, static_cast<size_t>(c));
    col += c;
  }
  return CTN_OK;
}

ctn_status reshape_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const WalkState *>(state);
  void *dst = desc_ptr<char>(args->outputs[0]);
  const void *src = desc_ptr<const char>(args->inputs[0]);
  if (dst != src) std::memmove(dst, src, static_cast<size_t>(st->n));
  return CTN_OK;
}

}  // namespace

ctn_status make_shape_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out,
                             bool *handled) {
  const ShapeKind kind = shape_kind(sig->op);
  if (kind == ShapeKind::kNone) return CTN_OK;
  *handled = true;
  const ctn_tensor_desc &y = *sig->output;
  const int64_t esize = static_cast<int64_t>(dtype_size(y.dtype));
  if (kind == ShapeKind::kConcat) {
    const ConcatPlan plan = concat_plan(sig);
    auto cs = new_state<ConcatState>(be);
    cs->outer = plan.outer;
    cs->out_row = plan.row * esize;
    for (int64_t c : plan.chunk) cs->chunk.push_back(c * esize);
    kernel_set(out, concat_kernel, cs.release());
    return CTN_OK;
  }
  auto st = new_state<WalkState>(be);
  const ShapeWalk w = shape_walk(sig, kind);
  if (kind == ShapeKind::kReshape) {
    st->n = w.n * esize;
    kernel_set(out, reshape_kernel, st.release(), CTN_KERNEL_INPLACE_OK);
    return CTN_OK;
  }
  static_cast<DimWalk &>(*st) = w.walk;
  st->n = w.n;
  st->base = w.base;
  st->scatter = w.scatter;
  st->transpose = !w.scatter && TransposeCall<uint8_t>::applies(w.walk);
  st->zero_bytes = w.full * esize;
  kernel_set(out, walk_fn(y.dtype), st.release());
  return CTN_OK;
}

}  // namespace ctn_cpu
