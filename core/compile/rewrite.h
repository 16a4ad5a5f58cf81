// Graph passes run by ctn_plan_compile on a private copy of the graph.
#pragma once

#include "graph/graph.h"

#include <vector>

namespace ctn {

struct Backend;

struct PassStats {
  uint32_t folded = 0;  // nodes removed by constant folding / algebraic simplification
  uint32_t fused = 0;   // nodes removed by fusion
};

// Replacement map: a rewritten node points at its replacement.
struct Rewriter {
  Graph &g;
  std::vector<ctn_node> repl;
  explicit Rewriter(Graph &graph) : g(graph) {}
  ctn_node resolve(ctn_node n);
  void grow();  // sizes the map to the graph
  void set(ctn_node from, ctn_node to);
  void resolve_inputs(ctn_node v);
  void resolve_all(std::vector<ctn_node> &roots);
};

// Whether n is an op node of the built-in op `name` (a library op of the same name is not).
bool is_op(const Graph &g, ctn_node n, const char *name);

// Whether backend b has a kernel for op with these operand descriptors and attributes (asks its
// get_kernel and releases the kernel).
bool offers(Backend &b, const OpDef &op, uint32_t n, const ctn_tensor_desc *in, const ctn_tensor_desc &od,
            const ctn_attrs &a);

// Algebraic simplification (x*1, x+0, x-0, x/1, -(-x), and constant reassociation so that
// x*2*2 becomes x*4) and constant folding (ops whose inputs are all constants are evaluated
// once at compile time on `fold_backend`, a host-memory backend; skipped when it is null).
void simplify_and_fold(Rewriter &rw, bool simplify, bool fold, Backend *fold_backend, PassStats &st);

// Live nodes reachable from roots in a valid execution order (dead-code elimination).
std::vector<ctn_node> schedule(const Graph &g, const std::vector<ctn_node> &roots);

// matmul + bias (+ relu/gelu) into matmul_bias_act, conv2d + bias (+ relu/gelu/clamp) into
// conv2d_bias_act, when `backend` offers the fused kernel.
void fuse_bias_act(Rewriter &rw, std::vector<ctn_node> &roots, Backend *backend, PassStats &st);

}  // namespace ctn
