#version 450
// Batch norm and layer norm. OP 0 batch_norm, 1 batch_norm_grad_input, 2 batch_norm_grad_gamma,
// 3 batch_norm_inference: one workgroup per channel. OP 4 layer_norm, 5 layer_norm_grad_input,
// 6 layer-norm row statistics (mean, rstd) into the workspace: one workgroup per row. OP 7
// layer_norm_grad_gamma from those statistics: one invocation per column, summing rows in order.
// Statistics take two passes (mean, then the mean of squared deviations) and combine in shared
// memory in a fixed tree order: deterministic, no atomics.
// Params: p[0] = outer (N) or rows, p[1] = C or len, p[2] = inner (spatial), p[4] = eps as float
// bits, p[5..6] = eps as double words.
// Bindings: 0 x, 1..4 the other inputs (ops.h order), 5 the output, 6 params, 7 workspace.
#include "common.glsl"
#include "storage.glsl"  // ELEM: T, or f16/bf16 with f32 statistics (the workspace stays T)

layout(constant_id = 2) const int OP = 0;

layout(std430, binding = 0) readonly buffer B0 { ELEM x[]; };
layout(std430, binding = 1) readonly buffer B1 { ELEM in1[]; };
layout(std430, binding = 2) readonly buffer B2 { ELEM in2[]; };
layout(std430, binding = 3) readonly buffer B3 { ELEM in3[]; };
layout(std430, binding = 4) readonly buffer B4 { ELEM in4[]; };
layout(std430, binding = 5) writeonly buffer B5 { ELEM y[]; };
layout(std430, binding = 6) readonly buffer B6 { uint p[]; };
layout(std430, binding = 7) buffer B7 { T ws[]; };

shared T sh[gl_WorkGroupSize.x];

T eps() {
#ifdef USE_F64
  return packDouble2x32(uvec2(p[5], p[6]));
#else
  return uintBitsToFloat(p[4]);
#endif
}

// Sum of v over the workgroup; called in uniform control flow.
T wg_sum(T v) {
  uint lid = gl_LocalInvocationID.x;
  barrier();  // earlier readers of sh[0] are done
  sh[lid] = v;
  barrier();
  for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1) {
    if (lid < s) sh[lid] += sh[lid + s];
    barrier();
  }
  return sh[0];
}

// Element e of channel c (batch norm: e runs over outer * inner).
uint bn_index(uint e, uint c) {
  uint inner = p[2];
  uint n = e / inner;
  return (n * p[1] + c) * inner + (e - n * inner);
}

void main() {
  uint lid = gl_LocalInvocationID.x, WG = gl_WorkGroupSize.x;
  if (OP == 7) {
    uint j = invocation_linear();
    if (j >= pc.count) return;
    uint rows = p[0], len = p[1];
    T acc = T(0);
    for (uint r = 0u; r < rows; ++r) {
      uint k = r * len + j;
      acc += LD(in1[pc.off[1] + k]) * ((LD(x[pc.off[0] + k]) - ws[pc.off[7] + 2u * r]) * ws[pc.off[7] + 2u * r + 1u]);
    }
    y[pc.off[5] + j] = ST(acc);
    return;
  }
  uint u = pc.base + group_linear();  // the channel or row
  if (u >= pc.count) return;           // uniform per workgroup
  bool bn = OP <= 3;
  uint cnt = bn ? p[0] * p[2] : p[1];
  uint xb = pc.off[0] + (bn ? 0u : u * p[1]);
  T mean, rstd;
  if (OP == 3) {
    mean = LD(in3[pc.off[3] + u]);
    rstd = T(1) / sqrt(LD(in4[pc.off[4] + u]) + eps());
  } else {
    T s = T(0);
    for (uint e = lid; e < cnt; e += WG) s += LD(x[xb + (bn ? bn_index(e, u) : e)]);
    mean = wg_sum(s) / T(cnt);
    T v = T(0);
    for (uint e = lid; e < cnt; e += WG) {
      T d = LD(x[xb + (bn ? bn_index(e, u) : e)]) - mean;
      v += d * d;
    }
    rstd = T(1) / sqrt(wg_sum(v) / T(cnt) + eps());
  }
  if (OP == 0 || OP == 3) {
    T gamma = LD(in1[pc.off[1] + u]), beta = LD(in2[pc.off[2] + u]);
    T scale = gamma * rstd, shift = beta - mean * gamma * rstd;
    for (uint e = lid; e < cnt; e += WG) {
      uint k = bn_index(e, u);
      y[pc.off[5] + k] = ST(LD(x[pc.off[0] + k]) * scale + shift);
    }
    return;
  }
  if (OP == 1) {
    T sdy = T(0), sdyx = T(0);
    for (uint e = lid; e < cnt; e += WG) {
      uint k = bn_index(e, u);
      T g = LD(in2[pc.off[2] + k]);
      sdy += g;
      sdyx += g * (LD(x[pc.off[0] + k]) - mean);
    }
    sdy = wg_sum(sdy);
    sdyx = wg_sum(sdyx);
    T kk = LD(in1[pc.off[1] + u]) * rstd;
    T mdy = sdy / T(cnt), mdyx = sdyx * rstd * rstd / T(cnt);
    for (uint e = lid; e < cnt; e += WG) {
      uint k = bn_index(e, u);
      y[pc.off[5] + k] = ST(kk * (LD(in2[pc.off[2] + k]) - mdy - (LD(x[pc.off[0] + k]) - mean) * mdyx));
    }
    return;
  }
  if (OP == 2) {
    T acc = T(0);
    for (uint e = lid; e < cnt; e += WG) {
      uint k = bn_index(e, u);
      acc += LD(in1[pc.off[1] + k]) * (LD(x[pc.off[0] + k]) - mean);
    }
    acc = wg_sum(acc);
    if (lid == 0u) y[pc.off[5] + u] = ST(acc * rstd);
    return;
  }
  uint len = p[1], rb = u * len;
  if (OP == 4) {
    for (uint e = lid; e < len; e += WG)
      y[pc.off[5] + rb + e] = ST((LD(x[xb + e]) - mean) * rstd * LD(in1[pc.off[1] + e]) + LD(in2[pc.off[2] + e]));
    return;
  }
  if (OP == 5) {
    T sg = T(0), sgx = T(0);
    for (uint e = lid; e < len; e += WG) {
      T g = LD(in2[pc.off[2] + rb + e]) * LD(in1[pc.off[1] + e]);
      sg += g;
      sgx += g * (LD(x[xb + e]) - mean);
    }
    sg = wg_sum(sg);
    sgx = wg_sum(sgx);
    T mg = sg / T(len), mgx = sgx * rstd * rstd / T(len);
    for (uint e = lid; e < len; e += WG)
      y[pc.off[5] + rb + e] = ST(rstd * (LD(in2[pc.off[2] + rb + e]) * LD(in1[pc.off[1] + e]) - mg - (LD(x[xb + e]) - mean) * mgx));
    return;
  }
  // OP 6: row statistics.
  if (lid == 0u) {
    ws[pc.off[7] + 2u * u] = mean;
    ws[pc.off[7] + 2u * u + 1u] = rstd;
  }
}
