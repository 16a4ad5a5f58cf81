#include "exec/eager.h"

#include "exec/select.h"
#include "plugin/context.h"
#include "util/small_buf.h"
#include "util/status.h"

#include <cstring>

namespace ctn {

namespace {

// The cache key: raw bytes of (op pointer, backend pointer, input dtypes/shapes, attrs). Built in
// a thread-local buffer so that a cache hit allocates nothing.
void build_key(std::string &key, const OpDef &op, const Backend *b, const Tensor *const *in, uint32_t n,
               const ctn_attrs &attrs) {
  key.clear();
  auto put = [&](const void *p, size_t sz) { key.append(static_cast<const char *>(p), sz); };
  const OpDef *opp = &op;
  put(&opp, sizeof opp);
  put(&b, sizeof b);
  put(&n, sizeof n);
  for (uint32_t i = 0; i < n; ++i) {
    put(&in[i]->dtype, sizeof(int32_t));
    put(&in[i]->shape.ndim, sizeof(uint32_t));
    put(in[i]->shape.d, sizeof(int64_t) * in[i]->shape.ndim);
  }
  put(&attrs.ni, sizeof attrs.ni);
  put(&attrs.nf, sizeof attrs.nf);
  put(attrs.i, sizeof(int64_t) * attrs.ni);
  put(attrs.f, sizeof(double) * attrs.nf);
}

const EagerEntry *lookup(Context &ctx, const OpDef &op, Backend *b, const Tensor *const *in, uint32_t n,
                         const ctn_attrs &attrs, const ValueInfo &out, std::string *why) {
  thread_local std::string key;
  build_key(key, op, b, in, n, attrs);
  {
    std::lock_guard<std::mutex> lk(ctx.eager_mu);
    auto it = ctx.eager_cache.find(key);
    if (it != ctx.eager_cache.end()) return it->second.kernel.fn ? &it->second : nullptr;
  }
  SmallBuf<ctn_tensor_desc, 8> descs(n);
  ctn_tensor_desc *d = descs.data();
  for (uint32_t i = 0; i < n; ++i) d[i] = make_desc(ValueInfo{in[i]->dtype, in[i]->shape});
  ctn_tensor_desc od = make_desc(out);
  EagerEntry e;
  e.backend = b;
  if (!select_kernel(*b, op, n, d, od, attrs, &e.kernel, why)) e.kernel = ctn_kernel{};  // negative entry
  std::lock_guard<std::mutex> lk(ctx.eager_mu);
  auto [it, inserted] = ctx.eager_cache.emplace(key, e);
  if (!inserted) b->release(e.kernel);
  if (!it->second.kernel.fn && why->empty()) *why = "unsupported (cached)";
  return it->second.kernel.fn ? &it->second : nullptr;
}

void run_on(const EagerEntry &e, const OpDef &op, const ctn_attrs &attrs, const Tensor *const *in, uint32_t n,
            Tensor &out) {
  Backend &b = *e.backend;
  SmallBuf<ctn_tensor_desc, 8> descs(n);
  ctn_tensor_desc *d = descs.data();
  ctn_tensor_desc od = make_desc(ValueInfo{out.dtype, out.shape});
  std::vector<void *> device_bufs;
  std::unique_ptr<Storage> ws;
  ctn_kernel_args args{};
  args.n_inputs = n;
  args.n_outputs = 1;
  args.attrs = &attrs;
  if (b.host_memory()) {
    for (uint32_t i = 0; i < n; ++i) {
      d[i] = make_desc(ValueInfo{in[i]->dtype, in[i]->shape});
      d[i].data = in[i]->data();
    }
    od.data = out.data();
    if (e.kernel.workspace_size) {
      ws = std::make_unique<Storage>(e.kernel.workspace_size);
      args.workspace = ws->data;
      args.workspace_size = e.kernel.workspace_size;
    }
    args.inputs = d;
    args.outputs = &od;
    call_kernel(e.kernel, args, op.name.c_str(), b);
    return;
  }
  // Device backends: stage through temporary device buffers (eager on a device is for
  // debugging; compiled plans keep data resident).
  struct Guard {
    Backend &b;
    std::vector<void *> &bufs;
    ~Guard() {
      for (void *p : bufs) b.free(p);
    }
  } guard{b, device_bufs};
  for (uint32_t i = 0; i < n; ++i) {
    d[i] = make_desc(ValueInfo{in[i]->dtype, in[i]->shape});
    device_bufs.push_back(b.alloc(in[i]->nbytes()));
    d[i].data = device_bufs.back();
    b.upload(d[i].data, 0, in[i]->data(), in[i]->nbytes());
  }
  device_bufs.push_back(b.alloc(out.nbytes()));
  od.data = device_bufs.back();
  if (e.kernel.workspace_size) {
    device_bufs.push_back(b.alloc(e.kernel.workspace_size));
    args.workspace = device_bufs.back();
    args.workspace_size = e.kernel.workspace_size;
  }
  args.inputs = d;
  args.outputs = &od;
  call_kernel(e.kernel, args, op.name.c_str(), b);
  b.download(od.data, 0, out.data(), out.nbytes());
}

}  // namespace

Tensor eager_compute(Context &ctx, const OpDef &op, const ctn_attrs &attrs, const Tensor *const *in, uint32_t n,
                     const ValueInfo &out, Backend *only, const Backend **ran_on) {
  Tensor result = Tensor::empty(out.dtype, out.shape);
  std::string reasons;
  auto attempt = [&](Backend *b) {
    std::string why;
    if (const EagerEntry *e = lookup(ctx, op, b, in, n, attrs, out, &why)) {
      run_on(*e, op, attrs, in, n, result);
      if (ran_on) *ran_on = b;
      return true;
    }
    reasons += (reasons.empty() ? "" : "; ") + b->name + ": " + why;
    return false;
  };
  if (only) {
    if (attempt(only)) return result;
  } else {
    const std::vector<Backend *> &prefs = ctx.preferred();
    if (prefs.empty()) fail(CTN_ERR_UNAVAILABLE, "%s: no backend is available in this context", op.name.c_str());
    for (Backend *b : prefs)
      if (attempt(b)) return result;
  }
  fail(CTN_ERR_UNSUPPORTED, "%s: no backend can run it for %s (%s)", op.name.c_str(),
       dtype_name(n ? in[0]->dtype : out.dtype), reasons.c_str());
}

void eager_execute(Graph &g, Node &node) {
  const uint32_t n = static_cast<uint32_t>(node.inputs.size());
  SmallBuf<const Tensor *, 8> in_buf(n);
  const Tensor **in = in_buf.data();
  for (uint32_t i = 0; i < n; ++i) {
    const Node &src = g.node(node.inputs[i]);
    if (!src.value) fail(CTN_ERR_STATE, "%s: input %u has no value (eager graphs compute every node)", node.op->name.c_str(), i);
    in[i] = src.value.get();
  }
  if (node.op->flags & OP_DATA_DEPENDENT) {  // computed on the host; the node takes the actual shape
    node.value = std::make_shared<Tensor>(node.op->evaluate(*node.op, in, n, node.attrs));
    node.info.shape = node.value->shape;
    node.bounded = false;
    return;
  }
  node.value = std::make_shared<Tensor>(
      eager_compute(*g.context(), *node.op, node.attrs, in, n, node.info, nullptr, &node.ran_on));
}

namespace {
// graph/ sits below exec/: an eager graph runs its nodes through what this installs (graph.h).
[[maybe_unused]] const bool kEagerInstalled = (install_eager_executor(&eager_execute), true);
}  // namespace

}  // namespace ctn
