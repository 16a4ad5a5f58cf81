// ONNX signal-processing ops, composed of existing chutney ops:
// - HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix take only sizes and scalars,
//   which must be constants: the result is a constant computed in double at import;
// - DFT (forward, inverse, one-sided, inverse one-sided = irfft) along an axis of a constant
//   length is up to four matrix products with a cos / sin basis built at import (angles reduced
//   mod 2 pi exactly: 2 pi ((k t) mod n) / n), computed in f64 and cast back: each output is one
//   dot product, so there is no FFT's log n rounding, but O(n^2) work per transform;
// - STFT gathers the frames (one constant index map), weights them by the window and takes the
//   one-sided or full DFT of each.
// Complex values are ONNX's: a trailing dim of 2 (real, imaginary); a real input has 1 there.
#include <chutney/ops.h>

#include "onnx/importer.h"
#include "onnx/lower.h"
#include "util/status.h"

#include <cmath>
#include <numbers>

namespace ctn::onnx {
namespace {

using namespace lower;

Shape shape_of(std::initializer_list<int64_t> v) { return Shape::from(static_cast<uint32_t>(v.size()), std::data(v)); }

int32_t output_dtype(NodeCtx &c, int64_t def_onnx) {
  const int64_t t = c.attr_i("output_datatype", def_onnx);
  const int32_t dt = dtype_from_onnx(static_cast<int32_t>(t));
  if (dt < 0) c.unsupported("output_datatype %lld (no chutney dtype)", static_cast<long long>(t));
  return dt;
}

int64_t scalar_int(NodeCtx &c, size_t i, const char *what) {
  const std::vector<int64_t> v = c.ints(i, what);
  if (v.size() != 1) c.invalid("%s must be a scalar, has %zu elements", what, v.size());
  return v[0];
}

// w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1.
void cosine_window(NodeCtx &c, double a0, double a1, double a2) {
  const int64_t size = scalar_int(c, 0, "size");
  const int32_t dt = output_dtype(c, 1);
  const bool periodic = c.attr_i("periodic", 1) != 0;
  if (size < 1) c.invalid("size must be positive, not %lld", static_cast<long long>(size));
  c.limit(static_cast<double>(size), "the window");
  const double n1 = static_cast<double>(periodic ? size : size - 1);
  std::vector<double> w(static_cast<size_t>(size));
  for (int64_t n = 0; n < size; ++n) {
    const double t = n1 == 0 ? 0 : 2 * std::numbers::pi * static_cast<double>(n) / n1;
    w[static_cast<size_t>(n)] = a0 - a1 * std::cos(t) + a2 * std::cos(2 * t);
  }
  c.outs = {const_f(c.g, dt, w, shape_of({size}))};
}
void hann_window(NodeCtx &c) { cosine_window(c, 0.5, 0.5, 0); }
void hamming_window(NodeCtx &c) { cosine_window(c, 25.0 / 46.0, 21.0 / 46.0, 0); }
void blackman_window(NodeCtx &c) { cosine_window(c, 0.42, 0.5, 0.08); }

// Triangular filters on the mel scale, as ONNX's reference computes them: the band edges
// (num_mel_bins + 2 points evenly spaced in mel, the step dividing by num_mel_bins + 2) mapped
// to DFT bins floor((dft_length + 1) f / sample_rate). The edge frequencies enter the mel formula
// in the input's precision, like the reference's float32 arithmetic.
void mel_weight_matrix(NodeCtx &c) {
  const int64_t mels = scalar_int(c, 0, "num_mel_bins"), dft = scalar_int(c, 1, "dft_length"), rate = scalar_int(c, 2, "sample_rate");
  const std::vector<double> lo = c.reals(3, "lower_edge_hertz"), hi = c.reals(4, "upper_edge_hertz");
  const int32_t dt = output_dtype(c, 1);
  if (mels < 1 || dft < 1 || rate < 1 || lo.size() != 1 || hi.size() != 1)
    c.invalid("num_mel_bins, dft_length and sample_rate must be positive scalars and the edges scalars");
  const int64_t bins = dft / 2 + 1;
  c.limit(static_cast<double>(bins) * static_cast<double>(mels), "the mel weight matrix");
  const bool single = c.dtype(3) == CTN_F32;
  auto to_mel = [&](double f) {
    const double m = single ? static_cast<double>(2595.0f * std::log1p(static_cast<float>(f) / 700.0f)) : 2595 * std::log1p(f / 700);
    return m / std::log(10.0);
  };
  const double lo_mel = to_mel(lo[0]), step = (to_mel(hi[0]) - lo_mel) / static_cast<double>(mels + 2);
  std::vector<int64_t> edge(static_cast<size_t>(mels + 2));
  for (int64_t k = 0; k < mels + 2; ++k) {
    const double f = 700 * std::expm1((static_cast<double>(k) * step + lo_mel) / 2595 * std::log(10.0));
    const double b = std::floor(static_cast<double>(dft + 1) * f / static_cast<double>(rate));
    if (!(b >= 0 && b < static_cast<double>(bins))) c.invalid("the mel band edge %lld falls outside the %lld DFT bins", static_cast<long long>(k), static_cast<long long>(bins));
    edge[static_cast<size_t>(k)] = static_cast<int64_t>(b);
  }
  std::vector<double> w(static_cast<size_t>(bins * mels), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double & { return w[static_cast<size_t>(j * mels + i)]; };
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t l = edge[static_cast<size_t>(i)], m = edge[static_cast<size_t>(i + 1)], h = edge[static_cast<size_t>(i + 2)];
    if (m == l) at(m, i) = 1;
    for (int64_t j = l; m != l && j <= m; ++j) at(j, i) = static_cast<double>(j - l) / static_cast<double>(m - l);
    for (int64_t j = m; j < h; ++j) at(j, i) = static_cast<double>(h - j) / static_cast<double>(h - m);
  }
  c.outs = {const_f(c.g, dt, w, shape_of({bins, mels}))};
}

struct DftSpec {
  int64_t n = 0;  // the transform's length
  bool inverse = false, onesided = false;
};

// The DFT of x ([..., L, ..., c], c = 1 real or 2 complex) along `axis` (not the last):
// y ([..., K, ..., 2], or [..., n, ..., 1] for the one-sided inverse). Inputs longer than n are
// truncated, shorter ones zero-padded (the basis only has rows for t < min(L, n)).
ctn_node dft(NodeCtx &c, ctn_node x, uint32_t axis, const DftSpec &s) {
  Graph &g = c.g;
  const Shape xs = g.info(x).shape;
  const int32_t dt = g.info(x).dtype;
  const uint32_t nd = xs.ndim;
  const int64_t L = xs[axis], n = s.n, ch = xs[nd - 1];
  const bool irfft = s.inverse && s.onesided;
  const int64_t rows = std::min(L, irfft ? n / 2 + 1 : n), K = irfft ? n : s.onesided ? n / 2 + 1 : n;
  // Four bases of rows x K doubles: an FFT would need none, so long transforms are refused.
  if (static_cast<double>(rows) * static_cast<double>(K) > 0x1p24)
    c.unsupported("a DFT of length %lld: its %lld x %lld basis exceeds 2^24 elements (chutney has no FFT)", static_cast<long long>(n),
                  static_cast<long long>(rows), static_cast<long long>(K));
  // Basis: out_re = re @ A + im @ B, out_im = re @ C + im @ D.
  std::vector<double> A(static_cast<size_t>(rows * K)), B(A.size()), C(A.size()), D(A.size());
  const double sign = s.inverse ? 1 : -1, scale = s.inverse ? 1.0 / static_cast<double>(n) : 1.0;
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const double ang = 2 * std::numbers::pi * static_cast<double>((t * k) % n) / static_cast<double>(n);
      const double co = std::cos(ang) * scale, si = sign * std::sin(ang) * scale;
      const size_t e = static_cast<size_t>(t * K + k);
      // irfft: row t is the one-sided bin t, counted twice unless it is its own mirror image.
      const double twice = irfft && t != 0 && 2 * t != n ? 2 : 1;
      A[e] = twice * co, B[e] = -twice * si, C[e] = si, D[e] = co;
    }
  // [..., L, ..., c] -> re, im as [M, rows] with the signal axis last.
  std::vector<int32_t> perm;
  for (uint32_t k = 0; k + 1 < nd; ++k)
    if (k != axis) perm.push_back(static_cast<int32_t>(k));
  perm.push_back(static_cast<int32_t>(axis));
  perm.push_back(static_cast<int32_t>(nd - 1));
  ctn_node xp = permute(g, slice(g, x, static_cast<int32_t>(axis), 0, rows, 1), perm);
  int64_t m = 1;
  Shape back;
  for (uint32_t k = 0; k + 2 < nd; ++k) m *= xs[static_cast<uint32_t>(perm[k])], back[back.ndim++] = xs[static_cast<uint32_t>(perm[k])];
  const Shape basis = shape_of({rows, K});
  auto part = [&](int64_t i) { return reshape(g, slice(g, xp, static_cast<int32_t>(nd - 1), i, i + 1, 1), shape_of({m, rows})); };
  auto mm = [&](ctn_node v, const std::vector<double> &w) { return g.op2(CTN_OP_MATMUL, v, const_f(g, dt, w, basis)); };
  ctn_node re = part(0), im = ch == 2 ? part(1) : CTN_NODE_NONE;
  ctn_node out_re = mm(re, A), out_im = CTN_NODE_NONE;
  if (im != CTN_NODE_NONE) out_re = g.op2(CTN_OP_ADD, out_re, mm(im, B));
  back[back.ndim++] = K;
  back[back.ndim++] = 1;
  ctn_node y = reshape(g, out_re, back);
  if (!irfft) {
    out_im = mm(re, C);
    if (im != CTN_NODE_NONE) out_im = g.op2(CTN_OP_ADD, out_im, mm(im, D));
    ctn_node parts[2] = {y, reshape(g, out_im, back)};
    ctn_attrs a = attrs_i({static_cast<int64_t>(nd - 1)});
    y = g.add_op(CTN_OP_CONCAT, 2, parts, &a);
  }
  // Move the transformed axis back to where it was.
  std::vector<int32_t> inv(nd);
  for (uint32_t k = 0; k < nd; ++k) inv[static_cast<size_t>(perm[k])] = static_cast<int32_t>(k);
  return permute(g, y, inv);
}

// In f64 whatever the input's float dtype: outputs that cancel to ~0 (the imaginary part of a
// real signal's inverse) are then as exact as the reference's double-precision FFT.
ctn_node dft_f64(NodeCtx &c, ctn_node x, uint32_t axis, const DftSpec &s) {
  const int32_t dt = c.g.info(x).dtype;
  return cast(c.g, dft(c, cast(c.g, x, CTN_F64), axis, s), dt);
}

void check_signal(NodeCtx &c, const Shape &xs) {
  if (!dtype_is_float(c.dtype(0))) c.unsupported("dtype %s (float and double only)", dtype_name(c.dtype(0)));
  if (xs.ndim < 2 || (xs[xs.ndim - 1] != 1 && xs[xs.ndim - 1] != 2))
    c.invalid("the signal %s must end in a dim of 1 (real) or 2 (complex)", shape_str(xs).c_str());
}

void dft_op(NodeCtx &c) {
  const Shape xs = c.shape(0);
  check_signal(c, xs);
  int64_t axis = c.opset >= 20 ? -2 : 1;
  if (c.opset >= 20) {
    if (c.has(2)) axis = scalar_int(c, 2, "axis");
  } else {
    axis = c.attr_i("axis", 1);
  }
  const int32_t ax = c.axis(axis, xs.ndim);
  if (ax == static_cast<int32_t>(xs.ndim - 1)) c.invalid("axis %lld is the real/imaginary dim", static_cast<long long>(axis));
  DftSpec s;
  s.inverse = c.attr_i("inverse", 0) != 0;
  s.onesided = c.attr_i("onesided", 0) != 0;
  const int64_t L = xs[static_cast<uint32_t>(ax)];
  s.n = c.has(1) ? scalar_int(c, 1, "dft_length") : s.inverse && s.onesided ? 2 * (L - 1) : L;
  if (s.n < 1) c.invalid("dft_length must be positive, not %lld", static_cast<long long>(s.n));
  if (s.onesided && !s.inverse && xs[xs.ndim - 1] == 2) c.invalid("onesided needs a real input");
  c.outs = {dft_f64(c, c.in(0), static_cast<uint32_t>(ax), s)};
}

// STFT: frames [B, F, W, c] gathered from the signal [B, L, c], times the window, then the DFT
// of length frame_length along the frame axis.
void stft(NodeCtx &c) {
  Graph &g = c.g;
  const Shape xs = c.shape(0);
  check_signal(c, xs);
  if (xs.ndim != 3) c.invalid("the signal must be [batch, length, 1 or 2], not %s", shape_str(xs).c_str());
  const int64_t step = scalar_int(c, 1, "frame_step");
  const bool windowed = c.has(2);
  const int64_t W = windowed ? c.shape(2).numel() : c.has(3) ? scalar_int(c, 3, "frame_length") : xs[1];
  const int64_t n = c.has(3) ? scalar_int(c, 3, "frame_length") : W;
  if (step < 1 || W < 1 || n < 1 || W > xs[1]) c.invalid("frame_step, the window and frame_length must be positive and fit the signal");
  const int64_t frames = 1 + (xs[1] - n) / step;
  if (xs[1] < n || frames < 1) c.invalid("frame_length %lld is longer than the signal (%lld)", static_cast<long long>(n), static_cast<long long>(xs[1]));
  c.limit(static_cast<double>(frames) * static_cast<double>(W), "the STFT frame map");
  std::vector<int64_t> idx(static_cast<size_t>(frames * W));
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t t = 0; t < W; ++t) idx[static_cast<size_t>(f * W + t)] = std::min(f * step + t, xs[1] - 1);
  ctn_node fr = take(g, c.in(0), const_i64(g, idx, shape_of({frames, W})), 1);  // [B, F, W, c]
  // A frame that runs past the end of the signal is zero-padded there (the reference's slice).
  std::vector<double> keep(static_cast<size_t>(frames * W));
  bool past = false;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t t = 0; t < W; ++t) {
      const bool inside = f * step + t < xs[1];
      keep[static_cast<size_t>(f * W + t)] = inside ? 1 : 0;
      past = past || !inside;
    }
  const int32_t dt = c.dtype(0);
  if (windowed) fr = g.op2(CTN_OP_MUL, fr, reshape(g, cast(g, c.in(2), dt), shape_of({1, 1, W, 1})));
  if (past) fr = g.op2(CTN_OP_MUL, fr, const_f(g, dt, keep, shape_of({1, frames, W, 1})));
  DftSpec s;
  s.n = n;
  s.onesided = c.attr_i("onesided", 1) != 0;
  if (s.onesided && xs[2] == 2) c.invalid("onesided needs a real signal");
  c.outs = {dft_f64(c, fr, 2, s)};
}

const OpEntry kSignal[] = {
    {"HannWindow", hann_window},
    {"HammingWindow", hamming_window},
    {"BlackmanWindow", blackman_window},
    {"MelWeightMatrix", mel_weight_matrix},
    {"DFT", dft_op},
    {"STFT", stft},
};
}  // namespace

std::span<const OpEntry> signal_ops() { return kSignal; }

}  // namespace ctn::onnx
