#version 450
// conv2d (OP 0), conv2d_grad_input / conv_transpose2d (OP 1): one invocation per output element,
// gathering its taps; conv2d_grad_weight (OP 2): one workgroup per weight element, its
// invocations stride over N*Ho*Wo and combine in shared memory in a fixed order (deterministic,
// no atomics).
// Geometry of the underlying convolution x [N,C,H,W] * w [O,C/G,KH,KW] -> y [N,O,Ho,Wo]:
// p[0..15] = N C H W O KH KW Ho Wo sh sw ph pw dh dw G. Bindings: OP 0: (x, w) -> y;
// OP 1: (dy, w) -> dx; OP 2: (x, dy) -> dw.
#include "common.glsl"
#include "storage.glsl"  // ELEM: T, or f16/bf16 multiplied and summed in f32

layout(constant_id = 2) const int OP = 0;

layout(std430, binding = 0) readonly buffer B0 { ELEM a[]; };
layout(std430, binding = 1) readonly buffer B1 { ELEM b[]; };
layout(std430, binding = 2) writeonly buffer B2 { ELEM y[]; };
layout(std430, binding = 3) readonly buffer B3 { uint p[]; };

shared T sh[gl_WorkGroupSize.x];

void main() {
  uint N = p[0], C = p[1], H = p[2], W = p[3], O = p[4], KH = p[5], KW = p[6], Ho = p[7], Wo = p[8];
  int sh_ = int(p[9]), sw_ = int(p[10]), ph = int(p[11]), pw = int(p[12]), dh = int(p[13]), dw = int(p[14]);
  uint G = p[15];
  uint cg = C / G, og = O / G;
  if (OP == 0) {
    uint gi = invocation_linear();
    if (gi >= pc.count) return;
    uint ow = gi % Wo, t = gi / Wo;
    uint oh = t % Ho;
    t /= Ho;
    uint o = t % O, n = t / O;
    uint g = o / og;
    int ih0 = int(oh) * sh_ - ph, iw0 = int(ow) * sw_ - pw;
    T acc = T(0);
    for (uint c = 0u; c < cg; ++c) {
      uint xb = pc.off[0] + ((n * C + g * cg + c) * H) * W;
      uint wb = pc.off[1] + ((o * cg + c) * KH) * KW;
      for (uint i = 0u; i < KH; ++i) {
        int ih = ih0 + int(i) * dh;
        if (ih < 0 || ih >= int(H)) continue;
        for (uint j = 0u; j < KW; ++j) {
          int iw = iw0 + int(j) * dw;
          if (iw < 0 || iw >= int(W)) continue;
          acc += LD(a[xb + uint(ih) * W + uint(iw)]) * LD(b[wb + i * KW + j]);
        }
      }
    }
    y[pc.off[2] + gi] = ST(acc);
    return;
  }
  if (OP == 1) {
    uint gi = invocation_linear();
    if (gi >= pc.count) return;
    uint xw = gi % W, t = gi / W;
    uint xh = t % H;
    t /= H;
    uint c = t % C, n = t / C;
    uint g = c / cg, cc = c - g * cg;
    T acc = T(0);
    for (uint i = 0u; i < KH; ++i) {
      int th = int(xh) + ph - int(i) * dh;
      if (th < 0 || th % sh_ != 0) continue;
      uint oh = uint(th / sh_);
      if (oh >= Ho) continue;
      for (uint j = 0u; j < KW; ++j) {
        int tw = int(xw) + pw - int(j) * dw;
        if (tw < 0 || tw % sw_ != 0) continue;
        uint ow = uint(tw / sw_);
        if (ow >= Wo) continue;
        for (uint oo = 0u; oo < og; ++oo) {
          uint o = g * og + oo;
          acc += LD(a[pc.off[0] + ((n * O + o) * Ho + oh) * Wo + ow]) * LD(b[pc.off[1] + ((o * cg + cc) * KH + i) * KW + j]);
        }
      }
    }
    y[pc.off[2] + gi] = ST(acc);
    return;
  }
  // OP 2: dw[o, cc, i, j] = sum over n, oh, ow of dy[n, o, oh, ow] * x[n, g*cg + cc, ih, iw].
  uint e = pc.base + group_linear();
  if (e >= pc.count) return;  // uniform per workgroup
  uint lid = gl_LocalInvocationID.x;
  uint j = e % KW, t = e / KW;
  uint i = t % KH;
  t /= KH;
  uint cc = t % cg, o = t / cg;
  uint c = (o / og) * cg + cc;
  uint P = Ho * Wo, total = N * P;
  T acc = T(0);
  for (uint r = lid; r < total; r += gl_WorkGroupSize.x) {
    uint n = r / P, q = r - n * P;
    uint oh = q / Wo, ow = q - oh * Wo;
    int ih = int(oh) * sh_ - ph + int(i) * dh, iw = int(ow) * sw_ - pw + int(j) * dw;
    if (ih < 0 || ih >= int(H) || iw < 0 || iw >= int(W)) continue;
    acc += LD(b[pc.off[1] + (n * O + o) * P + q]) * LD(a[pc.off[0] + ((n * C + c) * H + uint(ih)) * W + uint(iw)]);
  }
  sh[lid] = acc;
  barrier();
  for (uint s = gl_WorkGroupSize.x / 2u; s > 0u; s >>= 1) {
    if (lid < s) sh[lid] += sh[lid + s];
    barrier();
  }
  if (lid == 0u) y[pc.off[2] + e] = ST(sh[0]);
}
