// Neural-network ops: conv2d and its gradients (conv_transpose2d is conv2d_grad_input), max and
// average pooling with gradients, batch norm and layer norm (all forms), embedding and its
// gradient. Every accumulating gradient is a gather (one invocation or workgroup per output
// element, fixed summation order): deterministic, no float atomics. Validation mirrors the CPU
// backend (backends/cpu/k_conv.cpp, k_pool.cpp, k_norm.cpp, k_nn_misc.cpp).
#include <cstdlib>

#include "vk_backend.h"

namespace ctn_vk {
namespace {

const char *variant(const char *base, int32_t dtype, std::string *buf) {
  *buf = std::string(base) + "." + dtype_name(dtype);
  return buf->c_str();
}

// Every operand (and the workspace) within one descriptor range.
ctn_status fits(Backend &be, const ctn_op_signature *sig, uint64_t workspace = 0) {
  for (uint32_t i = 0; i <= sig->n_inputs; ++i) {
    const ctn_tensor_desc &d = i < sig->n_inputs ? sig->inputs[i] : *sig->output;
    if (desc_bytes(d) + be.align > be.max_range)
      return decline(be, sig, "operand %u (%llu bytes) exceeds maxStorageBufferRange (%llu)", i,
                     static_cast<unsigned long long>(desc_bytes(d)), static_cast<unsigned long long>(be.max_range));
  }
  if (workspace + be.align > be.max_range) return decline(be, sig, "workspace exceeds maxStorageBufferRange");
  return CTN_OK;
}

Bind whole(int8_t opnd, const ctn_tensor_desc &d) {
  const uint64_t esz = dtype_size(d.dtype);
  return Bind{opnd, static_cast<uint32_t>(esz), 0, std::max<uint64_t>(desc_bytes(d), esz)};
}

Bind params_bind(const std::vector<uint32_t> &p) {
  return Bind{kParams, 4, 0, std::max<uint64_t>(p.size() * 4, 64)};
}

// One invocation per item (1-D grid of be.wg1d); nothing when items == 0.
ctn_status add_flat(Backend &be, const ctn_op_signature *sig, Kernel *k, const Pipeline *pipe, Cmd c,
                    uint64_t items) {
  if (items == 0) return CTN_OK;
  if (!grid_1d(be, items, be.wg1d, &c.gx, &c.gy)) return decline(be, sig, "too many elements for the grid");
  c.pipe = pipe;
  c.base = 0;
  c.count = static_cast<uint32_t>(items);
  k->cmds.push_back(std::move(c));
  return CTN_OK;
}

// One workgroup per item, in pieces of at most max_groups_x * max_groups_y.
void add_groups(Backend &be, Kernel *k, const Pipeline *pipe, const Cmd &proto, uint64_t items) {
  const uint64_t per = static_cast<uint64_t>(be.max_groups_x) * be.max_groups_y;
  for (uint64_t b0 = 0; b0 < items; b0 += per) {
    Cmd c = proto;
    c.pipe = pipe;
    c.base = static_cast<uint32_t>(b0);
    c.count = static_cast<uint32_t>(items);
    uint64_t n = std::min<uint64_t>(per, items - b0);
    c.gx = static_cast<uint32_t>(std::min<uint64_t>(n, be.max_groups_x));
    c.gy = static_cast<uint32_t>((n + c.gx - 1) / c.gx);
    k->cmds.push_back(std::move(c));
  }
}

// Workgroup size for a reduction over n elements: a power of two, 32 .. wg1d.
uint32_t wg_for(const Backend &be, int64_t n) {
  uint32_t wg = 1;
  while (wg < be.wg1d && static_cast<int64_t>(wg) < n) wg *= 2;
  return std::max<uint32_t>(wg, std::min<uint32_t>(32u, be.wg1d));
}

void put_f(std::vector<uint32_t> &p, size_t f32_at, double v) {
  float f = static_cast<float>(v);
  std::memcpy(&p[f32_at], &f, 4);
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  p[f32_at + 1] = static_cast<uint32_t>(bits);
  p[f32_at + 2] = static_cast<uint32_t>(bits >> 32);
}

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// ---- convolution ----------------------------------------------------------------------------------

ctn_status make_conv(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, int kind) {
  // kind 0 forward, 1 grad-input (and conv_transpose2d), 2 grad-weight.
  const char *op = sig->op;
  const ctn_tensor_desc &a = sig->inputs[0], &b = sig->inputs[1], &y = *sig->output;
  ctn_status st = CTN_OK;
  if (!float_ok(be, sig, a.dtype, &st, true)) return st;  // f16/bf16: products summed in f32
  if (kind == 0 && sig->attrs->ni > 7 && sig->attrs->i[7] != 0)  // layout (since 1.7): NCHW only
    return be.host->set_error(CTN_ERR_UNSUPPORTED, "vulkan %s: layout 1 (NHWC) is not implemented", op);
  const int64_t *at = sig->attrs->i;
  const int64_t sh = at[0], sw = at[1], ph = at[2], pw = at[3], dh = at[4], dw = at[5], g = at[6];
  const ctn_tensor_desc *cx, *cw, *cy;
  switch (kind) {
    case 0: cx = &a, cw = &b, cy = &y; break;
    case 1: cx = &y, cw = &b, cy = &a; break;
    default: cx = &a, cw = &y, cy = &b; break;
  }
  const int64_t n = cx->shape[0], c = cx->shape[1], h = cx->shape[2], w = cx->shape[3];
  const int64_t o = cw->shape[0], kh = cw->shape[2], kw = cw->shape[3], ho = cy->shape[2], wo = cy->shape[3];
  if ((st = fits(be, sig)) != CTN_OK) return st;
  for (int64_t v : {sh, sw, ph, pw, dh, dw})
    if (v > (int64_t(1) << 20)) return decline(be, sig, "attribute values above 2^20");
  std::vector<uint32_t> p = {u32(n), u32(c), u32(h), u32(w), u32(o), u32(kh), u32(kw), u32(ho),
                             u32(wo), u32(sh), u32(sw), u32(ph), u32(pw), u32(dh), u32(dw), u32(g)};
  Kernel *k = nullptr;
  if ((st = kernel_new(be, op, p, &k)) != CTN_OK) return st;
  std::string name;
  const uint64_t items = static_cast<uint64_t>(desc_numel(y));
  // CPU drivers (lavapipe): the implicit-GEMM subgroup kernel (conv_sg.comp), unless an operand
  // is empty, the grid does not fit, or CHUTNEY_VULKAN_DIRECT_CONV=1.
  const uint32_t sgs = be.subgroup_size;
  if (be.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && be.subgroup_ballot && (sgs == 4 || sgs == 8 || sgs == 16) &&
      sgs <= be.max_wg_x && !ctn_backend_util::env_flag("CHUTNEY_VULKAN_DIRECT_CONV") &&
      desc_numel(a) > 0 && desc_numel(b) > 0 && items > 0) {
    const int64_t rows = kind == 1 ? c / g : o / g;
    const int64_t cols = kind == 0 ? n * ho * wo : kind == 1 ? n * h * w : (c / g) * kh * kw;
    const uint64_t gx = (static_cast<uint64_t>(cols) + 4 * sgs - 1) / (4 * sgs);
    const uint64_t gy = (static_cast<uint64_t>(rows) + 2 * sgs - 1) / (2 * sgs);
    if (gx <= be.max_groups_x && gy <= be.max_groups_y && static_cast<uint64_t>(g) <= be.max_groups_z) {
      const Pipeline *pipe = nullptr;
      name = "conv_sg" + std::to_string(sgs) + "." + dtype_name(a.dtype);
      if ((st = get_pipeline(be, name.c_str(), {static_cast<int32_t>(sgs), 1, kind}, 4, &pipe)) != CTN_OK) {
        kernel_delete(k);
        return st;
      }
      Cmd cmd;
      cmd.pipe = pipe;
      cmd.nb = 4;
      cmd.b[0] = whole(0, a);
      cmd.b[1] = whole(1, b);
      cmd.b[2] = whole(kOut, y);
      cmd.b[3] = params_bind(p);
      cmd.gx = static_cast<uint32_t>(gx);
      cmd.gy = static_cast<uint32_t>(gy);
      cmd.gz = static_cast<uint32_t>(g);
      k->cmds.push_back(std::move(cmd));
      kernel_publish(k, out);
      return CTN_OK;
    }
  }
  const uint32_t wg = kind == 2 ? wg_for(be, n * ho * wo) : be.wg1d;
  const Pipeline *pipe = nullptr;
  if ((st = get_pipeline(be, variant("conv", a.dtype, &name), {static_cast<int32_t>(wg), 1, kind}, 4, &pipe)) !=
      CTN_OK) {
    kernel_delete(k);
    return st;
  }
  Cmd proto;
  proto.nb = 4;
  proto.b[0] = whole(0, a);
  proto.b[1] = whole(1, b);
  proto.b[2] = whole(kOut, y);
  proto.b[3] = params_bind(p);
  if (kind == 2) {
    add_groups(be, k, pipe, proto, items);
  } else if ((st = add_flat(be, sig, k, pipe, proto, items)) != CTN_OK) {
    kernel_delete(k);
    return st;
  }
  kernel_publish(k, out);
  return CTN_OK;
}

// ---- pooling --------------------------------------------------------------------------------------

ctn_status make_pool(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, int kind) {
  // kind 0 max, 1 max-grad, 2 avg, 3 avg-grad.
  const char *op = sig->op;
  const ctn_tensor_desc &y = *sig->output;
  ctn_status st = CTN_OK;
  if (!float_ok(be, sig, y.dtype, &st, true)) return st;  // f16/bf16: compared and summed in f32
  const uint32_t layout_slot = kind == 0 ? 6 : 7;  // layout (since 1.7): NCHW only
  if ((kind == 0 || kind == 2) && sig->attrs->ni > layout_slot && sig->attrs->i[layout_slot] != 0)
    return be.host->set_error(CTN_ERR_UNSUPPORTED, "vulkan %s: layout 1 (NHWC) is not implemented", op);
  const bool grad = kind == 1 || kind == 3;
  const ctn_tensor_desc &big = kind == 3 ? y : sig->inputs[0];
  const ctn_tensor_desc &small = kind == 3 ? sig->inputs[0] : grad ? sig->inputs[2] : y;
  const int64_t *at = sig->attrs->i;
  const int64_t kh = at[0], kw = at[1], sh = at[2], sw = at[3], ph = at[4], pw = at[5];
  const bool include_pad = (kind == 2 || kind == 3) && at[6] != 0;
  const int64_t h = big.shape[2], w = big.shape[3], ho = small.shape[2], wo = small.shape[3];
  bool ok = kh >= 1 && kw >= 1 && sh >= 1 && sw >= 1 && ph >= 0 && pw >= 0 && 2 * ph <= kh && 2 * pw <= kw &&
            small.shape[0] == big.shape[0] && small.shape[1] == big.shape[1] && h + 2 * ph >= kh &&
            w + 2 * pw >= kw && ho == (h + 2 * ph - kh) / sh + 1 && wo == (w + 2 * pw - kw) / sw + 1;
  if (kind == 1) ok = ok && same_shape(sig->inputs[1], small) && same_shape(y, big);
  if ((st = fits(be, sig)) != CTN_OK) return st;
  for (int64_t v : {kh, kw, sh, sw})
    if (v > (int64_t(1) << 20)) return decline(be, sig, "attribute values above 2^20");
  std::vector<uint32_t> p = {u32(big.shape[0] * big.shape[1]), u32(h), u32(w), u32(ho), u32(wo), u32(kh),
                             u32(kw), u32(sh), u32(sw), u32(ph), u32(pw), include_pad ? 1u : 0u};
  Kernel *k = nullptr;
  if ((st = kernel_new(be, op, p, &k)) != CTN_OK) return st;
  std::string name;
  const Pipeline *pipe = nullptr;
  if ((st = get_pipeline(be, variant("pool", y.dtype, &name), {static_cast<int32_t>(be.wg1d), 1, kind}, 4, &pipe)) !=
      CTN_OK) {
    kernel_delete(k);
    return st;
  }
  Cmd proto;
  proto.nb = 4;
  proto.b[0] = whole(0, sig->inputs[0]);
  proto.b[1] = kind == 1 ? whole(2, sig->inputs[2]) : whole(0, sig->inputs[0]);
  proto.b[2] = whole(kOut, y);
  proto.b[3] = params_bind(p);
  if ((st = add_flat(be, sig, k, pipe, proto, static_cast<uint64_t>(desc_numel(y)))) != CTN_OK) {
    kernel_delete(k);
    return st;
  }
  kernel_publish(k, out);
  return CTN_OK;
}

// ---- batch norm and layer norm ------------------------------------------------------------------------

// kind: 0 bn, 1 bn-grad-input, 2 bn-grad-gamma, 3 bn-inference, 4 ln, 5 ln-grad-input, 7 ln-grad-gamma.
ctn_status make_norm(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, int kind, uint32_t n_in) {
  const char *op = sig->op;
  const ctn_tensor_desc &x = sig->inputs[0], &y = *sig->output;
  ctn_status st = CTN_OK;
  if (!float_ok(be, sig, x.dtype, &st, true)) return st;  // f16/bf16: statistics in f32
  const bool ln = kind >= 4;
  int64_t outer = 0, ch = 0, inner = 1, rows = 1, len = 1;
  if (ln) {
    const int64_t a = sig->attrs->i[0];
    for (uint32_t k = 0; k < x.ndim; ++k) (static_cast<int64_t>(k) < a ? rows : len) *= x.shape[k];
  } else {
    outer = x.shape[0];
    ch = x.shape[1];
    for (uint32_t k = 2; k < x.ndim; ++k) inner *= x.shape[k];
    bool ok = kind == 2 ? (y.ndim == 1 && y.shape[0] == ch && same_shape(sig->inputs[1], x)) : same_shape(x, y);
    for (uint32_t i = 1; ok && i < n_in; ++i) {
      const ctn_tensor_desc &d = sig->inputs[i];
      bool full = (kind == 1 && i == 2) || (kind == 2 && i == 1);
      ok = full ? same_shape(d, x) : (d.ndim == 1 && d.shape[0] == ch);
    }
  }
  const uint64_t tsz = x.dtype == CTN_F64 ? 8 : 4;  // the workspace holds T (f32 for 16 bits)
  const uint64_t ws = kind == 7 ? static_cast<uint64_t>(rows) * 2 * tsz : 0;
  if ((st = fits(be, sig, ws)) != CTN_OK) return st;
  std::vector<uint32_t> p(16, 0);
  p[0] = u32(ln ? rows : outer);
  p[1] = u32(ln ? len : ch);
  p[2] = u32(inner);
  put_f(p, 4, sig->attrs->f[0]);
  Kernel *k = nullptr;
  if ((st = kernel_new(be, op, p, &k)) != CTN_OK) return st;
  std::string name;
  variant("norm", x.dtype, &name);
  const uint32_t wg = wg_for(be, ln ? len : outer * inner);
  Cmd proto;
  proto.nb = 8;
  proto.b[0] = whole(0, x);
  for (uint32_t i = 1; i <= 4; ++i) proto.b[i] = i < n_in ? whole(static_cast<int8_t>(i), sig->inputs[i]) : whole(0, x);
  proto.b[5] = whole(kOut, y);
  proto.b[6] = params_bind(p);
  proto.b[7] = ws ? Bind{kWork, static_cast<uint32_t>(tsz), 0, ws} : Bind{};
  const Pipeline *pipe = nullptr;
  if (kind == 7) {
    // Row statistics into the workspace, then one invocation per column.
    const Pipeline *stats = nullptr;
    if ((st = get_pipeline(be, name.c_str(), {static_cast<int32_t>(wg), 1, 6}, 8, &stats)) != CTN_OK ||
        (st = get_pipeline(be, name.c_str(), {static_cast<int32_t>(be.wg1d), 1, 7}, 8, &pipe)) != CTN_OK) {
      kernel_delete(k);
      return st;
    }
    if (len > 0) add_groups(be, k, stats, proto, static_cast<uint64_t>(rows));
    if ((st = add_flat(be, sig, k, pipe, proto, static_cast<uint64_t>(len))) != CTN_OK) {
      kernel_delete(k);
      return st;
    }
  } else {
    if ((st = get_pipeline(be, name.c_str(), {static_cast<int32_t>(wg), 1, kind}, 8, &pipe)) != CTN_OK) {
      kernel_delete(k);
      return st;
    }
    // Layer norm: one workgroup per row (none when rows are empty); batch norm: one per channel.
    uint64_t groups = static_cast<uint64_t>(ln ? (len > 0 ? rows : 0) : ch);
    if (!ln && outer * inner == 0 && kind != 3 && kind != 2) groups = 0;  // nothing to write
    add_groups(be, k, pipe, proto, groups);
  }
  kernel_publish(k, out, 0, ws);
  return CTN_OK;
}

// ---- embedding --------------------------------------------------------------------------------------

ctn_status make_embedding(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, bool grad) {
  const char *op = sig->op;
  const ctn_tensor_desc &ids = sig->inputs[grad ? 0 : 1], &vals = sig->inputs[grad ? 1 : 0], &y = *sig->output;
  ctn_status st = CTN_OK;
  if (!float_ok(be, sig, vals.dtype, &st)) return st;
  const ctn_tensor_desc &table = grad ? y : vals;
  const int64_t v = table.shape[0], d = table.shape[1], n_ids = desc_numel(ids);
  if ((st = fits(be, sig)) != CTN_OK) return st;
  std::vector<uint32_t> p(16, 0);
  p[0] = u32(v);
  p[1] = u32(d);
  p[2] = u32(n_ids);
  p[3] = ids.dtype == CTN_I64;
  Kernel *k = nullptr;
  if ((st = kernel_new(be, op, p, &k)) != CTN_OK) return st;
  k->checks_error = true;
  k->error_kind = Kernel::kErrId;
  k->error_limit = static_cast<uint64_t>(v);
  std::string name;
  const Pipeline *pipe = nullptr;
  if ((st = get_pipeline(be, variant("embed", vals.dtype, &name), {static_cast<int32_t>(be.wg1d), 1, grad ? 1 : 0}, 4,
                         &pipe)) != CTN_OK) {
    kernel_delete(k);
    return st;
  }
  Cmd proto;
  proto.nb = 4;
  proto.b[0] = whole(grad ? 1 : 0, vals);
  proto.b[1] = Bind{static_cast<int8_t>(grad ? 0 : 1), 4, 0, std::max<uint64_t>(desc_bytes(ids), 4)};
  proto.b[2] = whole(kOut, y);
  proto.b[3] = params_bind(p);
  // The gradient always runs (at least invocation 0, which validates every id); the forward only
  // where it has elements to write, which also check their ids.
  uint64_t items = static_cast<uint64_t>(desc_numel(y));
  if (grad && items == 0 && n_ids > 0) items = 1;
  if (grad) {
    proto.count = static_cast<uint32_t>(desc_numel(y));
    if (items && !grid_1d(be, items, be.wg1d, &proto.gx, &proto.gy)) {
      kernel_delete(k);
      return decline(be, sig, "too many elements for the grid");
    }
    proto.pipe = pipe;
    if (items) k->cmds.push_back(proto);
  } else if ((st = add_flat(be, sig, k, pipe, proto, items)) != CTN_OK) {
    kernel_delete(k);
    return st;
  }
  kernel_publish(k, out);
  return CTN_OK;
}

}  // namespace

ctn_status make_nn_kernel(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  const char *op = sig->op;
  *handled = true;
  if (!std::strcmp(op, CTN_OP_CONV2D)) return make_conv(be, sig, out, 0);
  if (!std::strcmp(op, CTN_OP_CONV2D_GRAD_INPUT) || !std::strcmp(op, CTN_OP_CONV_TRANSPOSE2D))
    return make_conv(be, sig, out, 1);
  if (!std::strcmp(op, CTN_OP_CONV2D_GRAD_WEIGHT)) return make_conv(be, sig, out, 2);
  if (!std::strcmp(op, CTN_OP_MAX_POOL2D)) return make_pool(be, sig, out, 0);
  if (!std::strcmp(op, CTN_OP_MAX_POOL2D_GRAD)) return make_pool(be, sig, out, 1);
  if (!std::strcmp(op, CTN_OP_AVG_POOL2D)) return make_pool(be, sig, out, 2);
  if (!std::strcmp(op, CTN_OP_AVG_POOL2D_GRAD)) return make_pool(be, sig, out, 3);
  if (!std::strcmp(op, CTN_OP_BATCH_NORM)) return make_norm(be, sig, out, 0, 3);
  if (!std::strcmp(op, CTN_OP_BATCH_NORM_GRAD_INPUT)) return make_norm(be, sig, out, 1, 3);
  if (!std::strcmp(op, CTN_OP_BATCH_NORM_GRAD_GAMMA)) return make_norm(be, sig, out, 2, 2);
  if (!std::strcmp(op, CTN_OP_BATCH_NORM_INFERENCE)) return make_norm(be, sig, out, 3, 5);
  if (!std::strcmp(op, CTN_OP_LAYER_NORM)) return make_norm(be, sig, out, 4, 3);
  if (!std::strcmp(op, CTN_OP_LAYER_NORM_GRAD_INPUT)) return make_norm(be, sig, out, 5, 3);
  if (!std::strcmp(op, CTN_OP_LAYER_NORM_GRAD_GAMMA)) return make_norm(be, sig, out, 7, 2);
  if (!std::strcmp(op, CTN_OP_EMBEDDING)) return make_embedding(be, sig, out, false);
  if (!std::strcmp(op, CTN_OP_EMBEDDING_GRAD)) return make_embedding(be, sig, out, true);
  *handled = false;
  return CTN_OK;
}

}  // namespace ctn_vk
