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
    int64_t rem = i0;
    for (int k = nd - 1; k >= 0; --k) {
      idx[k] = rem % st->shape[k];
      rem /= st->shape[k];
    }
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
  const char *op = sig->op;
  enum { kReshape, kPermute, kSlice, kSliceGrad, kConcat, kBroadcast } kind;
  if (!std::strcmp(op, CTN_OP_RESHAPE)) kind = kReshape;
  else if (!std::strcmp(op, CTN_OP_PERMUTE)) kind = kPermute;
  else if (!std::strcmp(op, CTN_OP_SLICE)) kind = kSlice;
  else if (!std::strcmp(op, CTN_OP_SLICE_GRAD)) kind = kSliceGrad;
  else if (!std::strcmp(op, CTN_OP_CONCAT)) kind = kConcat;
  else if (!std::strcmp(op, CTN_OP_BROADCAST_TO)) kind = kBroadcast;
  else return CTN_OK;
  *handled = true;
  const ctn_host_api *host = be->host;
  const ctn_attrs &at = *sig->attrs;
  const ctn_tensor_desc &y = *sig->output;
  if (sig->n_inputs < 1 || (kind != kConcat && sig->n_inputs != 1))
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "cpu %s: wrong number of inputs (%u)", op,
                           sig->n_inputs);
  const ctn_tensor_desc &x = sig->inputs[0];
  for (uint32_t i = 0; i < sig->n_inputs; ++i)
    if (sig->inputs[i].dtype != y.dtype)
      return host->set_error(CTN_ERR_DTYPE, "cpu %s: input %u is %s, output %s", op, i,
                             dtype_name(sig->inputs[i].dtype), dtype_name(y.dtype));
  const int64_t esize = static_cast<int64_t>(dtype_size(y.dtype));
  auto bad_shape = [&](const ctn_tensor_desc &want) {
    return host->set_error(CTN_ERR_SHAPE, "cpu %s: output shape %s, expected %s", op,
                           shape_str(y).c_str(), shape_str(want).c_str());
  };
  auto st = std::make_unique<WalkState>();
  st->be = be;
  st->host = host;
  int64_t istr[CTN_MAX_DIMS];
  contiguous_strides(x, istr);
  ctn_tensor_desc want{};
  want.ndim = x.ndim;
  switch (kind) {
    case kReshape: {
      if (desc_numel(x) != desc_numel(y) || y.ndim != at.ni)
        return host->set_error(CTN_ERR_SHAPE, "cpu reshape: %s -> %s changes the element count",
                               shape_str(x).c_str(), shape_str(y).c_str());
      for (uint32_t k = 0; k < y.ndim; ++k)
        if (y.shape[k] != at.i[k])
          return host->set_error(CTN_ERR_SHAPE, "cpu reshape: output shape does not match attrs");
      st->n = desc_numel(x) * esize;
      kernel_set(out, reshape_kernel, st.release(), CTN_KERNEL_INPLACE_OK);
      return CTN_OK;
    }
    case kPermute: {
      int64_t str[CTN_MAX_DIMS];
      uint32_t seen = 0;
      if (at.ni != x.ndim) return bad_shape(x);
      for (uint32_t k = 0; k < x.ndim; ++k) {
        int64_t p = at.i[k];
        if (p < 0 || p >= static_cast<int64_t>(x.ndim) || (seen >> p) & 1)
          return host->set_error(CTN_ERR_INVALID_ARGUMENT, "cpu permute: bad permutation");
        seen |= 1u << p;
        want.shape[k] = x.shape[p];
        str[k] = istr[p];
      }
      if (!same_shape(want, y)) return bad_shape(want);
      st->n = desc_numel(y);
      coalesce(*st, y.ndim, y.shape, str);
      break;
    }
    case kSlice:
    case kSliceGrad: {
      // For slice_grad the "source" is the output and dy plays the sliced tensor.
      const ctn_tensor_desc &full = kind == kSlice ? x : y;
      const ctn_tensor_desc &part = kind == kSlice ? y : x;
      int64_t axis = at.i[0], start = at.i[1], stop = at.i[2], step = at.i[3];
      if (axis < 0 || axis >= static_cast<int64_t>(full.ndim) || step <= 0 || start < 0 ||
          stop < start || stop > full.shape[axis] ||
          (kind == kSliceGrad && at.i[4] != full.shape[axis]))
        return host->set_error(CTN_ERR_INVALID_ARGUMENT,
                               "cpu %s: bad axis/start/stop/step %lld/%lld/%lld/%lld for %s", op,
                               static_cast<long long>(axis), static_cast<long long>(start),
                               static_cast<long long>(stop), static_cast<long long>(step),
                               shape_str(full).c_str());
      want = full;
      if (step > full.shape[axis]) step = full.shape[axis] > 0 ? full.shape[axis] : 1;  // one element at most
      want.shape[axis] = stop == start ? 0 : (stop - start - 1) / step + 1;
      if (!same_shape(want, part)) {
        if (kind == kSlice) return bad_shape(want);
        return host->set_error(CTN_ERR_SHAPE, "cpu slice_grad: dy %s, expected %s",
                               shape_str(part).c_str(), shape_str(want).c_str());
      }
      int64_t fstr[CTN_MAX_DIMS];
      contiguous_strides(full, fstr);
      st->base = start * fstr[axis];
      fstr[axis] *= step;
      st->n = desc_numel(part);
      st->scatter = kind == kSliceGrad;
      st->zero_bytes = desc_numel(full) * esize;
      if (st->n > 0) coalesce(*st, part.ndim, part.shape, fstr);
      else st->nd = 1, st->shape[0] = 1;
      break;
    }
    case kBroadcast: {
      if (at.ni != y.ndim) return bad_shape(y);
      for (uint32_t k = 0; k < y.ndim; ++k)
        if (y.shape[k] != at.i[k])
          return host->set_error(CTN_ERR_SHAPE, "cpu broadcast_to: output shape %s differs from attrs",
                                 shape_str(y).c_str());
      int64_t str[CTN_MAX_DIMS];
      if (!broadcast_strides(x, y, str))
        return host->set_error(CTN_ERR_SHAPE, "cpu broadcast_to: %s does not broadcast to %s",
                               shape_str(x).c_str(), shape_str(y).c_str());
      st->n = desc_numel(y);
      coalesce(*st, y.ndim, y.shape, str);
      break;
    }
    case kConcat: {
      int64_t axis = at.i[0];
      if (axis < 0 || axis >= static_cast<int64_t>(x.ndim))
        return host->set_error(CTN_ERR_INVALID_ARGUMENT, "cpu concat: axis %lld out of range",
                               static_cast<long long>(axis));
      auto cs = std::make_unique<ConcatState>();
      cs->be = be;
      cs->host = host;
      want = x;
      want.shape[axis] = 0;
      int64_t inner = esize;
      for (uint32_t k = static_cast<uint32_t>(axis) + 1; k < x.ndim; ++k) inner *= x.shape[k];
      for (uint32_t i = 0; i < sig->n_inputs; ++i) {
        const ctn_tensor_desc &in = sig->inputs[i];
        bool ok = in.ndim == x.ndim;
        for (uint32_t k = 0; ok && k < x.ndim; ++k)
          ok = k == static_cast<uint32_t>(axis) || in.shape[k] == x.shape[k];
        if (!ok)
          return host->set_error(CTN_ERR_SHAPE, "cpu concat: input %u %s does not match %s on "
                                 "the other axes", i, shape_str(in).c_str(), shape_str(x).c_str());
        want.shape[axis] += in.shape[axis];
        cs->chunk.push_back(in.shape[axis] * inner);
      }
      if (!same_shape(want, y)) return bad_shape(want);
      cs->outer = 1;
      for (int64_t k = 0; k < axis; ++k) cs->outer *= x.shape[k];
      cs->out_row = want.shape[axis] * inner;
      kernel_set(out, concat_kernel, cs.release());
      return CTN_OK;
    }
  }
  kernel_set(out, walk_fn(y.dtype), st.release());
  return CTN_OK;
}

}  // namespace ctn_cpu
