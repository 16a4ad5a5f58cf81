// Shape ops: reshape and concat are buffer copies (vkCmdCopyBuffer: any dtype, any size);
// permute, slice, broadcast_to and slice_grad walk the output (or dy) with the gather shader,
// which moves 32-bit words and so handles every dtype (1, 2, 4 or 8 bytes).
#include "vk_backend.h"

namespace ctn_vk {
namespace {

using Walk = ctn_backend_util::DimWalk;

ctn_status gather_kernel(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, const Walk &w, int64_t base,
                         int64_t n, bool scatter) {
  const ctn_tensor_desc &x = sig->inputs[0], &y = *sig->output;
  const uint64_t esz = dtype_size(y.dtype);
  if (scatter && esz < 4)
    return decline(be, sig, "scatter of %llu-byte dtypes is not implemented",
                   static_cast<unsigned long long>(esz));
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
    uint64_t items = esz < 4 ? (static_cast<uint64_t>(n) + 4 / esz - 1) / (4 / esz) : static_cast<uint64_t>(n);
    if (ctn_status st = push_1d(be, sig, k, c, items); st) return st;
  }
  kernel_publish(k, out);
  return CTN_OK;
}

}  // namespace

ctn_status make_shape_kernel(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  const ShapeKind kind = shape_kind(sig->op);
  if (kind == ShapeKind::kNone) return CTN_OK;
  *handled = true;
  const char *op = sig->op;
  const ctn_tensor_desc &x = sig->inputs[0], &y = *sig->output;
  if (kind != ShapeKind::kReshape && kind != ShapeKind::kConcat) {
    const ShapeWalk w = shape_walk(sig, kind);
    return gather_kernel(be, sig, out, w.walk, w.base, w.n, w.scatter);
  }
  // reshape and concat: buffer copies, no shader.
  Kernel *k = nullptr;
  ctn_status st = kernel_new(be, op, {}, &k);
  if (st != CTN_OK) return st;
  if (kind == ShapeKind::kReshape) {
    Cmd c;
    c.kind = Cmd::kCopy;
    c.dst = kOut;
    c.src = 0;
    if (desc_bytes(x)) c.regions.push_back(VkBufferCopy{0, 0, desc_bytes(x)});
    k->cmds.push_back(std::move(c));
    kernel_publish(k, out, CTN_KERNEL_INPLACE_OK);
    return CTN_OK;
  }
  const ConcatPlan plan = concat_plan(sig);
  const int64_t esz = static_cast<int64_t>(dtype_size(y.dtype));
  const int64_t out_row = plan.row * esz;
  int64_t col = 0;
  for (uint32_t i = 0; i < sig->n_inputs; ++i) {
    const int64_t chunk = plan.chunk[i] * esz;
    Cmd ci;
    ci.kind = Cmd::kCopy;
    ci.src = static_cast<int8_t>(i);
    ci.dst = kOut;
    if (chunk > 0)
      for (int64_t o = 0; o < plan.outer; ++o)
        ci.regions.push_back(VkBufferCopy{static_cast<VkDeviceSize>(o * chunk),
                                          static_cast<VkDeviceSize>(o * out_row + col),
                                          static_cast<VkDeviceSize>(chunk)});
    col += chunk;
    if (!ci.regions.empty()) k->cmds.push_back(std::move(ci));
  }
  kernel_publish(k, out);
  return CTN_OK;
}

}  // namespace ctn_vk
