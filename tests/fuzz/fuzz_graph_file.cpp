// libFuzzer target for the whole-graph file reader (core/io/graph_file.cpp) through the public
// API: ctn_graph_load on the input (a context that loads no plugins: the reader and op inference run,
// nothing is compiled), then every listed entry read back. A hostile file is refused with a
// status; nothing may crash, read out of bounds or report CTN_ERR_INTERNAL.
// Corpus: tests/fuzz/corpus/graph_file (small graph files and damaged variants).
#include <chutney/checkpoint.h>

#include "memfile.h"

#include <cstdio>
#include <cstdlib>

namespace {
ctn_context *context() {
  static ctn_context *ctx = [] {
    ctn_context_options o{};
    o.struct_size = sizeof o;
    o.flags = CTN_CONTEXT_NO_AUTOLOAD;
    ctn_context *c = nullptr;
    if (ctn_context_create(&o, &c) != CTN_OK) {
      std::fprintf(stderr, "fuzz_graph_file: no context: %s\n", ctn_last_error());
      std::abort();
    }
    return c;
  }();
  return ctx;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MemFile f(data, size);
  if (!f.ok()) return 0;
  ctn_graph *g = nullptr;
  ctn_saved_graph *s = nullptr;
  ctn_status st = ctn_graph_load(context(), f.path(), &g, &s);
  if (st == CTN_ERR_INTERNAL) {
    std::fprintf(stderr, "fuzz_graph_file: CTN_ERR_INTERNAL: %s\n", ctn_last_error());
    std::abort();
  }
  if (st != CTN_OK) return 0;
  for (int32_t kind = CTN_SAVED_INPUTS; kind <= CTN_SAVED_VARIABLES; ++kind) {
    uint32_t n = 0;
    if (ctn_saved_graph_count(s, kind, &n) != CTN_OK) continue;
    for (uint32_t i = 0; i < n; ++i) {
      const char *name = nullptr;
      ctn_node node = CTN_NODE_NONE;
      ctn_dtype dt{};
      uint32_t nd = 0;
      if (ctn_saved_graph_entry(s, kind, i, &name, &node) == CTN_OK) (void)ctn_node_info(g, node, &dt, &nd, nullptr);
    }
  }
  ctn_saved_graph_release(s);
  ctn_graph_release(g);
  return 0;
}
