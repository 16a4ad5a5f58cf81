// Reductions (sum, mean, max), the softmax family and cross-entropy: one workgroup per output
// element / row, combining in shared memory.
#include <cmath>
#include <limits>

#include "vk_backend.h"

namespace ctn_vk {
namespace {

// Workgroup size for `n` elements per group: a power of two up to the 1-D size.
uint32_t wg_for(const Backend &be, int64_t n) {
  uint32_t wg = 1;
  while (wg < be.wg1d && static_cast<int64_t>(wg) < n) wg *= 2;
  return std::max<uint32_t>(wg, 32u > be.wg1d ? be.wg1d : 32u);
}

ctn_status fits(Backend &be, const ctn_op_signature *sig) {
  for (uint32_t i = 0; i <= sig->n_inputs; ++i) {
    const ctn_tensor_desc &d = i < sig->n_inputs ? sig->inputs[i] : *sig->output;
    if (desc_bytes(d) + be.align > be.max_range)
      return decline(be, sig, "operand %u (%llu bytes) exceeds maxStorageBufferRange (%llu); only elementwise ops, "
                     "copies and casts split large tensors", i, static_cast<unsigned long long>(desc_bytes(d)),
                     static_cast<unsigned long long>(be.max_range));
  }
  return CTN_OK;
}

// Dispatches one workgroup per item in pieces of at most max_groups_x * max_groups_y.
void add_rows(Backend &be, Kernel *k, const Pipeline *pipe, const Cmd &proto, uint64_t items) {
  uint64_t per = static_cast<uint64_t>(be.max_groups_x) * be.max_groups_y;
  for (uint64_t b0 = 0; b0 < std::max<uint64_t>(items, 1); b0 += per) {
    if (items == 0) break;
    Cmd c = proto;
    c.pipe = pipe;
    c.base = static_cast<uint32_t>(b0);
    c.count = static_cast<uint32_t>(items);  // the shader compares base + group < count
    uint64_t n = std::min<uint64_t>(per, items - b0);
    c.gx = static_cast<uint32_t>(std::min<uint64_t>(n, be.max_groups_x));
    c.gy = static_cast<uint32_t>((n + c.gx - 1) / c.gx);
    k->cmds.push_back(std::move(c));
  }
}

void put_scale(std::vector<uint32_t> &p, size_t f32_at, size_t f64_at, double v) {
  float f = static_cast<float>(v);
  std::memcpy(&p[f32_at], &f, 4);
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  p[f64_at] = static_cast<uint32_t>(bits);
  p[f64_at + 1] = static_cast<uint32_t>(bits >> 32);
}

// "<shader>.<dtype>": reduce.comp and softmax.comp are built for f32, f64, f16 and bf16 (the
// 16-bit floats summed in f32).
std::string variant(const char *shader, int32_t dtype) { return std::string(shader) + "." + dtype_name(dtype); }

ctn_status make_reduce(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, int op) {
  const ctn_tensor_desc &x = sig->inputs[0], &y = *sig->output;
  ctn_status st = CTN_OK;
  if (!float_ok(be, sig, x.dtype, &st, true)) return st;
  if ((st = fits(be, sig)) != CTN_OK) return st;
  const uint64_t mask = static_cast<uint64_t>(sig->attrs->i[0]);
  const int64_t count = reduce_count(sig);
  std::vector<uint32_t> p(40, 0);
  int64_t istr[CTN_MAX_DIMS], s = 1;
  for (int k = static_cast<int>(x.ndim) - 1; k >= 0; --k) {
    istr[k] = s;
    s *= x.shape[k];
  }
  uint32_t nk = 0, nr = 0;
  for (uint32_t k = 0; k < x.ndim; ++k) {
    if ((mask >> k) & 1) {
      p[18 + nr] = static_cast<uint32_t>(x.shape[k]);
      p[26 + nr] = static_cast<uint32_t>(istr[k]);
      ++nr;
    } else {
      p[1 + nk] = static_cast<uint32_t>(x.shape[k]);
      p[9 + nk] = static_cast<uint32_t>(istr[k]);
      ++nk;
    }
  }
  p[0] = nk;
  p[17] = nr;
  p[34] = static_cast<uint32_t>(count);
  double scale = op == 1 ? (count ? 1.0 / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN()) : 1.0;
  put_scale(p, 35, 36, scale);
  Kernel *k = nullptr;
  if ((st = kernel_new(be, sig->op, p, &k)) != CTN_OK) return st;
  const Pipeline *pipe = nullptr;
  uint32_t wg = wg_for(be, count);
  if ((st = get_pipeline(be, variant("reduce", x.dtype).c_str(), {static_cast<int32_t>(wg), 1, op}, 3,
                         &pipe)) != CTN_OK) {
    kernel_delete(k);
    return st;
  }
  const uint64_t esz = dtype_size(x.dtype);
  Cmd proto;
  proto.nb = 3;
  proto.b[0] = Bind{0, static_cast<uint32_t>(esz), 0, std::max<uint64_t>(desc_bytes(x), esz)};
  proto.b[1] = Bind{kOut, static_cast<uint32_t>(esz), 0, std::max<uint64_t>(desc_bytes(y), esz)};
  proto.b[2] = Bind{kParams, 4, 0, p.size() * 4};
  add_rows(be, k, pipe, proto, static_cast<uint64_t>(desc_numel(y)));
  kernel_publish(k, out);
  return CTN_OK;
}

ctn_status make_softmax(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, int op) {
  const ctn_tensor_desc &x = sig->inputs[0];
  ctn_status st = CTN_OK;
  if (!float_ok(be, sig, x.dtype, &st, true)) return st;
  if ((st = fits(be, sig)) != CTN_OK) return st;
  const AxisDims d = axis_dims(x, sig->attrs->i[0]);
  const int64_t outer = d.outer, inner = d.inner, len = d.len;
  std::vector<uint32_t> p = {static_cast<uint32_t>(len), static_cast<uint32_t>(inner)};
  Kernel *k = nullptr;
  if ((st = kernel_new(be, sig->op, p, &k)) != CTN_OK) return st;
  const Pipeline *pipe = nullptr;
  if ((st = get_pipeline(be, variant("softmax", x.dtype).c_str(),
                         {static_cast<int32_t>(wg_for(be, len)), 1, op}, 4, &pipe)) != CTN_OK) {
    kernel_delete(k);
    return st;
  }
  const uint64_t esz = dtype_size(x.dtype), bytes = std::max<uint64_t>(desc_bytes(x), esz);
  Cmd proto;
  proto.nb = 4;
  proto.b[0] = Bind{0, static_cast<uint32_t>(esz), 0, bytes};
  proto.b[1] = op <= 1 ? Bind{0, static_cast<uint32_t>(esz), 0, bytes} : Bind{1, static_cast<uint32_t>(esz), 0, bytes};
  proto.b[2] = Bind{kOut, static_cast<uint32_t>(esz), 0, bytes};
  proto.b[3] = Bind{kParams, 4, 0, 64};
  add_rows(be, k, pipe, proto, static_cast<uint64_t>(len == 0 ? 0 : outer * inner));
  kernel_publish(k, out);
  return CTN_OK;
}

ctn_status make_ce(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, bool grad) {
  const ctn_tensor_desc &x = sig->inputs[0], &lab = sig->inputs[1], &y = *sig->output;
  ctn_status st = CTN_OK;
  if (!float_ok(be, sig, x.dtype, &st)) return st;
  if ((st = fits(be, sig)) != CTN_OK) return st;
  const int64_t n = x.shape[0];
  std::vector<uint32_t> p(16, 0);
  p[0] = static_cast<uint32_t>(n);
  p[1] = static_cast<uint32_t>(x.shape[1]);
  p[2] = lab.dtype == CTN_I64;
  Kernel *k = nullptr;
  if ((st = kernel_new(be, sig->op, p, &k)) != CTN_OK) return st;
  k->checks_error = true;
  const Pipeline *pipe = nullptr;
  uint32_t wg = grad ? be.wg1d : wg_for(be, n);
  if ((st = get_pipeline(be, x.dtype == CTN_F32 ? "ce.f32" : "ce.f64", {static_cast<int32_t>(wg), 1, grad ? 1 : 0}, 5,
                         &pipe)) != CTN_OK) {
    kernel_delete(k);
    return st;
  }
  const uint32_t esz = static_cast<uint32_t>(dtype_size(x.dtype));
  Cmd c;
  c.pipe = pipe;
  c.nb = 5;
  c.b[0] = Bind{0, esz, 0, std::max<uint64_t>(desc_bytes(x), esz)};
  c.b[1] = Bind{1, 4, 0, std::max<uint64_t>(desc_bytes(lab), 4)};
  c.b[2] = grad ? Bind{2, esz, 0, esz} : Bind{0, esz, 0, esz};
  c.b[3] = Bind{kOut, esz, 0, std::max<uint64_t>(desc_bytes(y), esz)};
  c.b[4] = Bind{kParams, 4, 0, 64};
  if (grad) {
    if (!grid_1d(be, static_cast<uint64_t>(n), wg, &c.gx, &c.gy)) {
      kernel_delete(k);
      return decline(be, sig, "too many rows");
    }
  }
  if (!grad || n > 0) k->cmds.push_back(std::move(c));
  kernel_publish(k, out);
  return CTN_OK;
}

}  // namespace

ctn_status make_reduce_kernel(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  return dispatch_reduce(
      sig->op, handled, [&](int c) { return make_reduce(be, sig, out, c); },
      [&](int c) { return make_softmax(be, sig, out, c); },
      [&](bool grad) { return make_ce(be, sig, out, grad); });
}

}  // namespace ctn_vk
