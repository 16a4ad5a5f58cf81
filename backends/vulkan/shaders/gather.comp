#version 450
// Data movement for the shape ops (permute, slice, broadcast_to, slice_grad): out[i] =
// src[base + sum_k idx_k * str_k] over the output's row-major index, or the reverse (SCATTER).
// Elements are moved as 32-bit words, so any dtype of 1, 2, 4 or 8 bytes works without 8-bit,
// 16-bit or 64-bit shader features. ES = 1 or 2: one invocation writes one output word (4 or 2
// elements).
// Params: p[0] = nd, p[1..8] = shape, p[9..16] = strides (elements), p[17] = base (elements).
#include "common.glsl"

layout(constant_id = 2) const int ES = 4;
layout(constant_id = 3) const int SCATTER = 0;

layout(std430, binding = 0) readonly buffer B0 { uint src[]; };
layout(std430, binding = 1) buffer B1 { uint dst[]; };
layout(std430, binding = 2) readonly buffer B2 { uint p[]; };

uint walk(uint i) {
  uint o = p[17];
  for (int k = int(p[0]) - 1; k >= 0; --k) {
    uint s = p[1 + k];
    uint q = i / s;
    o += (i - q * s) * p[9 + k];
    i = q;
  }
  return o;
}

void main() {
  uint li = invocation_linear();
  if (ES < 4) {
    const uint per = 4u / uint(ES), bits = 8u * uint(ES), emask = ES == 1 ? 0xffu : 0xffffu;
    uint first = li * per;
    if (first >= pc.count) return;
    uint word = 0u, mask = 0u;
    for (uint t = 0u; t < per && first + t < pc.count; ++t) {
      uint s = pc.off[0] * per + walk(pc.base + first + t);
      word |= ((src[s / per] >> (bits * (s % per))) & emask) << (bits * t);
      mask |= emask << (bits * t);
    }
    uint di = pc.off[1] + li;
    dst[di] = mask == 0xffffffffu ? word : ((dst[di] & ~mask) | word);
    return;
  }
  if (li >= pc.count) return;
  uint gi = pc.base + li;
  uint so = walk(gi);
  if (SCATTER != 0) {
    if (ES == 8) {
      dst[pc.off[1] + 2u * so] = src[pc.off[0] + 2u * li];
      dst[pc.off[1] + 2u * so + 1u] = src[pc.off[0] + 2u * li + 1u];
    } else {
      dst[pc.off[1] + so] = src[pc.off[0] + li];
    }
    return;
  }
  if (ES == 8) {
    dst[pc.off[1] + 2u * li] = src[pc.off[0] + 2u * so];
    dst[pc.off[1] + 2u * li + 1u] = src[pc.off[0] + 2u * so + 1u];
  } else {
    dst[pc.off[1] + li] = src[pc.off[0] + so];
  }
}
