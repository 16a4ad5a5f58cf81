// Op codes of ew.comp: CTN_EW_* from backends/common/ew_ops.py (vk_ew_ops.h, generated). Code
// ranges tell the arity: a code >= CTN_EW_FIRST_BINARY reads a second input, >= FIRST_OPTIM3 a
// third, >= FIRST_OPTIM4 a fourth, >= FIRST_STEP an i64 step (binding 4). The build checks that
// every code of the host table has its case in ew_apply (generated or by hand), which has no
// default.
#include "vk_ew_ops.h"

// 64-bit unsigned arithmetic on (lo, hi) words: no shaderInt64 needed.
uvec2 add64(uvec2 a, uvec2 b) {
  uint c;
  uint lo = uaddCarry(a.x, b.x, c);
  return uvec2(lo, a.y + b.y + c);
}
uvec2 mul64(uvec2 a, uvec2 b) {
  uint hi, lo;
  umulExtended(a.x, b.x, hi, lo);
  return uvec2(lo, hi + a.x * b.y + a.y * b.x);
}
uvec2 shr64(uvec2 a, uint n) { return uvec2((a.x >> n) | (a.y << (32u - n)), a.y >> n); }
// The splitmix64 finaliser of ops.h's dropout.
uvec2 mix64(uvec2 z) {
  z ^= shr64(z, 30u);
  z = mul64(z, uvec2(0x1CE4E5B9u, 0xBF58476Du));
  z ^= shr64(z, 27u);
  z = mul64(z, uvec2(0x133111EBu, 0x94D049BBu));
  z ^= shr64(z, 31u);
  return z;
}
const uvec2 GOLDEN = uvec2(0x7F4A7C15u, 0x9E3779B9u);

// Dropout params: p[49..50] = seed words, p[51] = threshold floor(p * 2^24); the scale
// 1 / (1 - p) is in the f[1] slots.
bool dropout_keep(uvec2 step, uint k) {
  uvec2 key = mix64(add64(uvec2(p[49], p[50]), mix64(add64(step, GOLDEN))));
  uvec2 r = mix64(add64(key, mul64(uvec2(k + 1u, 0u), GOLDEN)));
  return (r.y >> 8) >= p[51];
}

T step_value(uvec2 s) { return T(int(s.y)) * T(4294967296.0) + T(s.x); }

T ew_apply(int op, T x, T u, T v, T w, uvec2 step, uint gi) {
  switch (op) {
    // The arithmetic ops: generated from the formulas of backends/common/ew_ops.py.
    CTN_EW_CASES_UNARY_INT(x, attr_f(0), attr_f(1))
    CTN_EW_CASES_UNARY_FLOAT(x, attr_f(0), attr_f(1))
    CTN_EW_CASES_BINARY_INT(x, u, attr_f(0), attr_f(1))
    CTN_EW_CASES_BINARY_FLOAT(x, u, attr_f(0), attr_f(1))
    CTN_EW_CASES_GRAD_FLOAT(x, u, attr_f(0), attr_f(1))
    // Optimizer steps (inputs in ops.h order).
    case CTN_EW_ADAM_MOMENT1: return attr_f(0) * x + (T(1) - attr_f(0)) * u;          // (m, g)
    case CTN_EW_ADAM_MOMENT2: return attr_f(0) * x + (T(1) - attr_f(0)) * u * u;      // (v, g)
    case CTN_EW_SGD_VELOCITY: return attr_f(0) * x + (u + attr_f(1) * v);        // (v, g, w)
    case CTN_EW_SGD_APPLY: {                                                     // (w, v', g, lr)
      T mom = attr_f(0), wd = attr_f(1);
      T upd = p[P_I0] != 0u ? (v + wd * x) + mom * u : u;
      return x - w * upd;
    }
    case CTN_EW_ADAM_APPLY: {                                                    // (w, m', v', lr, step)
      T b1 = attr_f(0), b2 = attr_f(1), eps = attr_f(2), wd = attr_f(3);
      T t = step_value(step);
      T mhat = u / (T(1) - m_pow(b1, t));
      T vhat = v / (T(1) - m_pow(b2, t));
      T r = mhat / (sqrt(vhat) + eps);
      if (p[P_I0] != 0u) r += wd * x;
      return x - w * r;
    }
    case CTN_EW_DROPOUT: return dropout_keep(step, gi) ? x * attr_f(1) : T(0);  // (x, step)
  }
  return t_nan();  // not reached: the host only passes codes of its generated table
}
