#include "exec/select.h"

#include "plugin/backend_proc.h"

#include "util/status.h"

#include <cstring>
#include <new>

namespace ctn {

ctn_tensor_desc make_desc(const ValueInfo &v) {
  ctn_tensor_desc d{};
  d.dtype = v.dtype;
  d.ndim = v.shape.ndim;
  for (uint32_t k = 0; k < v.shape.ndim; ++k) d.shape[k] = v.shape[k];
  contiguous_strides(v.shape, d.strides);
  return d;
}

namespace {

// A 1.2 op library kernel run through ctn_op_kernel.run: the state the host hands to run_thunk.
struct RunThunk {
  ctn_op_kernel_run_fn run;
  const ctn_op_def *op;
  void *user_data;
  void *state;
  void (*release)(void *);
};

ctn_status run_thunk(void *state, const ctn_kernel_args *args) {
  const auto *t = static_cast<const RunThunk *>(state);
  return t->run(t->op, t->user_data, t->state, args);
}

void release_thunk(void *state) {
  auto *t = static_cast<RunThunk *>(state);
  if (t->release && t->state) t->release(t->state);
  delete t;
}

// The minor that added a dtype: 0 for the six of 1.0, 5 for f16/bf16/i8, 6 for i16/u16/u32/u64.
uint32_t dtype_since(int32_t dt) { return dt >= CTN_DTYPE_COUNT_V5 ? 6 : dt >= CTN_DTYPE_COUNT_V1 ? 5 : 0; }

// The first dtype among the inputs and output that a plugin built against ABI 1.minor does not
// know (its name in *name, the minor that added it in *since), or false.
bool dtype_unknown_to(uint32_t minor, uint32_t n, const ctn_tensor_desc *in, const ctn_tensor_desc &out,
                      const char **name, uint32_t *since) {
  for (uint32_t i = 0; i <= n; ++i) {
    const int32_t dt = i < n ? in[i].dtype : out.dtype;
    if (dtype_since(dt) > minor) {
      *name = dtype_name(dt);
      *since = dtype_since(dt);
      return true;
    }
  }
  return false;
}

}  // namespace

uint64_t plan_const_inputs(const Graph &g, const std::vector<ctn_node> &inputs) {
  uint64_t bits = 0;
  for (size_t i = 0; i < inputs.size() && i < 64; ++i) {
    ctn_node v = inputs[i];
    while (g.node(v).kind == NodeKind::Op && (g.node(v).op->flags & OP_VIEW_RESHAPE)) v = g.node(v).inputs[0];
    if (g.node(v).kind == NodeKind::Constant) bits |= uint64_t{1} << i;
  }
  return bits;
}

bool select_kernel(Backend &b, const OpDef &op, uint32_t n, const ctn_tensor_desc *in, const ctn_tensor_desc &out,
                   const ctn_attrs &attrs, ctn_kernel *k, std::string *why, uint64_t const_inputs) {
  *k = ctn_kernel{};
  // The ABI promise (types.h): a plugin built before a dtype existed never sees a tensor of it.
  const bool lib_older = op.ext && op.lib->abi_minor < b.abi_minor;
  const char *late = nullptr;
  uint32_t since = 0;
  if (dtype_unknown_to(lib_older ? op.lib->abi_minor : b.abi_minor, n, in, out, &late, &since)) {
    if (why)
      *why = format("%s %s was built against ABI 1.%u, before the dtype %s (ABI 1.%u)", lib_older ? "op library" : "backend",
                    lib_older ? op.lib->name.c_str() : b.name.c_str(), lib_older ? op.lib->abi_minor : b.abi_minor, late,
                    since);
    return false;
  }
  if (op.ext) {
    // An exact backend match first; else a "cpu" kernel on any host-memory backend (backend.h).
    const auto &x = static_cast<const ExtOpDef &>(op);
    const ExtKernel *pick = nullptr;
    for (const ExtKernel &ek : x.kernels)
      if (!pick && b.name == ek.backend) pick = &ek;
    for (const ExtKernel &ek : x.kernels)
      if (!pick && b.host_memory() && std::strcmp(ek.backend, "cpu") == 0) pick = &ek;
    if (pick) {
      Backend::Serial serial(b);  // the library's kernel for b is part of b's calls (backend.h)
      KernelMakerScope maker(b);  // host->backend_proc reaches b's extras (plugin.h, 1.2)
      take_plugin_error();
      ctn_status s;
      try {
        s = pick->make ? pick->make(host_api(), x.declared, x.decl.user_data, b.name.c_str(), n, in, &out, &attrs, k)
                       : pick->get_kernel(host_api(), n, in, &out, &attrs, k);
      } catch (...) {
        fail(CTN_ERR_PLUGIN, "op library %s: get_kernel(%s) threw", op.lib->name.c_str(), op.name.c_str());
      }
      if (s == CTN_OK) {
        if (k->fn) return true;
        if (pick->make && pick->run) {
          // 1.2: the library's run function serves the kernel; a host thunk carries op and user_data.
          auto *t = new (std::nothrow) RunThunk{pick->run, x.declared, x.decl.user_data, k->state, k->release};
          if (!t) {
            release_kernel(*k);
            fail(CTN_ERR_OUT_OF_MEMORY, "%s: out of memory wrapping the kernel of op library %s", op.name.c_str(),
                 op.lib->name.c_str());
          }
          k->fn = run_thunk;
          k->state = t;
          k->release = release_thunk;
          return true;
        }
        release_kernel(*k);
        fail(CTN_ERR_PLUGIN, "op library %s: the kernel maker of %s for backend %s set no kernel function%s",
             op.lib->name.c_str(), op.name.c_str(), b.name.c_str(), pick->make ? " and its entry has no run" : "");
      }
      std::string m = take_plugin_error();
      if (s == CTN_ERR_UNSUPPORTED) {
        *why = m.empty() ? "unsupported" : m;
        return false;
      }
      throw Error(s, op.name + ": " + (m.empty() ? status_name(s) : m));
    }
    *why = "op library \"" + op.lib->name + "\" has no kernel for backend " + b.name +
           (b.host_memory() ? "" : " (and \"cpu\" kernels need a host-memory backend)");
    return false;
  }
  ctn_op_signature sig{};
  sig.struct_size = sizeof sig;
  sig.n_inputs = n;
  sig.op = op.name.c_str();
  sig.inputs = in;
  sig.output = &out;
  sig.attrs = &attrs;
  sig.const_inputs = const_inputs;
  return b.get_kernel(sig, k, why);
}

void call_kernel(const ctn_kernel &k, const ctn_kernel_args &args, const char *op, const Backend &b) {
  ctn_status s;
  Backend::Serial serial(b);
  try {
    s = k.fn(k.state, &args);
  } catch (const std::exception &e) {
    take_plugin_error();
    fail(CTN_ERR_PLUGIN, "%s on backend %s: the kernel threw: %s", op, b.name.c_str(), e.what());
  } catch (...) {
    take_plugin_error();
    fail(CTN_ERR_PLUGIN, "%s on backend %s: the kernel threw an unknown exception", op, b.name.c_str());
  }
  if (s != CTN_OK) {
    std::string m = take_plugin_error();
    fail(s, "%s on backend %s: %s", op, b.name.c_str(), m.empty() ? status_name(s) : m.c_str());
  }
}

}  // namespace ctn
