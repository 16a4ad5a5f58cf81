// Plugin discovery and ABI negotiation. Every candidate gets a verdict line in the report
// (`chutney plugins --explain`); a rejected or unavailable plugin never stops the others.
#include <chutney/backend.h>
#include <chutney/collective.h>
#include <chutney/oplib.h>

#include "graph/graph.h"
#include "plugin/context.h"
#include "util/files.h"
#include "util/status.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace ctn {

namespace {

std::vector<std::string> split(const char *s, char sep) {
  std::vector<std::string> out;
  if (!s) return out;
  std::string cur;
  for (const char *p = s;; ++p) {
    if (*p == sep || *p == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (!*p) break;
    } else {
      cur += *p;
    }
  }
  return out;
}

bool is_dir(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Plugin files in a directory: ctn-*.so, sorted for a stable order.
std::vector<std::string> scan_dir(const std::string &dir) {
  std::vector<std::string> out;
  DIR *d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent *e = readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 7 && n.compare(0, 4, "ctn-") == 0 && n.compare(n.size() - 3, 3, ".so") == 0)
      out.push_back(dir + "/" + n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string real(const std::string &p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : p;
}

const char *required_backend_slot_missing(const ctn_backend_desc &d) {
  if (!d.init) return "init";
  if (!d.shutdown) return "shutdown";
  if (!d.describe) return "describe";
  if (!d.buffer_alloc) return "buffer_alloc";
  if (!d.buffer_free) return "buffer_free";
  if (!d.upload) return "upload";
  if (!d.download) return "download";
  if (!d.get_kernel) return "get_kernel";
  return nullptr;
}

// The directory this libchutney was loaded from (resolved), or "".
std::string library_dir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void *>(&library_dir), &info) || !info.dli_fname) return "";
  std::string lib = info.dli_fname;
  size_t slash = lib.rfind('/');
  return real(slash == std::string::npos ? std::string(".") : lib.substr(0, slash));
}

// <directory of libchutney>/chutney/plugins: an installed tree that was moved, or a board package
// unpacked anywhere, finds its plugins there without configuration. "" when it does not exist.
std::string plugins_beside_library() {
  std::string dir = library_dir();
  if (dir.empty() || !is_dir(dir + "/chutney/plugins")) return "";
  return dir + "/chutney/plugins";
}

// Only the build tree's own libchutney searches the build tree: an installed or packaged copy
// must not pick up plugins from a build folder that happens to exist on the machine.
bool running_from_build_tree() { return library_dir() == real(std::string(CTN_BUILD_ROOT) + "/core"); }

}  // namespace

void Context::add_report(const std::string &path, const char *verdict, const std::string &why) {
  report_lines.push_back(format("%-11s %s: %s", verdict, path.c_str(), why.c_str()));
  report.clear();
  for (const auto &l : report_lines) report += l + "\n";
}

const std::string &Context::full_report() {
  full_report_text = report;
  for (const auto &b : backends) {
    if (!b->available || !b->desc.get_proc_address) continue;
    auto explain = reinterpret_cast<const char *(*)(void *)>(b->desc.get_proc_address(b->state, "ctn_placement_explain"));
    const char *text = explain ? explain(b->state) : nullptr;
    if (!text || !*text) continue;
    // "placement   <backend>: <first line>", further lines indented under it.
    std::string line, prefix = format("%-11s %s: ", "placement", b->name.c_str());
    for (const char *p = text;; ++p) {
      if (*p == '\n' || *p == '\0') {
        full_report_text += prefix + line + "\n";
        prefix = std::string(12, ' ');
        line.clear();
        if (!*p) break;
      } else {
        line += *p;
      }
    }
  }
  return full_report_text;
}

void Context::autoload(const ctn_context_options &opts) {
  std::vector<std::string> dirs_or_files;
  for (auto &p : split(opts.plugin_path, ':')) dirs_or_files.push_back(p);
  // NO_AUTOLOAD means what chutney.h says: only options.plugin_path and explicit loads. An
  // environment variable of the user's must not add a second copy of a backend the application
  // loads itself.
  if (!(opts.flags & CTN_CONTEXT_NO_AUTOLOAD)) {
    for (auto &p : split(std::getenv("CHUTNEY_PLUGIN_PATH"), ':')) dirs_or_files.push_back(p);
    dirs_or_files.push_back(CTN_PLUGIN_INSTALL_DIR);
    if (std::string beside = plugins_beside_library(); !beside.empty() && real(beside) != real(CTN_PLUGIN_INSTALL_DIR))
      dirs_or_files.push_back(beside);
    for (const char *sub : {"/backends", "/plugins"}) {  // plugins/collectives: ctn-mpi.so, ctn-nccl.so
      if (!running_from_build_tree()) break;
      std::string root = std::string(CTN_BUILD_ROOT) + sub;
      DIR *d = opendir(root.c_str());
      if (!d) continue;
      std::vector<std::string> subs;
      while (dirent *e = readdir(d))
        if (e->d_name[0] != '.' && is_dir(root + "/" + e->d_name)) subs.push_back(root + "/" + e->d_name);
      closedir(d);
      std::sort(subs.begin(), subs.end());
      for (auto &s : subs) dirs_or_files.push_back(s);
    }
  }
  std::vector<std::string> seen;
  for (const auto &entry : dirs_or_files) {
    struct stat st;
    if (stat(entry.c_str(), &st) != 0) {
      add_report(entry, "skipped", "no such file or directory");
      continue;
    }
    std::vector<std::string> files = is_dir(entry) ? scan_dir(entry) : std::vector<std::string>{entry};
    for (const auto &f : files) {
      std::string r = real(f);
      if (std::find(seen.begin(), seen.end(), r) != seen.end()) continue;
      seen.push_back(r);
      try {
        load_plugin(f, false);
      } catch (const Error &) {
        // Recorded in the report; autoload keeps going.
      }
    }
  }
}

void Context::load_plugin(const std::string &path, bool explicit_request) {
  (void)explicit_request;
  std::lock_guard<std::recursive_mutex> lifecycle(plugin_lifecycle_mutex());
  auto reject = [&](ctn_status code, const std::string &why) {
    add_report(path, code == CTN_ERR_UNAVAILABLE ? "unavailable" : "rejected", why);
    throw Error(code, "plugin " + path + ": " + why);
  };
  // dlopen's open() of a FIFO blocks until a writer appears, and of a device or directory fails
  // obscurely: only a regular file (after links) is handed to it.
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    reject(CTN_ERR_PLUGIN, errno == ENOENT ? std::string("file not found") : std::string("cannot open: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) reject(CTN_ERR_PLUGIN, std::string("not a regular file (") + file_kind(st.st_mode) + ")");
  void *dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char *e = dlerror();
    reject(CTN_ERR_PLUGIN, std::string("dlopen failed: ") + (e ? e : "unknown error"));
  }
  auto query = reinterpret_cast<ctn_plugin_query_fn>(dlsym(dl, CTN_PLUGIN_ENTRY_SYMBOL));
  if (!query) {
    dlclose(dl);
    reject(CTN_ERR_PLUGIN, "no entry symbol " CTN_PLUGIN_ENTRY_SYMBOL " (not a chutney plugin)");
  }
  admit_plugin(query, path, dl, false);
}

void Context::reject_plugin(const std::string &path, void *dl, ctn_status code, const std::string &why) {
  if (dl) dlclose(dl);
  add_report(path, code == CTN_ERR_UNAVAILABLE ? "unavailable" : "rejected", why);
  throw Error(code, "plugin " + path + ": " + why);
}

// The checks every kind shares (the query, the header, the ABI major, the name), then the
// kind's own admission: admit_backend (below), admit_oplib (plugin/oplib_loader.cpp) or
// load_collective (below).
void Context::admit_plugin(ctn_plugin_query_fn query, const std::string &path, void *dl, bool oplib_only) {
  std::lock_guard<std::recursive_mutex> lifecycle(plugin_lifecycle_mutex());
  auto close_and_reject = [&](ctn_status code, const std::string &why) { reject_plugin(path, dl, code, why); };
  const ctn_plugin_header *h = nullptr;
  try {
    h = query(CTN_ABI_VERSION, host_api());
  } catch (const std::exception &e) {
    close_and_reject(CTN_ERR_PLUGIN, std::string(CTN_PLUGIN_ENTRY_SYMBOL " threw: ") + e.what());
  } catch (...) {
    close_and_reject(CTN_ERR_PLUGIN, CTN_PLUGIN_ENTRY_SYMBOL " threw an unknown exception");
  }
  if (!h) close_and_reject(CTN_ERR_PLUGIN, CTN_PLUGIN_ENTRY_SYMBOL " returned NULL (the plugin declined this host)");
  if (h->struct_size < sizeof(ctn_plugin_header))
    close_and_reject(CTN_ERR_PLUGIN, format("descriptor is truncated: struct_size %u is smaller than the %zu-byte header",
                                            h->struct_size, sizeof(ctn_plugin_header)));
  std::string name = h->name ? h->name : "";
  if (h->abi_major != CTN_ABI_MAJOR)
    close_and_reject(CTN_ERR_PLUGIN, format("ABI major mismatch: plugin \"%s\" was built for ABI %u.%u, this host implements "
                                            "ABI %u.%u", name.c_str(), h->abi_major, h->abi_minor, CTN_ABI_MAJOR, CTN_ABI_MINOR));
  if (name.empty()) close_and_reject(CTN_ERR_PLUGIN, "the descriptor has no name");

  if (h->kind == CTN_PLUGIN_BACKEND && oplib_only)
    close_and_reject(CTN_ERR_PLUGIN, format("\"%s\" is a backend: ctn_context_add_oplib takes op libraries only "
                                            "(load backends from a file with ctn_context_load_plugin)", name.c_str()));
  switch (h->kind) {
    case CTN_PLUGIN_BACKEND: return admit_backend(h, path, dl);
    case CTN_PLUGIN_OPLIB: return admit_oplib(h, path, dl);
    case CTN_PLUGIN_COLLECTIVE: return load_collective(path, dl, h);
    default: break;
  }
  close_and_reject(CTN_ERR_PLUGIN, format("unknown plugin kind %u (expected %d backend, %d op library or %d collective)",
                                          h->kind, CTN_PLUGIN_BACKEND, CTN_PLUGIN_OPLIB, CTN_PLUGIN_COLLECTIVE));
}

// A backend: its descriptor copied into a host-sized one, the required slots, init; one whose
// init fails stays listed (unloaded) with its reason.
void Context::admit_backend(const ctn_plugin_header *h, const std::string &path, void *dl) {
  const std::string name = h->name;
  const std::string vers = format("ABI %u.%u", h->abi_major, h->abi_minor);
  auto close_and_reject = [&](ctn_status code, const std::string &why) { reject_plugin(path, dl, code, why); };
  if (find_backend(name)) {
    Backend *o = find_backend(name);
    close_and_reject(CTN_ERR_PLUGIN, "a backend named \"" + name + "\" is already loaded from " + o->path);
  }
  auto b = std::make_unique<Backend>();
  std::memcpy(&b->desc, h, std::min<size_t>(h->struct_size, sizeof(ctn_backend_desc)));
  b->desc.header.struct_size = static_cast<uint32_t>(sizeof(ctn_backend_desc));
  if (const char *slot = required_backend_slot_missing(b->desc))
    close_and_reject(CTN_ERR_PLUGIN, format("backend \"%s\" (%s, descriptor of %u bytes) lacks the required slot %s",
                                            name.c_str(), vers.c_str(), h->struct_size, slot));
  b->name = name;
  b->path = path;
  b->dl = dl;
  b->abi_major = h->abi_major;
  b->abi_minor = h->abi_minor;
  ctn_backend_config cfg{sizeof(ctn_backend_config), num_threads};
  ctn_status s = CTN_ERR_INTERNAL;
  std::string why;
  try {
    take_plugin_error();
    s = b->desc.init(host_api(), &cfg, &b->state);
    if (s != CTN_OK) why = take_plugin_error();
  } catch (const std::exception &e) {
    why = std::string("init threw: ") + e.what();
  } catch (...) {
    why = "init threw an unknown exception";
  }
  if (s != CTN_OK) {
    if (why.empty()) why = status_name(s);
    b->description = why;
    // Keep unavailable backends listed (with their reason) but unloaded.
    b->dl = nullptr;
    backends.push_back(std::move(b));
    close_and_reject(s == CTN_ERR_UNAVAILABLE ? CTN_ERR_UNAVAILABLE : CTN_ERR_PLUGIN,
                     format("backend \"%s\" init failed: %s", name.c_str(), why.c_str()));
  }
  b->available = true;
  const char *d = nullptr;
  try {
    d = b->desc.describe(b->state);
  } catch (...) {
  }
  b->description = d ? d : name;
  add_report(path, "loaded", format("backend \"%s\" (%s): %s", name.c_str(), vers.c_str(), b->description.c_str()));
  backends.push_back(std::move(b));
  if (preference.empty()) preference.push_back(backends.back().get());
}

// A collective plugin (collective.h): probed now, started by ctn_collective_open. Unavailable
// ones stay listed with their reason, like backends.
void Context::load_collective(const std::string &path, void *dl, const ctn_plugin_header *h) {
  std::string name = h->name;
  auto reject = [&](ctn_status code, const std::string &why) { reject_plugin(path, dl, code, why); };
  if (find_collective(name)) reject(CTN_ERR_PLUGIN, "a collective named \"" + name + "\" is already loaded from " + find_collective(name)->path);
  auto c = std::make_unique<CollectivePlugin>();
  std::memcpy(&c->desc, h, std::min<size_t>(h->struct_size, sizeof(ctn_collective_desc)));
  const ctn_collective_desc &d = c->desc;
  const char *missing = !d.probe ? "probe" : !d.init ? "init" : !d.shutdown ? "shutdown" : !d.describe ? "describe"
                        : !d.rank ? "rank" : !d.world_size ? "world_size" : !d.allreduce ? "allreduce"
                        : !d.broadcast ? "broadcast" : !d.barrier ? "barrier" : !d.abort ? "abort"
                        : !d.last_error ? "last_error" : nullptr;
  if (missing) reject(CTN_ERR_PLUGIN, format("collective \"%s\" (descriptor of %u bytes) lacks the required slot %s", name.c_str(), h->struct_size, missing));
  if (!(d.flags & CTN_COLLECTIVE_HOST_MEMORY))
    reject(CTN_ERR_PLUGIN, format("collective \"%s\" does not take host memory (the only kind this host hands over)", name.c_str()));
  // since 1.7: the overlapped allreduce is a pair (collective.h); a 1.6 descriptor has neither.
  if (!d.allreduce_start != !d.allreduce_wait)
    reject(CTN_ERR_PLUGIN, format("collective \"%s\" has %s without %s (since 1.7 they come as a pair)", name.c_str(),
                                  d.allreduce_start ? "allreduce_start" : "allreduce_wait",
                                  d.allreduce_start ? "allreduce_wait" : "allreduce_start"));
  c->name = name;
  c->path = path;
  ctn_status s = CTN_ERR_INTERNAL;
  std::string why;
  try {
    take_plugin_error();
    s = d.probe(host_api());
    if (s != CTN_OK) why = take_plugin_error();
  } catch (...) {
    why = "probe threw";
  }
  if (s != CTN_OK) {
    if (why.empty()) why = status_name(s);
    c->description = why;
    collectives.push_back(std::move(c));
    reject(s == CTN_ERR_UNAVAILABLE ? CTN_ERR_UNAVAILABLE : CTN_ERR_PLUGIN, format("collective \"%s\": %s", name.c_str(), why.c_str()));
  }
  c->dl = dl;
  c->available = true;
  c->description = "ready (ranks join at ctn_collective_open)";
  add_report(path, "loaded", format("collective \"%s\" (ABI %u.%u): %s", name.c_str(), h->abi_major, h->abi_minor,
                                    c->description.c_str()));
  collectives.push_back(std::move(c));
}

CollectivePlugin *Context::find_collective(std::string_view name) const {
  for (auto &c : collectives)
    if (c->name == name) return c.get();
  return nullptr;
}

}  // namespace ctn
