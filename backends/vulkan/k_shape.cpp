// Shape ops: reshape and concat are buffer copies (vkCmdCopyBuffer: any dtype, any size);
// permute, slice, broadcast_to and slice_grad walk the output (or dy) with the gather shader,
// which moves 32-bit words and so handles every dtype.
#include "vk_backend.h"

namespace ctn_vk {
namespace {

using Walk = ctn_backend_util::DimWalk;

ctn_status gather_kernel(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, const Walk &w, int64_t base,
                         int64_t n, bool scatter) {
  const ctn_tensor_desc &x = sig->inputs[0], &y = *sig->output;
  const uint64_t esz = dtype_size(y.dtype);
  if (scatter && esz == 1) return decline(be, sig, "scatter of 1-byte dtypes is not implemented");
  for (const ctn_tensor_desc *d : {&x, &y})
    if (desc_bytes(*d) + be.align > be.max_range)
      return decline(be, sig, "a %llu-byte operand exceeds maxStorageBufferRange (%llu)",
                     static_cast<unsigned long long>(desc_bytes(*d)), static_cast<unsigned long long>(be.max_range));
  std::vector<uint32_t> p(20, 0);
  p[0] = static_cast<uint32_t>(w.nd);
  for (int k = 0; k < w.nd; ++k) {
    p[1 + k] = static_cast<uint32_t>(w.shape[k]);
    p[9 + k] = static_cast<uint32_t>(w.str[k]);
  }
  p[17] = static_cast<uint32_t>(base);
  Kernel *k = nullptr;
  ctn_status st = kernel_new(be, sig->op, p, &k);
  if (st != CTN_OK) return st;
  if (scatter && desc_bytes(y) > 0) {
    Cmd f;
    f.kind = Cmd::kFill;
    f.dst = kOut;
    f.size = (desc_bytes(y) + 3) / 4 * 4;
    k->cmds.push_back(std::move(f));
  }
  const Pipeline *pipe = nullptr;
  if ((st = get_pipeline(be, "gather", {static_cast<int32_t>(be.wg1d), 1, static_cast<int32_t>(esz), scatter ? 1 : 0},
                         3, &pipe)) != CTN_OK) {
    kernel_delete(k);
    return st;
  }
  if (n > 0) {
    Cmd c;
    c.pipe = pipe;
    c.nb = 3;
    c.b[0] = Bind{0, 4, 0, std::max<uint64_t>(desc_bytes(x), 4)};
    c.b[1] = Bind{kOut, 4, 0, std::max<uint64_t>(desc_bytes(y), 4)};
    c.b[2] = Bind{kParams, 4, 0, p.size() * 4};
    c.count = static_cast<uint32_t>(n);
    uint64_t items = esz == 1 ? (static_cast<uint64_t>(n) + 3) / 4 : static_cast<uint64_t>(n);
    if (!grid_1d(be, items, be.wg1d, &c.gx, &c.gy)) {
      kernel_delete(k);
      return decline(be, sig, "too many elements for one dispatch");
    }
    k->cmds.push_back(std::move(c));
  }
  kernel_publish(k, out);
  return CTN_OK;
}

}  // namespace

ctn_status make_shape_kernel(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
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
  const ctn_host_api *host = be.host;
  const ctn_attrs &at = *sig->attrs;
  const ctn_tensor_desc &y = *sig->output;
  if (sig->n_inputs < 1 || (kind != kConcat && sig->n_inputs != 1))
    return host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan %s: wrong number of inputs (%u)", op, sig->n_inputs);
  const ctn_tensor_desc &x = sig->inputs[0];
  for (uint32_t i = 0; i < sig->n_inputs; ++i)
    if (sig->inputs[i].dtype != y.dtype)
      return host->set_error(CTN_ERR_DTYPE, "vulkan %s: input %u is %s, output %s", op, i,
                             dtype_name(sig->inputs[i].dtype), dtype_name(y.dtype));
  auto bad_shape = [&](const ctn_tensor_desc &want) {
    return host->set_error(CTN_ERR_SHAPE, "vulkan %s: output shape %s, expected %s", op, shape_str(y).c_str(),
                           shape_str(want).c_str());
  };
  int64_t istr[CTN_MAX_DIMS];
  contiguous_strides(x, istr);
  ctn_tensor_desc want{};
  want.ndim = x.ndim;
  Walk w;
  switch (kind) {
    case kReshape:
    case kConcat: {
      Kernel *k = nullptr;
      ctn_status st = CTN_OK;
      Cmd c;
      c.kind = Cmd::kCopy;
      c.dst = kOut;
      if (kind == kReshape) {
        if (desc_numel(x) != desc_numel(y)) return bad_shape(x);
        if ((st = kernel_new(be, op, {}, &k)) != CTN_OK) return st;
        c.src = 0;
        if (desc_bytes(x)) c.regions.push_back(VkBufferCopy{0, 0, desc_bytes(x)});
        k->cmds.push_back(std::move(c));
        kernel_publish(k, out, CTN_KERNEL_INPLACE_OK);
        return CTN_OK;
      }
      int64_t axis = at.i[0];
      if (axis < 0 || axis >= static_cast<int64_t>(x.ndim))
        return host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan concat: axis out of range");
      const int64_t esz = static_cast<int64_t>(dtype_size(y.dtype));
      want = x;
      want.shape[axis] = 0;
      int64_t inner = esz, outer = 1;
      for (uint32_t d = static_cast<uint32_t>(axis) + 1; d < x.ndim; ++d) inner *= x.shape[d];
      for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
      for (uint32_t i = 0; i < sig->n_inputs; ++i) {
        const ctn_tensor_desc &in = sig->inputs[i];
        bool ok = in.ndim == x.ndim;
        for (uint32_t d = 0; ok && d < x.ndim; ++d) ok = d == static_cast<uint32_t>(axis) || in.shape[d] == x.shape[d];
        if (!ok) return host->set_error(CTN_ERR_SHAPE, "vulkan concat: input %u does not match on the other axes", i);
        want.shape[axis] += in.shape[axis];
      }
      if (!same_shape(want, y)) return bad_shape(want);
      if ((st = kernel_new(be, op, {}, &k)) != CTN_OK) return st;
      const int64_t out_row = want.shape[axis] * inner;
      int64_t col = 0;
      for (uint32_t i = 0; i < sig->n_inputs; ++i) {
        const int64_t chunk = sig->inputs[i].shape[axis] * inner;
        Cmd ci;
        ci.kind = Cmd::kCopy;
        ci.src = static_cast<int8_t>(i);
        ci.dst = kOut;
        if (chunk > 0)
          for (int64_t o = 0; o < outer; ++o)
            ci.regions.push_back(VkBufferCopy{static_cast<VkDeviceSize>(o * chunk),
                                              static_cast<VkDeviceSize>(o * out_row + col),
                                              static_cast<VkDeviceSize>(chunk)});
        col += chunk;
        if (!ci.regions.empty()) k->cmds.push_back(std::move(ci));
      }
      kernel_publish(k, out);
      return CTN_OK;
    }
    case kPermute: {
      int64_t str[CTN_MAX_DIMS] = {};
      uint32_t seen = 0;
      if (at.ni != x.ndim) return bad_shape(x);
      for (uint32_t k = 0; k < x.ndim; ++k) {
        int64_t p = at.i[k];
        if (p < 0 || p >= static_cast<int64_t>(x.ndim) || ((seen >> p) & 1))
          return host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan permute: bad permutation");
        seen |= 1u << p;
        want.shape[k] = x.shape[p];
        str[k] = istr[p];
      }
      if (!same_shape(want, y)) return bad_shape(want);
      coalesce(w, y.ndim, y.shape, str);
      return gather_kernel(be, sig, out, w, 0, desc_numel(y), false);
    }
    case kSlice:
    case kSliceGrad: {
      const ctn_tensor_desc &full = kind == kSlice ? x : y;
      const ctn_tensor_desc &part = kind == kSlice ? y : x;
      int64_t axis = at.i[0], start = at.i[1], stop = at.i[2], step = at.i[3];
      if (axis < 0 || axis >= static_cast<int64_t>(full.ndim) || step <= 0 || start < 0 || stop < start ||
          stop > full.shape[axis] || (kind == kSliceGrad && at.i[4] != full.shape[axis]))
        return host->set_error(CTN_ERR_INVALID_ARGUMENT, "vulkan %s: bad axis/start/stop/step", op);
      want = full;
      want.shape[axis] = (stop - start + step - 1) / step;
      if (!same_shape(want, part)) return bad_shape(want);
      int64_t fstr[CTN_MAX_DIMS];
      contiguous_strides(full, fstr);
      int64_t base = start * fstr[axis];
      fstr[axis] *= step;
      coalesce(w, part.ndim, part.shape, fstr);
      return gather_kernel(be, sig, out, w, base, desc_numel(part), kind == kSliceGrad);
    }
    case kBroadcast: {
      if (at.ni != y.ndim) return bad_shape(y);
      int64_t str[CTN_MAX_DIMS] = {};
      if (!broadcast_strides(x, y, str))
        return host->set_error(CTN_ERR_SHAPE, "vulkan broadcast_to: %s does not broadcast to %s", shape_str(x).c_str(),
                               shape_str(y).c_str());
      coalesce(w, y.ndim, y.shape, str);
      return gather_kernel(be, sig, out, w, 0, desc_numel(y), false);
    }
  }
  return CTN_OK;
}

}  // namespace ctn_vk
