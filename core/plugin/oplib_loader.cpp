// Admission of an op library (oplib.h), the CTN_PLUGIN_OPLIB half of Context::admit_plugin
// (plugin/loader.cpp): its ops read and checked (read_op_defs), its init, then each op bound to
// the host (an infer wrapper) and named (docs/ABI.md, "Op namespaces").
#include <chutney/oplib.h>

#include "plugin/context.h"
#include "util/status.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

namespace ctn {

namespace {

// Op namespaces (docs/ABI.md): "domain::name" declares the op's domain, a plain name takes the
// library's name as its domain. The name is never refused for being taken elsewhere.
void split_op_name(ExtOpDef &def, const std::string &lib) {
  const char *full = def.decl.name;
  const char *sep = nullptr;
  for (const char *p = std::strstr(full, "::"); p; p = std::strstr(p + 1, "::")) sep = p;
  def.domain = sep ? std::string(full, sep) : lib;
  def.name = sep ? std::string(sep + 2) : std::string(full);
  if (def.domain.empty() || def.name.empty())
    fail(CTN_ERR_PLUGIN, "op library \"%s\": op name \"%s\" has an empty domain or name", lib.c_str(), full);
  if (sep && def.domain == "ctn")
    fail(CTN_ERR_PLUGIN, "op library \"%s\": op \"%s\": the domain ctn is reserved for the built-in ops", lib.c_str(),
         full);
  def.qualified = def.domain + "::" + def.name;
}

// The op's kernel makers: kernels_ex (1.2, strided by struct_size, which must reach `make`)
// first, then the 1.0 kernels.
void read_kernels(ExtOpDef &def, const std::string &lib) {
  const ctn_op_def &od = def.decl;
  if (od.n_kernels && !od.kernels)
    fail(CTN_ERR_PLUGIN, "op library \"%s\": op \"%s\" declares kernels but kernels is NULL", lib.c_str(), od.name);
  if (od.n_kernels_ex && !od.kernels_ex)
    fail(CTN_ERR_PLUGIN, "op library \"%s\": op \"%s\" declares kernels_ex but kernels_ex is NULL", lib.c_str(),
         od.name);
  const uint32_t kstride = od.n_kernels_ex ? od.kernels_ex[0].struct_size : 0;
  constexpr size_t kOpKernel12 = offsetof(ctn_op_kernel, run) + sizeof(ctn_op_kernel_run_fn);
  if (od.n_kernels_ex && kstride < offsetof(ctn_op_kernel, make) + sizeof(ctn_op_kernel_make_fn))
    fail(CTN_ERR_PLUGIN, "op library \"%s\": op \"%s\": kernels_ex[0].struct_size %u is too small", lib.c_str(), od.name,
         kstride);
  for (uint32_t k = 0; k < od.n_kernels_ex; ++k) {
    ctn_op_kernel ke{};
    const char *p = reinterpret_cast<const char *>(od.kernels_ex) + size_t(k) * kstride;
    std::memcpy(&ke, p, std::min<size_t>(kstride, kOpKernel12));
    if (ke.struct_size != kstride)
      fail(CTN_ERR_PLUGIN, "op library \"%s\": op \"%s\": kernels_ex[%u].struct_size %u differs from kernels_ex[0]'s %u",
           lib.c_str(), od.name, k, ke.struct_size, kstride);
    if (!ke.backend || !ke.make)
      fail(CTN_ERR_PLUGIN, "op library \"%s\": op \"%s\": kernels_ex[%u] has no backend or no make", lib.c_str(),
           od.name, k);
    def.kernels.push_back(ExtKernel{ke.backend, nullptr, ke.make, ke.run});
  }
  for (uint32_t k = 0; k < od.n_kernels; ++k)
    if (od.kernels[k].backend && od.kernels[k].get_kernel)
      def.kernels.push_back(ExtKernel{od.kernels[k].backend, od.kernels[k].get_kernel, nullptr, nullptr});
}

// One element of the library's ops array copied into a zero-filled host-sized ctn_op_def and checked.
// `earlier`: the ops read before it (a name may not repeat).
std::unique_ptr<ExtOpDef> read_op_def(const ctn_op_def *el, uint32_t stride, bool v12, const std::string &lib,
                                      uint32_t i, const std::vector<std::unique_ptr<ExtOpDef>> &earlier) {
  if (el->struct_size != stride)
    fail(CTN_ERR_PLUGIN, "op library \"%s\": ops[%u].struct_size %u differs from ops[0]'s %u (the array is strided by "
         "it)", lib.c_str(), i, el->struct_size, stride);
  auto def = std::make_unique<ExtOpDef>();
  std::memcpy(&def->decl, el, std::min<size_t>(stride, sizeof(ctn_op_def)));
  def->decl.struct_size = static_cast<uint32_t>(sizeof(ctn_op_def));
  if (!v12) {  // a 1.0/1.1 library has no 1.2 slots, whatever follows its struct
    def->decl.user_data = nullptr;
    def->decl.infer_ex = nullptr;
    def->decl.grad_ex = nullptr;
    def->decl.n_kernels_ex = 0;
    def->decl.kernels_ex = nullptr;
    def->decl.jvp_ex = nullptr;
  }
  def->declared = el;
  const ctn_op_def &od = def->decl;
  if (!od.name || !(od.infer || od.infer_ex))
    fail(CTN_ERR_PLUGIN, "op library \"%s\": op %u has no name or no infer function", lib.c_str(), i);
  split_op_name(*def, lib);
  for (const auto &d : earlier)
    if (d->qualified == def->qualified)
      fail(CTN_ERR_PLUGIN, "op library \"%s\" declares op \"%s\" twice", lib.c_str(), def->qualified.c_str());
  read_kernels(*def, lib);
  return def;
}

// Every op of the library; throws Error(CTN_ERR_PLUGIN) naming the first bad one.
std::vector<std::unique_ptr<ExtOpDef>> read_op_defs(const ctn_oplib_desc &desc, uint32_t abi_minor,
                                                    const std::string &lib) {
  const bool v12 = abi_minor >= 2;  // the 1.2 slots of ctn_op_def are read from 1.2 libraries only
  const uint32_t n_ops = desc.n_ops;
  if (n_ops && !desc.ops) fail(CTN_ERR_PLUGIN, "op library declares ops but ops is NULL");
  // ctn_op_def is an array element strided by struct_size (oplib.h): element i sits at
  // ops + i * ops[0].struct_size; every element carries the same size, at least the 1.0 one.
  constexpr size_t kOpDef10 = offsetof(ctn_op_def, kernels) + sizeof(const ctn_oplib_kernel *);
  const uint32_t stride = n_ops ? desc.ops[0].struct_size : 0;
  if (n_ops && stride < kOpDef10)
    fail(CTN_ERR_PLUGIN, "op library \"%s\": ops[0].struct_size %u is smaller than the %zu-byte 1.0 ctn_op_def",
         lib.c_str(), stride, kOpDef10);
  std::vector<std::unique_ptr<ExtOpDef>> defs;
  for (uint32_t i = 0; i < n_ops; ++i) {
    const auto *el = reinterpret_cast<const ctn_op_def *>(reinterpret_cast<const char *>(desc.ops) + size_t(i) * stride);
    defs.push_back(read_op_def(el, stride, v12, lib, i, defs));
  }
  return defs;
}

void init_oplib(const ctn_oplib_desc &desc, const std::string &lib) {
  if (!desc.init) return;
  ctn_status s = CTN_ERR_INTERNAL;
  std::string why;
  try {
    take_plugin_error();
    s = desc.init(host_api());
    if (s != CTN_OK) why = take_plugin_error();
  } catch (...) {
    why = "init threw";
  }
  if (s != CTN_OK) fail(CTN_ERR_PLUGIN, "op library \"%s\" init failed: %s", lib.c_str(), why.c_str());
}

// The host's view of a library op's shape inference: its infer (or infer_ex) on descriptors.
ValueInfo infer_ext(const OpDef &op, const ValueInfo *in, uint32_t n, ctn_attrs &attrs) {
  const auto &x = static_cast<const ExtOpDef &>(op);
  std::vector<ctn_tensor_desc> d(n);
  for (uint32_t k = 0; k < n; ++k) {
    d[k] = {};
    d[k].dtype = in[k].dtype;
    d[k].ndim = in[k].shape.ndim;
    for (uint32_t j = 0; j < in[k].shape.ndim; ++j) d[k].shape[j] = in[k].shape[j];
  }
  ctn_tensor_desc out{};
  take_plugin_error();
  ctn_status s = x.decl.infer_ex ? x.decl.infer_ex(host_api(), x.declared, x.decl.user_data, n, d.data(), &attrs, &out)
                                 : x.decl.infer(host_api(), n, d.data(), &attrs, &out);
  CTN_CHECK_PLUGIN(s, op.name);
  if (!dtype_valid(out.dtype) || out.ndim > CTN_MAX_DIMS)
    fail(CTN_ERR_PLUGIN, "%s: the infer function of op library \"%s\" returned an invalid dtype or ndim",
         op.name.c_str(), op.lib->name.c_str());
  return ValueInfo{out.dtype, Shape::from(out.ndim, out.shape)};
}

}  // namespace

// The names of one library op in `ops` (docs/ABI.md, "Op namespaces"); `notes` gets how they
// resolve where they collide.
void Context::name_lib_op(ExtOpDef &def, std::vector<std::string> &notes) {
  // The qualified name is the op's own unless another library's op claimed it first.
  if (def.domain == "ctn") {  // a library named "ctn" (1.0/1.1): ctn:: stays the built-ins'
    notes.push_back(format("%s: a library named ctn has no qualified names (ctn:: names the built-in ops)",
                           def.name.c_str()));
  } else if (const OpDef *q = find_op(def.qualified.c_str())) {
    notes.push_back(format("%s already names op library \"%s\"'s op (loaded first); this library's op of that name has "
                           "no qualified name", def.qualified.c_str(), q->lib ? q->lib->name.c_str() : "?"));
  } else {
    ops[def.qualified] = &def;
  }
  // The unqualified name: a library op shadows the built-in of that name (a program written
  // before the built-in existed keeps its meaning); among libraries the first loaded keeps it.
  const OpDef *prev = find_op(def.name.c_str());
  if (!prev) {
    ops[def.name] = &def;
  } else if (!prev->lib) {
    ops[def.name] = &def;
    notes.push_back(format("%s resolves to %s (shadows the built-in op; ctn::%s names the built-in)", def.name.c_str(),
                           def.qualified.c_str(), def.name.c_str()));
  } else {
    notes.push_back(format("%s resolves to %s of op library \"%s\" (loaded first); this library's op is %s",
                           def.name.c_str(), static_cast<const ExtOpDef *>(prev)->qualified.c_str(),
                           prev->lib->name.c_str(), def.qualified.c_str()));
  }
}

void Context::admit_oplib(const ctn_plugin_header *h, const std::string &path, void *dl) {
  const std::string name = h->name;
  // The library's name is the default domain of its ops: two libraries of one name would be
  // one namespace (the same library loaded twice, most likely).
  for (const auto &l : oplibs)
    if (l->name == name)
      reject_plugin(path, dl, CTN_ERR_PLUGIN, "an op library named \"" + name + "\" is already loaded from " + l->path);
  auto lib = std::make_unique<OpLib>();
  std::memcpy(&lib->desc, h, std::min<size_t>(h->struct_size, sizeof(ctn_oplib_desc)));
  lib->name = name;
  lib->path = path;
  lib->abi_minor = h->abi_minor;
  std::vector<std::unique_ptr<ExtOpDef>> defs;
  try {
    defs = read_op_defs(lib->desc, h->abi_minor, name);
    init_oplib(lib->desc, name);
  } catch (const Error &e) {
    reject_plugin(path, dl, e.code(), e.message());
  }
  lib->dl = dl;
  OpLib *lp = lib.get();
  std::string names;
  std::vector<std::string> notes;  // how this library's names resolve where they collide
  for (auto &def : defs) {
    def->n_inputs = static_cast<int>(def->decl.n_inputs);
    def->ext = &def->decl;
    def->lib = lp;
    def->infer = infer_ext;
    // The library's own rules through the host API (plugin/oplib_rules.cpp); without jvp_ex,
    // ext_tangent refuses naming the library.
    def->grad = (def->decl.grad || def->decl.grad_ex) ? &ext_grad : nullptr;
    def->tangent = &ext_tangent;
    names += (names.empty() ? "" : ", ") + (def->domain == name ? def->name : def->qualified);
    name_lib_op(*def, notes);
    lp->ops.push_back(std::move(def));
  }
  add_report(path, "loaded", format("op library \"%s\" (ABI %u.%u): %s", name.c_str(), h->abi_major, h->abi_minor,
                                    names.c_str()));
  for (const std::string &n : notes) {
    add_report(path, "op name", n);
    // On the log once per process (every context that loads the library reports it).
    static std::mutex logged_mu;
    static std::set<std::string> logged;
    std::lock_guard<std::mutex> lock(logged_mu);
    if (logged.insert(path + "\n" + n).second) host_api()->log(CTN_LOG_WARN, name.c_str(), ("op name collision: " + n).c_str());
  }
  oplibs.push_back(std::move(lib));
}

}  // namespace ctn
