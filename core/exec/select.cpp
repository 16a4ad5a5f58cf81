#include "exec/select.h"

#include "util/status.h"

#include <cstring>

namespace ctn {

ctn_tensor_desc make_desc(const ValueInfo &v) {
  ctn_tensor_desc d{};
  d.dtype = v.dtype;
  d.ndim = v.shape.ndim;
  for (uint32_t k = 0; k < v.shape.ndim; ++k) d.shape[k] = v.shape[k];
  contiguous_strides(v.shape, d.strides);
  return d;
}

bool select_kernel(Backend &b, const OpDef &op, uint32_t n, const ctn_tensor_desc *in, const ctn_tensor_desc &out,
                   const ctn_attrs &attrs, ctn_kernel *k, std::string *why) {
  *k = ctn_kernel{};
  if (op.ext) {
    // An exact backend match first; else a "cpu" kernel on any host-memory backend (backend.h).
    const ctn_oplib_kernel *pick = nullptr;
    for (uint32_t i = 0; i < op.ext->n_kernels && !pick; ++i) {
      const ctn_oplib_kernel &ok = op.ext->kernels[i];
      if (ok.backend && ok.get_kernel && b.name == ok.backend) pick = &ok;
    }
    for (uint32_t i = 0; i < op.ext->n_kernels && !pick && b.host_memory(); ++i) {
      const ctn_oplib_kernel &ok = op.ext->kernels[i];
      if (ok.backend && ok.get_kernel && std::strcmp(ok.backend, "cpu") == 0) pick = &ok;
    }
    if (pick) {
      const ctn_oplib_kernel &ok = *pick;
      Backend::Serial serial(b);  // the library's kernel for b is part of b's calls (backend.h)
      take_plugin_error();
      ctn_status s;
      try {
        s = ok.get_kernel(host_api(), n, in, &out, &attrs, k);
      } catch (...) {
        fail(CTN_ERR_PLUGIN, "op library %s: get_kernel(%s) threw", op.lib->name.c_str(), op.name.c_str());
      }
      if (s == CTN_OK) return true;
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
