// ONNX export (ctn_onnx_export, abi/chutney/onnx.h): the part of a lazy graph that its outputs
// depend on, written as an ONNX ModelProto (opset kExportOpset) with proto_writer.h. Inputs become
// graph inputs, variables and constants initializers (raw little-endian data), and each op one
// or a few ONNX nodes through the table below; an op without an entry is CTN_ERR_UNSUPPORTED
// naming it. docs/ONNX.md lists the mapping.
#include "onnx/exporter.h"

#include "onnx/proto.h"
#include "onnx/proto_writer.h"
#include "util/status.h"

#include <chutney/desc.h>
#include <chutney/ops.h>

#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

namespace ctn::onnx {

namespace {

int32_t onnx_dtype(int32_t dt) {
  switch (dt) {
    case CTN_F32: return DT_FLOAT;
    case CTN_F64: return DT_DOUBLE;
    case CTN_I32: return DT_INT32;
    case CTN_I64: return DT_INT64;
    case CTN_U8: return DT_UINT8;
    case CTN_BOOL: return DT_BOOL;
    case CTN_F16: return DT_FLOAT16;
    case CTN_BF16: return DT_BFLOAT16;
    case CTN_I8: return DT_INT8;
    case CTN_I16: return DT_INT16;
    case CTN_U16: return DT_UINT16;
    case CTN_U32: return DT_UINT32;
    case CTN_U64: return DT_UINT64;
  }
  fail(CTN_ERR_UNSUPPORTED, "ctn_onnx_export: dtype %d has no ONNX type", dt);
}

ProtoWriter tensor_proto(const std::string &name, const Tensor &t) {
  ProtoWriter p;
  for (uint32_t k = 0; k < t.shape.ndim; ++k) p.int64(1, t.shape[k]);
  p.int64(2, onnx_dtype(t.dtype));
  p.bytes(8, name);
  Tensor c = t.contiguous();
  p.bytes(9, std::string_view(c.data(), c.nbytes()));
  return p;
}

ProtoWriter value_info(const std::string &name, const ValueInfo &v) {
  ProtoWriter shape, tensor, type, vi;
  for (uint32_t k = 0; k < v.shape.ndim; ++k) {
    ProtoWriter dim;
    dim.int64(1, v.shape[k]);
    shape.message(1, dim);
  }
  tensor.int64(1, onnx_dtype(v.dtype));
  tensor.message(2, shape);
  type.message(1, tensor);
  vi.bytes(1, name);
  vi.message(2, type);
  return vi;
}

struct Attr {
  ProtoWriter p;
  static Attr i(const char *name, int64_t v) {
    Attr a;
    a.p.bytes(1, name);
    a.p.int64(3, v);
    a.p.int64(20, AT_INT);
    return a;
  }
  static Attr f(const char *name, double v) {
    Attr a;
    a.p.bytes(1, name);
    a.p.f32(2, static_cast<float>(v));
    a.p.int64(20, AT_FLOAT);
    return a;
  }
  static Attr ints(const char *name, std::vector<int64_t> v) {
    Attr a;
    a.p.bytes(1, name);
    a.p.packed_int64(8, v);
    a.p.int64(20, AT_INTS);
    return a;
  }
};

class Exporter {
 public:
  Exporter(const Graph &g, const Plan *plan) : g_(g), plan_(plan) {}
  std::string run(const std::vector<ctn_node> &outs, const std::vector<std::string> &names);

  // For the op table.
  const Node &node() const { return g_.node(cur_); }
  std::string in(size_t k) const { return name_[node().inputs[k]]; }
  const ValueInfo &in_info(size_t k) const { return g_.info(node().inputs[k]); }
  std::string out() const { return name_[cur_]; }
  std::string fresh() { return "ctn." + std::to_string(cur_) + "." + std::to_string(++tmp_); }
  void emit(const char *op, std::vector<std::string> ins, std::vector<std::string> outs, std::vector<Attr> attrs = {});
  std::string const_i64(const std::vector<int64_t> &v);
  std::string const_scalar(int32_t dtype, double v);
  [[noreturn]] void unsupported(const std::string &why) const {
    fail(CTN_ERR_UNSUPPORTED, "ctn_onnx_export: node %u (op \"%s\"): %s", cur_, node().op->name.c_str(), why.c_str());
  }

 private:
  void name_values(const std::vector<bool> &need);
  void export_op();

  const Graph &g_;
  const Plan *plan_;
  std::vector<std::string> name_;
  ctn_node cur_ = 0;
  int tmp_ = 0;
  ProtoWriter graph_;
};

using OpExport = void (*)(Exporter &e);

void unary(Exporter &e, const char *op) { e.emit(op, {e.in(0)}, {e.out()}); }
void binary(Exporter &e, const char *op) { e.emit(op, {e.in(0), e.in(1)}, {e.out()}); }

std::vector<int64_t> ints(const ctn_attrs &a, uint32_t from, uint32_t to) { return {a.i + from, a.i + to}; }

// The axes of a reduction's mask.
std::vector<int64_t> mask_axes(uint64_t mask) {
  std::vector<int64_t> ax;
  for (int64_t k = 0; k < 64; ++k)
    if (mask >> k & 1) ax.push_back(k);
  return ax;
}

void reduce(Exporter &e, const char *op, bool axes_as_input) {
  const ctn_attrs &a = e.node().attrs;
  std::vector<int64_t> ax = mask_axes(static_cast<uint64_t>(a.i[0]));
  if (ax.empty()) return e.emit("Identity", {e.in(0)}, {e.out()});
  if (axes_as_input) return e.emit(op, {e.in(0), e.const_i64(ax)}, {e.out()}, {Attr::i("keepdims", a.i[1] != 0)});
  e.emit(op, {e.in(0)}, {e.out()}, {Attr::ints("axes", ax), Attr::i("keepdims", a.i[1] != 0)});
}

// trans_a / trans_b: a Transpose of the last two axes before MatMul.
void matmul(Exporter &e) {
  const ctn_attrs &a = e.node().attrs;
  std::string x[2] = {e.in(0), e.in(1)};
  for (uint32_t k = 0; k < 2; ++k) {
    const uint32_t nd = e.in_info(k).shape.ndim;
    if (!a.i[k] || nd < 2) continue;
    std::vector<int64_t> perm(nd);
    for (uint32_t d = 0; d < nd; ++d) perm[d] = d;
    std::swap(perm[nd - 1], perm[nd - 2]);
    std::string t = e.fresh();
    e.emit("Transpose", {x[k]}, {t}, {Attr::ints("perm", perm)});
    x[k] = t;
  }
  e.emit("MatMul", {x[0], x[1]}, {e.out()});
}

void conv_pool(Exporter &e, const char *op, bool conv) {
  const ctn_attrs &a = e.node().attrs;
  std::vector<Attr> at;
  if (conv) {
    if (a.ni > 7 && a.i[7] != 0) e.unsupported("a layout 1 (NHWC) convolution has no ONNX Conv (NCHW only)");
    at.push_back(Attr::ints("strides", ints(a, 0, 2)));
    at.push_back(Attr::ints("pads", {a.i[2], a.i[3], a.i[2], a.i[3]}));
    at.push_back(Attr::ints("dilations", ints(a, 4, 6)));
    at.push_back(Attr::i("group", a.i[6]));
    return e.emit(op, {e.in(0), e.in(1)}, {e.out()}, std::move(at));
  }
  const uint32_t layout_slot = std::strcmp(op, "AveragePool") == 0 ? 7 : 6;  // since 1.7
  if (a.ni > layout_slot && a.i[layout_slot] != 0) e.unsupported("a layout 1 (NHWC) pool has no ONNX pool (NCHW only)");
  at.push_back(Attr::ints("kernel_shape", ints(a, 0, 2)));
  at.push_back(Attr::ints("strides", ints(a, 2, 4)));
  at.push_back(Attr::ints("pads", {a.i[4], a.i[5], a.i[4], a.i[5]}));
  if (std::strcmp(op, "AveragePool") == 0) at.push_back(Attr::i("count_include_pad", a.i[6] != 0));
  e.emit(op, {e.in(0)}, {e.out()}, std::move(at));
}

void slice(Exporter &e) {
  const ctn_attrs &a = e.node().attrs;
  // i[0] axis, i[1] start, i[2] stop, i[3] step (> 0), normalised by the op's inference.
  e.emit("Slice", {e.in(0), e.const_i64({a.i[1]}), e.const_i64({a.i[2]}), e.const_i64({a.i[0]}), e.const_i64({a.i[3]})},
         {e.out()});
}

std::vector<int64_t> out_shape(Exporter &e) {
  const Shape &s = e.node().info.shape;
  return {s.d, s.d + s.ndim};
}

const std::map<std::string, OpExport> &op_table() {
  static const std::map<std::string, OpExport> t = {
      {CTN_OP_NEG, [](Exporter &e) { unary(e, "Neg"); }},
      {CTN_OP_EXP, [](Exporter &e) { unary(e, "Exp"); }},
      {CTN_OP_LOG, [](Exporter &e) { unary(e, "Log"); }},
      {CTN_OP_SQRT, [](Exporter &e) { unary(e, "Sqrt"); }},
      {CTN_OP_ABS, [](Exporter &e) { unary(e, "Abs"); }},
      {CTN_OP_SIGN, [](Exporter &e) { unary(e, "Sign"); }},
      {CTN_OP_TANH, [](Exporter &e) { unary(e, "Tanh"); }},
      {CTN_OP_SIGMOID, [](Exporter &e) { unary(e, "Sigmoid"); }},
      {CTN_OP_RELU, [](Exporter &e) { unary(e, "Relu"); }},
      {CTN_OP_SOFTSIGN, [](Exporter &e) { unary(e, "Softsign"); }},
      {CTN_OP_SOFTPLUS, [](Exporter &e) { unary(e, "Softplus"); }},
      {CTN_OP_RECIPROCAL, [](Exporter &e) { unary(e, "Reciprocal"); }},
      {CTN_OP_COPY, [](Exporter &e) { unary(e, "Identity"); }},
      {CTN_OP_ADD, [](Exporter &e) { binary(e, "Add"); }},
      {CTN_OP_SUB, [](Exporter &e) { binary(e, "Sub"); }},
      {CTN_OP_MUL, [](Exporter &e) { binary(e, "Mul"); }},
      {CTN_OP_DIV, [](Exporter &e) { binary(e, "Div"); }},
      {CTN_OP_POW, [](Exporter &e) { binary(e, "Pow"); }},
      {CTN_OP_MAXIMUM, [](Exporter &e) { binary(e, "Max"); }},
      {CTN_OP_MINIMUM, [](Exporter &e) { binary(e, "Min"); }},
      {CTN_OP_EQ, [](Exporter &e) { binary(e, "Equal"); }},
      {CTN_OP_LT, [](Exporter &e) { binary(e, "Less"); }},
      {CTN_OP_LE, [](Exporter &e) { binary(e, "LessOrEqual"); }},
      {CTN_OP_GT, [](Exporter &e) { binary(e, "Greater"); }},
      {CTN_OP_GE, [](Exporter &e) { binary(e, "GreaterOrEqual"); }},
      {CTN_OP_NE,
       [](Exporter &e) {
         std::string t = e.fresh();
         e.emit("Equal", {e.in(0), e.in(1)}, {t});
         e.emit("Not", {t}, {e.out()});
       }},
      {CTN_OP_WHERE, [](Exporter &e) { e.emit("Where", {e.in(0), e.in(1), e.in(2)}, {e.out()}); }},
      {CTN_OP_LEAKY_RELU,
       [](Exporter &e) { e.emit("LeakyRelu", {e.in(0)}, {e.out()}, {Attr::f("alpha", e.node().attrs.f[0])}); }},
      {CTN_OP_CLAMP,
       [](Exporter &e) {
         const Node &n = e.node();
         e.emit("Clip", {e.in(0), e.const_scalar(n.info.dtype, n.attrs.f[0]), e.const_scalar(n.info.dtype, n.attrs.f[1])},
                {e.out()});
       }},
      {CTN_OP_CAST,
       [](Exporter &e) { e.emit("Cast", {e.in(0)}, {e.out()}, {Attr::i("to", onnx_dtype(e.node().info.dtype))}); }},
      {CTN_OP_MATMUL, matmul},
      {CTN_OP_SUM, [](Exporter &e) { reduce(e, "ReduceSum", true); }},
      {CTN_OP_MEAN, [](Exporter &e) { reduce(e, "ReduceMean", false); }},
      {CTN_OP_MAX, [](Exporter &e) { reduce(e, "ReduceMax", false); }},
      {CTN_OP_RESHAPE, [](Exporter &e) { e.emit("Reshape", {e.in(0), e.const_i64(out_shape(e))}, {e.out()}); }},
      {CTN_OP_BROADCAST_TO, [](Exporter &e) { e.emit("Expand", {e.in(0), e.const_i64(out_shape(e))}, {e.out()}); }},
      {CTN_OP_PERMUTE,
       [](Exporter &e) {
         e.emit("Transpose", {e.in(0)}, {e.out()}, {Attr::ints("perm", ints(e.node().attrs, 0, e.node().info.shape.ndim))});
       }},
      {CTN_OP_SLICE, slice},
      {CTN_OP_CONCAT,
       [](Exporter &e) {
         std::vector<std::string> ins;
         for (size_t k = 0; k < e.node().inputs.size(); ++k) ins.push_back(e.in(k));
         e.emit("Concat", ins, {e.out()}, {Attr::i("axis", e.node().attrs.i[0])});
       }},
      {CTN_OP_SOFTMAX, [](Exporter &e) { e.emit("Softmax", {e.in(0)}, {e.out()}, {Attr::i("axis", e.node().attrs.i[0])}); }},
      {CTN_OP_LOG_SOFTMAX,
       [](Exporter &e) { e.emit("LogSoftmax", {e.in(0)}, {e.out()}, {Attr::i("axis", e.node().attrs.i[0])}); }},
      {CTN_OP_CONV2D, [](Exporter &e) { conv_pool(e, "Conv", true); }},
      {CTN_OP_MAX_POOL2D, [](Exporter &e) { conv_pool(e, "MaxPool", false); }},
      {CTN_OP_AVG_POOL2D, [](Exporter &e) { conv_pool(e, "AveragePool", false); }},
      {CTN_OP_BATCH_NORM_INFERENCE,
       [](Exporter &e) {
         e.emit("BatchNormalization", {e.in(0), e.in(1), e.in(2), e.in(3), e.in(4)}, {e.out()},
                {Attr::f("epsilon", e.node().attrs.f[0])});
       }},
  };
  return t;
}

void Exporter::emit(const char *op, std::vector<std::string> ins, std::vector<std::string> outs, std::vector<Attr> attrs) {
  ProtoWriter n;
  for (const std::string &s : ins) n.bytes(1, s);
  for (const std::string &s : outs) n.bytes(2, s);
  n.bytes(3, outs[0]);
  n.bytes(4, op);
  for (const Attr &a : attrs) n.message(5, a.p);
  graph_.message(1, n);
}

std::string Exporter::const_i64(const std::vector<int64_t> &v) {
  Tensor t = Tensor::empty(CTN_I64, Shape::from(1, std::vector<int64_t>{static_cast<int64_t>(v.size())}.data()));
  if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * 8);
  std::string name = fresh();
  graph_.message(5, tensor_proto(name, t));
  return name;
}

std::string Exporter::const_scalar(int32_t dtype, double v) {
  Tensor t = Tensor::empty(dtype, Shape{});
  if (dtype == CTN_F32) *reinterpret_cast<float *>(t.data()) = static_cast<float>(v);
  else if (dtype == CTN_F64) *reinterpret_cast<double *>(t.data()) = v;
  else if (dtype == CTN_F16) *reinterpret_cast<uint16_t *>(t.data()) = ctn_desc_f64_to_f16(v);
  else if (dtype == CTN_BF16) *reinterpret_cast<uint16_t *>(t.data()) = ctn_desc_f64_to_bf16(v);
  else unsupported(std::string("a ") + dtype_name(dtype) + " bound (floating bounds are exported)");
  std::string name = fresh();
  graph_.message(5, tensor_proto(name, t));
  return name;
}

// Value names: inputs and variables keep theirs (made unique), the rest are "n<id>".
void Exporter::name_values(const std::vector<bool> &need) {
  std::set<std::string> used;
  name_.assign(g_.size(), "");
  for (ctn_node i = 0; i < g_.size(); ++i) {
    if (!need[i]) continue;
    const Node &n = g_.node(i);
    std::string nm = n.kind == NodeKind::Input || n.kind == NodeKind::Variable ? n.name : "n" + std::to_string(i);
    if (nm.empty() || used.count(nm)) nm = "n" + std::to_string(i);
    while (used.count(nm)) nm += "_";
    used.insert(nm);
    name_[i] = nm;
  }
}

void Exporter::export_op() {
  const Node &n = g_.node(cur_);
  auto it = op_table().find(n.op->name);
  if (it == op_table().end())
    fail(CTN_ERR_UNSUPPORTED, "ctn_onnx_export: node %u: op \"%s\" has no ONNX exporter (docs/ONNX.md lists those that do)",
         cur_, n.op->name.c_str());
  it->second(*this);
}

std::string Exporter::run(const std::vector<ctn_node> &outs, const std::vector<std::string> &names) {
  std::vector<bool> need(g_.size(), false);
  for (ctn_node o : outs) need[o] = true;
  for (size_t i = g_.size(); i-- > 0;)
    if (need[i])
      for (ctn_node x : g_.node(static_cast<ctn_node>(i)).inputs) need[x] = true;
  name_values(need);
  graph_.bytes(2, "chutney");
  for (cur_ = 0; cur_ < g_.size(); ++cur_) {
    if (!need[cur_]) continue;
    const Node &n = g_.node(cur_);
    switch (n.kind) {
      case NodeKind::Input: graph_.message(11, value_info(name_[cur_], n.info)); break;
      case NodeKind::Constant: graph_.message(5, tensor_proto(name_[cur_], *n.value)); break;
      case NodeKind::Variable: {
        Tensor v = plan_ && plan_->has_variable(cur_) ? plan_->read_variable(cur_) : *n.value;
        graph_.message(5, tensor_proto(name_[cur_], v));
        break;
      }
      case NodeKind::Assign:
        fail(CTN_ERR_UNSUPPORTED, "ctn_onnx_export: node %u is an assignment: ONNX models hold no state; export an "
             "inference graph", cur_);
      case NodeKind::Op: export_op(); break;
    }
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    for (const std::string &v : name_)
      if (v == names[k])
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_export: output name \"%s\" is also the name of an input or variable",
             v.c_str());
    cur_ = outs[k];
    emit("Identity", {name_[outs[k]]}, {names[k]});
    graph_.message(12, value_info(names[k], g_.node(outs[k]).info));
  }
  ProtoWriter model, opset;
  model.int64(1, kExportIrVersion);
  model.bytes(2, "chutney");
  opset.bytes(1, "");
  opset.int64(2, kExportOpset);
  model.message(8, opset);
  model.message(7, graph_);
  return model.str();
}

}  // namespace

std::string export_model(const Graph &g, const Plan *plan, const std::vector<ctn_node> &outs,
                         const std::vector<std::string> &names) {
  return Exporter(g, plan).run(outs, names);
}

}  // namespace ctn::onnx
