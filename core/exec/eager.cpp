#include "exec/eager.h"

#include "exec/select.h"
#include "plugin/context.h"
#include "tensor/pool.h"
#include "util/small_buf.h"
#include "util/status.h"

#include <algorithm>
#include <cstring>
#include <string_view>

namespace ctn {

namespace {

// The cache key: 64-bit words of (op, backend, input count, each input's dtype, rank and dims,
// the attribute counts, ints and float bits). On the stack up to 96 words (any op with at most
// eight rank-8 inputs), so that a cache hit allocates nothing.
class Key {
 public:
  Key(const OpDef &op, const Backend *b, const Tensor *const *in, uint32_t n, const ctn_attrs &attrs)
      : buf_(count(in, n, attrs)) {
    uint64_t *w = buf_.data();
    size_t k = 0;
    w[k++] = reinterpret_cast<uintptr_t>(&op);
    w[k++] = reinterpret_cast<uintptr_t>(b);
    w[k++] = n;
    for (uint32_t i = 0; i < n; ++i) {
      w[k++] = static_cast<uint64_t>(static_cast<uint32_t>(in[i]->dtype)) << 32 | in[i]->shape.ndim;
      for (uint32_t d = 0; d < in[i]->shape.ndim; ++d) w[k++] = static_cast<uint64_t>(in[i]->shape.d[d]);
    }
    w[k++] = static_cast<uint64_t>(attrs.ni) << 32 | attrs.nf;
    for (uint32_t j = 0; j < attrs.ni; ++j) w[k++] = static_cast<uint64_t>(attrs.i[j]);
    for (uint32_t j = 0; j < attrs.nf; ++j) std::memcpy(&w[k++], &attrs.f[j], sizeof(double));
    n_ = k;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ k;
    for (size_t j = 0; j < k; ++j) {
      h ^= w[j];
      h = (h << 29 | h >> 35) * 0xff51afd7ed558ccdull;
    }
    hash_ = h ^ (h >> 32);
  }
  uint64_t hash() const { return hash_; }
  size_t size() { return n_; }
  const uint64_t *words() { return buf_.data(); }
  std::string_view bytes() { return {reinterpret_cast<const char *>(buf_.data()), n_ * sizeof(uint64_t)}; }

 private:
  static size_t count(const Tensor *const *in, uint32_t n, const ctn_attrs &attrs) {
    size_t c = 4 + attrs.ni + attrs.nf;
    for (uint32_t i = 0; i < n; ++i) c += 1 + in[i]->shape.ndim;
    return c;
  }
  SmallBuf<uint64_t, 96> buf_;
  size_t n_ = 0;
  uint64_t hash_ = 0;
};

// Each thread's last hits: a two-way set-associative table of pointers into contexts' eager
// caches (whose entries stay until their context goes), with a copy of the key when it is short
// (most are: a binary op on two rank-2 tensors takes 10 words). Two ways, because with one, two
// keys of a loop that fell on the same slot (their op addresses vary from run to run) evicted
// each other on every op. A slot names its context by Context::id, which no later context
// reuses, so a slot of a destroyed context never matches again.
constexpr size_t kSlotWords = 14;
struct HitSlot {
  uint64_t ctx = 0;
  uint64_t hash = 0;
  size_t n = 0;  // key words; 0: the slot is empty (or the key was longer than kSlotWords)
  const EagerEntry *entry = nullptr;
  uint64_t key[kSlotWords];

  bool holds(const Context &c, Key &k) const {
    if (ctx != c.id || hash != k.hash() || n != k.size()) return false;
    const uint64_t *w = k.words();
    for (size_t i = 0; i < n; ++i)
      if (key[i] != w[i]) return false;
    return true;
  }
  void fill(const Context &c, Key &k, const EagerEntry *e) {
    if (k.size() > kSlotWords) return;
    ctx = c.id;
    hash = k.hash();
    n = k.size();
    entry = e;
    std::copy_n(k.words(), n, key);
  }
};
constexpr size_t kHitSets = 32;
thread_local HitSlot t_hits[kHitSets][2];  // [set][0]: the more recently filled way

// The cache entry for `key` (a negative one, with its reason, when b cannot run the op): made
// and inserted on a miss.
const EagerEntry &find_or_make(Context &ctx, Key &key, const OpDef &op, Backend *b,
                                                             const Tensor *const *in, uint32_t n,
                                                             const ctn_attrs &attrs, const ValueInfo &out) {
  {
    std::lock_guard<std::mutex> lk(ctx.eager_mu);
    auto it = ctx.eager_cache.find(key.bytes());  // no key string is made for a hit
    if (it != ctx.eager_cache.end()) return it->second;
  }
  SmallBuf<ctn_tensor_desc, 8> descs(n);
  ctn_tensor_desc *d = descs.data();
  for (uint32_t i = 0; i < n; ++i) d[i] = make_desc(ValueInfo{in[i]->dtype, in[i]->shape});
  ctn_tensor_desc od = make_desc(out);
  EagerEntry e;
  e.backend = b;
  if (!select_kernel(*b, op, n, d, od, attrs, &e.kernel, &e.why)) {  // negative entry
    e.kernel = ctn_kernel{};
    if (e.why.empty()) e.why = "unsupported";
  }
  std::lock_guard<std::mutex> lk(ctx.eager_mu);
  auto [it, inserted] = ctx.eager_cache.emplace(std::string(key.bytes()), e);
  if (!inserted) b->release(e.kernel);
  return it->second;
}

const EagerEntry *lookup(Context &ctx, const OpDef &op, Backend *b, const Tensor *const *in, uint32_t n,
                         const ctn_attrs &attrs, const ValueInfo &out, std::string *why) {
  Key key(op, b, in, n, attrs);
  HitSlot *set = t_hits[key.hash() % kHitSets];
  const EagerEntry *e;
  if (set[0].holds(ctx, key)) {
    e = set[0].entry;
  } else if (set[1].holds(ctx, key)) {
    e = set[1].entry;
  } else {
    e = &find_or_make(ctx, key, op, b, in, n, attrs, out);
    set[1] = set[0];  // the older way goes
    set[0].fill(ctx, key, e);
  }
  if (e->kernel.fn) return e;
  *why = e->why;
  return nullptr;
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
  Tensor result = Tensor::empty(out.dtype, out.shape, ctx.eager_buffers);
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
  Context &ctx = *g.context();
  node.value = std::allocate_shared<Tensor>(PoolAllocator<Tensor>(ctx.eager_buffers),
                                            eager_compute(ctx, *node.op, node.attrs, in, n, node.info, nullptr, &node.ran_on));
}

namespace {
// graph/ sits below exec/: an eager graph runs its nodes through what this installs (graph.h).
[[maybe_unused]] const bool kEagerInstalled = (install_eager_executor(&eager_execute), true);
}  // namespace

}  // namespace ctn
