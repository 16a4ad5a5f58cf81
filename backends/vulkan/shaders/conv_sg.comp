#version 450
// Convolutions on CPU drivers (lavapipe), as implicit GEMMs shaped like matmul_sg.comp: one
// subgroup of S lanes per workgroup computes a 2S x 4S block of C[R, Q] = sum_k A[r, k] B[k, q];
// lane l loads A rows row0 + l, row0 + S + l and B columns col0 + l + s S (s < 4) once per k and
// shares the A values with subgroupBroadcast. The direct kernels (conv.comp) do two lane-serial
// loads per multiply-add on llvmpipe (see matmul_sg.comp); this does 6 per 64. Each output is a
// sum over k in a fixed order: deterministic, no atomics. The z grid is the group.
//   OP 0 conv2d:             r = o in the group, q = (n, oh, ow), k = (c, i, j): A = w, B = x taps
//   OP 1 grad_input (and conv_transpose2d): r = c in the group, q = (n, h, w), k = (o, i, j):
//                            A = w^T, B = dy at ((h + ph - i dh) / sh, ...) where it divides
//   OP 2 grad_weight:        r = o in the group, q = (c, i, j), k = (n, oh, ow): A = dy, B = x taps
// Params as conv.comp: p[0..15] = N C H W O KH KW Ho Wo sh sw ph pw dh dw G.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#include "common.glsl"
#include "storage.glsl"  // ELEM: T, or f16/bf16 multiplied and summed in f32

#ifndef S
#define S 8
#endif
layout(constant_id = 2) const int OP = 0;

layout(std430, binding = 0) readonly buffer B0 { ELEM in0[]; };  // x (OP 0, 2) or dy (OP 1)
layout(std430, binding = 1) readonly buffer B1 { ELEM in1[]; };  // w (OP 0, 1) or dy (OP 2)
layout(std430, binding = 2) writeonly buffer B2 { ELEM y[]; };
layout(std430, binding = 3) readonly buffer B3 { uint p[]; };

#ifdef USE_F64
#define V4 dvec4
#else
#define V4 vec4
#endif

uint N, C, H, W, O, KH, KW, Ho, Wo, G, cg, og;
int SH, SW, PH, PW, DH, DW;
uint lane, row0, col0, R, Q;
V4 acc0[S], acc1[S];  // the lane's two rows of the block, four columns each
uvec4 ob;             // per column: output offset without the row term
uint rowbase, rs;     // output row r is at ob + (rowbase + r) * rs

#define ROW(r)                               \
  acc0[r] += subgroupBroadcast(av0, r) * bv; \
  acc1[r] += subgroupBroadcast(av1, r) * bv;
#if S == 4
#define ALL_ROWS ROW(0) ROW(1) ROW(2) ROW(3)
#elif S == 8
#define ALL_ROWS ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
#else
#define ALL_ROWS ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7) \
  ROW(8) ROW(9) ROW(10) ROW(11) ROW(12) ROW(13) ROW(14) ROW(15)
#endif

// Output row r of the block: y[ob_s + (rowbase + row0 + r) * rs] for the lane's columns s.
void store(uint r, V4 v, uvec4 ob, uint rowbase, uint rs) {
  uint gr = row0 + r;
  if (gr >= R) return;
  for (uint s = 0u; s < 4u; ++s) {
    if (col0 + lane + s * uint(S) >= Q) return;
    y[pc.off[2] + ob[s] + (rowbase + gr) * rs] = ST(v[s]);
  }
}

// The lanes' four B values: in0[idx] where ok, else 0 (the read goes to `base`, always valid).
V4 gather(uvec4 idx, uvec4 base, bvec4 ok) {
  V4 bv = V4(LD(in0[ok.x ? idx.x : base.x]), LD(in0[ok.y ? idx.y : base.y]), LD(in0[ok.z ? idx.z : base.z]),
             LD(in0[ok.w ? idx.w : base.w]));
  return mix(V4(0), bv, ok);
}

// OP 0, conv2d: r = o in the group, q = (n, oh, ow), k = (c, i, j).
void conv_forward(uint g, uint P, uint HW, uint KK) {
  R = og;
  Q = N * P;
  uint K = cg * KK;
  uvec4 xb;
  ivec4 ih0, iw0;
  for (uint s = 0u; s < 4u; ++s) {
    uint q = min(col0 + lane + s * uint(S), Q - 1u);
    uint n = q / P, pp = q - n * P, oh = pp / Wo, ow = pp - oh * Wo;
    xb[s] = pc.off[0] + (n * C + g * cg) * HW;
    ih0[s] = int(oh) * SH - PH;
    iw0[s] = int(ow) * SW - PW;
    ob[s] = n * O * P + pp;
  }
  uint wa0 = pc.off[1] + (g * og + min(row0 + lane, R - 1u)) * K;
  uint wa1 = pc.off[1] + (g * og + min(row0 + uint(S) + lane, R - 1u)) * K;
  uint k = 0u;
  for (uint c = 0u; c < cg; ++c)
    for (uint i = 0u; i < KH; ++i)
      for (uint j = 0u; j < KW; ++j, ++k) {
        T av0 = LD(in1[wa0 + k]), av1 = LD(in1[wa1 + k]);
        ivec4 ih = ih0 + int(i) * DH, iw = iw0 + int(j) * DW;
        bvec4 ok = bvec4(uvec4(greaterThanEqual(ih, ivec4(0))) * uvec4(lessThan(ih, ivec4(int(H)))) *
                         uvec4(greaterThanEqual(iw, ivec4(0))) * uvec4(lessThan(iw, ivec4(int(W)))));
        uvec4 idx = xb + (c * H + uvec4(max(ih, ivec4(0)))) * W + uvec4(max(iw, ivec4(0)));
        V4 bv = gather(idx, xb, ok);
        ALL_ROWS
      }
  rowbase = g * og;
  rs = P;
}

// OP 1, grad_input (and conv_transpose2d): r = c in the group, q = (n, h, w), k = (o, i, j).
void conv_grad_input(uint g, uint P, uint HW, uint KK) {
  R = cg;
  Q = N * HW;
  uvec4 dyb;
  ivec4 th0, tw0;
  for (uint s = 0u; s < 4u; ++s) {
    uint q = min(col0 + lane + s * uint(S), Q - 1u);
    uint n = q / HW, hw = q - n * HW, h = hw / W, w = hw - h * W;
    dyb[s] = pc.off[0] + (n * O + g * og) * P;
    th0[s] = int(h) + PH;
    tw0[s] = int(w) + PW;
    ob[s] = n * C * HW + hw;
  }
  uint wa0 = pc.off[1] + (g * og * cg + min(row0 + lane, R - 1u)) * KK;
  uint wa1 = pc.off[1] + (g * og * cg + min(row0 + uint(S) + lane, R - 1u)) * KK;
  for (uint oo = 0u; oo < og; ++oo)
    for (uint i = 0u; i < KH; ++i)
      for (uint j = 0u; j < KW; ++j) {
        uint wk = oo * cg * KK + i * KW + j;
        T av0 = LD(in1[wa0 + wk]), av1 = LD(in1[wa1 + wk]);
        ivec4 th = th0 - int(i) * DH, tw = tw0 - int(j) * DW;
        // th >= 0, divisible by the stride, th / sh < Ho (and alike for w).
        uvec4 uth = uvec4(max(th, ivec4(0))), utw = uvec4(max(tw, ivec4(0)));
        uvec4 oh = uth / uint(SH), ow = utw / uint(SW);
        bvec4 ok = bvec4(uvec4(greaterThanEqual(th, ivec4(0))) * uvec4(equal(oh * uint(SH), uth)) *
                         uvec4(lessThan(oh, uvec4(Ho))) * uvec4(greaterThanEqual(tw, ivec4(0))) *
                         uvec4(equal(ow * uint(SW), utw)) * uvec4(lessThan(ow, uvec4(Wo))));
        uvec4 idx = dyb + oo * P + oh * Wo + ow;
        V4 bv = gather(idx, dyb, ok);
        ALL_ROWS
      }
  rowbase = g * cg;
  rs = HW;
}

// OP 2, grad_weight: r = o in the group, q = (c, i, j), k = (n, oh, ow).
void conv_grad_weight(uint g, uint P, uint HW, uint KK) {
  R = og;
  Q = cg * KK;
  uvec4 xo;
  ivec4 di, dj;
  for (uint s = 0u; s < 4u; ++s) {
    uint q = min(col0 + lane + s * uint(S), Q - 1u);
    uint cc = q / KK, ij = q - cc * KK, i = ij / KW, j = ij - i * KW;
    xo[s] = pc.off[0] + (g * cg + cc) * HW;
    di[s] = int(i) * DH - PH;
    dj[s] = int(j) * DW - PW;
    ob[s] = q;
  }
  uint da0 = pc.off[1] + (g * og + min(row0 + lane, R - 1u)) * P;
  uint da1 = pc.off[1] + (g * og + min(row0 + uint(S) + lane, R - 1u)) * P;
  for (uint n = 0u; n < N; ++n) {
    uint dn = n * O * P;
    uvec4 xn = xo + n * C * HW;
    for (uint oh = 0u; oh < Ho; ++oh)
      for (uint ow = 0u; ow < Wo; ++ow) {
        uint t = dn + oh * Wo + ow;
        T av0 = LD(in1[da0 + t]), av1 = LD(in1[da1 + t]);
        ivec4 ih = int(oh) * SH + di, iw = int(ow) * SW + dj;
        bvec4 ok = bvec4(uvec4(greaterThanEqual(ih, ivec4(0))) * uvec4(lessThan(ih, ivec4(int(H)))) *
                         uvec4(greaterThanEqual(iw, ivec4(0))) * uvec4(lessThan(iw, ivec4(int(W)))));
        uvec4 idx = xn + uvec4(max(ih, ivec4(0))) * W + uvec4(max(iw, ivec4(0)));
        V4 bv = gather(idx, xn, ok);
        ALL_ROWS
      }
  }
  rowbase = g * og;
  rs = Q;
}

void main() {
  N = p[0]; C = p[1]; H = p[2]; W = p[3]; O = p[4]; KH = p[5]; KW = p[6]; Ho = p[7]; Wo = p[8];
  SH = int(p[9]); SW = int(p[10]); PH = int(p[11]); PW = int(p[12]); DH = int(p[13]); DW = int(p[14]);
  G = p[15];
  cg = C / G;
  og = O / G;
  uint g = gl_WorkGroupID.z;
  lane = gl_SubgroupInvocationID;
  row0 = gl_WorkGroupID.y * uint(2 * S);
  col0 = gl_WorkGroupID.x * uint(4 * S);
  uint P = Ho * Wo, HW = H * W, KK = KH * KW;
  for (int r = 0; r < S; ++r) {
    acc0[r] = V4(0);
    acc1[r] = V4(0);
  }
  if (OP == 0)
    conv_forward(g, P, HW, KK);
  else if (OP == 1)
    conv_grad_input(g, P, HW, KK);
  else
    conv_grad_weight(g, P, HW, KK);
  for (int r = 0; r < S; ++r) {
    store(uint(r), acc0[r], ob, rowbase, rs);
    store(uint(S + r), acc1[r], ob, rowbase, rs);
  }
}
