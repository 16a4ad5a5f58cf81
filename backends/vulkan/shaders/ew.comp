#version 450
// Elementwise ops with numpy broadcasting: unary, binary, backward helpers, where and the
// optimizer updates. One invocation per output element. MODEj: 0 = input j has the output's
// layout (index i), 1 = one element, 2 = strided (broadcast) walk. ELEM is the stored element type
// (storage.glsl): T, or a 16-bit float with f32 arithmetic.
#include "common.glsl"
#include "math.glsl"
#include "storage.glsl"

layout(constant_id = 2) const int OP = 0;
layout(constant_id = 3) const int MODE0 = 0;
layout(constant_id = 4) const int MODE1 = 0;
layout(constant_id = 5) const int MODE2 = 0;
layout(constant_id = 6) const int MODE3 = 0;

#ifdef WHERE
layout(std430, binding = 0) readonly buffer B0 { uint cw[]; };
#else
layout(std430, binding = 0) readonly buffer B0 { ELEM a[]; };
#endif
layout(std430, binding = 1) readonly buffer B1 { ELEM b[]; };
layout(std430, binding = 2) readonly buffer B2 { ELEM c[]; };
layout(std430, binding = 3) readonly buffer B3 { ELEM d[]; };
layout(std430, binding = 4) readonly buffer B4 { uint sw[]; };  // an i64 step (2 words)
layout(std430, binding = 5) writeonly buffer B5 { ELEM y[]; };
layout(std430, binding = 6) readonly buffer B6 { uint p[]; };

#include "index.glsl"
#include "ew_ops.glsl"

uint in_index(int mode, uint li, uint gi, int j) {
  if (mode == 0) return li;
  if (mode == 1) return 0u;
  return bcast_offset(gi, j);
}

void main() {
  uint li = invocation_linear();
  if (li >= pc.count) return;
  uint gi = pc.base + li;
  // Contiguous inputs are bound from this dispatch's first element (large tensors are split into
  // windows); broadcast ones whole.
#ifdef WHERE
  uint ci = pc.off[0] * 4u + in_index(MODE0, li, gi, 0);
  bool cond = ((cw[ci >> 2] >> (8u * (ci & 3u))) & 0xffu) != 0u;
  // Element to element (ELEM may be a 16-bit type, which only buffer members can have).
  if (cond) y[pc.off[5] + li] = b[pc.off[1] + in_index(MODE1, li, gi, 1)];
  else y[pc.off[5] + li] = c[pc.off[2] + in_index(MODE2, li, gi, 2)];
#else
  T v0 = LD(a[pc.off[0] + in_index(MODE0, li, gi, 0)]);
  T v1 = T(0), v2 = T(0), v3 = T(0);
  if (OP >= CTN_EW_FIRST_BINARY && OP != CTN_EW_DROPOUT)
    v1 = LD(b[pc.off[1] + in_index(MODE1, li, gi, 1)]);
  if (OP >= CTN_EW_FIRST_OPTIM3) v2 = LD(c[pc.off[2] + in_index(MODE2, li, gi, 2)]);
  if (OP >= CTN_EW_FIRST_OPTIM4) v3 = LD(d[pc.off[3] + in_index(MODE3, li, gi, 3)]);
  uvec2 step = uvec2(0u);
  if (OP >= CTN_EW_FIRST_STEP) step = uvec2(sw[pc.off[4]], sw[pc.off[4] + 1u]);
  y[pc.off[5] + li] = ST(ew_apply(OP, v0, v1, v2, v3, step, gi));
#endif
}
