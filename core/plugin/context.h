// The runtime context: loaded plugins, the op registry (built-in + op libraries), backend
// preference, and the eager kernel cache.
#pragma once

#include <chutney/backend.h>
#include <chutney/chutney.h>
#include <chutney/collective.h>
#include <chutney/oplib.h>

#include "graph/graph.h"
#include "graph/op.h"
#include "tensor/tensor.h"

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ctn {

// Loading, initialising, shutting down and unloading plugins are serialised process-wide:
// contexts are created and released on any thread, and device drivers are not all safe to
// initialise concurrently (two PoCL initialisations at once crashed in libpocl). Recursive: an
// admission may run inside a load.
std::recursive_mutex &plugin_lifecycle_mutex();


// Every call into a backend goes through this struct, holding `call_mu` (Serial) unless the
// backend declares CTN_BACKEND_CONCURRENT: backend.h promises the serialisation, and several
// threads may use one context.
struct Backend {
  std::string name, path, description;
  ctn_backend_desc desc{};  // zero-filled beyond the plugin's struct_size
  uint16_t abi_major = 0, abi_minor = 0;
  void *dl = nullptr;
  void *state = nullptr;
  bool available = false;
  mutable std::mutex call_mu;

  // Holds call_mu for the scope of one call into the backend (nothing for concurrent ones).
  class Serial {
   public:
    explicit Serial(const Backend &b) : mu_(b.desc.flags & CTN_BACKEND_CONCURRENT ? nullptr : &b.call_mu) {
      if (mu_) mu_->lock();
    }
    ~Serial() {
      if (mu_) mu_->unlock();
    }
    Serial(const Serial &) = delete;
    Serial &operator=(const Serial &) = delete;

   private:
    std::mutex *mu_;
  };

  bool host_memory() const { return desc.flags & CTN_BACKEND_HOST_MEMORY; }
  void *alloc(uint64_t bytes);
  void free(void *handle);
  void upload(void *handle, uint64_t offset, const void *src, uint64_t bytes);
  void download(void *handle, uint64_t offset, void *dst, uint64_t bytes);
  void sync();
  // false (with *why) when the backend does not support the node; throws on other errors.
  bool get_kernel(const ctn_op_signature &sig, ctn_kernel *out, std::string *why);
  void release(ctn_kernel &k);  // a kernel this backend (or an op library for it) made
  void set_option(const char *key, const char *value);
};

// One kernel maker of an op library, from either list (1.0 `kernels` or 1.2 `kernels_ex`).
struct ExtKernel {
  const char *backend = nullptr;
  ctn_status (*get_kernel)(const ctn_host_api *, uint32_t, const ctn_tensor_desc *, const ctn_tensor_desc *,
                           const ctn_attrs *, ctn_kernel *) = nullptr;  // 1.0 form
  ctn_op_kernel_make_fn make = nullptr;                                 // 1.2 form
  ctn_op_kernel_run_fn run = nullptr;
};

// An op of an op library as the host read it: `decl` is the library's element copied into a
// zero-filled host-sized ctn_op_def (older libraries lack the 1.2 slots; OpDef::ext points to
// it), `declared` the library's own element (what 1.2 callbacks receive).
struct ExtOpDef : OpDef {
  std::string domain;     // the op's domain: from "domain::name" in ctn_op_def.name, else the library's name
  std::string qualified;  // domain + "::" + name, what always names this op
  ctn_op_def decl{};
  const ctn_op_def *declared = nullptr;
  std::vector<ExtKernel> kernels;  // kernels_ex first, then kernels
};

struct OpLib {
  std::string name, path;
  ctn_oplib_desc desc{};
  void *dl = nullptr;  // nullptr for libraries added in process (ctn_context_add_oplib)
  uint16_t abi_minor = CTN_ABI_MINOR;  // the minor its header says it was built against
  std::vector<std::unique_ptr<ExtOpDef>> ops;
};

// Releases a kernel's state (if any). Kernels of a backend: Backend::release.
void release_kernel(ctn_kernel &k);

// An op library's gradient and tangent rules, the OpDef::grad / OpDef::tangent of its ops
// (plugin/oplib_rules.cpp).
void ext_grad(Graph &g, ctn_node node, ctn_node dy, const bool *need, ctn_node *dx);
ctn_node ext_tangent(Graph &g, ctn_node node, const ctn_node *t);

// Hashes the eager cache's byte keys as string_views too, so a lookup needs no std::string.
struct EagerKeyHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
struct EagerEntry {
  ctn_kernel kernel{};
  Backend *backend = nullptr;
  std::string why;  // a negative entry (kernel.fn NULL): why the backend cannot run it
};

// A collective plugin (collective.h); `available` false keeps it listed with its reason.
struct CollectivePlugin {
  std::string name, path, description;
  ctn_collective_desc desc{};
  void *dl = nullptr;
  bool available = false;
  bool open = false;  // a communicator is started (one per plugin per process)
};

struct Context : OpSource {
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::unique_ptr<CollectivePlugin>> collectives;  // data-parallel (collective.h)
  std::vector<std::unique_ptr<OpLib>> oplibs;
  // Op names as ctn_op takes them (docs/ABI.md, "Op namespaces"): "ctn::<name>" for every
  // built-in op, "<domain>::<name>" for every library op, and each unqualified name bound to
  // the first loaded library op of that name, else to the built-in of that name.
  std::unordered_map<std::string, const OpDef *> ops;
  // The preferred backends. Writers (create, set_backends, load_plugin) hold mu and then call
  // publish_preference(); readers (compile, every eager op) use preferred(), which never locks.
  std::vector<Backend *> preference;
  std::vector<std::string> report_lines;
  std::string report;
  int32_t num_threads = 1;
  // Serialises plugin loading and the setters (set_backends, set_num_threads) against each other.
  std::mutex mu;

  // Eager kernel cache, keyed by a byte signature of (op, backend, dtypes, shapes, attrs). Entries
  // stay until the context goes (exec/eager.cpp's per-thread last-hit slots point at them).
  std::unordered_map<std::string, EagerEntry, EagerKeyHash, std::equal_to<>> eager_cache;
  std::mutex eager_mu;
  // Unique in the process, never reused (a per-thread eager slot names the context it is for).
  const uint64_t id;
  // Eager ops' output buffers (tensor/pool.h); closed by the destructor.
  BufferPool *const eager_buffers;
  // Released eager graphs' node arrays (graph.h); eager graphs hold it too.
  const std::shared_ptr<NodeArrays> node_arrays = std::make_shared<NodeArrays>();

  Context();
  ~Context();

  // What a program means by `name` (ctn_op, ctn_context_op_support, an op library's
  // host->graph_op): a qualified name exactly; an unqualified one by the namespacing rule. With
  // `from`, that library's own op of an unqualified name comes first.
  const OpDef *find_op(const char *name, const OpLib *from = nullptr) const override;
  // What the core's own rules mean (gradients, composites, passes, the ONNX lowering): the
  // built-in op of an unqualified name first, so a library op can never replace one of their parts.
  const OpDef *find_core_op(const char *name) const override;
  // The name ctn_context_op_info lists for `op`: the unqualified name when it resolves to `op`,
  // else the qualified one (owned by the context: a key of `ops`).
  const char *listed_name(const OpDef &op) const;
  Backend *find_backend(std::string_view name) const;
  // Parses "a,b" into backends, skipping unavailable ones; throws when none is available.
  // `source` names where the list came from in messages (CHUTNEY_BACKEND, options.backends, ...).
  std::vector<Backend *> parse_preference(const char *list, const char *source = "backend list") const;
  // The last published `preference`: valid as long as the context (an older list stays alive
  // when ctn_context_set_backends publishes a new one while another thread iterates it).
  const std::vector<Backend *> &preferred() const { return *published_.load(std::memory_order_acquire); }
  void publish_preference();

  // Plugin loading (plugin/loader.cpp).
  void autoload(const ctn_context_options &opts);
  void load_plugin(const std::string &path, bool explicit_request);
  // Admits what `query` returns: the half of load_plugin after dlopen (dl may be nullptr for an
  // in-process op library; it is dlclosed on rejection). oplib_only rejects backends.
  void admit_plugin(ctn_plugin_query_fn query, const std::string &path, void *dl, bool oplib_only);
  void add_report(const std::string &path, const char *verdict, const std::string &why);
  // The kinds admit_plugin hands a checked header to; each dlcloses `dl` when it rejects.
  void admit_backend(const ctn_plugin_header *h, const std::string &path, void *dl);
  void admit_oplib(const ctn_plugin_header *h, const std::string &path, void *dl);  // plugin/oplib_loader.cpp
  void name_lib_op(ExtOpDef &def, std::vector<std::string> &notes);                  // its names in `ops`
  // Reports `why` against `path`, dlcloses `dl` (when not null), throws Error(code).
  [[noreturn]] void reject_plugin(const std::string &path, void *dl, ctn_status code, const std::string &why);
  void load_collective(const std::string &path, void *dl, const ctn_plugin_header *h);
  CollectivePlugin *find_collective(std::string_view name) const;
  // The report plus, per available backend that exports "ctn_placement_explain", what its
  // placement policy measured and decided (`chutney plugins --explain`). Caller holds `mu`.
  const std::string &full_report();
  std::string full_report_text;

 private:
  std::atomic<const std::vector<Backend *> *> published_{nullptr};
  std::vector<std::unique_ptr<const std::vector<Backend *>>> published_all_;  // a few per context
};

const ctn_host_api *host_api();

// The op library whose callback (gradient or tangent rule) this thread is in, or nullptr: its
// host->graph_op calls resolve names as that library's program would (Context::find_op `from`);
// anyone else's (a backend expanding an op) as the core does.
struct OpLibCallScope {
  explicit OpLibCallScope(const OpLib *lib);
  ~OpLibCallScope();
  OpLibCallScope(const OpLibCallScope &) = delete;
  OpLibCallScope &operator=(const OpLibCallScope &) = delete;
  static const OpLib *current();

 private:
  const OpLib *prev_;
};

}  // namespace ctn

struct ctn_context final : ctn::Context {};
