// matmul and matmul_bias_act: the tiled shader (shared-memory tiles of A and B), batched over
// broadcast batch dims through the z grid dimension. Tile sizes follow the device's limits.
#include <cstdlib>
#include <string>

#include "vk_backend.h"

namespace ctn_vk {

ctn_status make_matmul_kernel(Backend &be, const ctn_op_signature *sig, ctn_kernel *out, bool *handled) {
  bool fused = false;
  if (!is_matmul_op(sig->op, &fused)) return CTN_OK;
  *handled = true;
  const ctn_tensor_desc &a = sig->inputs[0], &b = sig->inputs[1], &y = *sig->output;
  ctn_status st = CTN_OK;
  if (!float_ok(be, sig, a.dtype, &st, true)) return st;  // f16/bf16: products summed in f32
  const MatmulDims dims = matmul_dims(sig);
  const bool ta = dims.ta, tb = dims.tb;
  const int64_t m = dims.m, n = dims.n, k = dims.k;
  const ctn_tensor_desc &ab = dims.a_batch, &bb = dims.b_batch, &yb = dims.y_batch;
  const int act = fused ? dims.act : -1;
  if (yb.ndim > 6) return decline(be, sig, "more than 6 batch dims");
  for (uint32_t i = 0; i <= sig->n_inputs; ++i) {
    const ctn_tensor_desc &d = i < sig->n_inputs ? sig->inputs[i] : y;
    if (desc_bytes(d) + be.align > be.max_range)
      return decline(be, sig, "operand %u (%llu bytes) exceeds maxStorageBufferRange (%llu)", i,
                     static_cast<unsigned long long>(desc_bytes(d)), static_cast<unsigned long long>(be.max_range));
  }
  std::vector<uint32_t> p(32, 0);
  p[0] = static_cast<uint32_t>(m);
  p[1] = static_cast<uint32_t>(n);
  p[2] = static_cast<uint32_t>(k);
  p[3] = static_cast<uint32_t>(ta ? 1 : k);  // A(i, p) = a[i * rsa + p * csa]
  p[4] = static_cast<uint32_t>(ta ? m : 1);
  p[5] = static_cast<uint32_t>(tb ? 1 : n);
  p[6] = static_cast<uint32_t>(tb ? k : 1);
  int64_t sa[CTN_MAX_DIMS] = {}, sb[CTN_MAX_DIMS] = {};
  broadcast_strides(ab, yb, sa);
  broadcast_strides(bb, yb, sb);
  p[7] = yb.ndim;
  for (uint32_t d = 0; d < yb.ndim; ++d) {
    p[8 + d] = static_cast<uint32_t>(yb.shape[d]);
    p[14 + d] = static_cast<uint32_t>(sa[d] * m * k);
    p[20 + d] = static_cast<uint32_t>(sb[d] * k * n);
  }
  const int64_t batches = desc_numel(yb);
  // 64x64 tiles with 16x16 invocations (4x4 outputs each) when the device allows 256 invocations
  // and the tiles fit the shared-memory budget; 32x32 with 8x8 otherwise.
  const uint32_t esz = static_cast<uint32_t>(dtype_size(a.dtype));
  const uint32_t tsz = a.dtype == CTN_F64 ? 8 : 4;  // the shared tiles hold T (f32 for 16 bits)
  int bm = 64, bn = 64, bk = 16, tx = 16, ty = 16;
  if (be.max_invocations < 256 || be.max_wg_x < 16 || be.max_wg_y < 16 ||
      2u * bk * (bm + bn) * tsz > be.max_shared || ctn_backend_util::env_flag("CHUTNEY_VULKAN_SMALL_TILES")) {
    bm = bn = 32;
    tx = ty = 8;
  }
  // CPU drivers (lavapipe): the subgroup kernel, a 2S x 4S block per workgroup of one subgroup
  // (see matmul_sg.comp); CHUTNEY_VULKAN_TILED_MATMUL=1 forces the tiled one.
  const uint32_t sgs = be.subgroup_size;
  const bool use_sg = be.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && be.subgroup_ballot &&
                      (sgs == 4 || sgs == 8 || sgs == 16) && sgs <= be.max_wg_x && !ctn_backend_util::env_flag("CHUTNEY_VULKAN_TILED_MATMUL");
  std::string sg_name;
  if (use_sg) {
    sg_name = "matmul_sg" + std::to_string(sgs) + "." + dtype_name(a.dtype);
    bm = static_cast<int>(2 * sgs);
    bn = static_cast<int>(4 * sgs);
    tx = static_cast<int>(sgs);
    ty = 1;
    bk = 0;
  }
  Kernel *kern = nullptr;
  if ((st = kernel_new(be, sig->op, p, &kern)) != CTN_OK) return st;
  const Pipeline *pipe = nullptr;
  const std::string tiled_name = std::string("matmul.") + dtype_name(a.dtype);
  if ((st = get_pipeline(be, use_sg ? sg_name.c_str() : tiled_name.c_str(),
                         {tx, ty, bm, bn, bk, act}, 5, &pipe)) != CTN_OK) {
    kernel_delete(kern);
    return st;
  }
  uint64_t gx = (static_cast<uint64_t>(n) + bn - 1) / bn, gy = (static_cast<uint64_t>(m) + bm - 1) / bm;
  if (gx > be.max_groups_x || gy > be.max_groups_y) {
    kernel_delete(kern);
    return decline(be, sig, "matrix too large for one dispatch grid");
  }
  if (m > 0 && n > 0) {
    for (int64_t z0 = 0; z0 < batches; z0 += be.max_groups_z) {
      Cmd c;
      c.pipe = pipe;
      c.nb = 5;
      c.b[0] = Bind{0, esz, 0, std::max<uint64_t>(desc_bytes(a), esz)};
      c.b[1] = Bind{1, esz, 0, std::max<uint64_t>(desc_bytes(b), esz)};
      c.b[2] = fused ? Bind{2, esz, 0, std::max<uint64_t>(desc_bytes(sig->inputs[2]), esz)} : Bind{};
      c.b[3] = Bind{kOut, esz, 0, std::max<uint64_t>(desc_bytes(y), esz)};
      c.b[4] = Bind{kParams, 4, 0, p.size() * 4};
      c.base = static_cast<uint32_t>(z0);
      c.gx = static_cast<uint32_t>(gx);
      c.gy = static_cast<uint32_t>(gy);
      c.gz = static_cast<uint32_t>(std::min<int64_t>(batches - z0, be.max_groups_z));
      kern->cmds.push_back(std::move(c));
    }
  }
  kernel_publish(kern, out);
  return CTN_OK;
}

}  // namespace ctn_vk
