// The ONNX import driver: file -> ModelP -> chutney graph. See importer.h.
#include <chutney/ops.h>

#include "onnx/importer.h"
#include "onnx/lower.h"

#include "plugin/context.h"
#include "tensor/element.h"
#include "util/files.h"
#include "util/status.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <unordered_map>

namespace ctn::onnx {

// ---------------------------------------------------------------------------------------------
// NodeCtx
// ---------------------------------------------------------------------------------------------

NodeCtx::NodeCtx(Graph &graph, const NodeP &n, int64_t opset_version, std::vector<ctn_node> inputs)
    : g(graph), node(n), opset(opset_version), in_(std::move(inputs)), used_(n.attrs.size(), false) {}

std::string NodeCtx::where() const {
  return format("node '%.*s' (%.*s)", static_cast<int>(node.name.size()), node.name.data(),
                static_cast<int>(node.op_type.size()), node.op_type.data());
}

void NodeCtx::unsupported(const char *fmt, ...) const {
  va_list ap;
  va_start(ap, fmt);
  std::string m = vformat(fmt, ap);
  va_end(ap);
  throw Error(CTN_ERR_UNSUPPORTED, "ONNX " + where() + ": unsupported: " + m);
}

void NodeCtx::invalid(const char *fmt, ...) const {
  va_list ap;
  va_start(ap, fmt);
  std::string m = vformat(fmt, ap);
  va_end(ap);
  throw Error(CTN_ERR_INVALID_ARGUMENT, "ONNX " + where() + ": " + m);
}

ctn_node NodeCtx::in(size_t i) const {
  if (!has(i)) invalid("input %zu is required", i);
  return in_[i];
}

const Tensor *NodeCtx::konst(size_t i) const {
  if (!has(i)) return nullptr;
  const Node &n = g.node(in_[i]);
  return n.kind == NodeKind::Constant ? n.value.get() : nullptr;
}

int32_t NodeCtx::declared_type(size_t i) const {
  if (!declared || i >= node.inputs.size()) return 0;
  auto it = declared->find(std::string(node.inputs[i]));
  return it == declared->end() ? 0 : it->second;
}

std::vector<int64_t> NodeCtx::ints(size_t i, const char *what) const {
  const Tensor *t = konst(i);
  if (!t)
    unsupported("input %zu (%s) must be a constant (an initializer, a Constant or a graph input bound as a constant "
                "with ctn_onnx_options.inputs)",
                i, what);
  std::vector<int64_t> v(static_cast<size_t>(t->numel()));
  Tensor c = t->contiguous();
  for (size_t k = 0; k < v.size(); ++k) {
    switch (c.dtype) {
      case CTN_I64: v[k] = reinterpret_cast<const int64_t *>(c.data())[k]; break;
      case CTN_I32: v[k] = reinterpret_cast<const int32_t *>(c.data())[k]; break;
      case CTN_U8:
      case CTN_BOOL: v[k] = reinterpret_cast<const uint8_t *>(c.data())[k]; break;
      default: invalid("input %zu (%s) must be an integer tensor, got %s", i, what, dtype_name(c.dtype));
    }
  }
  return v;
}

std::vector<double> tensor_reals(const Tensor &t) {
  Tensor c = t.contiguous();
  std::vector<double> v(static_cast<size_t>(c.numel()));
  for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<double>(element_value(c, static_cast<int64_t>(k)));
  return v;
}

std::vector<double> NodeCtx::reals(size_t i, const char *what) const {
  const Tensor *t = konst(i);
  if (!t) unsupported("input %zu (%s) must be a constant", i, what);
  return tensor_reals(*t);
}

std::vector<double> NodeCtx::attr_tensor_reals(const char *name) const {
  const AttributeP *a = attr(name);
  if (!a) return {};
  if (a->type != AT_TENSOR || !a->t) invalid("attribute '%s' must be a tensor", name);
  return tensor_reals(tensor_from_proto(*a->t, "", name));
}

const AttributeP *NodeCtx::attr(const char *name) const {
  for (size_t k = 0; k < node.attrs.size(); ++k)
    if (node.attrs[k].name == name) {
      used_[k] = true;
      if (!node.attrs[k].ref_attr_name.empty()) unsupported("attribute '%s' refers to a function attribute", name);
      return &node.attrs[k];
    }
  return nullptr;
}

int64_t NodeCtx::attr_i(const char *name, int64_t def) const {
  const AttributeP *a = attr(name);
  if (!a) return def;
  if (a->type != AT_INT) invalid("attribute '%s' must be an int", name);
  return a->i;
}

double NodeCtx::attr_f(const char *name, double def) const {
  const AttributeP *a = attr(name);
  if (!a) return def;
  if (a->type == AT_INT) return static_cast<double>(a->i);
  if (a->type != AT_FLOAT) invalid("attribute '%s' must be a float", name);
  return a->f;
}

std::string NodeCtx::attr_s(const char *name, const char *def) const {
  const AttributeP *a = attr(name);
  if (!a) return def;
  if (a->type != AT_STRING) invalid("attribute '%s' must be a string", name);
  return std::string(a->s);
}

std::vector<int64_t> NodeCtx::attr_ints(const char *name) const {
  const AttributeP *a = attr(name);
  if (!a) return {};
  if (a->type == AT_INT) return {a->i};
  if (a->type != AT_INTS) invalid("attribute '%s' must be a list of ints", name);
  return a->ints;
}

std::vector<int64_t> NodeCtx::attr_ints_n(const char *name, int64_t def, size_t n) const {
  std::vector<int64_t> v = attr_ints(name);
  if (v.empty()) v.assign(n, def);
  if (v.size() != n) invalid("%s must have %zu entries, has %zu", name, n, v.size());
  return v;
}

std::vector<float> NodeCtx::attr_floats(const char *name) const {
  const AttributeP *a = attr(name);
  if (!a) return {};
  if (a->type == AT_FLOAT) return {a->f};
  if (a->type != AT_FLOATS) invalid("attribute '%s' must be a list of floats", name);
  return a->floats;
}

void NodeCtx::check_attrs_used() const {
  for (size_t k = 0; k < node.attrs.size(); ++k)
    if (!used_[k])
      unsupported("attribute '%.*s' is not supported", static_cast<int>(node.attrs[k].name.size()),
                  node.attrs[k].name.data());
}

void NodeCtx::limit(double n, const char *what) const {
  if (!(n >= 0 && n <= static_cast<double>(kMaxBuiltElements)))
    unsupported("%s of %g elements (the importer builds constants of at most 2^28 elements)", what, n);
}

int32_t NodeCtx::axis(int64_t a, uint32_t ndim) const {
  int64_t r = a < 0 ? a + ndim : a;
  if (r < 0 || r >= static_cast<int64_t>(ndim)) invalid("axis %lld is out of range for a %u-d input", static_cast<long long>(a), ndim);
  return static_cast<int32_t>(r);
}

const OpEntry *find_converter(std::string_view op_type) {
  for (auto table : {math_ops(), tensor_ops(), nn_ops(), resize_ops(), attention_ops(), signal_ops(), sampling_ops(),
                     dynamic_ops(), quant_ops()})
    for (const OpEntry &e : table)
      if (op_type == e.op_type) return &e;
  return nullptr;
}

static const OpEntry *find_ml_converter(std::string_view domain, std::string_view op_type) {
  if (domain != "ai.onnx.ml") return nullptr;
  for (const OpEntry &e : ml_ops())
    if (op_type == e.op_type) return &e;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// The driver
// ---------------------------------------------------------------------------------------------

namespace {

std::string sv(std::string_view s) { return std::string(s); }

// Ops whose result must not be computed at import time even with constant inputs. A
// DequantizeLinear of constants stays a node so that the QDQ fusion (qdq.cpp) finds the quantized
// weights; when nothing fuses it, the plan's constant folding computes it.
bool never_fold(std::string_view op) {
  return op.rfind("Random", 0) == 0 || op == "Multinomial" || op == "Bernoulli" || op == "DequantizeLinear";
}

std::string read_file(const std::string &path) { return read_regular_file(path, "ctn_onnx_load:"); }

class Importer {
 public:
  Importer(Graph *g, const std::string &path, const Options &o) : g_(g), path_(path), opts_(o) {
    size_t slash = path.rfind('/');
    base_dir_ = o.external_data_dir.empty() ? (slash == std::string::npos ? "." : path.substr(0, slash))
                                            : o.external_data_dir;
  }

  ModelInfo run() {
    bytes_ = read_file(path_);
    model_ = parse_model(reinterpret_cast<const uint8_t *>(bytes_.data()), bytes_.size(), path_);
    if (!model_.has_graph) fail(CTN_ERR_CORRUPT, "%s: the model has no graph", path_.c_str());
    info_.ir_version = model_.ir_version;
    find_opset();
    survey_ops();
    const GraphP &gp = model_.graph;
    std::set<std::string_view> inits;
    for (const TensorP &t : gp.initializers) inits.insert(t.name);
    for (const ValueInfoP &v : gp.inputs)
      if (!inits.count(v.name)) info_.inputs.push_back({sv(v.name), CTN_NODE_NONE});
    for (const TensorP &t : gp.initializers) info_.initializers.push_back({sv(t.name), CTN_NODE_NONE});
    for (const ValueInfoP &v : gp.outputs) info_.outputs.push_back({sv(v.name), CTN_NODE_NONE});
    for (const InputSpec &s : opts_.inputs) {
      bool found = std::any_of(info_.inputs.begin(), info_.inputs.end(), [&](auto &e) { return e.name == s.name; });
      if (!found)
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_load: %s has no graph input named '%s'%s", path_.c_str(), s.name.c_str(),
             inits.count(s.name) ? " (it is an initializer)" : "");
    }
    if (opts_.inspect_only) return info_;
    // A model with no default-domain opset has no default-domain node to convert (a node of
    // another domain is refused by name below).
    if (info_.opset != 0 && (info_.opset < kMinOpset || info_.opset > kMaxOpset))
      fail(CTN_ERR_UNSUPPORTED, "%s: default-domain opset %lld is not supported (chutney imports opsets %lld to %lld)",
           path_.c_str(), static_cast<long long>(info_.opset), static_cast<long long>(kMinOpset),
           static_cast<long long>(kMaxOpset));
    if (gp.n_sparse_initializers) fail(CTN_ERR_UNSUPPORTED, "%s: sparse initializers are not supported", path_.c_str());
    add_initializers();
    add_inputs();
    for (const ValueInfoP &v : gp.inputs) declared_[sv(v.name)] = v.elem_type;
    for (const ValueInfoP &v : gp.value_info) declared_[sv(v.name)] = v.elem_type;
    for (const TensorP &t : gp.initializers) declared_[sv(t.name)] = t.data_type;
    for (const NodeP &n : gp.nodes) convert(n);
    for (ModelInfo::Entry &e : info_.outputs) {
      auto it = values_.find(e.name);
      if (it == values_.end() && seqs_.count(e.name))
        fail(CTN_ERR_UNSUPPORTED, "%s: graph output '%s' is a sequence, not a tensor (sequences are lowered at import; "
             "graph outputs must be tensors)", path_.c_str(), e.name.c_str());
      if (it == values_.end()) fail(CTN_ERR_CORRUPT, "%s: graph output '%s' is never computed", path_.c_str(), e.name.c_str());
      e.node = it->second;
    }
    return info_;
  }

 private:
  void find_opset() {
    for (const OpsetP &o : model_.opsets)
      if (o.domain.empty() || o.domain == "ai.onnx") info_.opset = o.version;
    if (model_.opsets.empty()) info_.opset = 1;  // IR version 1 files name no opset
  }

  // The input's declared shape, symbolic dims by name ("?" when unnamed): "[batch, 3, 224, 224]".
  static std::string model_shape_str(const ValueInfoP &v) {
    std::string r = "[";
    for (size_t k = 0; k < v.dims.size(); ++k) {
      std::string d = v.dims[k] >= 0 ? std::to_string(v.dims[k]) : sv(v.dim_params[k]);
      r += (k ? ", " : "") + (d.empty() ? std::string("?") : d);
    }
    return r + "]";
  }

  Context *context() const { return g_ ? g_->context() : opts_.context; }

  static bool default_domain(std::string_view d) { return d.empty() || d == "ai.onnx"; }

  void survey_ops() {
    for (const NodeP &n : model_.graph.nodes) {
      std::string name = default_domain(n.domain) ? sv(n.op_type) : sv(n.domain) + "." + sv(n.op_type);
      auto it = std::find_if(info_.op_types.begin(), info_.op_types.end(), [&](auto &o) { return o.name == name; });
      if (it == info_.op_types.end()) {
        const OpDef *custom =
            default_domain(n.domain) || !context() ? nullptr : context()->find_op((sv(n.domain) + "::" + sv(n.op_type)).c_str());
        const bool known = default_domain(n.domain)
                               ? find_converter(n.op_type) != nullptr || is_control(n.op_type) || is_sequence_op(n.op_type)
                               : find_ml_converter(n.domain, n.op_type) || (custom && custom->lib);
        info_.op_types.push_back({name, 0, known, ""});
        it = info_.op_types.end() - 1;
      }
      ++it->uses;
    }
  }

  void add_initializers() {
    for (size_t k = 0; k < model_.graph.initializers.size(); ++k) {
      const TensorP &tp = model_.graph.initializers[k];
      Tensor t = tensor_from_proto(tp, base_dir_, path_);
      std::string name = sv(tp.name);
      ctn_node n = (opts_.initializers_as_constants || !dtype_is_float(t.dtype)) ? g_->add_constant(t)
                                                                                 : g_->add_variable(name.c_str(), t);
      values_[name] = n;
      info_.initializers[k].node = n;
    }
  }

  void add_inputs() {
    for (ModelInfo::Entry &e : info_.inputs) {
      const ValueInfoP *v = nullptr;
      for (const ValueInfoP &x : model_.graph.inputs)
        if (x.name == e.name) v = &x;
      const InputSpec *spec = nullptr;
      for (const InputSpec &s : opts_.inputs)
        if (s.name == e.name) spec = &s;
      if (!v->is_tensor)
        fail(CTN_ERR_UNSUPPORTED, "%s: graph input '%s' is not a tensor (sequences, maps and optionals are not supported)",
             path_.c_str(), e.name.c_str());
      const int32_t dt = dtype_from_onnx(v->elem_type);
      if (dt < 0 && !spec)
        fail(CTN_ERR_UNSUPPORTED, "%s: graph input '%s' has dtype %s, which chutney does not have", path_.c_str(),
             e.name.c_str(), data_type_name(v->elem_type));
      if (spec) {
        const Tensor &val = *spec->value;
        if (dt >= 0 && val.dtype != dt)
          fail(CTN_ERR_DTYPE, "ctn_onnx_load: input '%s' is %s in the model, the given value is %s", e.name.c_str(),
               data_type_name(v->elem_type), dtype_name(val.dtype));
        bool ok = !v->has_shape || v->dims.size() == val.shape.ndim;
        for (uint32_t k = 0; ok && v->has_shape && k < val.shape.ndim; ++k) ok = v->dims[k] < 0 || v->dims[k] == val.shape[k];
        if (!ok)
          fail(CTN_ERR_SHAPE, "ctn_onnx_load: input '%s' has shape %s, which does not fit the model's %s", e.name.c_str(),
               shape_str(val.shape).c_str(), model_shape_str(*v).c_str());
        e.node = spec->as_constant ? CTN_NODE_NONE : g_->add_input(e.name.c_str(), val.dtype, val.shape);
        values_[e.name] = spec->as_constant ? g_->add_constant(val) : e.node;
        continue;
      }
      if (!v->has_shape)
        fail(CTN_ERR_INVALID_ARGUMENT, "%s: graph input '%s' has no shape; give one with ctn_onnx_options.inputs",
             path_.c_str(), e.name.c_str());
      if (v->dims.size() > CTN_MAX_DIMS)
        fail(CTN_ERR_UNSUPPORTED, "%s: graph input '%s' has %zu dims (at most %d)", path_.c_str(), e.name.c_str(),
             v->dims.size(), CTN_MAX_DIMS);
      Shape s;
      s.ndim = static_cast<uint32_t>(v->dims.size());
      for (uint32_t k = 0; k < s.ndim; ++k) {
        if (v->dims[k] < 0 && opts_.symbolic_dims_as_one) {
          s[k] = 1;
          continue;
        }
        if (v->dims[k] < 0)
          fail(CTN_ERR_INVALID_ARGUMENT, "%s: graph input '%s' has a symbolic dimension %u ('%s'); give its shape with "
               "ctn_onnx_options.inputs (the CLI takes it from the --input file)", path_.c_str(), e.name.c_str(), k,
               sv(v->dim_params[k]).c_str());
        s[k] = v->dims[k];
      }
      e.node = g_->add_input(e.name.c_str(), dt, s);
      values_[e.name] = e.node;
    }
  }

  void convert(const NodeP &n) {
    const std::string where = format("node '%s' (%s)", sv(n.name).c_str(), sv(n.op_type).c_str());
    const OpEntry *ml = find_ml_converter(n.domain, n.op_type);
    if (!default_domain(n.domain) && !ml) {
      convert_custom(n, where);
      return;
    }
    if (!ml && is_sequence_op(n.op_type)) {
      convert_sequence_node(n, where);
      return;
    }
    if (!ml && is_control(n.op_type)) {
      const size_t before = g_->size();
      try {
        convert_control(n, where);
      } catch (const Error &err) {
        if (err.message().rfind("ONNX ", 0) == 0) throw;
        throw Error(err.code(), "ONNX " + where + ": " + err.message());
      }
      record_lowering(n, before);
      return;
    }
    const OpEntry *e = ml ? ml : find_converter(n.op_type);
    if (!e) {
      for (const FunctionP &f : model_.functions)
        if (f.name == n.op_type)
          fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: model-local functions are not inlined", where.c_str());
      fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: chutney has no converter for op type %s", where.c_str(),
           sv(n.op_type).c_str());
    }
    std::vector<ctn_node> ins;
    bool all_const = true;
    for (std::string_view name : n.inputs) {
      if (name.empty()) {
        ins.push_back(CTN_NODE_NONE);
        continue;
      }
      ins.push_back(value_of(name, where));
      all_const = all_const && g_->node(ins.back()).kind == NodeKind::Constant;
    }
    std::vector<ctn_node> outs;
    const size_t before = g_->size();
    try {
      if (all_const && !never_fold(n.op_type)) {
        // Evaluate now on an eager graph; the results enter the model graph as constants.
        Graph eg(g_->context(), true);
        std::vector<ctn_node> eins;
        for (ctn_node x : ins) eins.push_back(x == CTN_NODE_NONE ? CTN_NODE_NONE : eg.add_constant(*g_->node(x).value));
        NodeCtx c(eg, n, info_.opset, std::move(eins));
        c.declared = &declared_;
        run_converter(*e, c);
        for (ctn_node o : c.outs) outs.push_back(o == CTN_NODE_NONE ? o : g_->add_constant(*eg.node(o).value));
      } else {
        NodeCtx c(*g_, n, info_.opset, std::move(ins));
        c.declared = &declared_;
        run_converter(*e, c);
        outs = c.outs;
      }
    } catch (const Error &err) {
      if (err.message().rfind("ONNX ", 0) == 0) throw;
      throw Error(err.code(), "ONNX " + where + ": " + err.message());
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k].empty()) continue;
      if (k >= outs.size() || outs[k] == CTN_NODE_NONE)
        fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: output %zu ('%s')", where.c_str(), k, sv(n.outputs[k]).c_str());
      values_[sv(n.outputs[k])] = outs[k];
    }
    record_lowering(n, before);
  }

  // A node of a custom domain D is op D::op_type of a loaded op library whose domain is D (the
  // library's name, or the domain its ops declare: docs/ABI.md, "Op namespaces"): its inputs in
  // order, one output, no attributes (ONNX attributes have no mapping onto ctn_attrs slots).
  void convert_custom(const NodeP &n, const std::string &where) {
    const std::string q = sv(n.domain) + "::" + sv(n.op_type);
    const OpDef *op = g_->context()->find_op(q.c_str());
    if ((!op || !op->lib) && n.domain == "ai.onnx.ml")
      fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: ai.onnx.ml op %s has no converter (Binarizer, ArrayFeatureExtractor, "
           "Scaler, Normalizer, Linear*, TreeEnsemble, TreeEnsembleRegressor/Classifier and ZipMap do; or load an op library of domain "
           "'ai.onnx.ml')",
           where.c_str(), sv(n.op_type).c_str());
    if (!op || !op->lib)
      fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: op domain '%s' (the default ai.onnx domain, or an op library "
           "whose domain is '%s' and which defines %s; none is loaded)", where.c_str(), sv(n.domain).c_str(),
           sv(n.domain).c_str(), q.c_str());
    if (!n.attrs.empty())
      fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: attributes on custom-domain op %s", where.c_str(), q.c_str());
    if (n.outputs.size() != 1)
      fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: custom-domain op %s has %zu outputs (op-library ops have one)",
           where.c_str(), q.c_str(), n.outputs.size());
    std::vector<ctn_node> ins;
    for (std::string_view name : n.inputs) {
      auto it = values_.find(sv(name));
      if (name.empty() || it == values_.end())
        fail(CTN_ERR_CORRUPT, "ONNX %s: input '%s' is not defined by any earlier node, initializer or graph input",
             where.c_str(), sv(name).c_str());
      ins.push_back(it->second);
    }
    const size_t before = g_->size();
    try {
      values_[sv(n.outputs[0])] = g_->add_named_op(q.c_str(), static_cast<uint32_t>(ins.size()), ins.data(), nullptr);
    } catch (const Error &err) {
      throw Error(err.code(), "ONNX " + where + ": " + err.message());
    }
    record_lowering(n, before);
  }

  // ---- control flow: If, Loop and Scan are unrolled at import (graphs are static) ----
  static bool is_control(std::string_view op) { return op == "If" || op == "Loop" || op == "Scan"; }

  static const AttributeP *node_attr(const NodeP &n, const char *name) {
    for (const AttributeP &a : n.attrs)
      if (a.name == name) return &a;
    return nullptr;
  }

  ctn_node value_of(std::string_view name, const std::string &where) {
    auto it = values_.find(sv(name));
    if (it == values_.end() && seqs_.count(sv(name)))
      fail(CTN_ERR_UNSUPPORTED, "ONNX %s: input '%s' is a sequence, not a tensor (sequences are lowered at import: only "
           "the sequence ops and ConcatFromSequence/SequenceAt take them)", where.c_str(), sv(name).c_str());
    if (it == values_.end())
      fail(CTN_ERR_CORRUPT, "ONNX %s: input '%s' is not defined by any earlier node, initializer or graph input",
           where.c_str(), sv(name).c_str());
    return it->second;
  }

  // A constant scalar's value (bool, integer or floating) as a double; false when not constant.
  bool const_scalar(ctn_node x, double *v) {
    const Node &node = g_->node(x);
    if (node.kind != NodeKind::Constant || node.value->numel() != 1) return false;
    Tensor t = node.value->contiguous();
    switch (t.dtype) {
      case CTN_BOOL: case CTN_U8: *v = reinterpret_cast<const uint8_t *>(t.data())[0]; return true;
      case CTN_I32: *v = reinterpret_cast<const int32_t *>(t.data())[0]; return true;
      case CTN_I64: *v = static_cast<double>(reinterpret_cast<const int64_t *>(t.data())[0]); return true;
      case CTN_F32: *v = reinterpret_cast<const float *>(t.data())[0]; return true;
      case CTN_F64: *v = reinterpret_cast<const double *>(t.data())[0]; return true;
      default: return false;
    }
  }

  // Converts subgraph `sg` with its inputs bound to `args`; outer-scope values stay visible and
  // the outer names are restored afterwards. Returns the subgraph's outputs.
  std::vector<ctn_node> run_subgraph(const GraphP &sg, const std::vector<ctn_node> &args, const std::string &where) {
    if (args.size() != sg.inputs.size())
      fail(CTN_ERR_CORRUPT, "ONNX %s: the subgraph '%s' takes %zu inputs, it is given %zu", where.c_str(),
           sv(sg.name).c_str(), sg.inputs.size(), args.size());
    const auto saved = values_;
    const auto saved_seqs = seqs_;
    for (const TensorP &t : sg.initializers) values_[sv(t.name)] = g_->add_constant(tensor_from_proto(t, base_dir_, path_));
    for (size_t k = 0; k < args.size(); ++k) values_[sv(sg.inputs[k].name)] = args[k];
    for (const NodeP &n : sg.nodes) convert(n);
    std::vector<ctn_node> outs;
    for (const ValueInfoP &v : sg.outputs) outs.push_back(value_of(v.name, where));
    values_ = saved;
    seqs_ = saved_seqs;
    return outs;
  }

  const GraphP &graph_attr(const NodeP &n, const char *name, const std::string &where) {
    const AttributeP *a = node_attr(n, name);
    if (!a || !a->g) fail(CTN_ERR_CORRUPT, "ONNX %s: the graph attribute '%s' is missing", where.c_str(), name);
    return *a->g;
  }

  void set_outputs(const NodeP &n, const std::vector<ctn_node> &outs, const std::string &where) {
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k].empty()) continue;
      if (k >= outs.size()) fail(CTN_ERR_CORRUPT, "ONNX %s: output %zu is not produced", where.c_str(), k);
      values_[sv(n.outputs[k])] = outs[k];
    }
  }

  // Stacks per-iteration tensors along a new `axis` (their shapes must agree).
  ctn_node stack(const std::vector<ctn_node> &parts, int64_t axis, const std::string &where) {
    std::vector<ctn_node> in;
    const Shape s0 = g_->info(parts.at(0)).shape;
    if (axis < 0) axis += s0.ndim + 1;
    if (axis < 0 || axis > static_cast<int64_t>(s0.ndim)) fail(CTN_ERR_INVALID_ARGUMENT, "ONNX %s: output axis out of range", where.c_str());
    for (ctn_node p : parts) {
      Shape s = g_->info(p).shape, r;
      if (s != s0) fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: scan outputs of different shapes (%s, %s)", where.c_str(),
                        shape_str(s0).c_str(), shape_str(s).c_str());
      for (uint32_t k = 0; k <= s.ndim; ++k) r[r.ndim++] = k == axis ? 1 : s[k < axis ? k : k - 1];
      in.push_back(lower::reshape(*g_, p, r));
    }
    if (in.size() == 1) return in[0];
    ctn_attrs a = attrs_i({axis});
    return g_->add_op(CTN_OP_CONCAT, static_cast<uint32_t>(in.size()), in.data(), &a);
  }

  void convert_control(const NodeP &n, const std::string &where) {
    if (n.op_type == "If") return convert_if(n, where);
    if (n.op_type == "Loop") return convert_loop(n, where);
    convert_scan(n, where);
  }

  // If: a constant condition picks its branch; otherwise both branches are built and each output
  // is where(cond, then, else) (the branches must agree in shape and dtype).
  void convert_if(const NodeP &n, const std::string &where) {
    if (n.inputs.size() != 1) fail(CTN_ERR_CORRUPT, "ONNX %s: If takes one input", where.c_str());
    ctn_node cond = value_of(n.inputs[0], where);
    const GraphP &then_g = graph_attr(n, "then_branch", where), &else_g = graph_attr(n, "else_branch", where);
    double v = 0;
    if (const_scalar(cond, &v)) return set_outputs(n, run_subgraph(v != 0 ? then_g : else_g, {}, where), where);
    std::vector<ctn_node> a = run_subgraph(then_g, {}, where), b = run_subgraph(else_g, {}, where);
    if (a.size() != b.size()) fail(CTN_ERR_CORRUPT, "ONNX %s: the branches have %zu and %zu outputs", where.c_str(), a.size(), b.size());
    ctn_node c = lower::cast(*g_, lower::reshape(*g_, cond, Shape{}), CTN_BOOL);
    std::vector<ctn_node> outs;
    for (size_t k = 0; k < a.size(); ++k) {
      if (g_->info(a[k]).shape != g_->info(b[k]).shape || g_->info(a[k]).dtype != g_->info(b[k]).dtype)
        fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: the condition must be a constant when the branches' output %zu "
             "differ in shape or dtype (%s and %s)", where.c_str(), k, shape_str(g_->info(a[k]).shape).c_str(),
             shape_str(g_->info(b[k]).shape).c_str());
      ctn_node in[3] = {c, a[k], b[k]};
      outs.push_back(g_->add_op(CTN_OP_WHERE, 3, in, nullptr));
    }
    set_outputs(n, outs, where);
  }

  // Loop: unrolled; the trip count and the condition must be constants at every iteration.
  void convert_loop(const NodeP &n, const std::string &where) {
    const GraphP &body = graph_attr(n, "body", where);
    if (n.inputs.size() < 2) fail(CTN_ERR_CORRUPT, "ONNX %s: Loop takes at least 2 inputs (M, cond)", where.c_str());
    double trip = -1, c = 1;
    if (!n.inputs[0].empty() && !const_scalar(value_of(n.inputs[0], where), &trip))
      fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: the trip count M must be a constant (Loop is unrolled at import)", where.c_str());
    ctn_node cond = CTN_NODE_NONE;
    if (!n.inputs[1].empty()) {
      cond = value_of(n.inputs[1], where);
      if (!const_scalar(cond, &c))
        fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: the condition must be a constant (Loop is unrolled at import)", where.c_str());
    }
    std::vector<ctn_node> carried;
    for (size_t k = 2; k < n.inputs.size(); ++k) carried.push_back(value_of(n.inputs[k], where));
    const size_t n_scan = body.outputs.size() >= 1 + carried.size() ? body.outputs.size() - 1 - carried.size() : 0;
    std::vector<std::vector<ctn_node>> scans(n_scan);
    constexpr int64_t kMaxIterations = 4096;
    int64_t i = 0;
    for (; (trip < 0 || i < static_cast<int64_t>(trip)) && c != 0; ++i) {
      if (i >= kMaxIterations)
        fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: more than %lld iterations (Loop is unrolled at import)", where.c_str(),
             static_cast<long long>(kMaxIterations));
      std::vector<ctn_node> args = {lower::const_i64(*g_, {i}, Shape{}),
                                    cond == CTN_NODE_NONE ? g_->add_scalar(CTN_BOOL, 1) : cond};
      args.insert(args.end(), carried.begin(), carried.end());
      std::vector<ctn_node> outs = run_subgraph(body, args, where);
      cond = outs.at(0);
      if (!const_scalar(cond, &c))
        fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: the body's condition output must be a constant (Loop is unrolled "
             "at import)", where.c_str());
      for (size_t k = 0; k < carried.size(); ++k) carried[k] = outs.at(1 + k);
      for (size_t k = 0; k < n_scan; ++k) scans[k].push_back(outs.at(1 + carried.size() + k));
    }
    std::vector<ctn_node> outs = carried;
    for (auto &parts : scans) {
      if (parts.empty()) fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: a scan output of a loop that runs 0 times", where.c_str());
      outs.push_back(stack(parts, 0, where));
    }
    set_outputs(n, outs, where);
  }

  // Scan (opset 9+): unrolled over the scan inputs' axis; states carried, slices stacked.
  void convert_scan(const NodeP &n, const std::string &where) {
    if (info_.opset < 9) fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: Scan of opset 8 (batch and sequence_lens)", where.c_str());
    const GraphP &body = graph_attr(n, "body", where);
    const AttributeP *ns = node_attr(n, "num_scan_inputs");
    if (!ns) fail(CTN_ERR_CORRUPT, "ONNX %s: num_scan_inputs is missing", where.c_str());
    if (ns->i < 1 || ns->i > static_cast<int64_t>(n.inputs.size()))
      fail(CTN_ERR_CORRUPT, "ONNX %s: num_scan_inputs %lld is out of range (1 to %zu inputs)", where.c_str(),
           static_cast<long long>(ns->i), n.inputs.size());
    const auto m = static_cast<size_t>(ns->i);
    const size_t n_state = n.inputs.size() - m;
    auto ints = [&](const char *name, size_t count) {
      const AttributeP *a = node_attr(n, name);
      std::vector<int64_t> v = a ? a->ints : std::vector<int64_t>{};
      if (!a) v.assign(count, 0);
      if (v.size() != count) fail(CTN_ERR_CORRUPT, "ONNX %s: %s has %zu entries, %zu expected", where.c_str(), name, v.size(), count);
      return v;
    };
    const size_t n_out = body.outputs.size() >= n_state ? body.outputs.size() - n_state : 0;
    std::vector<int64_t> in_axes = ints("scan_input_axes", m), in_dirs = ints("scan_input_directions", m);
    std::vector<int64_t> out_axes = ints("scan_output_axes", n_out), out_dirs = ints("scan_output_directions", n_out);
    std::vector<ctn_node> states, xs;
    for (size_t k = 0; k < n.inputs.size(); ++k) (k < n_state ? states : xs).push_back(value_of(n.inputs[k], where));
    int64_t len = -1;
    for (size_t k = 0; k < m; ++k) {
      const Shape s = g_->info(xs[k]).shape;
      if (in_axes[k] < 0) in_axes[k] += s.ndim;
      if (in_axes[k] < 0 || in_axes[k] >= static_cast<int64_t>(s.ndim)) fail(CTN_ERR_INVALID_ARGUMENT, "ONNX %s: scan input axis out of range", where.c_str());
      const int64_t l = s[static_cast<uint32_t>(in_axes[k])];
      if (len >= 0 && l != len) fail(CTN_ERR_SHAPE, "ONNX %s: scan inputs of lengths %lld and %lld", where.c_str(),
                                     static_cast<long long>(len), static_cast<long long>(l));
      len = l;
    }
    if (len < 1 || len > 4096) fail(CTN_ERR_UNSUPPORTED, "ONNX %s: unsupported: a scan of %lld steps (1 to 4096; Scan is unrolled at import)",
                                    where.c_str(), static_cast<long long>(len));
    std::vector<std::vector<ctn_node>> ys(n_out);
    for (int64_t t = 0; t < len; ++t) {
      std::vector<ctn_node> args = states;
      for (size_t k = 0; k < m; ++k) {
        const int64_t at = in_dirs[k] ? len - 1 - t : t;
        const auto ax = static_cast<int32_t>(in_axes[k]);
        Shape s = g_->info(xs[k]).shape, r;
        for (uint32_t d = 0; d < s.ndim; ++d)
          if (static_cast<int32_t>(d) != ax) r[r.ndim++] = s[d];
        args.push_back(lower::reshape(*g_, lower::slice(*g_, xs[k], ax, at, at + 1, 1), r));
      }
      std::vector<ctn_node> outs = run_subgraph(body, args, where);
      for (size_t k = 0; k < n_state; ++k) states[k] = outs.at(k);
      for (size_t k = 0; k < n_out; ++k) ys[k].push_back(outs.at(n_state + k));
    }
    std::vector<ctn_node> outs = states;
    for (size_t k = 0; k < n_out; ++k) {
      if (out_dirs[k]) std::reverse(ys[k].begin(), ys[k].end());
      outs.push_back(stack(ys[k], out_axes[k], where));
    }
    set_outputs(n, outs, where);
  }

  // A sequence op (ops_sequence.cpp): sequence inputs come from seqs_, tensors from values_.
  void convert_sequence_node(const NodeP &n, const std::string &where) {
    std::vector<ctn_node> ins;
    std::vector<const Seq *> seqs;
    for (std::string_view name : n.inputs) {
      auto s = name.empty() ? seqs_.end() : seqs_.find(sv(name));
      seqs.push_back(s == seqs_.end() ? nullptr : &s->second);
      ins.push_back(name.empty() || seqs.back() ? CTN_NODE_NONE : value_of(name, where));
    }
    const size_t before = g_->size();
    Seq out;
    bool made = false;
    NodeCtx c(*g_, n, info_.opset, std::move(ins));
    try {
      convert_sequence(c, seqs, &out, &made);
      c.check_attrs_used();
    } catch (const Error &err) {
      if (err.message().rfind("ONNX ", 0) == 0) throw;
      throw Error(err.code(), "ONNX " + where + ": " + err.message());
    }
    if (made && !n.outputs.empty() && !n.outputs[0].empty()) seqs_[sv(n.outputs[0])] = std::move(out);
    if (!made) set_outputs(n, c.outs, where);
    record_lowering(n, before);
  }

  static void run_converter(const OpEntry &e, NodeCtx &c) {
    e.fn(c);
    c.check_attrs_used();
  }

  void record_lowering(const NodeP &n, size_t before) {
    auto it = std::find_if(info_.op_types.begin(), info_.op_types.end(), [&](auto &o) { return o.name == n.op_type; });
    if (it == info_.op_types.end()) return;
    for (size_t k = before; k < g_->size(); ++k) {
      const Node &node = g_->node(static_cast<ctn_node>(k));
      if (node.kind != NodeKind::Op) continue;
      const std::string &op = node.op->name;
      std::string list = "," + it->lowered + ",";
      if (list.find("," + op + ",") == std::string::npos) it->lowered += (it->lowered.empty() ? "" : ",") + op;
    }
  }

  Graph *g_;
  std::string path_, base_dir_;
  const Options &opts_;
  std::string bytes_;
  ModelP model_;
  ModelInfo info_;
  std::unordered_map<std::string, ctn_node> values_;
  std::unordered_map<std::string, Seq> seqs_;  // sequence values (ops_sequence.cpp)
  std::unordered_map<std::string, int32_t> declared_;  // ONNX element types the top-level graph declares
};

}  // namespace

ModelInfo import_model(Graph *g, const std::string &path, const Options &opts) {
  return Importer(g, path, opts).run();
}

}  // namespace ctn::onnx
