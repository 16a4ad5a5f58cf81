// Op definitions: one entry per op name with its shape/dtype inference and gradient rule.
// Built-in ops' rows live in core/ops/; op libraries add entries wrapping ctn_op_def.
#pragma once

#include <chutney/oplib.h>

#include "tensor/shape.h"

#include <string>

namespace ctn {

struct ValueInfo {
  int32_t dtype = CTN_F32;
  Shape shape;
};

struct OpDef;
class Graph;
struct OpLib;
struct Tensor;

// Infers the output; may normalise attrs in place (negative axes, -1 in shapes, slice bounds).
// Throws ctn::Error naming the op and the offending shapes/dtypes.
using InferFn = ValueInfo (*)(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &attrs);

// Adds to `g` the gradient of node `node` given the gradient `dy` of its output; writes one entry
// per input into dx (CTN_NODE_NONE: no gradient). `need[i]` tells whether input i needs one.
using GradFn = void (*)(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx);

// Composite ops (ops/ops_composite.cpp): adds to `g` the parts that compute the op from
// `in` with the attributes its infer normalised, and returns the node holding the result.
// The graph never holds a node of a composite op; its gradient is that of the parts.
using ExpandFn = ctn_node (*)(Graph &g, const OpDef &op, const ctn_node *in, uint32_t n, const ctn_attrs &attrs);

// Forward-mode rule (ctn_jvp): adds to `g` the tangent of node `node` given its inputs' tangents
// `t` (CTN_NODE_NONE: zero); returns CTN_NODE_NONE when the tangent is zero. Built-in rules:
// the shared ones in autodiff/tangent_rules.cpp, an op's own beside its row (core/ops/).
using TangentFn = ctn_node (*)(Graph &g, ctn_node node, const ctn_node *t);

// The node ctn_context_op_support builds to ask a backend whether it runs the op. `inputs`:
// space-separated "T[d0,d1]" with T "D" (the dtype asked about), "i64", "i32", "bool", "u8", "i8", "f32"; "[]" is
// 0-d; nullptr: n_inputs (2 for variadic ops) inputs of D[2,3]. ints/floats: the attributes.
struct OpProbe {
  const char *inputs = nullptr;
  int64_t ints[CTN_ATTR_INTS] = {};
  uint32_t ni = 0;
  double floats[CTN_ATTR_FLOATS] = {};
  uint32_t nf = 0;
};

enum OpFlags : uint32_t {
  OP_ELEMENTWISE = 1u << 0,   // output element i depends only on input elements i (after bcast)
  OP_VIEW_RESHAPE = 1u << 1,  // output can alias input 0's storage (no kernel needed)
  OP_NO_FOLD = 1u << 2,       // never constant-folded
  // since 1.6: the output's shape depends on the input values. `infer` gives an upper bound
  // (each dim >= the actual one), `evaluate` computes the value with its actual shape on the
  // host; plans holding such a node run in stages (compile/staged.cpp, docs/EXECUTION.md).
  OP_DATA_DEPENDENT = 1u << 3,
};

// Data-dependent ops (OP_DATA_DEPENDENT): the value of the node from its inputs' values (host
// tensors of their actual shapes), with the attributes infer normalised. Throws ctn::Error
// naming the op for bad values (an index out of range, a negative k).
using EvaluateFn = Tensor (*)(const OpDef &op, const Tensor *const *in, uint32_t n, const ctn_attrs &attrs);

struct OpDef {
  std::string name;
  int n_inputs = 1;  // -1: variadic (>= 1)
  InferFn infer = nullptr;
  GradFn grad = nullptr;
  uint32_t flags = 0;
  // The ctn_attrs slots the op reads, as ctn_context_op_info reports them ("f[0] alpha");
  // nullptr: none.
  const char *attributes = nullptr;
  // Op libraries:
  const ctn_op_def *ext = nullptr;
  OpLib *lib = nullptr;
  // Composite ops: set, and grad unset (the parts are differentiated).
  ExpandFn expand = nullptr;
  TangentFn tangent = nullptr;  // nullptr: ctn_jvp refuses the op (op libraries: ctn_op_def.jvp_ex)
  OpProbe probe{};
  EvaluateFn evaluate = nullptr;  // OP_DATA_DEPENDENT ops only
};

// A table of built-in ops in static storage. Each area defines its own (ops/ops_builtin.cpp,
// ops/ops_nn.cpp, ops/ops_optim.cpp, ops/ops_composite.cpp: core/ops/ sits above graph/ and
// autodiff/, whose rules the rows name); builtin_ops() is their union.
struct OpTable {
  const OpDef *ops;
  size_t n;
};
OpTable core_op_table();
OpTable nn_op_table();     // conv, pooling, norms, dropout, embedding...
OpTable optim_op_table();  // optimizer update steps
OpTable composite_op_table();  // ops defined as a decomposition into other ops
OpTable dynamic_op_table();    // since 1.6: ops with data-dependent output shapes (ops_dynamic.cpp)
OpTable quant_op_table();      // int8 quantization (ops/ops_quant.cpp)

// Built-in op lookup by name (static storage). Returns nullptr for an unknown name.
const OpDef *find_builtin_op(const char *name);
// Every built-in op, for listings and the conformance matrix.
const OpDef *const *builtin_ops(size_t *count);

std::string values_str(const ValueInfo *in, uint32_t n);  // "a: f32[2, 3], b: f32[3]"

// conv2d's geometry (ops/ops_nn.cpp): normalises and checks attribute slots 0..6 against x
// [N,C,H,W] and w [O,C/groups,KH,KW]; returns [N,O,Ho,Wo]. Throws naming `op`.
Shape conv2d_geometry(const OpDef &op, const Shape &x, const Shape &w, ctn_attrs &a);

}  // namespace ctn
