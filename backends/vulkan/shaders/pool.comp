#version 450
// max_pool2d (OP 0), max_pool2d_grad (OP 1), avg_pool2d (OP 2), avg_pool2d_grad (OP 3): one
// invocation per output element. The gradients gather: each input element visits the windows
// that contain it in row-major order (the CPU backend's order of accumulation), so overlapping
// windows add up deterministically, without atomics.
// p[0..11] = planes H W Ho Wo KH KW sh sw ph pw count_include_pad. Bindings: OP 0, 2: x; OP 1:
// x, dy; OP 3: dy; binding 2 the output.
#include "common.glsl"
#include "math.glsl"
#include "storage.glsl"  // ELEM: T, or f16/bf16 compared and summed in f32

layout(constant_id = 2) const int OP = 0;

layout(std430, binding = 0) readonly buffer B0 { ELEM a[]; };
layout(std430, binding = 1) readonly buffer B1 { ELEM dy[]; };
layout(std430, binding = 2) writeonly buffer B2 { ELEM y[]; };
layout(std430, binding = 3) readonly buffer B3 { uint p[]; };

uint H, W, Ho, Wo, KH, KW;
int SH, SW, PH, PW;

// Clipped window [lo, hi) of output index o along one axis.
void window(uint o, int s, int pad, uint k, uint n, out uint lo, out uint hi) {
  int st = int(o) * s - pad;
  lo = uint(max(st, 0));
  hi = uint(min(st + int(k), int(n)));
}

T divisor(uint h0, uint h1, uint w0, uint w1) {
  return p[11] != 0u ? T(KH * KW) : T((h1 - h0) * (w1 - w0));
}

// First maximum of window (oh, ow) of the plane at xb, in row-major order (NaN wins once).
uint argmax(uint xb, uint oh, uint ow) {
  uint h0, h1, w0, w1;
  window(oh, SH, PH, KH, H, h0, h1);
  window(ow, SW, PW, KW, W, w0, w1);
  T m = -t_inf();
  uint arg = h0 * W + w0;
  for (uint ih = h0; ih < h1; ++ih)
    for (uint iw = w0; iw < w1; ++iw) {
      T v = LD(a[xb + ih * W + iw]);
      if (v > m || (isnan(v) && !isnan(m))) {
        m = v;
        arg = ih * W + iw;
      }
    }
  return arg;
}

// Output indices along one axis whose window contains input index x: [lo, hi).
void covering(uint x, int s, int pad, uint k, uint no, out uint lo, out uint hi) {
  int t = int(x) + pad;  // o*s <= t and o*s > t - k
  int l = t - int(k) < 0 ? 0 : (t - int(k)) / s + 1;
  int h = t / s + 1;
  lo = uint(l);
  hi = uint(min(h, int(no)));
}

void main() {
  H = p[1]; W = p[2]; Ho = p[3]; Wo = p[4]; KH = p[5]; KW = p[6];
  SH = int(p[7]); SW = int(p[8]); PH = int(p[9]); PW = int(p[10]);
  uint gi = invocation_linear();
  if (gi >= pc.count) return;
  if (OP == 0 || OP == 2) {
    uint ow = gi % Wo, t = gi / Wo;
    uint oh = t % Ho, pl = t / Ho;
    uint xb = pc.off[0] + pl * H * W;
    uint h0, h1, w0, w1;
    window(oh, SH, PH, KH, H, h0, h1);
    window(ow, SW, PW, KW, W, w0, w1);
    T acc = OP == 0 ? -t_inf() : T(0);
    for (uint ih = h0; ih < h1; ++ih)
      for (uint iw = w0; iw < w1; ++iw) {
        T v = LD(a[xb + ih * W + iw]);
        if (OP == 0) {
          if (v > acc || isnan(v)) acc = v;
        } else {
          acc += v;
        }
      }
    if (OP == 2) acc /= divisor(h0, h1, w0, w1);
    y[pc.off[2] + gi] = ST(acc);
    return;
  }
  // Gradients: gi indexes the input plane element.
  uint xw = gi % W, t = gi / W;
  uint xh = t % H, pl = t / H;
  uint oh0, oh1, ow0, ow1;
  covering(xh, SH, PH, KH, Ho, oh0, oh1);
  covering(xw, SW, PW, KW, Wo, ow0, ow1);
  uint gb = (OP == 1 ? pc.off[1] : pc.off[0]) + pl * Ho * Wo;
  uint xb = pc.off[0] + pl * H * W;
  uint me = xh * W + xw;
  T acc = T(0);
  for (uint oh = oh0; oh < oh1; ++oh)
    for (uint ow = ow0; ow < ow1; ++ow) {
      if (OP == 1) {
        if (argmax(xb, oh, ow) == me) acc += LD(dy[gb + oh * Wo + ow]);
      } else {
        uint h0, h1, w0, w1;
        window(oh, SH, PH, KH, H, h0, h1);
        window(ow, SW, PW, KW, W, w0, w1);
        acc += LD(a[gb + oh * Wo + ow]) / divisor(h0, h1, w0, w1);
      }
    }
  y[pc.off[2] + gi] = ST(acc);
}
