// The "auto" placement policy of the device backends (OpenCL, Vulkan): the GPU of a small board
// is often slower than its CPU, and chutney must never make a model slower by using it. Per op
// class (GEMM, elementwise, reductions) the backend's device is timed against a plain host loop
// at three sizes, once per device + driver, and the smallest size from which the device wins at
// every larger measured size is kept; get_kernel declines smaller ops with the reason, so they
// fall to the next backend (the CPU). The table is cached in a small text file per device.
// Compiled into each backend plugin (plugins share no code at run time).
#ifndef CTN_BACKEND_PLACEMENT_POLICY_H
#define CTN_BACKEND_PLACEMENT_POLICY_H

#include <chutney/backend.h>

#include <cstdint>
#include <functional>
#include <string>

namespace ctn_backend_util {

enum OpClass { kClassGemm, kClassElementwise, kClassReduce, kClassCount };
const char *op_class_name(int c);
// The class of a node and its size measure (GEMM: m*n*k; reductions: input elements; everything
// else, the neural-network ops included: output elements).
int op_class_of(const ctn_op_signature *sig, int64_t *size);

// Times the op of `sig` (f32 operands, data NULL: the timer allocates device buffers) on the
// device: milliseconds per call, the median of three rounds of `reps` calls after a warm-up; < 0
// when the device cannot run it.
using DeviceTimer = std::function<double(const ctn_op_signature &sig, int reps)>;

struct PolicyEntry {
  int64_t device_from = INT64_MAX;  // smallest size the device takes; INT64_MAX: none
  std::string note;                 // "4096: device 0.12 ms, cpu 0.003 ms; ..."
};

class PlacementPolicy {
 public:
  // "always" (false): the device takes every op it implements, the table is not consulted.
  bool auto_mode = true;

  bool ready() const { return ready_; }
  // Reads the table from `path` (unless `remeasure` or it is missing, stale or corrupt) or
  // measures it with `timer` and writes it there (temporary file + rename). Never fails: a device
  // that cannot be timed gets no op classes, the safe default.
  void prepare(const std::string &path, const DeviceTimer &timer, bool remeasure);
  // Under "auto", the reason the device declines this node ("placement policy: cpu faster for gemm
  // (size 4096; ...)"), or "" when it takes it. Call prepare() first.
  std::string decline_reason(const ctn_op_signature *sig) const;
  // {"origin": ..., "classes": [{"class", "device_from", "measurements"}]} (benchmarks).
  std::string report_json() const;
  // What was measured and decided, for `chutney plugins --explain`: one summary line, then one
  // line per class.
  std::string explain(const char *placement_env) const;
  // explain() in a per-thread buffer, for a backend's "ctn_placement_explain" (valid until the
  // next call on this thread; "" if it could not be built). Never throws.
  const char *explain_cstr(const char *placement_env) const noexcept;

 private:
  bool load(const std::string &path);
  void save(const std::string &path) const;
  void measure(const DeviceTimer &timer);

  bool ready_ = false;
  PolicyEntry cls_[kClassCount];
  std::string origin_;  // "measured" or "cache"
  std::string path_;
  double measure_ms_ = 0;
};

}  // namespace ctn_backend_util

#endif
