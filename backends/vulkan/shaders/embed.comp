#version 450
// embedding (OP 0): one invocation per output element; embedding_grad (OP 1): one invocation
// per table element, summing the dy rows of the ids equal to its row in id order (a gather: no
// atomics, deterministic). Ids are i32 or i64 (two words). An id outside [0, V) makes the
// shader record the smallest bad position in the error word p[8] as ~position (atomicMax), which
// the backend reports after the work completes; the output element is then 0.
// Params: p[0] = V, p[1] = D, p[2] = number of ids, p[3] = ids are i64.
#include "common.glsl"

layout(constant_id = 2) const int OP = 0;

layout(std430, binding = 0) readonly buffer B0 { T src[]; };  // table or dy
layout(std430, binding = 1) readonly buffer B1 { uint ids[]; };
layout(std430, binding = 2) writeonly buffer B2 { T y[]; };
layout(std430, binding = 3) buffer B3 { uint p[]; };

// The id at position i, or -1 when it is outside [0, V).
int id_at(uint i) {
  uint V = p[0];
  if (p[3] != 0u) {
    uint lo = ids[pc.off[1] + 2u * i], hi = ids[pc.off[1] + 2u * i + 1u];
    return hi == 0u && lo < V ? int(lo) : -1;
  }
  int v = int(ids[pc.off[1] + i]);
  return v >= 0 && uint(v) < V ? v : -1;
}

void bad(uint i) { atomicMax(p[8], ~i); }

void main() {
  uint gi = invocation_linear();
  uint V = p[0], D = p[1], n = p[2];
  if (OP == 0) {
    if (gi >= pc.count) return;
    uint i = gi / D, d = gi - i * D;
    int id = id_at(i);
    if (id < 0) {
      if (d == 0u) bad(i);
      y[pc.off[2] + gi] = T(0);
      return;
    }
    y[pc.off[2] + gi] = src[pc.off[0] + uint(id) * D + d];
    return;
  }
  if (gi == 0u)
    for (uint i = 0u; i < n; ++i)
      if (id_at(i) < 0) {
        bad(i);
        break;
      }
  if (gi >= pc.count) return;
  uint v = gi / D, d = gi - v * D;
  T acc = T(0);
  for (uint i = 0u; i < n; ++i)
    if (id_at(i) == int(v)) acc += src[pc.off[0] + i * D + d];
  y[pc.off[2] + gi] = acc;
}
