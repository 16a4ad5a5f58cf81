#version 450
// Comparisons with broadcasting -> bool (one byte per element). One invocation writes one 32-bit
// word, i.e. four outputs, so no two invocations share a word. T may be float, double or int; a
// 16-bit float (-DF16 / -DBF16, storage.glsl) is compared as the float it widens to.
#include "common.glsl"
#include "vk_ew_ops.h"
#include "storage.glsl"

layout(constant_id = 2) const int OP = 0;  // CTN_EW_EQ ... CTN_EW_GE
layout(constant_id = 3) const int MODE0 = 0;
layout(constant_id = 4) const int MODE1 = 0;

layout(std430, binding = 0) readonly buffer B0 { ELEM a[]; };
layout(std430, binding = 1) readonly buffer B1 { ELEM b[]; };
layout(std430, binding = 2) buffer B2 { uint y[]; };
layout(std430, binding = 3) readonly buffer B3 { uint p[]; };

#include "index.glsl"

uint in_index(int mode, uint li, uint gi, int j) {
  if (mode == 0) return li;
  if (mode == 1) return 0u;
  return bcast_offset(gi, j);
}

bool cmp(T x, T z) {
  switch (OP) {
    case CTN_EW_EQ: return x == z;
    case CTN_EW_NE: return x != z;
    case CTN_EW_LT: return x < z;
    case CTN_EW_LE: return x <= z;
    case CTN_EW_GT: return x > z;
    case CTN_EW_GE: return x >= z;
  }
  return false;  // not reached: the host only passes codes of its generated table
}

void main() {
  uint w = invocation_linear();  // word of this dispatch; base is a multiple of 4
  uint first = w * 4u;
  if (first >= pc.count) return;
  uint word = 0u;
  for (uint t = 0u; t < 4u; ++t) {
    uint li = first + t;
    if (li >= pc.count) break;
    uint gi = pc.base + li;
    T x = LD(a[pc.off[0] + in_index(MODE0, li, gi, 0)]);
    T z = LD(b[pc.off[1] + in_index(MODE1, li, gi, 1)]);
    if (cmp(x, z)) word |= 1u << (8u * t);
  }
  uint n = pc.count - first;
  if (n >= 4u) {
    y[pc.off[2] + w] = word;
  } else {
    // The last word may hold bytes of a neighbour in the arena: keep them.
    uint mask = (1u << (8u * n)) - 1u;
    y[pc.off[2] + w] = (y[pc.off[2] + w] & ~mask) | word;
  }
}
