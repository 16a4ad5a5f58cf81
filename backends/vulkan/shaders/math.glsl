// Math for T = float or double. GLSL offers exp/log/pow/tanh/atan for 32-bit floats only, and erf
// for neither: the double versions here are range reduction + series, accurate to a few ulp.
#ifdef USE_F64
T t_inf() { return packDouble2x32(uvec2(0u, 0x7ff00000u)); }
T t_nan() { return packDouble2x32(uvec2(0u, 0x7ff80000u)); }
double f64_inf() { return packDouble2x32(uvec2(0u, 0x7ff00000u)); }
double f64_nan() { return packDouble2x32(uvec2(0u, 0x7ff80000u)); }

double m_exp(double x) {
  if (isnan(x)) return x;
  if (x > 709.782712893384LF) return f64_inf();
  if (x < -745.2LF) return 0.0LF;
  double n = floor(x * 1.4426950408889634074LF + 0.5LF);
  // ln 2 split in two (fdlibm): n * hi is exact for |n| < 2^11.
  double r = (x - n * 6.93147180369123816490e-01LF) - n * 1.90821492927058770002e-10LF;
  double s = 1.0LF;
  [[unroll]] for (int k = 14; k >= 1; --k) s = 1.0LF + r * s / double(k);
  int ni = int(n);
  int h = ni / 2;
  return ldexp(ldexp(s, h), ni - h);  // two steps keep subnormal results
}

double m_log(double x) {
  if (isnan(x) || x < 0.0LF) return f64_nan();
  if (x == 0.0LF) return -f64_inf();
  if (isinf(x)) return x;
  int e;
  double m = frexp(x, e);
  if (m < 0.70710678118654752440LF) {
    m *= 2.0LF;
    e -= 1;
  }
  double f = m - 1.0LF;
  double s = f / (2.0LF + f);
  double s2 = s * s;
  double t = 0.0LF;
  [[unroll]] for (int k = 14; k >= 1; --k) t = s2 * (t + 1.0LF / double(2 * k + 1));
  double de = double(e);
  return de * 6.93147180369123816490e-01LF + (de * 1.90821492927058770002e-10LF + 2.0LF * s * (1.0LF + t));
}

double m_tanh(double x) {
  double ax = abs(x);
  if (ax > 22.0LF) return sign(x);
  double t;
  if (ax < 0.25LF) {
    // tanh x = x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835 - ...: avoids 1 - 2/(e+1) cancelling.
    double x2 = ax * ax;
    t = ax * (1.0LF + x2 * (-1.0LF / 3.0LF + x2 * (2.0LF / 15.0LF + x2 * (-17.0LF / 315.0LF +
             x2 * (62.0LF / 2835.0LF + x2 * (-1382.0LF / 155925.0LF + x2 * (21844.0LF / 6081075.0LF +
             x2 * (-929569.0LF / 638512875.0LF))))))));
  } else {
    t = 1.0LF - 2.0LF / (m_exp(2.0LF * ax) + 1.0LF);
  }
  return x < 0.0LF ? -t : t;
}

// atan: |x| > 1 folds to pi/2 - atan(1/|x|), above tan(pi/8) to pi/4 + atan((z-1)/(z+1)); then
// the series z (1 - z^2/3 + z^4/5 - ...) with z^2 <= 0.172 (31 terms: below 2^-53).
double m_atan(double x) {
  if (isnan(x)) return x;
  double ax = abs(x);
  bool inv = ax > 1.0LF;
  double z = inv ? 1.0LF / ax : ax;
  double off = 0.0LF;
  if (z > 0.41421356237309504880LF) {
    z = (z - 1.0LF) / (z + 1.0LF);
    off = 0.78539816339744830962LF;
  }
  double z2 = z * z, s = 0.0LF;
  [[unroll]] for (int k = 30; k >= 0; --k) s = 1.0LF / double(2 * k + 1) - z2 * s;
  double r = off + z * s;
  if (inv) r = 1.57079632679489661923LF - r;
  return x < 0.0LF ? -r : r;
}

// sin, cos: x = n pi/2 + r with pi/2 in three parts (fdlibm's pio2_1..3; n pio2_1 is exact for
// |n| < 2^20, so results keep full accuracy for |x| below about 1.6e6 and lose it gradually
// beyond), |r| <= pi/4, then the Taylor series to r^23 (below 2^-53) and the quadrant.
void m_reduce_pio2(double x, out double r, out int q) {
  double n = floor(x * 0.63661977236758134308LF + 0.5LF);
  r = ((x - n * 1.57079632673412561417e+00LF) - n * 6.07710050630396597660e-11LF) - n * 2.02226624871116645580e-21LF;
  q = int(n - 4.0LF * floor(n * 0.25LF));
}
double m_sin_r(double r) {
  double r2 = r * r, s = 1.0LF;
  [[unroll]] for (int k = 11; k >= 1; --k) s = 1.0LF - r2 * s / double((2 * k) * (2 * k + 1));
  return r * s;
}
double m_cos_r(double r) {
  double r2 = r * r, c = 1.0LF;
  [[unroll]] for (int k = 11; k >= 1; --k) c = 1.0LF - r2 * c / double((2 * k - 1) * (2 * k));
  return c;
}
// sin of n pi/2 + r for the quadrant q = n mod 4 (any q >= 0): one series, never both.
double m_sin_q(double r, int q) {
  double v = (q & 1) == 0 ? m_sin_r(r) : m_cos_r(r);
  return (q & 2) != 0 ? -v : v;
}
// sin(x + shift pi/2): shift 0 is sin x, shift 1 cos x.
double m_sin_shifted(double x, int shift) {
  if (isnan(x) || isinf(x)) return f64_nan();
  double r;
  int q;
  m_reduce_pio2(x, r, q);
  return m_sin_q(r, q + shift);
}
double m_sin(double x) { return m_sin_shifted(x, 0); }
double m_cos(double x) { return m_sin_shifted(x, 1); }
double m_tan(double x) {
  if (isnan(x) || isinf(x)) return f64_nan();
  double r;
  int q;
  m_reduce_pio2(x, r, q);
  return m_sin_q(r, q) / m_sin_q(r, q + 1);
}
#else
T t_inf() { return uintBitsToFloat(0x7f800000u); }
T t_nan() { return uintBitsToFloat(0x7fc00000u); }
float m_exp(float x) { return exp(x); }
float m_log(float x) { return log(x); }
float m_atan(float x) { return atan(x); }
float m_sin(float x) { return sin(x); }
float m_cos(float x) { return cos(x); }
float m_tan(float x) { return tan(x); }
float m_tanh(float x) {
  float ax = abs(x);
  if (ax > 9.0) return sign(x);
  float t = 1.0 - 2.0 / (exp(2.0 * ax) + 1.0);
  if (ax < 0.125) {
    float x2 = ax * ax;
    t = ax * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))));
  }
  return x < 0.0 ? -t : t;
}
#endif

// pow as C's pow for the cases that matter: negative bases with integral exponents keep their
// sign; 0^b follows the limits.
T m_pow(T a, T b) {
  if (b == T(0)) return T(1);
  if (isnan(a) || isnan(b)) return a + b;
  if (a == T(0)) return b > T(0) ? T(0) : t_inf();
  if (a < T(0)) {
    if (floor(b) != b) return t_nan();
    T r = m_exp(b * m_log(-a));
    return mod(b, T(2)) == T(0) ? r : -r;
  }
  return m_exp(b * m_log(a));
}

T m_sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + m_exp(-x));
  T e = m_exp(x);
  return e / (T(1) + e);
}

// erf x = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (1*3*...*(2n+1)): every term is positive,
// so the sum does not cancel; it converges for all x, and erf is +-1 to T's precision beyond 6.
T m_erf(T x) {
  T ax = abs(x);
#ifdef USE_F64
  const T lim = T(6);
  const T tiny = T(1e-17LF);
#else
  const T lim = T(4);
  const T tiny = T(1e-8);
#endif
  if (isnan(x)) return x;
  if (ax >= lim) return sign(x);
  T x2 = ax * ax;
  T term = ax, sum = ax;
  for (int n = 1; n < 300; ++n) {
    term *= T(2) * x2 / T(2 * n + 1);
    sum += term;
    if (term < sum * tiny) break;
  }
#ifdef USE_F64
  T r = 1.12837916709551257390LF * m_exp(-x2) * sum;
#else
  T r = 1.12837916709551257390 * m_exp(-x2) * sum;
#endif
  return x < T(0) ? -r : r;
}

T m_gelu(T x) {
#ifdef USE_F64
  return T(0.5) * x * (T(1) + m_erf(x * 0.70710678118654752440LF));
#else
  return T(0.5) * x * (T(1) + m_erf(x * 0.70710678118654752440));
#endif
}

T m_gelu_grad(T x, T dy) {
#ifdef USE_F64
  T cdf = T(0.5) * (T(1) + m_erf(x * 0.70710678118654752440LF));
  T pdf = m_exp(T(-0.5) * x * x) * 0.39894228040143267794LF;
#else
  T cdf = T(0.5) * (T(1) + m_erf(x * 0.70710678118654752440));
  T pdf = m_exp(T(-0.5) * x * x) * 0.39894228040143267794;
#endif
  return dy * (cdf + x * pdf);
}
