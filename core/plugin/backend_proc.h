// since 1.2: host->backend_proc (plugin.h) and the scope that makes it work.
#pragma once

#include "plugin/context.h"

namespace ctn {

// Marks this thread as running a kernel maker for `b` (select_kernel), so that the maker's
// host->backend_proc calls reach b's extras. Nests.
class KernelMakerScope {
 public:
  explicit KernelMakerScope(Backend &b);
  ~KernelMakerScope();
  KernelMakerScope(const KernelMakerScope &) = delete;
  KernelMakerScope &operator=(const KernelMakerScope &) = delete;

 private:
  Backend *prev_;
};

ctn_status host_backend_proc(const char *backend, const char *name, void **out_proc, void **out_state);

}  // namespace ctn
