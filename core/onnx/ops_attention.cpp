// ONNX's transformer ops of opsets 23 and newer (Attention, RotaryEmbedding, SwiGLU,
// CausalConvWithState, LinearAttention), lowered onto matmul, softmax, where and shape ops.
// Semantics follow the ONNX reference implementation (onnx/reference/ops/op_*.py), which is what
// the backend suite's expected outputs come from.
#include <chutney/ops.h>

#include "onnx/importer.h"
#include "onnx/lower.h"
#include "util/status.h"

#include <cmath>
#include <limits>

namespace ctn::onnx {
namespace {

using namespace lower;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

Shape shape_of(std::initializer_list<int64_t> v) { return Shape::from(static_cast<uint32_t>(v.size()), std::data(v)); }

ctn_node select(Graph &g, ctn_node cond, ctn_node a, ctn_node b) {
  ctn_node in[3] = {cond, a, b};
  return g.add_op(CTN_OP_WHERE, 3, in, nullptr);
}

// 0 where `allowed`, -inf elsewhere, in dtype dt.
ctn_node bias_of(Graph &g, ctn_node allowed, int32_t dt) {
  return select(g, allowed, g.add_scalar(dt, 0), g.add_scalar(dt, kNegInf));
}

ctn_node sum_bias(Graph &g, ctn_node a, ctn_node b) {
  if (a == CTN_NODE_NONE || b == CTN_NODE_NONE) return a == CTN_NODE_NONE ? b : a;
  return g.op2(CTN_OP_ADD, a, b);
}

void require_float(NodeCtx &c, size_t i) {
  if (!dtype_is_float(c.dtype(i))) c.unsupported("dtype %s (float, double, float16 and bfloat16 only)", dtype_name(c.dtype(i)));
}

// ---- Attention -----------------------------------------------------------------------------------
// The operands in [B, H, S, D] layout and the sizes the lowering needs.
struct Attn {
  ctn_node q = CTN_NODE_NONE, k = CTN_NODE_NONE, v = CTN_NODE_NONE;
  int32_t dt = CTN_F32;
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, Skv = 0, Spast = 0, D = 0;
  bool three_d = false;
};

// [B, S, H*D] -> [B, H, S, D].
ctn_node split_heads(NodeCtx &c, ctn_node x, int64_t heads, const char *what) {
  Graph &g = c.g;
  const Shape s = g.info(x).shape;
  if (heads < 1 || s[2] % heads)
    c.invalid("%s's hidden size %lld is not a multiple of %lld heads", what, static_cast<long long>(s[2]), static_cast<long long>(heads));
  return permute(g, reshape(g, x, shape_of({s[0], s[1], heads, s[2] / heads})), {0, 2, 1, 3});
}

// [B, H, S, D] -> [B, S, H*D].
ctn_node merge_heads(Graph &g, ctn_node y) {
  const Shape s = g.info(y).shape;
  return reshape(g, permute(g, y, {0, 2, 1, 3}), shape_of({s[0], s[2], s[1] * s[3]}));
}

Attn attention_operands(NodeCtx &c) {
  Graph &g = c.g;
  Attn a;
  for (size_t i = 0; i < 3; ++i) require_float(c, i);
  a.dt = c.dtype(0);
  const uint32_t nd = c.shape(0).ndim;
  if (nd != 3 && nd != 4) c.invalid("Q must be 3-d or 4-d, not %u-d", nd);
  if (c.shape(1).ndim != nd || c.shape(2).ndim != nd) c.invalid("Q, K and V must have the same rank");
  if (c.dtype(1) != a.dt || c.dtype(2) != a.dt) c.invalid("Q, K and V must have the same dtype");
  a.three_d = nd == 3;
  const int64_t qh = c.attr_i("q_num_heads", 0), kvh = c.attr_i("kv_num_heads", 0);
  if (a.three_d) {
    if (!c.has_attr("q_num_heads") || !c.has_attr("kv_num_heads")) c.invalid("3-d inputs need q_num_heads and kv_num_heads");
    a.q = split_heads(c, c.in(0), qh, "Q");
    a.k = split_heads(c, c.in(1), kvh, "K");
    a.v = split_heads(c, c.in(2), kvh, "V");
  } else {
    a.q = c.in(0), a.k = c.in(1), a.v = c.in(2);
  }
  const Shape qs = g.info(a.q).shape, ks = g.info(a.k).shape, vs = g.info(a.v).shape;
  a.B = qs[0], a.Hq = qs[1], a.Sq = qs[2], a.D = qs[3], a.Hkv = ks[1];
  if (ks[0] != a.B || vs[0] != a.B) c.invalid("Q, K and V must have the same batch size");
  if (ks[3] != a.D) c.invalid("K's head size %lld differs from Q's %lld", static_cast<long long>(ks[3]), static_cast<long long>(a.D));
  if (vs[1] != a.Hkv || vs[2] != ks[2]) c.invalid("V must have K's number of heads and sequence length");
  if (a.Hkv < 1 || a.Hq % a.Hkv)
    c.invalid("q_num_heads %lld is not a multiple of kv_num_heads %lld", static_cast<long long>(a.Hq), static_cast<long long>(a.Hkv));
  // The internal cache: present = concat(past, new) along the sequence.
  if (c.has(4) != c.has(5)) c.invalid("past_key and past_value must be given together");
  if (c.has(4)) {
    if (c.has(6)) c.invalid("nonpad_kv_seqlen cannot be combined with past_key and past_value");
    const Shape pk = c.shape(4), pv = c.shape(5);
    if (pk.ndim != 4 || pv.ndim != 4 || pk[0] != a.B || pk[1] != a.Hkv || pk[3] != a.D || pv[0] != a.B || pv[1] != a.Hkv ||
        pv[2] != pk[2] || pv[3] != vs[3])
      c.invalid("past_key %s / past_value %s do not fit K %s and V %s", shape_str(pk).c_str(), shape_str(pv).c_str(),
                shape_str(ks).c_str(), shape_str(vs).c_str());
    a.Spast = pk[2];
    ctn_attrs ax = attrs_i({2});
    ctn_node kin[2] = {cast(g, c.in(4), a.dt), a.k}, vin[2] = {cast(g, c.in(5), a.dt), a.v};
    a.k = g.add_op(CTN_OP_CONCAT, 2, kin, &ax);
    a.v = g.add_op(CTN_OP_CONCAT, 2, vin, &ax);
  }
  a.Skv = g.info(a.k).shape[2];
  return a;
}

// The mask input as an additive bias of dtype dt whose last axis is padded to Skv (-inf, or
// false for a boolean mask), or NONE.
ctn_node mask_bias(NodeCtx &c, const Attn &a) {
  if (!c.has(3)) return CTN_NODE_NONE;
  Graph &g = c.g;
  ctn_node m = c.in(3);
  const Shape ms = c.shape(3);
  const bool boolean = c.dtype(3) == CTN_BOOL;
  if (!boolean && !dtype_is_float(c.dtype(3))) c.invalid("attn_mask must be bool or floating, not %s", dtype_name(c.dtype(3)));
  if (ms.ndim < 1 || ms.ndim > 4) c.invalid("attn_mask must be 1-d to 4-d, not %u-d", ms.ndim);
  const int64_t n = ms[ms.ndim - 1];
  if (n > a.Skv)
    c.invalid("attn_mask's last dim %lld exceeds the total sequence length %lld", static_cast<long long>(n), static_cast<long long>(a.Skv));
  m = pad_axis(g, m, static_cast<int32_t>(ms.ndim - 1), 0, a.Skv - n, 0, boolean ? 0.0 : kNegInf);
  return boolean ? bias_of(g, m, a.dt) : cast(g, m, a.dt);
}

// The positional constraints (is_causal, the sliding window, nonpad_kv_seqlen's padding) as one
// additive 0 / -inf bias, or NONE. A query at row i sits at absolute position i + offset, where
// the offset is the cache length (past_key), nonpad_kv_seqlen[b] - Sq per batch, or 0.
ctn_node position_bias(NodeCtx &c, const Attn &a, bool causal, int64_t left, int64_t right) {
  Graph &g = c.g;
  const bool nonpad = c.has(6);
  if (!causal && left < 0 && right < 0 && !nonpad) return CTN_NODE_NONE;
  c.limit(static_cast<double>(a.Sq) * static_cast<double>(a.Skv), "the positional mask");
  std::vector<double> ij(static_cast<size_t>(a.Sq * a.Skv));
  for (int64_t i = 0; i < a.Sq; ++i)
    for (int64_t j = 0; j < a.Skv; ++j) ij[static_cast<size_t>(i * a.Skv + j)] = static_cast<double>(i - j);
  ctn_node diff = const_f(g, CTN_F64, ij, shape_of({a.Sq, a.Skv}));  // query position - key position
  ctn_node lens = CTN_NODE_NONE;
  if (nonpad) {
    const Shape ns = c.shape(6);
    if (ns.numel() != a.B) c.invalid("nonpad_kv_seqlen must have one entry per batch (%lld)", static_cast<long long>(a.B));
    lens = reshape(g, cast(g, c.in(6), CTN_F64), shape_of({a.B, 1, 1, 1}));
    diff = g.op2(CTN_OP_ADD, diff, g.op2(CTN_OP_SUB, lens, g.add_scalar(CTN_F64, static_cast<double>(a.Sq))));
  } else if (a.Spast) {
    diff = g.op2(CTN_OP_ADD, diff, g.add_scalar(CTN_F64, static_cast<double>(a.Spast)));
  }
  ctn_node bias = CTN_NODE_NONE;
  auto constrain = [&](const char *op, ctn_node lhs, double bound) {
    bias = sum_bias(g, bias, bias_of(g, g.op2(op, lhs, g.add_scalar(CTN_F64, bound)), a.dt));
  };
  if (causal) constrain(CTN_OP_GE, diff, 0);
  if (left >= 0) constrain(CTN_OP_LE, diff, static_cast<double>(left));
  if (right >= 0) constrain(CTN_OP_GE, diff, -static_cast<double>(right));
  if (nonpad) {
    ctn_node keys = reshape(g, ramp(g, a.Skv, 1, 0), shape_of({1, 1, 1, a.Skv}));
    bias = sum_bias(g, bias, bias_of(g, g.op2(CTN_OP_LT, keys, lens), a.dt));
  }
  return bias;
}

// softmax(qk + bias) along the keys, in the softmax_precision dtype when given; rows whose bias
// is -inf everywhere (no key may be attended) are zero, not NaN.
ctn_node masked_softmax(NodeCtx &c, ctn_node scores, ctn_node bias, int32_t dt) {
  Graph &g = c.g;
  int32_t sdt = dt;
  if (c.has_attr("softmax_precision")) {
    sdt = dtype_from_onnx(static_cast<int32_t>(c.attr_i("softmax_precision", 1)));
    if (sdt < 0 || !dtype_is_float(sdt)) c.unsupported("softmax_precision %lld", static_cast<long long>(c.attr_i("softmax_precision", 1)));
  }
  ctn_attrs ax = attrs_i({3});
  ctn_node p = g.op1(CTN_OP_SOFTMAX, cast(g, scores, sdt), &ax);
  if (bias != CTN_NODE_NONE) {
    const uint32_t last = g.info(bias).shape.ndim - 1;
    ctn_node none = g.op2(CTN_OP_EQ, reduce(g, CTN_OP_MAX, bias, 1ull << last, true), g.add_scalar(dt, kNegInf));
    p = select(g, none, g.add_scalar(sdt, 0), p);
  }
  return cast(g, p, dt);
}

void attention(NodeCtx &c) {
  Graph &g = c.g;
  Attn a = attention_operands(c);
  const int32_t out_dt = a.dt;
  const ctn_node present_k = a.k, present_v = a.v;
  // float16 and bfloat16 compute in float32 and round once at the end: the scores, the softmax
  // and its sums in 16 bits lose more than one ulp of Y (the reference rounds each step).
  if (a.dt == CTN_F16 || a.dt == CTN_BF16) {
    a.dt = CTN_F32;
    a.q = cast(g, a.q, CTN_F32), a.k = cast(g, a.k, CTN_F32), a.v = cast(g, a.v, CTN_F32);
  }
  const bool causal = c.attr_i("is_causal", 0) != 0;
  const int64_t left = c.attr_i("left_window_size", -1), right = c.attr_i("right_window_size", -1);
  if (left < -1 || right < -1) c.invalid("left_window_size and right_window_size must be -1 or non-negative");
  const double softcap = c.attr_f("softcap", 0.0);
  const int64_t mode = c.attr_i("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) c.unsupported("qk_matmul_output_mode %lld (0 to 3)", static_cast<long long>(mode));
  if (c.has(6) && c.dtype(6) != CTN_I64 && c.dtype(6) != CTN_I32) c.invalid("nonpad_kv_seqlen must be an integer tensor");
  // Q and K are each scaled by sqrt(scale), as the spec prescribes (against overflow).
  const double scale = c.has_attr("scale") ? c.attr_f("scale", 1.0) : 1.0 / std::sqrt(static_cast<double>(a.D));
  ctn_node s = g.add_scalar(a.dt, std::sqrt(scale));
  // Grouped-query attention: query head h uses key/value head h / (Hq / Hkv); the r query heads
  // of a group are stacked along the query axis so that one batched matmul serves them.
  const int64_t r = a.Hq / a.Hkv;
  ctn_node q = reshape(g, g.op2(CTN_OP_MUL, a.q, s), shape_of({a.B, a.Hkv, r * a.Sq, a.D}));
  ctn_attrs tb = attrs_i({0, 1});
  ctn_node qk = g.op2(CTN_OP_MATMUL, q, g.op2(CTN_OP_MUL, a.k, s), &tb);
  qk = reshape(g, qk, shape_of({a.B, a.Hq, a.Sq, a.Skv}));
  if (softcap > 0) {
    ctn_node cap = g.add_scalar(a.dt, softcap);
    qk = g.op2(CTN_OP_MUL, g.op1(CTN_OP_TANH, g.op2(CTN_OP_DIV, qk, cap)), cap);
  }
  ctn_node bias = sum_bias(g, mask_bias(c, a), position_bias(c, a, causal, left, right));
  ctn_node scores = bias == CTN_NODE_NONE ? qk : g.op2(CTN_OP_ADD, qk, bias);
  ctn_node p = masked_softmax(c, scores, bias, a.dt);
  ctn_node y = g.op2(CTN_OP_MATMUL, reshape(g, p, shape_of({a.B, a.Hkv, r * a.Sq, a.Skv})), a.v);
  const int64_t dv = g.info(a.v).shape[3];
  y = reshape(g, y, shape_of({a.B, a.Hq, a.Sq, dv}));
  // Modes 0 and 1 both give the (softcapped) product, as the reference does.
  ctn_node qk_out = mode == 3 ? p : mode == 2 ? scores : qk;
  c.outs = {cast(g, a.three_d ? merge_heads(g, y) : y, out_dt), present_k, present_v, cast(g, qk_out, out_dt)};
}

// ---- RotaryEmbedding -----------------------------------------------------------------------------
void rotary_embedding(NodeCtx &c) {
  Graph &g = c.g;
  require_float(c, 0);
  const Shape xs = c.shape(0);
  const int32_t dt = c.dtype(0);
  if (xs.ndim != 3 && xs.ndim != 4) c.invalid("the input must be 3-d or 4-d, not %u-d", xs.ndim);
  const bool three_d = xs.ndim == 3;
  const int64_t heads = c.attr_i("num_heads", 0), B = xs[0];
  // Work in [B, S, H, D] (3-d input) or the input's own [B, H, S, D]; the caches broadcast as
  // [B, S, 1, half] or [B, 1, S, half].
  ctn_node x = c.in(0);
  int64_t S = xs[1], D = 0;
  if (three_d) {
    if (heads < 1 || xs[2] % heads) c.invalid("a 3-d input needs num_heads dividing its hidden size %lld", static_cast<long long>(xs[2]));
    D = xs[2] / heads;
    x = reshape(g, x, shape_of({B, S, heads, D}));
  } else {
    S = xs[2], D = xs[3];
  }
  const int64_t rot = c.attr_i("rotary_embedding_dim", 0) > 0 ? c.attr_i("rotary_embedding_dim", 0) : D;
  if (rot > D || rot % 2) c.invalid("rotary_embedding_dim %lld must be even and at most the head size %lld", static_cast<long long>(rot), static_cast<long long>(D));
  const int64_t half = rot / 2;
  const bool interleaved = c.attr_i("interleaved", 0) != 0;
  ctn_node cs[2] = {cast(g, c.in(1), dt), cast(g, c.in(2), dt)};
  for (ctn_node &t : cs) {
    if (c.has(3)) {
      if (g.info(t).shape.ndim != 2) c.invalid("with position_ids, the caches must be 2-d [max_position, rotary_dim / 2]");
      t = take(g, t, c.in(3), 0);
    }
    const Shape ts = g.info(t).shape;
    if (ts.ndim != 3 || ts[0] != B || ts[1] != S || ts[2] != half)
      c.invalid("the cos/sin cache gives %s per token, not [%lld, %lld, %lld]", shape_str(ts).c_str(), static_cast<long long>(B),
                static_cast<long long>(S), static_cast<long long>(half));
    t = reshape(g, t, three_d ? shape_of({B, S, 1, half}) : shape_of({B, 1, S, half}));
  }
  ctn_node x1 = interleaved ? slice(g, x, 3, 0, rot, 2) : slice(g, x, 3, 0, half, 1);
  ctn_node x2 = interleaved ? slice(g, x, 3, 1, rot, 2) : slice(g, x, 3, half, rot, 1);
  ctn_node re = g.op2(CTN_OP_SUB, g.op2(CTN_OP_MUL, cs[0], x1), g.op2(CTN_OP_MUL, cs[1], x2));
  ctn_node im = g.op2(CTN_OP_ADD, g.op2(CTN_OP_MUL, cs[1], x1), g.op2(CTN_OP_MUL, cs[0], x2));
  const Shape hs = g.info(re).shape;
  ctn_node rotated;
  if (interleaved) {
    // re, im -> re0 im0 re1 im1 ...: stack along a new last axis, then flatten it.
    const Shape h5 = shape_of({hs[0], hs[1], hs[2], half, 1});
    ctn_node parts[2] = {reshape(g, re, h5), reshape(g, im, h5)};
    ctn_attrs ax = attrs_i({4});
    rotated = reshape(g, g.add_op(CTN_OP_CONCAT, 2, parts, &ax), shape_of({hs[0], hs[1], hs[2], rot}));
  } else {
    ctn_node parts[2] = {re, im};
    ctn_attrs ax = attrs_i({3});
    rotated = g.add_op(CTN_OP_CONCAT, 2, parts, &ax);
  }
  if (rot < D) {
    ctn_node parts[2] = {rotated, slice(g, x, 3, rot, D, 1)};
    ctn_attrs ax = attrs_i({3});
    rotated = g.add_op(CTN_OP_CONCAT, 2, parts, &ax);
  }
  c.outs = {three_d ? reshape(g, rotated, xs) : rotated};
}

// ---- SwiGLU ----------------------------------------------------------------------------------------
void swiglu(NodeCtx &c) {
  Graph &g = c.g;
  require_float(c, 0);
  if (c.shape(0) != c.shape(1) || c.dtype(0) != c.dtype(1))
    c.invalid("A %s and B %s must have the same shape and dtype (no broadcasting)", shape_str(c.shape(0)).c_str(), shape_str(c.shape(1)).c_str());
  ctn_node a = c.in(0);
  const double alpha = c.attr_f("alpha", 1.0);
  ctn_node gate = g.op1(CTN_OP_SIGMOID, alpha == 1.0 ? a : g.op2(CTN_OP_MUL, a, scalar_like(g, a, alpha)));
  c.outs = {g.op2(CTN_OP_MUL, g.op2(CTN_OP_MUL, a, gate), c.in(1))};
}

// ---- CausalConvWithState ---------------------------------------------------------------------------
// A depthwise 1-d convolution over [past_state (or zeros), input]: conv2d with one group per
// channel on [B, C, 1, k-1+L]; the last k-1 positions of that concatenation are the new state.
void causal_conv_with_state(NodeCtx &c) {
  Graph &g = c.g;
  require_float(c, 0);
  const std::string act = c.attr_s("activation", "none");
  if (act != "none" && act != "silu" && act != "swish") c.unsupported("activation '%s' (none, silu, swish)", act.c_str());
  const Shape xs = c.shape(0), ws = c.shape(1);
  if (xs.ndim != 3 || ws.ndim != 3 || ws[0] != xs[1] || ws[1] != 1)
    c.invalid("input %s must be [B, C, L] and weight %s [C, 1, k]", shape_str(xs).c_str(), shape_str(ws).c_str());
  const int32_t dt = c.dtype(0);
  const int64_t B = xs[0], C = xs[1], L = xs[2], k = ws[2];
  if (k < 1) c.invalid("the kernel must have at least one tap");
  ctn_node padded = c.in(0);
  if (k > 1) {
    ctn_node past;
    if (c.has(3)) {
      if (c.shape(3) != shape_of({B, C, k - 1})) c.invalid("past_state %s must be [B, C, k-1]", shape_str(c.shape(3)).c_str());
      past = cast(g, c.in(3), dt);
    } else {
      ctn_attrs z = attrs_i({B, C, k - 1});
      past = g.op1(CTN_OP_BROADCAST_TO, g.add_scalar(dt, 0), &z);
    }
    ctn_node parts[2] = {past, padded};
    ctn_attrs ax = attrs_i({2});
    padded = g.add_op(CTN_OP_CONCAT, 2, parts, &ax);
  }
  // float16 and bfloat16 convolve in float32 (the reference computes in the wide type too).
  const int32_t wt = dt == CTN_F64 ? CTN_F64 : CTN_F32;
  ctn_node x4 = reshape(g, cast(g, padded, wt), shape_of({B, C, 1, L + k - 1}));
  ctn_node w4 = reshape(g, cast(g, c.in(1), wt), shape_of({C, 1, 1, k}));
  ctn_attrs ca = attrs_i({1, 1, 0, 0, 1, 1, C});
  ctn_node y = reshape(g, g.op2(CTN_OP_CONV2D, x4, w4, &ca), shape_of({B, C, L}));
  if (c.has(2)) y = g.op2(CTN_OP_ADD, y, reshape(g, cast(g, c.in(2), wt), shape_of({C, 1})));
  if (act != "none") y = g.op2(CTN_OP_MUL, y, g.op1(CTN_OP_SIGMOID, cast(g, cast(g, y, dt), wt)));
  ctn_attrs tail = attrs_i({2, L, L + k - 1, 1});
  c.outs = {cast(g, y, dt), g.op1(CTN_OP_SLICE, padded, &tail)};
}

// ---- LinearAttention -------------------------------------------------------------------------------
constexpr int64_t kMaxLinearSteps = 4096;  // the recurrence is unrolled, a few nodes per token

struct Linear {
  ctn_node q, k, v, decay = CTN_NODE_NONE, beta = CTN_NODE_NONE;  // [B, H, T, .] in float32
  int64_t B, T, Hq, Hkv, dk, dv;
};

Linear linear_operands(NodeCtx &c, bool gating, bool delta) {
  Graph &g = c.g;
  Linear l{};
  for (size_t i = 0; i < 3; ++i) {
    require_float(c, i);
    if (c.shape(i).ndim != 3) c.invalid("query, key and value must be 3-d [B, T, H*D]");
  }
  l.Hq = c.attr_i("q_num_heads", 0), l.Hkv = c.attr_i("kv_num_heads", 0);
  if (l.Hq < 1 || l.Hkv < 1 || l.Hq % l.Hkv)
    c.invalid("q_num_heads (%lld) must be a positive multiple of kv_num_heads (%lld)", static_cast<long long>(l.Hq), static_cast<long long>(l.Hkv));
  auto heads = [&](ctn_node x, int64_t h, const char *what) { return split_heads(c, cast(g, x, CTN_F32), h, what); };
  l.q = heads(c.in(0), l.Hq, "query");
  l.k = heads(c.in(1), l.Hkv, "key");
  l.v = heads(c.in(2), l.Hkv, "value");
  const Shape qs = g.info(l.q).shape, ks = g.info(l.k).shape, vs = g.info(l.v).shape;
  l.B = qs[0], l.T = qs[2], l.dk = qs[3], l.dv = vs[3];
  if (ks[0] != l.B || vs[0] != l.B || ks[2] != l.T || vs[2] != l.T || ks[3] != l.dk) c.invalid("query, key and value do not fit");
  if (l.T > kMaxLinearSteps) c.unsupported("%lld tokens (the recurrence is unrolled; at most %lld)", static_cast<long long>(l.T), static_cast<long long>(kMaxLinearSteps));
  if (gating != c.has(4)) c.invalid("update_rule %s the decay input", gating ? "needs" : "forbids");
  if (delta != c.has(5)) c.invalid("update_rule %s the beta input", delta ? "needs" : "forbids");
  if (gating) {
    const Shape ds = c.shape(4);
    if (ds.ndim != 3 || ds[0] != l.B || ds[1] != l.T || (ds[2] != l.Hkv && ds[2] != l.Hkv * l.dk))
      c.invalid("decay %s must be [B, T, kv_num_heads] or [B, T, kv_num_heads * d_k]", shape_str(ds).c_str());
    l.decay = heads(c.in(4), l.Hkv, "decay");
  }
  if (delta) {
    const Shape bs = c.shape(5);
    if (bs.ndim != 3 || bs[0] != l.B || bs[1] != l.T || (bs[2] != l.Hkv && bs[2] != 1))
      c.invalid("beta %s must be [B, T, kv_num_heads] or [B, T, 1]", shape_str(bs).c_str());
    l.beta = heads(c.in(5), bs[2], "beta");
  }
  return l;
}

// The recurrence, one token at a time, on a float32 state [B, Hkv, dk, dv].
void linear_attention(NodeCtx &c) {
  Graph &g = c.g;
  c.ignore("chunk_size");  // a tuning hint with no effect on the result
  const std::string rule = c.attr_s("update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    c.unsupported("update_rule '%s' (linear, gated, delta, gated_delta)", rule.c_str());
  const bool gating = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
  const Linear l = linear_operands(c, gating, delta);
  const int32_t dt = c.dtype(0);
  const Shape state_shape = shape_of({l.B, l.Hkv, l.dk, l.dv});
  ctn_node state;
  if (c.has(3)) {
    if (c.shape(3) != state_shape) c.invalid("past_state %s must be %s", shape_str(c.shape(3)).c_str(), shape_str(state_shape).c_str());
    state = cast(g, c.in(3), CTN_F32);
  } else {
    ctn_attrs z = attrs_i({l.B, l.Hkv, l.dk, l.dv});
    state = g.op1(CTN_OP_BROADCAST_TO, g.add_scalar(CTN_F32, 0), &z);
  }
  const double sc = c.attr_f("scale", 0.0);
  ctn_node scale = g.add_scalar(CTN_F32, sc == 0.0 ? 1.0 / std::sqrt(static_cast<double>(l.dk)) : sc);
  const int64_t r = l.Hq / l.Hkv;
  ctn_attrs ta = attrs_i({1, 0});
  std::vector<ctn_node> outs;
  for (int64_t t = 0; t < l.T; ++t) {
    ctn_node kt = slice(g, l.k, 2, t, t + 1, 1), vt = slice(g, l.v, 2, t, t + 1, 1);  // [B, Hkv, 1, d]
    if (gating) {
      ctn_node gt = slice(g, l.decay, 2, t, t + 1, 1);  // [B, Hkv, 1, dk or 1] -> per state row
      const int64_t w = g.info(gt).shape[3];
      state = g.op2(CTN_OP_MUL, state, reshape(g, g.op1(CTN_OP_EXP, gt), shape_of({l.B, l.Hkv, w, 1})));
    }
    if (delta) {
      ctn_node retrieved = g.op2(CTN_OP_MATMUL, kt, state);  // [B, Hkv, 1, dv]
      vt = g.op2(CTN_OP_MUL, slice(g, l.beta, 2, t, t + 1, 1), g.op2(CTN_OP_SUB, vt, retrieved));
    }
    state = g.op2(CTN_OP_ADD, state, g.op2(CTN_OP_MATMUL, kt, vt, &ta));
    // Query heads of a group read their shared state: [B, Hkv, r, dk] @ [B, Hkv, dk, dv].
    ctn_node qt = reshape(g, slice(g, l.q, 2, t, t + 1, 1), shape_of({l.B, l.Hkv, r, l.dk}));
    outs.push_back(reshape(g, g.op2(CTN_OP_MUL, g.op2(CTN_OP_MATMUL, qt, state), scale), shape_of({l.B, l.Hq, 1, l.dv})));
  }
  ctn_attrs ax = attrs_i({2});
  ctn_node y = outs.size() == 1 ? outs[0] : g.add_op(CTN_OP_CONCAT, static_cast<uint32_t>(outs.size()), outs.data(), &ax);
  c.outs = {cast(g, merge_heads(g, y), dt), cast(g, state, c.has(3) ? c.dtype(3) : dt)};
}

const OpEntry kAttention[] = {
    {"Attention", attention},
    {"RotaryEmbedding", rotary_embedding},
    {"SwiGLU", swiglu},
    {"CausalConvWithState", causal_conv_with_state},
    {"LinearAttention", linear_attention},
};
}  // namespace

std::span<const OpEntry> attention_ops() { return kAttention; }

}  // namespace ctn::onnx
