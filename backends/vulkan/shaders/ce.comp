#version 450
// cross_entropy (OP 0: one workgroup, mean over rows) and cross_entropy_grad (OP 1: one
// invocation per row). Labels are i32 or i64 words. A label outside [0, C) sets the error word
// p[8] = row + 1 (first one wins); the backend reports it after the work completes.
// Params: p[0] = N, p[1] = C, p[2] = labels are i64.
#include "common.glsl"
#include "math.glsl"

layout(constant_id = 2) const int OP = 0;

layout(std430, binding = 0) readonly buffer B0 { T x[]; };
layout(std430, binding = 1) readonly buffer B1 { uint lab[]; };
layout(std430, binding = 2) readonly buffer B2 { T dy[]; };
layout(std430, binding = 3) writeonly buffer B3 { T y[]; };
layout(std430, binding = 4) buffer B4 { uint p[]; };

shared T sh[gl_WorkGroupSize.x];

// The label of row r, or -1 when it is outside [0, C).
int label(uint r) {
  uint C = p[1];
  if (p[2] != 0u) {
    uint lo = lab[pc.off[1] + 2u * r], hi = lab[pc.off[1] + 2u * r + 1u];
    return hi == 0u && lo < C ? int(lo) : -1;
  }
  int v = int(lab[pc.off[1] + r]);
  return v >= 0 && uint(v) < C ? v : -1;
}

void bad_row(uint r) { atomicCompSwap(p[8], 0u, r + 1u); }

void main() {
  uint N = p[0], C = p[1];
  if (OP == 0) {
    uint lid = gl_LocalInvocationID.x;
    T total = T(0);
    for (uint r = lid; r < N; r += gl_WorkGroupSize.x) {
      int l = label(r);
      if (l < 0) {
        bad_row(r);
        continue;
      }
      uint xo = pc.off[0] + r * C;
      T m = -t_inf();
      for (uint j = 0u; j < C; ++j) m = max(m, x[xo + j]);
      T s = T(0);
      for (uint j = 0u; j < C; ++j) s += m_exp(x[xo + j] - m);
      total += m + m_log(s) - x[xo + uint(l)];
    }
    sh[lid] = total;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1) {
      if (lid < s) sh[lid] += sh[lid + s];
      barrier();
    }
    if (lid == 0u) y[pc.off[3]] = N == 0u ? t_nan() : sh[0] / T(N);
    return;
  }
  uint r = invocation_linear();
  if (r >= N) return;
  int l = label(r);
  if (l < 0) {
    bad_row(r);
    return;
  }
  T scale = dy[pc.off[2]] / T(N);
  uint xo = pc.off[0] + r * C, yo = pc.off[3] + r * C;
  T m = -t_inf();
  for (uint j = 0u; j < C; ++j) m = max(m, x[xo + j]);
  T s = T(0);
  for (uint j = 0u; j < C; ++j) s += m_exp(x[xo + j] - m);
  T inv = T(1) / s;
  for (uint j = 0u; j < C; ++j) {
    T v = m_exp(x[xo + j] - m) * inv * scale;
    if (j == uint(l)) v -= scale;
    y[yo + j] = v;
  }
}
