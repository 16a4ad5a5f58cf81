#version 450
// softmax, log_softmax and their gradients along one axis: one workgroup per row (outer x inner
// rows of `len` elements, `inner` apart). Params: p[0] = len, p[1] = inner.
#include "common.glsl"
#include "math.glsl"
#include "storage.glsl"  // ELEM: T, or f16/bf16 with f32 arithmetic

layout(constant_id = 2) const int OP = 0;  // 0 softmax, 1 log_softmax, 2 softmax_grad, 3 log_softmax_grad

layout(std430, binding = 0) readonly buffer B0 { ELEM x[]; };
layout(std430, binding = 1) readonly buffer B1 { ELEM dy[]; };
layout(std430, binding = 2) buffer B2 { ELEM y[]; };
layout(std430, binding = 3) readonly buffer B3 { uint p[]; };

shared T sh[gl_WorkGroupSize.x];

T reduce_sum(T v) {
  uint lid = gl_LocalInvocationID.x;
  barrier();
  sh[lid] = v;
  barrier();
  for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1) {
    if (lid < s) sh[lid] += sh[lid + s];
    barrier();
  }
  return sh[0];
}

T reduce_max(T v) {
  uint lid = gl_LocalInvocationID.x;
  barrier();
  sh[lid] = v;
  barrier();
  for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1) {
    if (lid < s) sh[lid] = max(sh[lid], sh[lid + s]);
    barrier();
  }
  return sh[0];
}

void main() {
  uint r = pc.base + group_linear();
  if (r >= pc.count) return;  // uniform per workgroup
  uint len = p[0], inner = p[1];
  uint base = (r / inner) * len * inner + r % inner;
  uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  uint xo = pc.off[0] + base, yo = pc.off[2] + base, dof = pc.off[1] + base;
  if (OP <= 1) {
    T m = -t_inf();
    for (uint j = lid; j < len; j += wg) m = max(m, LD(x[xo + j * inner]));
    m = reduce_max(m);
    if (isinf(m) && m < T(0)) m = T(0);
    T s = T(0);
    for (uint j = lid; j < len; j += wg) s += m_exp(LD(x[xo + j * inner]) - m);
    s = reduce_sum(s);
    if (OP == 0) {
      T inv = T(1) / s;
      for (uint j = lid; j < len; j += wg) y[yo + j * inner] = ST(m_exp(LD(x[xo + j * inner]) - m) * inv);
    } else {
      T lse = m + m_log(s);
      for (uint j = lid; j < len; j += wg) y[yo + j * inner] = ST(LD(x[xo + j * inner]) - lse);
    }
  } else if (OP == 2) {
    T d = T(0);
    for (uint j = lid; j < len; j += wg) d += LD(dy[dof + j * inner]) * LD(x[xo + j * inner]);
    d = reduce_sum(d);
    barrier();  // y may alias x (in place): every read of x above is done
    for (uint j = lid; j < len; j += wg) {
      T v = LD(x[xo + j * inner]) * (LD(dy[dof + j * inner]) - d);
      y[yo + j * inner] = ST(v);
    }
  } else {
    T s = T(0);
    for (uint j = lid; j < len; j += wg) s += LD(dy[dof + j * inner]);
    s = reduce_sum(s);
    for (uint j = lid; j < len; j += wg)
      y[yo + j * inner] = ST(LD(dy[dof + j * inner]) - m_exp(LD(x[xo + j * inner])) * s);
  }
}
