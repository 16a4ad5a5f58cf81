#version 450
// Batched matmul C[b] = act(A[b] @ B[b] + bias) with shared-memory tiles: a BM x BN block of C
// per workgroup of TX x TY invocations, each computing (BM/TY) x (BN/TX) outputs; K is walked in
// steps of BK through tiles of A and B staged in shared memory (2 * BK * (BM + BN) elements,
// 16 KiB for doubles at 64/64/16). Transposes and broadcast batch dims are strides.
// Params: p[0..2] = M, N, K; p[3..6] = row/col strides of A(i,p) and B(p,j); p[7] = batch dims
// nb; p[8..13] = batch shape; p[14..19] = A batch strides; p[20..25] = B batch strides.
#include "common.glsl"
#include "math.glsl"
#include "storage.glsl"  // ELEM: T, or f16/bf16 multiplied and summed in f32

layout(constant_id = 2) const int BM = 64;
layout(constant_id = 3) const int BN = 64;
layout(constant_id = 4) const int BK = 16;
layout(constant_id = 5) const int ACT = -1;  // -1: plain matmul; else bias + CTN_ACT_*

layout(std430, binding = 0) readonly buffer B0 { ELEM a[]; };
layout(std430, binding = 1) readonly buffer B1 { ELEM b[]; };
layout(std430, binding = 2) readonly buffer B2 { ELEM bias[]; };
layout(std430, binding = 3) writeonly buffer B3 { ELEM c[]; };
layout(std430, binding = 4) readonly buffer B4 { uint p[]; };

shared T As[BK * BM];  // As[k * BM + m]
shared T Bs[BK * BN];  // Bs[k * BN + n]

const uint TX = gl_WorkGroupSize.x, TY = gl_WorkGroupSize.y;
// Each invocation computes 4 x 4 outputs (the host picks BM = 4 TY, BN = 4 TX), held in four
// vec4 variables, not in an array: an array whose size or indices come from specialisation
// constants stays in function memory (glslc does not unroll), and on lavapipe every access then
// goes through per-lane scratch memory (the tiled kernel ran at 0.16 GFLOP/s).
#ifdef USE_F64
#define V4 dvec4
#else
#define V4 vec4
#endif

uint M, N;
uint coff, row0, col0, tx, ty;

void store(uint r, V4 v) {
  uint gm = row0 + ty + r * TY;
  if (gm >= M) return;
  for (uint q = 0u; q < 4u; ++q) {
    uint gn = col0 + tx + q * TX;
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
  tx = gl_LocalInvocationID.x;
  ty = gl_LocalInvocationID.y;
  uint tid = ty * TX + tx, nthreads = TX * TY;
  row0 = gl_WorkGroupID.y * uint(BM);
  col0 = gl_WorkGroupID.x * uint(BN);
  V4 acc0 = V4(0), acc1 = V4(0), acc2 = V4(0), acc3 = V4(0);
  for (uint k0 = 0u; k0 < K; k0 += uint(BK)) {
    for (uint i = tid; i < uint(BM * BK); i += nthreads) {
      uint m = i / uint(BK), k = i % uint(BK);
      uint gm = row0 + m, gk = k0 + k;
      As[k * uint(BM) + m] = (gm < M && gk < K) ? LD(a[aoff + gm * rsa + gk * csa]) : T(0);
    }
    for (uint i = tid; i < uint(BK * BN); i += nthreads) {
      uint k = i / uint(BN), n = i % uint(BN);
      uint gk = k0 + k, gn = col0 + n;
      Bs[k * uint(BN) + n] = (gk < K && gn < N) ? LD(b[boff + gk * rsb + gn * csb]) : T(0);
    }
    barrier();
    for (uint k = 0u; k < uint(BK); ++k) {
      uint ab = k * uint(BM) + ty, bb = k * uint(BN) + tx;
      V4 bv = V4(Bs[bb], Bs[bb + TX], Bs[bb + 2u * TX], Bs[bb + 3u * TX]);
      acc0 += As[ab] * bv;
      acc1 += As[ab + TY] * bv;
      acc2 += As[ab + 2u * TY] * bv;
      acc3 += As[ab + 3u * TY] * bv;
    }
    barrier();
  }
  store(0u, acc0);
  store(1u, acc1);
  store(2u, acc2);
  store(3u, acc3);
}
