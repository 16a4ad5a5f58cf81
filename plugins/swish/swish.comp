#version 450
// ctn-swish: the Vulkan kernels (compiled to SPIR-V at build time by glslc, embedded by
// embed_spirv.py). T is float or double; GRAD selects swish_grad. One invocation per element.
// Bindings: 0 x, 1 dy (swish_grad only), 2 the output; offsets are in elements (push constants),
// relative to the bound range, which the kernel aligns down to minStorageBufferOffsetAlignment.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer BX { T x[]; };
#ifdef GRAD
layout(std430, binding = 1) readonly buffer BD { T dy[]; };
#endif
layout(std430, binding = 2) buffer BY { T y[]; };

layout(push_constant) uniform PC {
  uint xo;
  uint dyo;
  uint yo;
  uint n;
  uint gx;  // invocations per row of the grid (groups in x times 64)
} pc;

#ifdef USE_F64
// exp(-a) for a >= 0 in double (GLSL has no double exp): range reduction by ln 2, Taylor series
// of degree 14 on |r| <= ln2 / 2, then the power of two.
double exp_neg(double a) {
  if (a > 745.0LF) return 0.0LF;
  double v = -a;
  double k = floor(v * 1.4426950408889634074LF + 0.5LF);
  double r = (v - k * 6.93147180369123816490e-01LF) - k * 1.90821492927058770002e-10LF;
  double s = 1.0LF;
  for (int i = 14; i >= 1; --i) s = 1.0LF + r * s / double(i);
  int ki = int(k);
  int h = ki / 2;
  return ldexp(ldexp(s, h), ki - h);
}
#else
float exp_neg(float a) { return exp(-a); }
#endif

T sig(T v) {
  T e = exp_neg(abs(v));
  return v >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
}

void main() {
  uint i = gl_GlobalInvocationID.y * pc.gx + gl_GlobalInvocationID.x;
  if (i >= pc.n) return;
  T v = x[pc.xo + i];
  T s = sig(v);
#ifdef GRAD
  y[pc.yo + i] = dy[pc.dyo + i] * (s + v * s * (T(1) - s));
#else
  y[pc.yo + i] = v * s;
#endif
}
