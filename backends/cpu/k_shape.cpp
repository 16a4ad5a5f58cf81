// Shape ops: reshape, permute, slice, slice_grad, concat, broadcast_to. They move bits only, so
// each kernel is instantiated per element size rather than per dtype.
#include "cpu_backend.h"

namespace ctn_cpu {
namespace {

// out[i] = in[base + sum idx_k * str_k] over the output's row-major index (gather), or the
// reverse (scatter, for slice_grad). Dims are coalesced at get_kernel time.
struct WalkState : KernelBase, ctn_backend_util::DimWalk {
  bool scatter = false;
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

template <class E>
ctn_status walk_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const WalkState *>(state);
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
  st->zero_bytes = w.full * esize;
  kernel_set(out, walk_fn(y.dtype), st.release());
  return CTN_OK;
}

}  // namespace ctn_cpu
