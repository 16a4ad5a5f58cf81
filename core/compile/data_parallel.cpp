// Data-parallel plans (docs/DISTRIBUTED.md). Compile stage data_parallel (the first: compile/compile.h):
// every gradient that ctn_grad made (Node::grad_uses_from) is replaced, where the graph uses it
// after ctn_grad (the optimizer, clipping), by its average over the ranks. Gradients are taken
// in node order, which is the order backward produces them (last layer first, as DDP's buckets),
// and packed into buckets of at most `bucket_bytes` (one gradient larger than that is a bucket of
// its own): reshape to 1-D, concat, one "dp_allreduce" node (in-place allreduce-mean through
// the communicator), slice and reshape back, Horovod's tensor fusion written as graph ops. The
// graph is the same on every rank, so the buckets and their order are too, and so are the
// results. Uses inside the backward pass keep the local gradient: averaging is only correct on
// the final gradients.
#include "compile/data_parallel.h"

#include "compile/compile.h"
#include "exec/program.h"
#include "util/status.h"

#include <algorithm>
#include <cstring>

namespace ctn {

namespace {

ValueInfo infer_same(const OpDef &, const ValueInfo *in, uint32_t, ctn_attrs &) { return in[0]; }

// Not in the built-in table: only this stage makes such nodes, and placement gives them the
// communicator's kernel on a host-memory backend.
const OpDef kAllreduceOp{"dp_allreduce", 1, infer_same, nullptr, OP_NO_FOLD, nullptr, nullptr};
const OpDef kStartOp{"dp_allreduce_start", 1, infer_same, nullptr, OP_NO_FOLD, nullptr, nullptr};
const OpDef kWaitOp{"dp_allreduce_wait", 1, infer_same, nullptr, OP_NO_FOLD, nullptr, nullptr};

struct KernelState {
  ctn_collective *comm;
  uint64_t count;
  ctn_dtype dtype;
  uint64_t bytes;
};

// The step's output, holding its input (the kernels may run in place).
char *bucket(const KernelState &k, const ctn_kernel_args *a) {
  char *dst = static_cast<char *>(a->outputs[0].data) + a->outputs[0].offset;
  const char *src = static_cast<const char *>(a->inputs[0].data) + a->inputs[0].offset;
  if (dst != src) std::memmove(dst, src, k.bytes);
  return dst;
}

ctn_status run_allreduce(void *state, const ctn_kernel_args *a) {
  auto *k = static_cast<KernelState *>(state);
  char *dst = bucket(*k, a);
  std::lock_guard<std::mutex> lk(k->comm->mu);
  const ctn_collective_desc &d = k->comm->plugin->desc;
  ctn_status s = d.allreduce(k->comm->state, dst, k->count, k->dtype, CTN_REDUCE_MEAN);
  // The plugin recorded its message (a timeout naming the missing ranks); the run fails with it
  // and the ranks are out of step: the caller ends the job (ctn_collective_abort).
  return s;
}

// dp_allreduce_start: the bucket (this step's output) goes to the plugin until the wait.
ctn_status run_start(void *state, const ctn_kernel_args *a) {
  auto *k = static_cast<KernelState *>(state);
  char *dst = bucket(*k, a);
  std::lock_guard<std::mutex> lk(k->comm->mu);
  const ctn_collective_desc &d = k->comm->plugin->desc;
  uint64_t ticket = 0;
  ctn_status s = d.allreduce_start(k->comm->state, dst, k->count, k->dtype, CTN_REDUCE_MEAN, &ticket);
  if (s == CTN_OK) k->comm->pending.emplace_back(dst, ticket);
  return s;
}

// dp_allreduce_wait: its input is the start's bucket; the allreduce pending on it completes.
ctn_status run_wait(void *state, const ctn_kernel_args *a) {
  auto *k = static_cast<KernelState *>(state);
  const char *src = static_cast<const char *>(a->inputs[0].data) + a->inputs[0].offset;
  std::lock_guard<std::mutex> lk(k->comm->mu);
  auto &pending = k->comm->pending;
  auto it = std::find_if(pending.begin(), pending.end(), [&](const auto &p) { return p.first == src; });
  if (it == pending.end()) {
    set_plugin_error("dp_allreduce_wait: no allreduce was started on this bucket");
    return CTN_ERR_STATE;
  }
  const uint64_t ticket = it->second;
  pending.erase(it);
  const ctn_collective_desc &d = k->comm->plugin->desc;
  if (ctn_status s = d.allreduce_wait(k->comm->state, ticket); s != CTN_OK) return s;
  bucket(*k, a);  // out of place: the averaged bucket into the output
  return CTN_OK;
}

void release_state(void *state) { delete static_cast<KernelState *>(state); }

}  // namespace

bool is_collective_op(const OpDef *op) { return op == &kAllreduceOp || op == &kStartOp || op == &kWaitOp; }

ctn_kernel collective_kernel(ctn_collective *comm, const OpDef *op, const ValueInfo &info) {
  ctn_kernel k{};
  auto *st = new KernelState{comm, static_cast<uint64_t>(info.shape.numel()), static_cast<ctn_dtype>(info.dtype),
                             static_cast<uint64_t>(info.shape.numel()) * dtype_size(info.dtype)};
  k.fn = op == &kStartOp ? run_start : op == &kWaitOp ? run_wait : run_allreduce;
  k.state = st;
  k.release = release_state;
  k.flags = CTN_KERNEL_INPLACE_OK;
  return k;
}

void hoist_allreduce_starts(const Graph &g, std::vector<ctn_node> &order) {
  const size_t n = g.size();
  std::vector<int64_t> pos(n, -1);
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<int64_t>(i);
  // Movable: the starts, and every op all of whose readers in the schedule are movable (the
  // bucket's concat and reshapes), found from the back.
  std::vector<char> movable(n, 0);
  std::vector<uint32_t> readers(n, 0), movable_readers(n, 0);
  for (ctn_node v : order)
    for (ctn_node in : g.node(v).inputs) ++readers[in];
  for (size_t i = order.size(); i-- > 0;) {
    const ctn_node v = order[i];
    const Node &nd = g.node(v);
    movable[v] = nd.kind == NodeKind::Op &&
                 (nd.op == &kStartOp || (readers[v] > 0 && movable_readers[v] == readers[v] && nd.op != &kWaitOp));
    if (movable[v])
      for (ctn_node in : nd.inputs) ++movable_readers[in];
  }
  // Each movable node goes right after its anchor: the last unmovable node it depends on.
  std::vector<int64_t> anchor(n, -1);
  std::vector<std::vector<ctn_node>> after(order.size() + 1);
  for (ctn_node v : order) {
    if (!movable[v]) continue;
    for (ctn_node in : g.node(v).inputs) anchor[v] = std::max(anchor[v], movable[in] ? anchor[in] : pos[in]);
    after[static_cast<size_t>(anchor[v] + 1)].push_back(v);
  }
  std::vector<ctn_node> out(after[0]);
  for (size_t i = 0; i < order.size(); ++i) {
    if (movable[order[i]]) continue;
    out.push_back(order[i]);
    out.insert(out.end(), after[i + 1].begin(), after[i + 1].end());
  }
  order.swap(out);
}

void insert_gradient_allreduce(CompileState &cs, uint64_t bucket_bytes, bool overlap) {
  Graph &g = cs.g;
  const size_t n0 = g.size();
  // The gradients, in node order, that something after their ctn_grad uses.
  std::vector<ctn_node> grads;
  for (size_t v = 0; v < n0; ++v) {
    const Node &nd = g.node(static_cast<ctn_node>(v));
    if (!nd.grad_uses_from || !dtype_is_float(nd.info.dtype)) continue;
    bool used = false;
    for (size_t u = nd.grad_uses_from; u < n0 && !used; ++u)
      for (ctn_node in : g.node(static_cast<ctn_node>(u)).inputs) used = used || in == v;
    if (used) grads.push_back(static_cast<ctn_node>(v));
  }
  cs.dp_stats.gradients = static_cast<uint32_t>(grads.size());
  size_t i = 0;
  while (i < grads.size()) {
    // One bucket: consecutive gradients of one dtype up to bucket_bytes.
    const int32_t dt = g.info(grads[i]).dtype;
    std::vector<ctn_node> members;
    uint64_t bytes = 0;
    while (i < grads.size() && g.info(grads[i]).dtype == dt) {
      const uint64_t b = static_cast<uint64_t>(g.info(grads[i]).shape.numel()) * dtype_size(dt);
      if (!members.empty() && bytes + b > bucket_bytes) break;
      members.push_back(grads[i++]);
      bytes += b;
    }
    std::vector<ctn_node> flat;
    for (ctn_node m : members) {
      ctn_attrs a = attrs_i({g.info(m).shape.numel()});
      flat.push_back(g.op1("reshape", m, &a));
    }
    ctn_node cat = flat[0];
    if (flat.size() > 1) {
      ctn_attrs a = attrs_i({0});
      cat = g.add_op("concat", static_cast<uint32_t>(flat.size()), flat.data(), &a);
    }
    ctn_node ar = g.add_op(overlap ? kStartOp : kAllreduceOp, 1, &cat, ctn_attrs{});
    if (overlap) ar = g.add_op(kWaitOp, 1, &ar, ctn_attrs{});
    int64_t off = 0;
    for (ctn_node m : members) {
      const ValueInfo mi = g.info(m);
      const int64_t n = mi.shape.numel();
      ctn_node piece = ar;
      if (members.size() > 1) {
        ctn_attrs a = attrs_i({0, off, off + n, 1});
        piece = g.op1("slice", ar, &a);
      }
      ctn_attrs shp{};
      for (uint32_t d = 0; d < mi.shape.ndim; ++d) shp.i[shp.ni++] = mi.shape[d];
      ctn_node back = g.op1("reshape", piece, &shp);
      off += n;
      for (size_t u = g.node(m).grad_uses_from; u < n0; ++u)
        for (ctn_node &in : g.node(static_cast<ctn_node>(u)).inputs)
          if (in == m) in = back;
    }
    ++cs.dp_stats.buckets;
    cs.dp_stats.bytes += bytes;
  }
}

void data_parallel(CompileState &cs) {
  if (!cs.dp) return;
  cs.dp_stats.overlapped = !(cs.dp_flags & CTN_DP_BLOCKING) && cs.dp->can_overlap();
  insert_gradient_allreduce(cs, cs.dp_bucket_bytes, cs.dp_stats.overlapped);
}

// The last stage, data-parallel plans only: every variable of the plan from rank 0, in node
// order (the same on every rank).
void broadcast_variables(CompileState &cs) {
  if (!cs.dp) return;
  Program &prog = cs.out;
  ctn_collective *comm = cs.dp;
  std::vector<std::pair<ctn_node, int>> vars(prog.variables.begin(), prog.variables.end());
  std::sort(vars.begin(), vars.end());
  std::vector<char> buf;
  for (auto &[node, id] : vars) {
    (void)node;
    const Program::Value &val = prog.values[static_cast<size_t>(id)];
    buf.resize(val.bytes);
    val.dev->sync();
    val.dev->download(val.handle, val.offset, buf.data(), val.bytes);
    comm->broadcast(buf.data(), val.bytes, 0);
    val.dev->upload(val.handle, val.offset, buf.data(), val.bytes);
  }
}

}  // namespace ctn
