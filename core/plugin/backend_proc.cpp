// since 1.2: host->backend_proc, backend extras for op libraries' kernel makers (plugin.h).
//
// The host table is one static table shared by every context, so the slot cannot know which
// context calls it from its arguments. select_kernel marks the thread while a kernel maker runs
// (KernelMakerScope): backend_proc then reaches the extras of the backend the kernel is made for.
#include "plugin/backend_proc.h"

#include "util/status.h"

#include <cstring>
#include <string>

namespace ctn {

namespace {
thread_local Backend *tl_maker_backend = nullptr;
}

KernelMakerScope::KernelMakerScope(Backend &b) : prev_(tl_maker_backend) { tl_maker_backend = &b; }
KernelMakerScope::~KernelMakerScope() { tl_maker_backend = prev_; }

ctn_status host_backend_proc(const char *backend, const char *name, void **out_proc, void **out_state) {
  try {
    Backend *b = tl_maker_backend;
    if (!b) {
      set_plugin_error("backend_proc: called outside a kernel maker (only an op library's get_kernel/make may call it; "
                       "a program uses ctn_context_backend_proc)");
      return CTN_ERR_INVALID_ARGUMENT;
    }
    if (!name || !out_proc) {
      set_plugin_error("backend_proc: NULL name or out_proc");
      return CTN_ERR_INVALID_ARGUMENT;
    }
    if (backend && b->name != backend) {
      set_plugin_error("backend_proc: the kernel is being made for backend \"" + b->name + "\", not \"" +
                       std::string(backend) + "\"");
      return CTN_ERR_INVALID_ARGUMENT;
    }
    void *p = b->desc.get_proc_address ? b->desc.get_proc_address(b->state, name) : nullptr;
    if (!p) {
      set_plugin_error("backend_proc: backend \"" + b->name + "\" has no extra named \"" + name + "\"" +
                       (b->desc.get_proc_address ? "" : " (it offers no extras)"));
      return CTN_ERR_UNSUPPORTED;
    }
    *out_proc = p;
    if (out_state) *out_state = b->state;
    return CTN_OK;
  } catch (...) {
    set_plugin_error("backend_proc: the backend's get_proc_address threw");
    return CTN_ERR_PLUGIN;
  }
}

}  // namespace ctn
