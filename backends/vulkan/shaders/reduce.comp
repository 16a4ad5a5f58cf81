#version 450
// sum / mean / max over any set of axes: one workgroup per output element; its invocations stride
// over the reduced elements and combine in shared memory.
// Params: p[0] = kept dims nk, p[1..8] kept shape, p[9..16] kept input strides, p[17] = reduced
// dims nr, p[18..25] reduced shape, p[26..33] reduced input strides, p[34] = reduced count,
// p[35] = scale as float bits, p[36..37] = scale as double words.
#include "common.glsl"
#include "math.glsl"
#include "storage.glsl"  // ELEM: T, or f16/bf16 summed in f32

layout(constant_id = 2) const int OP = 0;  // 0 sum, 1 mean, 2 max

layout(std430, binding = 0) readonly buffer B0 { ELEM x[]; };
layout(std430, binding = 1) writeonly buffer B1 { ELEM y[]; };
layout(std430, binding = 2) readonly buffer B2 { uint p[]; };

shared T sh[gl_WorkGroupSize.x];

uint decompose(uint i, uint n, uint shape0, uint str0) {
  uint o = 0u;
  for (int k = int(n) - 1; k >= 0; --k) {
    uint s = p[shape0 + k];
    uint q = i / s;
    o += (i - q * s) * p[str0 + k];
    i = q;
  }
  return o;
}

T combine(T a, T b) {
  if (OP == 2) return (b > a || isnan(b)) ? b : a;
  return a + b;
}

void main() {
  uint o = pc.base + group_linear();
  if (o >= pc.count) return;  // uniform per workgroup
  uint lid = gl_LocalInvocationID.x;
  uint ibase = decompose(o, p[0], 1u, 9u);
  uint n = p[34];
  T acc = OP == 2 ? -t_inf() : T(0);
  for (uint r = lid; r < n; r += gl_WorkGroupSize.x)
    acc = combine(acc, LD(x[pc.off[0] + ibase + decompose(r, p[17], 18u, 26u)]));
  sh[lid] = acc;
  barrier();
  for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1) {
    if (lid < s) sh[lid] = combine(sh[lid], sh[lid + s]);
    barrier();
  }
  if (lid == 0u) {
    T r = sh[0];
    if (OP == 1) {
#ifdef USE_F64
      r *= packDouble2x32(uvec2(p[36], p[37]));
#else
      r *= uintBitsToFloat(p[35]);
#endif
    }
    y[pc.off[1] + o] = ST(r);
  }
}
