// ONNX sequences (since 1.6), lowered at import: a sequence is the list of its tensors' nodes, so
// SequenceConstruct, SequenceEmpty, SequenceInsert, SequenceErase and SplitToSequence edit a list,
// SequenceAt picks an element, SequenceLength is a constant and ConcatFromSequence a concat (a
// stack with new_axis). Every length, position and split must be known at import (constants);
// graph inputs and outputs stay tensors (a sequence there is refused by name).
#include <chutney/ops.h>

#include "onnx/importer.h"
#include "onnx/lower.h"
#include "util/status.h"

#include <string_view>

namespace ctn::onnx {
namespace {

using namespace lower;

const Seq &seq_in(NodeCtx &c, const std::vector<const Seq *> &in, size_t i) {
  if (i >= in.size() || !in[i]) c.invalid("input %zu must be a sequence", i);
  return *in[i];
}

// A position input (a constant scalar) checked against a sequence of n (n + 1 for an insert).
size_t position(NodeCtx &c, size_t i, size_t n, bool insert) {
  const std::vector<int64_t> v = c.ints(i, "position");
  if (v.size() != 1) c.invalid("position must be one integer, it has %zu elements", v.size());
  const auto len = static_cast<int64_t>(n);
  const int64_t p = v[0] < 0 ? v[0] + len : v[0];
  if (p < 0 || p > len - (insert ? 0 : 1))
    c.invalid("position %lld is out of range for a sequence of %lld", static_cast<long long>(v[0]), static_cast<long long>(len));
  return static_cast<size_t>(p);
}

Seq split_to_sequence(NodeCtx &c) {
  const Shape s = c.shape(0);
  const int32_t ax = c.axis(c.attr_i("axis", 0), s.ndim);
  const int64_t n = s[static_cast<uint32_t>(ax)];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!c.has(1)) {
    sizes.assign(static_cast<size_t>(n), 1);
    squeeze = c.attr_i("keepdims", 1) == 0;
  } else {
    c.ignore("keepdims");
    const std::vector<int64_t> v = c.ints(1, "split");
    if (c.shape(1).ndim == 0) {
      if (v[0] <= 0) c.invalid("split must be positive, got %lld", static_cast<long long>(v[0]));
      for (int64_t at = 0; at < n; at += v[0]) sizes.push_back(std::min(v[0], n - at));
    } else {
      sizes = v;
    }
  }
  Seq out;
  int64_t at = 0;
  for (int64_t len : sizes) {
    if (len < 0 || at + len > n) c.invalid("the split sizes exceed the axis (%lld)", static_cast<long long>(n));
    ctn_node part = slice(c.g, c.in(0), ax, at, at + len, 1);
    if (squeeze) {
      Shape q;
      for (uint32_t k = 0; k < s.ndim; ++k)
        if (static_cast<int32_t>(k) != ax) q.d[q.ndim++] = s[k];
      part = reshape(c.g, part, q);
    }
    out.push_back(part);
    at += len;
  }
  if (at != n) c.invalid("the split sizes add up to %lld, the axis has %lld", static_cast<long long>(at), static_cast<long long>(n));
  return out;
}

ctn_node concat_from_sequence(NodeCtx &c, const Seq &seq) {
  if (seq.empty()) c.invalid("the sequence is empty");
  const Shape s = c.g.info(seq[0]).shape;
  const bool stack = c.attr_i("new_axis", 0) != 0;
  const int32_t ax = c.axis(c.attr_i("axis", 0), s.ndim + (stack ? 1 : 0));
  std::vector<ctn_node> parts;
  for (ctn_node x : seq) {
    if (!stack) {
      parts.push_back(x);
      continue;
    }
    const Shape xs = c.g.info(x).shape;
    Shape e;
    for (uint32_t k = 0; k <= xs.ndim; ++k) e.d[e.ndim++] = static_cast<int32_t>(k) == ax ? 1 : xs[k - (static_cast<int32_t>(k) > ax)];
    parts.push_back(reshape(c.g, x, e));
  }
  if (parts.size() == 1) return parts[0];
  ctn_attrs a = attrs_i({ax});
  return c.g.add_op(CTN_OP_CONCAT, static_cast<uint32_t>(parts.size()), parts.data(), &a);
}

}  // namespace

bool is_sequence_op(std::string_view op) {
  return op == "SequenceConstruct" || op == "SequenceEmpty" || op == "SequenceInsert" || op == "SequenceErase" ||
         op == "SequenceAt" || op == "SequenceLength" || op == "SplitToSequence" || op == "ConcatFromSequence";
}

void convert_sequence(NodeCtx &c, const std::vector<const Seq *> &in, Seq *out, bool *made) {
  const std::string_view op = c.node.op_type;
  *made = true;
  if (op == "SequenceConstruct") {
    for (size_t i = 0; i < c.n_in(); ++i) out->push_back(c.in(i));
  } else if (op == "SequenceEmpty") {
    c.ignore("dtype");
  } else if (op == "SequenceInsert") {
    *out = seq_in(c, in, 0);
    const size_t at = c.has(2) ? position(c, 2, out->size(), true) : out->size();
    out->insert(out->begin() + static_cast<std::ptrdiff_t>(at), c.in(1));
  } else if (op == "SequenceErase") {
    *out = seq_in(c, in, 0);
    if (out->empty()) c.invalid("the sequence is empty");
    const size_t at = c.has(1) ? position(c, 1, out->size(), false) : out->size() - 1;
    out->erase(out->begin() + static_cast<std::ptrdiff_t>(at));
  } else if (op == "SplitToSequence") {
    *out = split_to_sequence(c);
  } else {
    *made = false;
    const Seq &s = seq_in(c, in, 0);
    if (op == "SequenceAt") c.outs = {s.at(position(c, 1, s.size(), false))};
    else if (op == "SequenceLength") c.outs = {const_i64(c.g, {static_cast<int64_t>(s.size())}, Shape{})};
    else c.outs = {concat_from_sequence(c, s)};
  }
}

}  // namespace ctn::onnx
