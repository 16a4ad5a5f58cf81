#version 450
// Batched matmul for CPU Vulkan drivers (lavapipe/llvmpipe), where one workgroup of S
// invocations is one subgroup = one SIMD register (S = 8 for 256-bit vectors). llvmpipe turns
// every storage-buffer or shared-memory load whose address differs between invocations into a
// loop over the lanes (a bounds check, a scalar load and an insert through the stack per lane),
// so the tiled shader (matmul.comp) spent its time in those loops: 8 such loads (4 of them for
// one value all lanes share) per 16 multiply-adds, 0.16 GFLOP/s. Here lane l loads A rows
// row0 + l and row0 + S + l and B columns col0 + l + q S (q < 4) once per k, and the A values
// are shared with subgroupBroadcast (a register extract on llvmpipe): 6 lane loads per 64
// multiply-adds, no shared memory, no barriers. Each workgroup computes a 2S x 4S block of C.
// Selected only for VK_PHYSICAL_DEVICE_TYPE_CPU devices whose subgroup size is S with ballot
// support in compute; GPUs use matmul.comp. Same params and bindings as matmul.comp.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#include "common.glsl"
#include "math.glsl"
#include "storage.glsl"  // ELEM: T, or f16/bf16 multiplied and summed in f32

#ifndef S
#define S 8
#endif
layout(constant_id = 5) const int ACT = -1;  // -1: plain matmul; else bias + CTN_ACT_*

layout(std430, binding = 0) readonly buffer B0 { ELEM a[]; };
layout(std430, binding = 1) readonly buffer B1 { ELEM b[]; };
layout(std430, binding = 2) readonly buffer B2 { ELEM bias[]; };
layout(std430, binding = 3) writeonly buffer B3 { ELEM c[]; };
layout(std430, binding = 4) readonly buffer B4 { uint p[]; };

#ifdef USE_F64
#define V4 dvec4
#else
#define V4 vec4
#endif

uint M, N, coff, row0, col0, lane;

void store(uint r, V4 v) {
  uint gm = row0 + r;
  if (gm >= M) return;
  for (uint q = 0u; q < 4u; ++q) {
    uint gn = col0 + lane + q * uint(S);
    if (gn >= N) return;
    T o = v[q];
    if (ACT >= 0) {
      o += LD(bias[pc.off[2] + gn]);
      if (ACT == 1) o = o > T(0) ? o : T(0);
      else if (ACT == 2) o = m_gelu(o);
    }
    c[coff + gm * N + gn] = ST(o);
  }
}

void main() {
  M = p[0];
  N = p[1];
  uint K = p[2];
  uint rsa = p[3], csa = p[4], rsb = p[5], csb = p[6];
  uint batch = pc.base + gl_WorkGroupID.z;
  uint aoff = pc.off[0], boff = pc.off[1];
  uint rem = batch;
  for (int k = int(p[7]) - 1; k >= 0; --k) {
    uint s = p[8 + k];
    uint q = rem / s;
    uint i = rem - q * s;
    aoff += i * p[14 + k];
    boff += i * p[20 + k];
    rem = q;
  }
  coff = pc.off[3] + batch * M * N;
  lane = gl_SubgroupInvocationID;
  row0 = gl_WorkGroupID.y * uint(2 * S);
  col0 = gl_WorkGroupID.x * uint(4 * S);
  // Rows and columns past the edge read a valid element (clamped) and are never stored.
  uint ra0 = aoff + min(row0 + lane, M - 1u) * rsa, ra1 = aoff + min(row0 + uint(S) + lane, M - 1u) * rsa;
  uint cb0 = boff + min(col0 + lane, N - 1u) * csb, cb1 = boff + min(col0 + lane + uint(S), N - 1u) * csb,
       cb2 = boff + min(col0 + lane + uint(2 * S), N - 1u) * csb,
       cb3 = boff + min(col0 + lane + uint(3 * S), N - 1u) * csb;
  V4 acc0[S], acc1[S];
  for (int r = 0; r < S; ++r) {
    acc0[r] = V4(0);
    acc1[r] = V4(0);
  }
  for (uint k = 0u; k < K; ++k) {
    T av0 = LD(a[ra0 + k * csa]), av1 = LD(a[ra1 + k * csa]);
    uint kb = k * rsb;
    V4 bv = V4(LD(b[cb0 + kb]), LD(b[cb1 + kb]), LD(b[cb2 + kb]), LD(b[cb3 + kb]));
#define ROW(r)                                     \
  acc0[r] += subgroupBroadcast(av0, r) * bv;       \
  acc1[r] += subgroupBroadcast(av1, r) * bv;
    ROW(0) ROW(1) ROW(2) ROW(3)
#if S >= 8
    ROW(4) ROW(5) ROW(6) ROW(7)
#endif
#if S >= 16
    ROW(8) ROW(9) ROW(10) ROW(11) ROW(12) ROW(13) ROW(14) ROW(15)
#endif
  }
  for (int r = 0; r < S; ++r) {
    store(uint(r), acc0[r]);
    store(uint(S + r), acc1[r]);
  }
}
