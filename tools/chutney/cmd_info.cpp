// `chutney version` and `chutney plugins`: what is installed and why a plugin was (not) loaded.
#include "cli.h"

#include <sys/stat.h>

#include <cstdio>
#include <string>

namespace ctn_cli {
namespace {

int run_version(const ParsedArgs &) {
  uint32_t abi = ctn_abi_version();
  std::printf("chutney %s\n", ctn_version_string());
  std::printf("library ABI %u.%u (this tool was built against ABI %d.%d)\n",
              CTN_ABI_VERSION_MAJOR(abi), CTN_ABI_VERSION_MINOR(abi), CTN_ABI_MAJOR,
              CTN_ABI_MINOR);
  if (CTN_ABI_VERSION_MAJOR(abi) != CTN_ABI_MAJOR) {
    std::fprintf(stderr, "chutney: warning: library ABI major %u differs from the tool's %d\n",
                 CTN_ABI_VERSION_MAJOR(abi), CTN_ABI_MAJOR);
    return kExitFailure;
  }
  return kExitOk;
}

int run_plugins(const ParsedArgs &args) {
  std::string path = args.str("path", "");
  ctn_context_options opts{};
  opts.struct_size = sizeof opts;
  if (!path.empty()) {
    // CHUTNEY_PLUGIN_PATH-style lists are accepted; each entry must exist so that a typo is
    // reported here rather than silently finding nothing.
    size_t start = 0;
    while (start <= path.size()) {
      size_t end = path.find(':', start);
      if (end == std::string::npos) end = path.size();
      std::string entry = path.substr(start, end - start);
      struct stat st {};
      if (!entry.empty() && stat(entry.c_str(), &st) != 0) {
        throw UsageError("--path: '" + entry + "' does not exist");
      }
      start = end + 1;
    }
    opts.plugin_path = path.c_str();
  }
  ctn_context *raw = nullptr;
  check(ctn_context_create(&opts, &raw), "ctn_context_create");
  ContextPtr ctx(raw);

  uint32_t count = 0;
  check(ctn_context_backend_count(ctx.get(), &count), "ctn_context_backend_count");
  std::printf("%u backend%s:\n", count, count == 1 ? "" : "s");
  uint32_t usable = 0;
  for (uint32_t i = 0; i < count; ++i) {
    ctn_backend_info info{};
    info.struct_size = sizeof info;
    check(ctn_context_backend_info(ctx.get(), i, &info), "ctn_context_backend_info");
    usable += info.available ? 1 : 0;
    std::printf("  %-8s %-11s ABI %u.%u  %s\n", info.name ? info.name : "?",
                info.available ? "available" : "unavailable", info.abi_major, info.abi_minor,
                info.description ? info.description : "");
    if (info.path != nullptr) std::printf("  %-8s %-11s %s\n", "", "", info.path);
  }
  if (usable == 0) {
    std::printf("no usable backend: run `chutney plugins --explain` to see why\n");
  }
  if (args.flag("explain")) {
    // Device backends with an "auto" placement policy (opencl, vulkan) load it from their cache
    // or measure it now, so that the report says what was measured and decided. Backends
    // without a policy reject the key, which is fine.
    for (uint32_t i = 0; i < count; ++i) {
      ctn_backend_info info{};
      info.struct_size = sizeof info;
      if (ctn_context_backend_info(ctx.get(), i, &info) == CTN_OK && info.available && info.name)
        (void)ctn_context_set_option(ctx.get(), info.name, "policy", "prepare");
    }
    const char *report = nullptr;
    check(ctn_context_plugin_report(ctx.get(), &report), "ctn_context_plugin_report");
    std::printf("\nplugin search report:\n");
    if (report == nullptr || report[0] == '\0') {
      std::printf("  (no plugin candidates were found)\n");
    } else {
      // Indent each line of the report.
      std::string text = report;
      size_t start = 0;
      while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        std::printf("  %s\n", text.substr(start, end - start).c_str());
        start = end + 1;
      }
    }
  }
  return kExitOk;
}

}  // namespace

const CommandSpec &version_command() {
  static const CommandSpec spec{
      "version", "print the library and ABI versions", nullptr, {}, run_version};
  return spec;
}

const CommandSpec &plugins_command() {
  static const CommandSpec spec{
      "plugins",
      "list the backends found and whether they are usable",
      "Plugins are searched in --path, CHUTNEY_PLUGIN_PATH, the install directory and the\n"
      "build tree (files named ctn-*.so).\n",
      {
          {"explain", nullptr,
           "print every plugin candidate and why it was loaded or rejected, and what the GPU "
           "backends' placement policy measured and decided"},
          {"path", "DIR", "search DIR first (':'-separated directories or files)"},
      },
      run_plugins};
  return spec;
}

}  // namespace ctn_cli
