// The computation graph: nodes appended in creation order (so every node's inputs precede it),
// each with its dtype and shape inferred when it is added.
#pragma once

#include "graph/op.h"
#include "tensor/tensor.h"
#include "util/small_vec.h"

#include <memory>
#include <mutex>
#include <vector>

struct ctn_context;

namespace ctn {

struct Context;
struct Backend;
class Graph;
struct Node;

// What a graph asks of the context it belongs to: graph/ sits below plugin/ (the context, which
// implements this: plugin/context.h) and so sees it only through this interface.
class OpSource {
 public:
  // Context::find_core_op and Context::find_op (plugin/context.h say what they resolve).
  virtual const OpDef *find_core_op(const char *name) const = 0;
  virtual const OpDef *find_op(const char *name, const OpLib *from = nullptr) const = 0;

 protected:
  ~OpSource() = default;
};

// Eager execution (exec/eager.cpp, above graph/) computes a node's value as it is added.
// exec/eager.cpp installs it when the library loads; an eager graph refuses ops without it.
using EagerExecutor = void (*)(Graph &g, Node &node);
void install_eager_executor(EagerExecutor run);

enum class NodeKind : uint8_t { Input, Constant, Variable, Op, Assign };

struct Node {
  NodeKind kind = NodeKind::Op;
  const OpDef *op = nullptr;  // Op nodes
  SmallVec<ctn_node, 4> inputs;  // in place up to four (no allocation per recorded node)
  ctn_attrs attrs{};
  ValueInfo info;
  std::string name;
  // Constant data, a variable's initial value, or an eager graph's computed value.
  std::shared_ptr<Tensor> value;
  const Backend *ran_on = nullptr;  // eager graphs: the backend that computed `value`
  // Non-zero: ctn_grad returned this node as a gradient, and nodes from this id on were made
  // after that ctn_grad (data-parallel plans average it for them: compile/data_parallel.cpp).
  uint32_t grad_uses_from = 0;
  // since 1.6: info.shape is an upper bound: the node is a data-dependent op (OP_DATA_DEPENDENT)
  // or reads one, so its actual shape is known only when it runs.
  bool bounded = false;
};

// Keeps eager graphs' node arrays between graphs (one per context: plugin/context.h). A program
// that builds an eager graph per step would otherwise grow a fresh array every step, relocating
// each node as it doubles and faulting in new pages. Shared by the context and its eager graphs,
// so a graph released after its context (against the documented order) still gives its array
// back to a live object.
class NodeArrays {
 public:
  static constexpr size_t kKept = 4;                          // arrays kept at most
  static constexpr size_t kMaxBytes = size_t{16} << 20;       // capacity of one kept array at most
  std::vector<Node> take();                                   // empty, with capacity if one was kept
  void give(std::vector<Node> &&nodes) noexcept;              // an empty array to keep (or drop)

 private:
  std::mutex mu_;
  std::vector<std::vector<Node>> spare_;
};

class Graph {
 public:
  // C is the Context (or ctn_context): a template so that graph/ needs only its declaration.
  template <class C>
  Graph(C *ctx, bool eager) : ctx_(ctx), ops_(ctx), arrays_(eager ? ctx->node_arrays : nullptr), eager_(eager) {
    if (arrays_) nodes_ = arrays_->take();
  }
  ~Graph() {
    if (!arrays_) return;
    nodes_.clear();
    arrays_->give(std::move(nodes_));
  }
  Graph(const Graph &) = default;
  Graph &operator=(const Graph &) = default;
  Graph(Graph &&) = default;  // the source keeps no array: its destructor gives nothing back
  Graph &operator=(Graph &&) = default;

  Context *context() const { return ctx_; }
  bool eager() const { return eager_; }
  size_t size() const { return nodes_.size(); }
  const Node &node(ctn_node n) const { return nodes_[n]; }
  Node &node(ctn_node n) { return nodes_[n]; }
  const std::vector<Node> &nodes() const { return nodes_; }
  void check(ctn_node n, const char *what) const;  // throws for an invalid id
  // What reading node n reads: the assigned value for an assignment's node (assignments run
  // last in a plan, so nothing may be scheduled after one), else n itself.
  ctn_node through_assign(ctn_node n) const {
    while (nodes_[n].kind == NodeKind::Assign) n = nodes_[n].inputs[1];
    return n;
  }

  ctn_node add_input(const char *name, int32_t dtype, const Shape &shape);
  ctn_node add_constant(const Tensor &value);  // copies
  ctn_node add_scalar(int32_t dtype, double v);
  ctn_node add_variable(const char *name, const Tensor &init);
  ctn_node add_assign(ctn_node var, ctn_node value);
  // The core's own op by name (Context::find_core_op: built-in first), for rules and lowerings.
  ctn_node add_op(const char *op, uint32_t n, const ctn_node *inputs, const ctn_attrs *attrs);
  // An op named by a program (ctn_op) or an op library's rule (`from`): Context::find_op.
  ctn_node add_named_op(const char *op, uint32_t n, const ctn_node *inputs, const ctn_attrs *attrs,
                        const OpLib *from = nullptr);
  ctn_node add_op(const OpDef &op, uint32_t n, const ctn_node *inputs, const ctn_attrs &attrs);

  // Convenience for rules and passes.
  ctn_node op1(const char *op, ctn_node a, const ctn_attrs *attrs = nullptr) { return add_op(op, 1, &a, attrs); }
  ctn_node op2(const char *op, ctn_node a, ctn_node b, const ctn_attrs *attrs = nullptr) {
    ctn_node in[2] = {a, b};
    return add_op(op, 2, in, attrs);
  }
  const ValueInfo &info(ctn_node n) const { return nodes_[n].info; }

  std::string to_dot() const;
  // A lazy copy of the nodes (compile works on a private copy; node ids are preserved).
  void copy_nodes_from(const Graph &o) { nodes_ = o.nodes_; }
  // Drops the nodes from id n on (undoing a failed builder such as ctn_jvp).
  void truncate(size_t n) {
    if (n < nodes_.size()) nodes_.resize(n);
  }

  // Scratch owned by the graph for C API string results.
  std::string text;

 private:
  ctn_node add_composite(const OpDef &op, uint32_t n, const ctn_node *inputs, const ctn_attrs &attrs,
                         const ValueInfo &want);

  Context *ctx_;
  const OpSource *ops_;  // ctx_ itself, seen as an OpSource
  std::shared_ptr<NodeArrays> arrays_;  // the context's, for an eager graph (its node array goes back there); else NULL
  bool eager_;
  std::vector<Node> nodes_;
};

// Reduces `g` (of some broadcast shape) to `target` by summing over broadcast axes.
ctn_node sum_to(Graph &g, ctn_node x, Shape target);

// Appends the backward graph; see ctn_grad.
void build_grad(Graph &g, ctn_node loss, uint32_t n, const ctn_node *wrt, ctn_node *out);
// Appends the forward-mode tangents; see ctn_jvp (autodiff/jvp.cpp).
void build_jvp(Graph &g, uint32_t n_out, const ctn_node *outs, uint32_t n_in, const ctn_node *ins,
               const ctn_node *tangents, ctn_node *out_tangents);

// The names of a saved or exported graph's outputs (ctn_graph_save, ctn_onnx_export): names[i],
// or "output<i>" when names is NULL. Checks the ids, and that names are non-empty and unique
// (CTN_ERR_INVALID_ARGUMENT prefixed with `fn`).
std::vector<std::string> output_names(const Graph &g, uint32_t n, const ctn_node *outs, const char *const *names,
                                      const char *fn);

ctn_attrs attrs_i(std::initializer_list<int64_t> ints);
ctn_attrs attrs_f(std::initializer_list<double> floats);

}  // namespace ctn

struct ctn_graph : ctn::Graph {
  using ctn::Graph::Graph;
};
