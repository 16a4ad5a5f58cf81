#include "graph/graph.h"

#include "util/small_buf.h"
#include "util/status.h"

#include <cstring>

#include <chutney/desc.h>

namespace ctn {

namespace {

// Constant-initialised (no static-initialisation order with exec/eager.cpp's installer).
EagerExecutor g_eager_executor = nullptr;

void run_eager(Graph &g, Node &node) {
  if (!g_eager_executor)
    fail(CTN_ERR_INTERNAL, "%s: eager graphs need exec/eager.cpp, which is not linked in", node.op->name.c_str());
  g_eager_executor(g, node);
}

}  // namespace

void install_eager_executor(EagerExecutor run) { g_eager_executor = run; }

ctn_attrs attrs_i(std::initializer_list<int64_t> ints) {
  ctn_attrs a{};
  for (int64_t v : ints) a.i[a.ni++] = v;
  return a;
}

ctn_attrs attrs_f(std::initializer_list<double> floats) {
  ctn_attrs a{};
  for (double v : floats) a.f[a.nf++] = v;
  return a;
}

std::vector<std::string> output_names(const Graph &g, uint32_t n, const ctn_node *outs, const char *const *names,
                                      const char *fn) {
  std::vector<std::string> r;
  for (uint32_t i = 0; i < n; ++i) {
    g.check(outs[i], fn);
    std::string nm = names ? (names[i] ? names[i] : "") : "output" + std::to_string(i);
    if (nm.empty()) fail(CTN_ERR_INVALID_ARGUMENT, "%s: output_names[%u] is empty or NULL", fn, i);
    for (const std::string &o : r)
      if (o == nm) fail(CTN_ERR_INVALID_ARGUMENT, "%s: output name \"%s\" repeats", fn, nm.c_str());
    r.push_back(std::move(nm));
  }
  return r;
}

void Graph::check(ctn_node n, const char *what) const {
  if (n >= nodes_.size())
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: node %u does not exist in this graph (it has %zu nodes)", what, n,
         nodes_.size());
}

ctn_node Graph::add_input(const char *name, int32_t dtype, const Shape &shape) {
  if (eager_) fail(CTN_ERR_STATE, "ctn_input: an eager graph has no placeholders; use ctn_constant or ctn_variable");
  if (!dtype_valid(dtype)) fail(CTN_ERR_DTYPE, "ctn_input: unknown dtype %d", dtype);
  Node n;
  n.kind = NodeKind::Input;
  n.info = {dtype, shape};
  n.name = name ? name : "input" + std::to_string(nodes_.size());
  nodes_.push_back(std::move(n));
  return static_cast<ctn_node>(nodes_.size() - 1);
}

ctn_node Graph::add_constant(const Tensor &value) {
  Node n;
  n.kind = NodeKind::Constant;
  n.info = {value.dtype, value.shape};
  n.value = std::make_shared<Tensor>(value.contiguous());
  nodes_.push_back(std::move(n));
  return static_cast<ctn_node>(nodes_.size() - 1);
}

ctn_node Graph::add_scalar(int32_t dtype, double v) {
  if (!dtype_valid(dtype)) fail(CTN_ERR_DTYPE, "ctn_scalar: unknown dtype %d", dtype);
  // A value an integer dtype cannot hold (NaN, inf, 1e30, -1 for u8) is refused: the
  // conversion would be undefined behaviour. Fractions truncate toward zero.
  auto fits = [&](double lo, double hi) { return v > lo && v < hi; };  // false for NaN
  bool ok = true;
  if (dtype == CTN_I32) ok = fits(-2147483649.0, 2147483648.0);
  if (dtype == CTN_I64) ok = fits(-9223372036854777856.0, 9223372036854775808.0);
  if (dtype == CTN_U8) ok = fits(-1.0, 256.0);
  if (dtype == CTN_I8) ok = fits(-129.0, 128.0);
  if (dtype == CTN_I16) ok = fits(-32769.0, 32768.0);
  if (dtype == CTN_U16) ok = fits(-1.0, 65536.0);
  if (dtype == CTN_U32) ok = fits(-1.0, 4294967296.0);
  if (dtype == CTN_U64) ok = fits(-1.0, 18446744073709551616.0);
  if (!ok) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_scalar: %g does not fit in %s", v, dtype_name(dtype));
  Tensor t = Tensor::empty(dtype, Shape{});
  switch (dtype) {
    case CTN_F32: *reinterpret_cast<float *>(t.data()) = static_cast<float>(v); break;
    case CTN_F64: *reinterpret_cast<double *>(t.data()) = v; break;
    case CTN_I32: *reinterpret_cast<int32_t *>(t.data()) = static_cast<int32_t>(v); break;
    case CTN_I64: *reinterpret_cast<int64_t *>(t.data()) = static_cast<int64_t>(v); break;
    case CTN_U8: *reinterpret_cast<uint8_t *>(t.data()) = static_cast<uint8_t>(v); break;
    case CTN_BOOL: *reinterpret_cast<uint8_t *>(t.data()) = v != 0; break;
    case CTN_I8: *reinterpret_cast<int8_t *>(t.data()) = static_cast<int8_t>(v); break;
    case CTN_I16: *reinterpret_cast<int16_t *>(t.data()) = static_cast<int16_t>(v); break;
    case CTN_U16: *reinterpret_cast<uint16_t *>(t.data()) = static_cast<uint16_t>(v); break;
    case CTN_U32: *reinterpret_cast<uint32_t *>(t.data()) = static_cast<uint32_t>(v); break;
    case CTN_U64: *reinterpret_cast<uint64_t *>(t.data()) = static_cast<uint64_t>(v); break;
    // The 16-bit floats round to nearest even (once, from the double); past the range: inf.
    case CTN_F16: *reinterpret_cast<uint16_t *>(t.data()) = ctn_desc_f64_to_f16(v); break;
    case CTN_BF16: *reinterpret_cast<uint16_t *>(t.data()) = ctn_desc_f64_to_bf16(v); break;
  }
  Node n;
  n.kind = NodeKind::Constant;
  n.info = {dtype, Shape{}};
  n.value = std::make_shared<Tensor>(std::move(t));
  nodes_.push_back(std::move(n));
  return static_cast<ctn_node>(nodes_.size() - 1);
}

ctn_node Graph::add_variable(const char *name, const Tensor &init) {
  Node n;
  n.kind = NodeKind::Variable;
  n.info = {init.dtype, init.shape};
  n.name = name ? name : "var" + std::to_string(nodes_.size());
  n.value = std::make_shared<Tensor>(init.contiguous());
  nodes_.push_back(std::move(n));
  return static_cast<ctn_node>(nodes_.size() - 1);
}

ctn_node Graph::add_assign(ctn_node var, ctn_node value) {
  check(var, "ctn_assign");
  check(value, "ctn_assign");
  if (nodes_[var].kind != NodeKind::Variable)
    fail(CTN_ERR_INVALID_ARGUMENT, "ctn_assign: node %u is not a variable", var);
  const ValueInfo &a = nodes_[var].info, &b = nodes_[value].info;
  if (a.dtype != b.dtype) fail(CTN_ERR_DTYPE, "ctn_assign: variable is %s, value is %s", dtype_name(a.dtype), dtype_name(b.dtype));
  if (a.shape != b.shape)
    fail(CTN_ERR_SHAPE, "ctn_assign: variable is %s, value is %s", shape_str(a.shape).c_str(), shape_str(b.shape).c_str());
  Node n;
  n.kind = NodeKind::Assign;
  n.inputs = {var, through_assign(value)};
  n.info = b;
  if (eager_) {
    // Eager: the variable takes the value now (reads already done saw the old one).
    nodes_[var].value = std::make_shared<Tensor>(nodes_[value].value->contiguous());
    n.value = nodes_[var].value;
  }
  nodes_.push_back(std::move(n));
  return static_cast<ctn_node>(nodes_.size() - 1);
}

ctn_node Graph::add_op(const char *op, uint32_t n, const ctn_node *inputs, const ctn_attrs *attrs) {
  const OpDef *def = ops_->find_core_op(op);
  if (!def) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_op: unknown op \"%s\"", op ? op : "(null)");
  static const ctn_attrs zero{};
  return add_op(*def, n, inputs, attrs ? *attrs : zero);
}

ctn_node Graph::add_named_op(const char *op, uint32_t n, const ctn_node *inputs, const ctn_attrs *attrs,
                             const OpLib *from) {
  const OpDef *def = ops_->find_op(op, from);
  if (!def) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_op: unknown op \"%s\"", op ? op : "(null)");
  static const ctn_attrs zero{};
  return add_op(*def, n, inputs, attrs ? *attrs : zero);
}

ctn_node Graph::add_op(const OpDef &op, uint32_t n, const ctn_node *inputs, const ctn_attrs &attrs_in) {
  if (op.n_inputs >= 0 && n != static_cast<uint32_t>(op.n_inputs))
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: takes %d inputs, got %u", op.name.c_str(), op.n_inputs, n);
  if (op.n_inputs < 0 && n == 0) fail(CTN_ERR_INVALID_ARGUMENT, "%s: takes at least one input", op.name.c_str());
  if (n && !inputs) fail(CTN_ERR_INVALID_ARGUMENT, "%s: inputs is NULL", op.name.c_str());
  // The counts come from the caller: past the arrays they would make every reader of the
  // attributes (the eager cache key, op libraries' infer and kernels) read beyond them.
  if (attrs_in.ni > CTN_ATTR_INTS || attrs_in.nf > CTN_ATTR_FLOATS)
    fail(CTN_ERR_INVALID_ARGUMENT, "%s: attrs.ni is %u and attrs.nf is %u (at most %d and %d)", op.name.c_str(),
         attrs_in.ni, attrs_in.nf, CTN_ATTR_INTS, CTN_ATTR_FLOATS);
  SmallBuf<ValueInfo, 4> in_buf(n);
  ValueInfo *in = in_buf.data();
  for (uint32_t i = 0; i < n; ++i) {
    check(inputs[i], op.name.c_str());
    in[i] = nodes_[inputs[i]].info;
  }
  // An assignment's node evaluates to the value it assigns, but assignments run after every
  // other node of a plan: an op reading one reads the assigned value itself (a plan scheduled
  // the op before the assignment and failed with an internal error otherwise).
  SmallVec<ctn_node, 4> ins(inputs, inputs + n);
  for (ctn_node &x : ins) x = through_assign(x);
  Node node;
  node.kind = NodeKind::Op;
  node.op = &op;
  node.attrs = attrs_in;
  node.info = op.infer(op, in, n, node.attrs);
  // Attributes can describe shapes whose element count overflows (a pad of 2^62); refuse them
  // here rather than let a planner or kernel compute sizes with the overflowed count.
  if (!node.info.shape.numel_fits())
    fail(CTN_ERR_SHAPE, "%s: the result %s has more elements than a tensor can hold (2^60)", op.name.c_str(),
         shape_str(node.info.shape).c_str());
  if (op.expand) return add_composite(op, n, ins.data(), node.attrs, node.info);
  node.bounded = (op.flags & OP_DATA_DEPENDENT) != 0;
  for (ctn_node x : ins) node.bounded = node.bounded || nodes_[x].bounded;
  node.inputs = std::move(ins);
  if (eager_) run_eager(*this, node);
  nodes_.push_back(std::move(node));
  return static_cast<ctn_node>(nodes_.size() - 1);
}

// A composite op is replaced by its parts, each added through add_op like any node (eager graphs
// run them as they come). A part that fails removes the parts already added, so the failed call
// leaves the graph as it was.
ctn_node Graph::add_composite(const OpDef &op, uint32_t n, const ctn_node *inputs, const ctn_attrs &attrs,
                              const ValueInfo &want) {
  const size_t mark = nodes_.size();
  try {
    ctn_node r = op.expand(*this, op, inputs, n, attrs);
    check(r, op.name.c_str());
    const ValueInfo &got = nodes_[r].info;
    if (got.dtype != want.dtype || got.shape != want.shape)
      fail(CTN_ERR_INTERNAL, "%s: the composite's parts give %s%s, its inference %s%s", op.name.c_str(),
           dtype_name(got.dtype), shape_str(got.shape).c_str(), dtype_name(want.dtype), shape_str(want.shape).c_str());
    return r;
  } catch (...) {
    nodes_.erase(nodes_.begin() + static_cast<std::ptrdiff_t>(mark), nodes_.end());
    throw;
  }
}

ctn_node sum_to(Graph &g, ctn_node x, Shape target) {
  const Shape s = g.info(x).shape;
  if (s == target) return x;
  uint32_t lead = s.ndim - target.ndim;
  uint64_t mask = 0;
  for (uint32_t k = 0; k < s.ndim; ++k) {
    if (k < lead) mask |= 1ull << k;
    else if (target[k - lead] == 1 && s[k] != 1) mask |= 1ull << k;
  }
  ctn_node r = x;
  if (mask) {
    ctn_attrs a = attrs_i({static_cast<int64_t>(mask), 1});
    r = g.op1("sum", x, &a);
  }
  if (g.info(r).shape != target) {
    ctn_attrs a{};
    for (uint32_t k = 0; k < target.ndim; ++k) a.i[a.ni++] = target[k];
    r = g.op1("reshape", r, &a);
  }
  return r;
}

std::string Graph::to_dot() const {
  std::string s = "digraph chutney {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node &n = nodes_[i];
    std::string label, shape = "box", color = "white";
    switch (n.kind) {
      case NodeKind::Input: label = "input " + n.name; shape = "ellipse"; color = "lightblue"; break;
      case NodeKind::Constant: label = "const"; shape = "ellipse"; color = "lightgrey"; break;
      case NodeKind::Variable: label = "var " + n.name; shape = "ellipse"; color = "palegreen"; break;
      case NodeKind::Assign: label = "assign"; color = "orange"; break;
      case NodeKind::Op: label = n.op->name; color = n.op->name.find("_grad") != std::string::npos ? "mistyrose" : "white"; break;
    }
    s += format("  n%zu [label=\"%s\\n%s%s\", shape=%s, style=filled, fillcolor=%s];\n", i, label.c_str(),
                dtype_name(n.info.dtype), shape_str(n.info.shape).c_str(), shape.c_str(), color.c_str());
    for (ctn_node in : n.inputs) s += format("  n%u -> n%zu;\n", in, i);
  }
  return s + "}\n";
}

std::vector<Node> NodeArrays::take() {
  std::lock_guard<std::mutex> lk(mu_);
  if (spare_.empty()) return {};
  std::vector<Node> v = std::move(spare_.back());
  spare_.pop_back();
  return v;
}

void NodeArrays::give(std::vector<Node> &&nodes) noexcept {
  if (!nodes.empty() || nodes.capacity() == 0 || nodes.capacity() * sizeof(Node) > kMaxBytes) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (spare_.size() >= kKept) return;
  try {
    spare_.push_back(std::move(nodes));
  } catch (...) {  // no room to keep it: the caller frees it
  }
}

}  // namespace ctn
