// Elementwise kernels: unary, binary with broadcasting, backward helpers, comparisons, where,
// cast, copy and the optimizer updates. Outputs (and inputs laid out like them) are processed in
// windows that fit maxStorageBufferRange, one dispatch per window.
#include <cmath>

#include "vk_backend.h"
#include "vk_ew_ops.h"

namespace ctn_vk {
namespace {

enum Kind { kFloat, kCompare, kWhere, kCast, kCopy };

struct EwEntry {
  const char *name;
  Kind kind;
  int code;  // CTN_EW_* (vk_ew_ops.h, generated from backends/common/ew_ops.py)
  uint32_t nin;
};

// The ops of ew.comp and cmp.comp come from the generated list; where, cast and copy have their
// own shaders.
bool find_entry(const char *op, EwEntry *e) {
  if (const ctn_ew::Op *o = ctn_ew::find(op)) {
    *e = {o->name, o->group == ctn_ew::kCompare ? kCompare : kFloat, o->code, o->nin};
    return true;
  }
  static const EwEntry kOther[] = {
      {CTN_OP_WHERE, kWhere, 0, 3},
      {CTN_OP_CAST, kCast, 0, 1},
      {CTN_OP_COPY, kCopy, 0, 1},
  };
  for (const EwEntry &c : kOther)
    if (!std::strcmp(c.name, op)) {
      *e = c;
      return true;
    }
  return false;
}

constexpr size_t kParamWords = 68;

void put_double(std::vector<uint32_t> &p, size_t at, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  p[at] = static_cast<uint32_t>(bits);
  p[at + 1] = static_cast<uint32_t>(bits >> 32);
}

void put_float(std::vector<uint32_t> &p, size_t at, double v) {
  float f = static_cast<float>(v);
  std::memcpy(&p[at], &f, 4);
}


// Broadcast params (p[0..51]) and the per-input mode: 0 layout of the output, 1 one element,
// 2 strided. False when an input does not broadcast to the output.
bool broadcast_params(const ctn_op_signature *sig, uint32_t n_in, std::vector<uint32_t> &p, int *mode) {
  const ctn_tensor_desc &out = *sig->output;
  const int64_t n = desc_numel(out);
  int64_t full[5][CTN_MAX_DIMS] = {};
  bool general = false;
  for (uint32_t j = 0; j < n_in; ++j) {
    const ctn_tensor_desc &in = sig->inputs[j];
    if (!broadcast_strides(in, out, full[j])) return false;
    int64_t numel = desc_numel(in);
    mode[j] = same_shape(in, out) || numel == n ? 0 : numel == 1 ? 1 : 2;
    general = general || mode[j] == 2;
  }
  if (!general) return true;
  int nd = 0;
  int64_t shape[CTN_MAX_DIMS] = {}, str[5][CTN_MAX_DIMS] = {};
  for (uint32_t k = 0; k < out.ndim; ++k) {
    if (out.shape[k] == 1) continue;
    bool merge = nd > 0;
    for (uint32_t j = 0; merge && j < n_in; ++j) merge = str[j][nd - 1] == full[j][k] * out.shape[k];
    if (merge) {
      shape[nd - 1] *= out.shape[k];
      for (uint32_t j = 0; j < n_in; ++j) str[j][nd - 1] = full[j][k];
    } else {
      shape[nd] = out.shape[k];
      for (uint32_t j = 0; j < n_in; ++j) str[j][nd] = full[j][k];
      ++nd;
    }
  }
  if (nd == 0) shape[nd++] = 1;
  p[0] = static_cast<uint32_t>(nd);
  for (int k = 0; k < nd; ++k) {
    p[1 + k] = static_cast<uint32_t>(shape[k]);
    for (uint32_t j = 0; j < n_in; ++j) p[9 + 8 * j + k] = static_cast<uint32_t>(str[j][k]);
  }
  return true;
}

// Elements per window: a multiple of 1024 whose bytes fit the storage range of every binding.
uint64_t window_elems(const Backend &be, uint64_t max_esize) {
  uint64_t w = (be.max_range - be.align) / max_esize / 1024 * 1024;
  return std::max<uint64_t>(w, 1024);
}

bool is_half(int32_t dt) { return dt == CTN_F16 || dt == CTN_BF16; }
// The cast shader's dtypes: the six of 1.0 and the 16-bit floats (not i8, nor the 1.6 integers).
bool cast_ok(int32_t dt) { return dt < CTN_DTYPE_COUNT_V1 || is_half(dt); }

// copy and cast: a buffer copy when the dtypes agree, else the cast shader (its HALF16 variant
// when an operand is a 16-bit float: those bind at 2 and 3 instead of 0 and 1).
ctn_status make_copy_cast_kernel(Backend &be, const ctn_op_signature *sig, ctn_kernel *out) {
  const char *op = sig->op;
  const ctn_tensor_desc &o = *sig->output;
  const ctn_tensor_desc &a = sig->inputs[0];
  const int64_t n = desc_numel(o);
  ctn_status st = CTN_OK;
  Kernel *k = nullptr;
  if ((st = kernel_new(be, op, {}, &k)) != CTN_OK) return st;
  if (a.dtype == o.dtype) {
    // A buffer copy: no shader, any size, any dtype.
    Cmd c;
    c.kind = Cmd::kCopy;
    c.src = 0;
    c.dst = kOut;
    if (n > 0) c.regions.push_back(VkBufferCopy{0, 0, desc_bytes(o)});
    k->cmds.push_back(std::move(c));
    kernel_publish(k, out, CTN_KERNEL_INPLACE_OK);
    return CTN_OK;
  }
  const bool h16 = is_half(a.dtype) || is_half(o.dtype);
  if (!cast_ok(a.dtype) || !cast_ok(o.dtype) || (!be.has_f64 && (a.dtype == CTN_F64 || o.dtype == CTN_F64)) ||
      (h16 && !be.has_16bit)) {
    kernel_delete(k);
    if (!cast_ok(a.dtype) || !cast_ok(o.dtype))
      return decline(be, sig, "casts of %s are not implemented", dtype_name(cast_ok(a.dtype) ? o.dtype : a.dtype));
    if (h16 && !be.has_16bit)
      return decline(be, sig, "unavailable for %s: the device lacks storageBuffer16BitAccess",
                     dtype_name(is_half(a.dtype) ? a.dtype : o.dtype));
    return decline(be, sig, "f64 needs shaderFloat64, which %s lacks", be.props.deviceName);
  }
  const char *shader = be.has_f64 ? (h16 ? "cast.f64.h16" : "cast.f64") : (h16 ? "cast.h16" : "cast");
  const Pipeline *pipe = nullptr;
  if ((st = get_pipeline(be, shader, {static_cast<int32_t>(be.wg1d), 1, a.dtype, o.dtype}, h16 ? 4 : 2,
                         &pipe)) != CTN_OK) {
    kernel_delete(k);
    return st;
  }
  const uint64_t isz = dtype_size(a.dtype), osz = dtype_size(o.dtype);
  const uint64_t win = window_elems(be, 8);
  for (uint64_t c0 = 0; c0 < static_cast<uint64_t>(n); c0 += win) {
    uint64_t cnt = std::min<uint64_t>(win, n - c0);
    Cmd c;
    c.pipe = pipe;
    c.nb = h16 ? 4 : 2;
    for (uint32_t j = 0; j < c.nb; ++j) c.b[j] = Bind{};
    c.b[isz == 2 ? 2 : 0] = Bind{0, isz == 2 ? 2u : 4u, c0 * isz, cnt * isz};
    c.b[osz == 2 ? 3 : 1] = Bind{kOut, osz == 2 ? 2u : 4u, c0 * osz, cnt * osz};
    c.count = static_cast<uint32_t>(cnt);
    uint64_t items = osz == 1 ? (cnt + 3) / 4 : cnt;
    if (ctn_status st = push_1d(be, sig, k, c, items); st) return st;
  }
  kernel_publish(k, out);
  return CTN_OK;
}

}  // namespace

ctn_status make_elementwise_kernel(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  EwEntry entry;
  if (!find_entry(sig->op, &entry)) return CTN_OK;
  const EwEntry *e = &entry;
  *handled = true;
  const ctn_host_api *host = be.host;
  const char *op = sig->op;
  const ctn_tensor_desc &o = *sig->output;
  const ctn_tensor_desc &a = sig->inputs[0];
  const int64_t n = desc_numel(o);
  ctn_status st = CTN_OK;

  if (e->kind == kCopy || e->kind == kCast) return make_copy_cast_kernel(be, sig, out);

  // Dtypes.
  const char *shader = nullptr;
  int32_t tdt = a.dtype;  // the T of the shader
  if (e->kind == kWhere) {
    tdt = sig->inputs[1].dtype;
    if (!float_ok(be, sig, tdt, &st, true)) return st;
    shader = tdt == CTN_F32 ? "where.f32" : tdt == CTN_F64 ? "where.f64" : "where.h16";
  } else if (e->kind == kCompare) {
    if (a.dtype == CTN_I32) shader = "cmp.i32";
    else if (a.dtype == CTN_F32) shader = "cmp.f32";
    else if (a.dtype == CTN_F64 && be.has_f64) shader = "cmp.f64";
    else if (a.dtype == CTN_F64) return decline(be, sig, "f64 needs shaderFloat64, which %s lacks", be.props.deviceName);
    else if (is_half(a.dtype) && float_ok(be, sig, a.dtype, &st, true)) shader = a.dtype == CTN_F16 ? "cmp.f16" : "cmp.bf16";
    else if (is_half(a.dtype)) return st;
    else return decline(be, sig, "comparisons of %s are not implemented (f32, f64, f16, bf16, i32)", dtype_name(a.dtype));
  } else {
    // Float ops (the optimizer's step input, adam_apply's last, is i64). The formula ops (codes
    // below the optimizer groups) have 16-bit shaders too.
    if (!float_ok(be, sig, a.dtype, &st, e->code < CTN_EW_FIRST_OPTIM2)) return st;
    shader = a.dtype == CTN_F32 ? "ew.f32" : a.dtype == CTN_F64 ? "ew.f64" : a.dtype == CTN_F16 ? "ew.f16" : "ew.bf16";
  }
  std::vector<uint32_t> p(kParamWords, 0);
  int mode[5] = {};
  broadcast_params(sig, sig->n_inputs, p, mode);
  p[52] = static_cast<uint32_t>(sig->attrs->i[0] != 0);
  for (int i = 0; i < 4; ++i) {
    put_float(p, 56 + i, sig->attrs->f[i]);
    put_double(p, 60 + 2 * i, sig->attrs->f[i]);
  }
  if (e->code == CTN_EW_DROPOUT && e->kind == kFloat) {  // dropout: seed, threshold and scale as the CPU backend computes them
    const double pr = sig->attrs->f[0];
    const uint64_t seed = static_cast<uint64_t>(sig->attrs->i[0]);
    p[49] = static_cast<uint32_t>(seed);
    p[50] = static_cast<uint32_t>(seed >> 32);
    p[51] = static_cast<uint32_t>(std::floor(pr * 16777216.0));
    put_float(p, 57, 1.0 / (1.0 - pr));
    put_double(p, 62, 1.0 / (1.0 - pr));
  }
  // Whole-bound inputs (broadcast or scalar) must fit one descriptor range.
  for (uint32_t j = 0; j < sig->n_inputs; ++j)
    if (mode[j] != 0 && desc_bytes(sig->inputs[j]) + be.align > be.max_range)
      return decline(be, sig, "broadcast input %u of %llu bytes exceeds maxStorageBufferRange", j,
                     static_cast<unsigned long long>(desc_bytes(sig->inputs[j])));
  Kernel *k = nullptr;
  if ((st = kernel_new(be, op, p, &k)) != CTN_OK) return st;
  const bool cmp = e->kind == kCompare;
  std::vector<int32_t> spec = {static_cast<int32_t>(be.wg1d), 1, e->code};
  for (uint32_t j = 0; j < (cmp ? 2u : 4u); ++j) spec.push_back(j < sig->n_inputs ? mode[j] : 1);
  const Pipeline *pipe = nullptr;
  const uint32_t nb = cmp ? 4 : 7;
  if ((st = get_pipeline(be, shader, spec, nb, &pipe)) != CTN_OK) {
    kernel_delete(k);
    return st;
  }
  const uint64_t tsz = dtype_size(tdt);
  const uint64_t win = window_elems(be, 8);
  for (uint64_t c0 = 0; c0 < static_cast<uint64_t>(std::max<int64_t>(n, 1)); c0 += win) {
    uint64_t cnt = std::min<uint64_t>(win, static_cast<uint64_t>(n) - std::min<uint64_t>(c0, n));
    if (n == 0) break;
    Cmd c;
    c.pipe = pipe;
    c.nb = nb;
    for (uint32_t j = 0; j < 5; ++j) c.b[j] = Bind{};
    for (uint32_t j = 0; j < sig->n_inputs; ++j) {
      const ctn_tensor_desc &in = sig->inputs[j];
      uint64_t isz = dtype_size(in.dtype);
      const bool step = e->code >= CTN_EW_FIRST_STEP && e->kind == kFloat && j + 1 == sig->n_inputs;
      const uint32_t slot = step ? 4 : j;  // ew.comp reads the i64 step as words at binding 4
      uint32_t unit = (in.dtype == CTN_BOOL || step) ? 4 : static_cast<uint32_t>(isz);
      if (step && desc_numel(in) != 1) {
        kernel_delete(k);
        return host->set_error(CTN_ERR_SHAPE, "vulkan %s: step must have one element", op);
      }
      if (mode[j] == 0 && !step) c.b[slot] = Bind{static_cast<int8_t>(j), unit, c0 * isz, cnt * isz};
      else c.b[slot] = Bind{static_cast<int8_t>(j), unit, 0, std::max<uint64_t>(desc_bytes(in), 4)};
    }
    if (cmp) {
      c.b[2] = Bind{kOut, 4, c0, cnt};
      c.b[3] = Bind{kParams, 4, 0, kParamWords * 4};
    } else {
      c.b[5] = Bind{kOut, static_cast<uint32_t>(tsz), c0 * tsz, cnt * tsz};
      c.b[6] = Bind{kParams, 4, 0, kParamWords * 4};
    }
    c.base = static_cast<uint32_t>(c0);
    c.count = static_cast<uint32_t>(cnt);
    if (ctn_status st = push_1d(be, sig, k, c, cmp ? (cnt + 3) / 4 : cnt); st) return st;
  }
  uint32_t flags = 0;
  if (e->kind == kFloat && same_shape(a, o) && a.dtype == o.dtype) flags = CTN_KERNEL_INPLACE_OK;
  kernel_publish(k, out, flags);
  return CTN_OK;
}

}  // namespace ctn_vk
