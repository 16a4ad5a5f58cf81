// Op codes of ew.comp, mirrored by k_elementwise.cpp. Ranges tell the arity:
// 1-19 unary, 20-59 two inputs, 60-69 three, 70-79 four, 90+ read an i64 step (binding 4).
#define EW_NEG 1
#define EW_EXP 2
#define EW_LOG 3
#define EW_SQRT 4
#define EW_ABS 5
#define EW_SIGN 6
#define EW_TANH 7
#define EW_SIGMOID 8
#define EW_RELU 9
#define EW_GELU 10
#define EW_LEAKY_RELU 11
#define EW_CLAMP 12
#define EW_ADD 20
#define EW_SUB 21
#define EW_MUL 22
#define EW_DIV 23
#define EW_POW 24
#define EW_MAXIMUM 25
#define EW_MINIMUM 26
#define EW_RELU_GRAD 30
#define EW_LEAKY_RELU_GRAD 31
#define EW_GELU_GRAD 32
#define EW_CLAMP_GRAD 33
#define EW_TANH_GRAD 34
#define EW_SIGMOID_GRAD 35
#define EW_ADAM_M1 40
#define EW_ADAM_M2 41
#define EW_SGD_VELOCITY 60
#define EW_SGD_APPLY 70
#define EW_ADAM_APPLY 90
#define EW_DROPOUT 91

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
    case EW_NEG: return -x;
    case EW_EXP: return m_exp(x);
    case EW_LOG: return m_log(x);
    case EW_SQRT: return sqrt(x);
    case EW_ABS: return abs(x);
    case EW_SIGN: return sign(x);
    case EW_TANH: return m_tanh(x);
    case EW_SIGMOID: return m_sigmoid(x);
    case EW_RELU: return x > T(0) ? x : T(0);
    case EW_GELU: return m_gelu(x);
    case EW_LEAKY_RELU: return x > T(0) ? x : x * attr_f(0);
    case EW_CLAMP: {
      T lo = attr_f(0), hi = attr_f(1);
      return x < lo ? lo : (x > hi ? hi : x);
    }
    case EW_ADD: return x + u;
    case EW_SUB: return x - u;
    case EW_MUL: return x * u;
    case EW_DIV: return x / u;
    case EW_POW: return m_pow(x, u);
    case EW_MAXIMUM: return (x > u || isnan(x)) ? x : u;
    case EW_MINIMUM: return (x < u || isnan(x)) ? x : u;
    case EW_RELU_GRAD: return x > T(0) ? u : T(0);
    case EW_LEAKY_RELU_GRAD: return x > T(0) ? u : u * attr_f(0);
    case EW_GELU_GRAD: return m_gelu_grad(x, u);
    case EW_CLAMP_GRAD: return (x >= attr_f(0) && x <= attr_f(1)) ? u : T(0);
    case EW_TANH_GRAD: return u * (T(1) - x * x);
    case EW_SIGMOID_GRAD: return u * x * (T(1) - x);
    // Optimizer steps (inputs in ops.h order).
    case EW_ADAM_M1: return attr_f(0) * x + (T(1) - attr_f(0)) * u;          // (m, g)
    case EW_ADAM_M2: return attr_f(0) * x + (T(1) - attr_f(0)) * u * u;      // (v, g)
    case EW_SGD_VELOCITY: return attr_f(0) * x + (u + attr_f(1) * v);        // (v, g, w)
    case EW_SGD_APPLY: {                                                     // (w, v', g, lr)
      T mom = attr_f(0), wd = attr_f(1);
      T upd = p[P_I0] != 0u ? (v + wd * x) + mom * u : u;
      return x - w * upd;
    }
    case EW_ADAM_APPLY: {                                                    // (w, m', v', lr, step)
      T b1 = attr_f(0), b2 = attr_f(1), eps = attr_f(2), wd = attr_f(3);
      T t = step_value(step);
      T mhat = u / (T(1) - m_pow(b1, t));
      T vhat = v / (T(1) - m_pow(b2, t));
      T r = mhat / (sqrt(vhat) + eps);
      if (p[P_I0] != 0u) r += wd * x;
      return x - w * r;
    }
    case EW_DROPOUT: return dropout_keep(step, gi) ? x * attr_f(1) : T(0);  // (x, step)
  }
  return x;
}
