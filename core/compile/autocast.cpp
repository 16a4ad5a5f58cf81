// Compile stage autocast (compile/compile.h): mixed precision, ctn_compile_options.precision.
//
// With precision bf16 or f16, every live matmul, matmul_bias_act, conv2d, conv_transpose2d and
// convolution gradient (conv2d_grad_input, conv2d_grad_weight; matmul's gradients are matmuls)
// whose floating inputs and output are f32 gets a twin computing in the low dtype: its inputs
// are cast down (a value cast once however many twins read it; a twin's input that is another
// twin's output is read directly, not cast up and down again) and its output is low. Readers
// that stay f32 (everything else: elementwise ops, reductions, norms, softmax, losses, the
// optimizer updates, assignments to the f32 variables, the plan's outputs) read one cast of the
// twin's output back to f32. The stage runs after rewrite, so fusion has already made
// matmul_bias_act in f32, and before placement: the planner sizes values by dtype, so the
// smaller buffers are counted. A node whose default backend has no kernel for the low dtype
// stays f32 (counted as kept).
#include <chutney/ops.h>

#include "compile/compile.h"
#include "exec/select.h"

#include <cstring>
#include <map>

namespace ctn {

namespace {

bool runs_low(const Node &nd) {
  if (nd.kind != NodeKind::Op || nd.op->lib) return false;  // built-in ops only (a library op may share a name)
  static const char *const kOps[] = {CTN_OP_MATMUL,           CTN_OP_MATMUL_BIAS_ACT,    CTN_OP_CONV2D,
                                     CTN_OP_CONV2D_BIAS_ACT,  CTN_OP_CONV2D_GRAD_INPUT, CTN_OP_CONV2D_GRAD_WEIGHT,
                                     CTN_OP_CONV_TRANSPOSE2D, CTN_OP_CONV2D_BIAS_ADD_ACT};
  for (const char *name : kOps)
    if (nd.op->name == name) return true;
  return false;
}

struct Autocaster {
  CompileState &cs;
  Graph &g;
  int32_t low;
  std::vector<ctn_node> twin;                    // per original node: its low twin, or NONE
  std::map<std::pair<ctn_node, int32_t>, ctn_node> casts;  // (value, dtype) -> its cast

  ctn_node cast(ctn_node x, int32_t dtype) {
    auto it = casts.find({x, dtype});
    if (it != casts.end()) return it->second;
    ctn_attrs a = attrs_i({dtype});
    ctn_node c = g.op1(CTN_OP_CAST, x, &a);
    casts[{x, dtype}] = c;
    ++cs.autocast_stats.casts;
    return c;
  }

  // The node's inputs as its twin reads them: twins' outputs as they are, the rest cast down.
  bool low_inputs(const Node &nd, std::vector<ctn_node> &ins) {
    for (ctn_node in : nd.inputs)
      if (g.info(in).dtype != CTN_F32 && twin[in] == CTN_NODE_NONE) return false;
    ctn_tensor_desc descs[4];
    if (nd.inputs.size() > 4) return false;
    for (size_t i = 0; i < nd.inputs.size(); ++i) {
      ValueInfo vi = g.info(nd.inputs[i]);
      vi.dtype = low;
      descs[i] = make_desc(vi);
    }
    ValueInfo out = nd.info;
    out.dtype = low;
    bool offered = false;  // by one of the preferred backends (placement picks among them)
    for (Backend *b : cs.prefs) {
      ctn_kernel k;
      std::string why;
      if (offered || !select_kernel(*b, *nd.op, static_cast<uint32_t>(nd.inputs.size()), descs, make_desc(out), nd.attrs, &k, &why))
        continue;
      b->release(k);
      offered = true;
    }
    if (!offered) return false;
    for (ctn_node in : nd.inputs) ins.push_back(twin[in] != CTN_NODE_NONE ? twin[in] : cast(in, low));
    return true;
  }

  void run() {
    const std::vector<ctn_node> live = schedule(g, cs.roots);
    twin.assign(g.size(), CTN_NODE_NONE);
    for (ctn_node v : live) {
      const Node nd = g.node(v);  // a copy: add_op appends to the node list
      if (!runs_low(nd) || nd.info.dtype != CTN_F32) continue;
      std::vector<ctn_node> ins;
      if (!low_inputs(nd, ins)) {
        ++cs.autocast_stats.kept;
        continue;
      }
      twin[v] = g.add_op(*nd.op, static_cast<uint32_t>(ins.size()), ins.data(), nd.attrs);
      ++cs.autocast_stats.lowered;
    }
    // The f32 readers of a replaced node read its twin cast back up; the old node is dead.
    for (ctn_node v : live) {
      if (twin[v] != CTN_NODE_NONE) continue;
      for (ctn_node &in : g.node(v).inputs)
        if (in < twin.size() && twin[in] != CTN_NODE_NONE) in = cast(twin[in], CTN_F32);
    }
    for (ctn_node &r : cs.roots)
      if (twin[r] != CTN_NODE_NONE) r = cast(twin[r], CTN_F32);
    for (size_t v = 0; v < twin.size(); ++v)
      if (twin[v] != CTN_NODE_NONE) cs.rw.set(static_cast<ctn_node>(v), twin[v]);
  }
};

}  // namespace

void autocast(CompileState &cs) {
  if (cs.precision == CTN_PRECISION_F32) return;
  Autocaster ac{cs, cs.g, cs.precision == CTN_PRECISION_BF16 ? CTN_BF16 : CTN_F16, {}, {}};
  ac.run();
}

}  // namespace ctn
