// Whole-graph files (abi/chutney/checkpoint.h, docs/MODELS.md): a safetensors checkpoint whose
// metadata holds the graph as JSON and whose tensors are the graph's constants and variables.
// The reader trusts nothing: every id, count, name and tensor is checked before use and every
// node is rebuilt through the graph's own add_* (so op inference re-checks shapes and dtypes);
// a disagreement is CTN_ERR_CORRUPT naming the file and the node.
#include <chutney/checkpoint.h>

#include "exec/plan.h"
#include "graph/graph.h"
#include "io/io_common.h"
#include "io/json.h"
#include "plugin/context.h"
#include "tensor/handle.h"

#include <cinttypes>
#include <cstdlib>
#include <memory>
#include <set>
#include <unordered_set>

using namespace ctn;
using ctn::io::Json;

struct ctn_saved_graph {
  struct Entry {
    std::string name;
    ctn_node node;
  };
  std::vector<Entry> lists[3];  // CTN_SAVED_INPUTS, _OUTPUTS, _VARIABLES
  std::vector<std::pair<std::string, std::string>> meta;  // user metadata
};

namespace {

constexpr const char *kFormatKey = "chutney.format";
constexpr const char *kVersionKey = "chutney.format_version";
constexpr const char *kGraphKey = "chutney.graph";
constexpr int kFormatVersion = 1;

const char *kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::Input: return "input";
    case NodeKind::Constant: return "const";
    case NodeKind::Variable: return "var";
    case NodeKind::Op: return "op";
    case NodeKind::Assign: return "assign";
  }
  return "?";
}

// ------------------------------------------------------------------------------------------
// Writing
// ------------------------------------------------------------------------------------------

void put_key(std::string &o, const char *k) {
  if (o.back() != '{') o += ',';
  io::json_quote(o, k);
  o += ':';
}

void put_ints(std::string &o, const int64_t *v, uint32_t n) {
  o += '[';
  for (uint32_t i = 0; i < n; ++i) o += (i ? "," : "") + std::to_string(v[i]);
  o += ']';
}

void put_info(std::string &o, const ValueInfo &info) {
  put_key(o, "dtype");
  io::json_quote(o, dtype_name(info.dtype));
  put_key(o, "shape");
  put_ints(o, info.shape.d, info.shape.ndim);
}

// Floats as the 16 hex digits of the double's bits: exact, NaN payloads and infinities included.
void put_floats(std::string &o, const double *v, uint32_t n) {
  o += '[';
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v[i], 8);
    o += format("%s\"%016" PRIx64 "\"", i ? "," : "", bits);
  }
  o += ']';
}

// The tensor key of each constant and variable node: a variable's own name when unique.
std::vector<std::string> tensor_keys(const Graph &g) {
  std::unordered_map<std::string, int> uses;
  for (const Node &n : g.nodes())
    if (n.kind == NodeKind::Variable) ++uses[n.name];
  std::vector<std::string> keys(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const Node &n = g.nodes()[i];
    if (n.kind == NodeKind::Constant) keys[i] = "const." + std::to_string(i);
    if (n.kind != NodeKind::Variable) continue;
    bool own = uses[n.name] == 1 && !n.name.empty() && n.name != "__metadata__" && n.name.rfind("const.", 0) != 0 &&
               n.name.rfind("var.", 0) != 0;
    keys[i] = own ? n.name : "var." + std::to_string(i);
  }
  return keys;
}

std::string node_json(const Node &n, const std::string &key) {
  std::string o = "{";
  put_key(o, "kind");
  io::json_quote(o, kind_name(n.kind));
  if (n.kind == NodeKind::Input || n.kind == NodeKind::Variable) {
    put_key(o, "name");
    io::json_quote(o, n.name);
  }
  if (!key.empty()) {
    put_key(o, "tensor");
    io::json_quote(o, key);
  }
  if (n.kind == NodeKind::Op) {
    put_key(o, "op");
    io::json_quote(o, n.op->name);
    put_key(o, "ai");
    put_ints(o, n.attrs.i, n.attrs.ni);
    put_key(o, "af");
    put_floats(o, n.attrs.f, n.attrs.nf);
  }
  if (n.kind == NodeKind::Op || n.kind == NodeKind::Assign) {
    std::vector<int64_t> in(n.inputs.begin(), n.inputs.end());
    put_key(o, "in");
    put_ints(o, in.data(), static_cast<uint32_t>(in.size()));
  }
  if (n.grad_uses_from) {
    put_key(o, "grad_uses_from");
    o += std::to_string(n.grad_uses_from);
  }
  put_info(o, n.info);
  return o + "}";
}

std::string graph_json(const Graph &g, const std::vector<std::string> &keys, uint32_t n_out, const ctn_node *outs,
                       const std::vector<std::string> &out_names) {
  std::string o = "{\"nodes\":[";
  for (size_t i = 0; i < g.size(); ++i) o += (i ? "," : "") + node_json(g.nodes()[i], keys[i]);
  o += "],\"outputs\":[";
  for (uint32_t i = 0; i < n_out; ++i) {
    o += i ? ",{" : "{";
    put_key(o, "name");
    io::json_quote(o, out_names[i]);
    o += format(",\"node\":%u}", outs[i]);
  }
  return o + "]}";
}

// The metadata object: the caller's keys (checked) and the format's own.
std::string metadata(const char *user, const std::string &graph) {
  Json m;
  m.kind = Json::Object;
  if (user) {
    std::string err;
    if (!io::json_parse(user, &m, &err) || m.kind != Json::Object)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_graph_save: metadata_json is not a JSON object%s%s", err.empty() ? "" : ": ",
           err.c_str());
    for (const auto &kv : m.members)
      if (kv.first.rfind("chutney.", 0) == 0)
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_graph_save: metadata key \"%s\" is reserved (\"chutney.\" keys are the format's)",
             kv.first.c_str());
  }
  auto add = [&](const char *k, const std::string &v) {
    Json s;
    s.kind = Json::String;
    s.text = v;
    m.members.emplace_back(k, std::move(s));
  };
  add(kFormatKey, "graph");
  add(kVersionKey, std::to_string(kFormatVersion));
  add(kGraphKey, graph);
  std::string out;
  io::json_write(out, m);
  return out;
}

// The value saved for node i: the plan's current value of a variable it uses, else the graph's.
Tensor saved_value(const Graph &g, const ctn_plan *plan, ctn_node i) {
  const Node &n = g.node(i);
  if (n.kind != NodeKind::Variable || !plan || !plan->has_variable(i)) return *n.value;
  Tensor t = plan->read_variable(i);
  if (t.dtype != n.info.dtype || t.shape != n.info.shape)
    fail(CTN_ERR_INVALID_ARGUMENT,
         "ctn_graph_save: the plan's variable %u is %s%s but the graph's node %u is %s%s: was the plan compiled from "
         "this graph?", i, dtype_name(t.dtype), shape_str(t.shape).c_str(), i, dtype_name(n.info.dtype),
         shape_str(n.info.shape).c_str());
  return t;
}

void save_graph(ctn_graph *g, ctn_plan *plan, uint32_t n_out, const ctn_node *outs, const char *const *names,
                const char *user_meta, const char *path) {
  if (g->eager()) fail(CTN_ERR_STATE, "ctn_graph_save: the graph is eager; build the model in a lazy graph to save it");
  const std::vector<std::string> out_names = output_names(*g, n_out, outs, names, "ctn_graph_save");
  const std::vector<std::string> keys = tensor_keys(*g);
  std::vector<std::unique_ptr<ctn_tensor>> held;
  std::vector<const ctn_tensor *> tensors;
  std::vector<const char *> tnames;
  for (ctn_node i = 0; i < g->size(); ++i) {
    if (keys[i].empty()) continue;
    held.push_back(std::make_unique<ctn_tensor>(saved_value(*g, plan, i)));
    tensors.push_back(held.back().get());
    tnames.push_back(keys[i].c_str());
  }
  const std::string meta = metadata(user_meta, graph_json(*g, keys, n_out, outs, out_names));
  io::check(ctn_checkpoint_save(path, static_cast<uint32_t>(tensors.size()), tnames.data(), tensors.data(), meta.c_str()),
            "ctn_graph_save");
}

// ------------------------------------------------------------------------------------------
// Reading
// ------------------------------------------------------------------------------------------

struct Reader {
  Graph &g;
  const ctn_checkpoint *ck;
  std::string path;
  size_t at = 0;  // the node being read, for messages

  [[noreturn]] void bad(const std::string &why) const {
    throw Error(CTN_ERR_CORRUPT, path + ": node " + std::to_string(at) + ": " + why);
  }
  const Json &field(const Json &n, const char *key, Json::Kind kind) const {
    const Json *v = n.find(key);
    if (!v || v->kind != kind) bad(std::string("\"") + key + "\" is missing or of the wrong JSON type");
    return *v;
  }
  int64_t integer(const Json &v) const {
    if (v.kind != Json::Number) bad("\"" + v.text + "\" is not an integer");
    char *end = nullptr;
    errno = 0;
    long long x = std::strtoll(v.text.c_str(), &end, 10);
    if (errno || end == v.text.c_str() || *end) bad("\"" + v.text + "\" is not a 64-bit integer");
    return x;
  }
  std::vector<int64_t> ints(const Json &n, const char *key, size_t most) const {
    const Json &a = field(n, key, Json::Array);
    if (a.items.size() > most) bad(format("\"%s\" has %zu entries (at most %zu)", key, a.items.size(), most));
    std::vector<int64_t> v;
    for (const Json &x : a.items) v.push_back(integer(x));
    return v;
  }
  ValueInfo info(const Json &n) const {
    const std::string &dt = field(n, "dtype", Json::String).text;
    ValueInfo r;
    r.dtype = -1;
    for (int32_t d = 0; d < 64; ++d)
      if (dtype_valid(d) && dt == dtype_name(d)) r.dtype = d;
    if (r.dtype < 0) bad("unknown dtype \"" + dt + "\"");
    std::vector<int64_t> s = ints(n, "shape", CTN_MAX_DIMS);
    try {
      r.shape = Shape::from(static_cast<uint32_t>(s.size()), s.data());
    } catch (const Error &e) {
      bad(e.message());
    }
    return r;
  }
  Tensor tensor(const Json &n, const ValueInfo &want) const {
    const std::string &key = field(n, "tensor", Json::String).text;
    ctn_tensor *t = nullptr;
    ctn_status s = ctn_checkpoint_get(ck, key.c_str(), &t);
    if (s != CTN_OK) bad("tensor \"" + key + "\": " + ctn_last_error());
    std::unique_ptr<ctn_tensor> own(t);
    if (t->dtype != want.dtype || t->shape != want.shape)
      bad(format("tensor \"%s\" is %s%s, the node says %s%s", key.c_str(), dtype_name(t->dtype), shape_str(t->shape).c_str(),
                 dtype_name(want.dtype), shape_str(want.shape).c_str()));
    return *t;
  }
  std::vector<ctn_node> inputs(const Json &n) const {
    std::vector<ctn_node> in;
    for (int64_t x : ints(n, "in", 1u << 20)) {
      if (x < 0 || static_cast<uint64_t>(x) >= at) bad(format("input %" PRId64 " does not precede the node", x));
      in.push_back(static_cast<ctn_node>(x));
    }
    return in;
  }
  ctn_attrs attrs(const Json &n) const {
    ctn_attrs a{};
    std::vector<int64_t> iv = ints(n, "ai", CTN_ATTR_INTS);
    for (int64_t x : iv) a.i[a.ni++] = x;
    const Json &fv = field(n, "af", Json::Array);
    if (fv.items.size() > CTN_ATTR_FLOATS) bad(format("\"af\" has %zu entries (at most %d)", fv.items.size(), CTN_ATTR_FLOATS));
    for (const Json &x : fv.items) {
      char *end = nullptr;
      if (x.kind != Json::String || x.text.size() != 16) bad("a float attribute is not 16 hex digits");
      uint64_t bits = std::strtoull(x.text.c_str(), &end, 16);
      if (*end) bad("a float attribute is not 16 hex digits");
      std::memcpy(&a.f[a.nf++], &bits, 8);
    }
    return a;
  }
  ctn_node add(const Json &n, const ValueInfo &want);
  void node(const Json &n);
};

ctn_node Reader::add(const Json &n, const ValueInfo &want) {
  const std::string &kind = field(n, "kind", Json::String).text;
  if (kind == "input") return g.add_input(field(n, "name", Json::String).text.c_str(), want.dtype, want.shape);
  if (kind == "const") return g.add_constant(tensor(n, want));
  if (kind == "var") return g.add_variable(field(n, "name", Json::String).text.c_str(), tensor(n, want));
  if (kind == "assign") {
    std::vector<ctn_node> in = inputs(n);
    if (in.size() != 2) bad("an assignment has " + std::to_string(in.size()) + " inputs, not 2");
    return g.add_assign(in[0], in[1]);
  }
  if (kind != "op") bad("unknown kind \"" + kind + "\"");
  const std::string &name = field(n, "op", Json::String).text;
  const OpDef *def = g.context()->find_op(name.c_str());
  if (!def)
    fail(CTN_ERR_UNSUPPORTED,
         "%s: node %zu uses op \"%s\", which this context does not know: load the op library that defines it "
         "(ctn_context_load_plugin / ctn_context_add_oplib) before ctn_graph_load",
         path.c_str(), at, name.c_str());
  if (def->expand) bad("op \"" + name + "\" is composite: a saved graph holds only its parts");
  std::vector<ctn_node> in = inputs(n);
  ctn_attrs a = attrs(n);
  return g.add_op(*def, static_cast<uint32_t>(in.size()), in.data(), a);
}

void Reader::node(const Json &n) {
  if (n.kind != Json::Object) bad("not a JSON object");
  const ValueInfo want = info(n);
  ctn_node id = CTN_NODE_NONE;
  try {
    id = add(n, want);
  } catch (const Error &e) {
    if (e.code() == CTN_ERR_CORRUPT || e.code() == CTN_ERR_UNSUPPORTED || e.code() == CTN_ERR_OUT_OF_MEMORY) throw;
    bad(e.message());
  }
  if (id != at || g.size() != at + 1) bad("rebuilding it did not give exactly one node with its id");
  const ValueInfo &got = g.info(id);
  if (got.dtype != want.dtype || got.shape != want.shape)
    bad(format("inferred %s%s, the file says %s%s", dtype_name(got.dtype), shape_str(got.shape).c_str(),
               dtype_name(want.dtype), shape_str(want.shape).c_str()));
  if (const Json *gu = n.find("grad_uses_from")) {
    int64_t v = integer(*gu);
    if (v < 0 || v > UINT32_MAX) bad("grad_uses_from out of range");
    g.node(id).grad_uses_from = static_cast<uint32_t>(v);
  }
}

// Checks the magic and version and returns the parsed graph JSON.
Json graph_document(const ctn_checkpoint *ck, const std::string &path) {
  const char *fmt = nullptr, *ver = nullptr, *text = nullptr;
  io::check(ctn_checkpoint_metadata_get(ck, kFormatKey, &fmt), "");
  if (!fmt || std::string(fmt) != "graph")
    throw Error(CTN_ERR_CORRUPT, path + ": not a chutney graph file (no \"chutney.format\": \"graph\" metadata; a "
                                        "checkpoint of variables only?)");
  io::check(ctn_checkpoint_metadata_get(ck, kVersionKey, &ver), "");
  if (!ver || std::string(ver).empty() || std::string(ver).find_first_not_of("0123456789") != std::string::npos ||
      std::string(ver).size() > 9)
    throw Error(CTN_ERR_CORRUPT, path + ": \"chutney.format_version\" is missing or not a number");
  if (std::atoi(ver) > kFormatVersion)
    throw Error(CTN_ERR_UNSUPPORTED, path + ": graph format version " + ver + " is newer than this chutney reads (" +
                                         std::to_string(kFormatVersion) + ")");
  io::check(ctn_checkpoint_metadata_get(ck, kGraphKey, &text), "");
  Json doc;
  std::string err;
  if (!text) throw Error(CTN_ERR_CORRUPT, path + ": no \"chutney.graph\" metadata");
  if (!io::json_parse(text, &doc, &err)) throw Error(CTN_ERR_CORRUPT, path + ": invalid graph JSON: " + err);
  if (doc.kind != Json::Object) throw Error(CTN_ERR_CORRUPT, path + ": the graph JSON is not an object");
  return doc;
}

void read_outputs(const Json &doc, const Graph &g, const std::string &path, ctn_saved_graph &s) {
  const Json *outs = doc.find("outputs");
  if (!outs || outs->kind != Json::Array) throw Error(CTN_ERR_CORRUPT, path + ": the graph has no \"outputs\" array");
  for (size_t i = 0; i < outs->items.size(); ++i) {
    const Json &o = outs->items[i];
    const Json *nm = o.kind == Json::Object ? o.find("name") : nullptr;
    const Json *nd = o.kind == Json::Object ? o.find("node") : nullptr;
    uint64_t id = 0;
    if (!nm || nm->kind != Json::String || !nd || !nd->as_index(&id) || id >= g.size())
      throw Error(CTN_ERR_CORRUPT, format("%s: output %zu lacks a name or names a node that does not exist", path.c_str(), i));
    s.lists[CTN_SAVED_OUTPUTS].push_back({nm->text, static_cast<ctn_node>(id)});
  }
}

void load_graph(ctn_context *ctx, const char *path, ctn_graph **out_graph, ctn_saved_graph **out_saved) {
  ctn_checkpoint *raw = nullptr;
  io::check(ctn_checkpoint_load(path, &raw), "");
  std::unique_ptr<ctn_checkpoint, void (*)(ctn_checkpoint *)> ck(raw, ctn_checkpoint_release);
  const Json doc = graph_document(ck.get(), path);
  const Json *nodes = doc.find("nodes");
  if (!nodes || nodes->kind != Json::Array) throw Error(CTN_ERR_CORRUPT, std::string(path) + ": the graph has no \"nodes\" array");
  auto g = std::make_unique<ctn_graph>(ctx, false);
  auto s = std::make_unique<ctn_saved_graph>();
  Reader r{*g, ck.get(), path};
  for (; r.at < nodes->items.size(); ++r.at) {
    r.node(nodes->items[r.at]);
    const Node &n = g->node(static_cast<ctn_node>(r.at));
    if (n.kind == NodeKind::Input) s->lists[CTN_SAVED_INPUTS].push_back({n.name, static_cast<ctn_node>(r.at)});
    if (n.kind == NodeKind::Variable) s->lists[CTN_SAVED_VARIABLES].push_back({n.name, static_cast<ctn_node>(r.at)});
  }
  read_outputs(doc, *g, path, *s);
  const char *meta = nullptr;
  io::check(ctn_checkpoint_metadata(ck.get(), &meta), "");
  Json m;
  std::string err;
  if (io::json_parse(meta, &m, &err))
    for (const auto &kv : m.members)
      if (kv.first.rfind("chutney.", 0) != 0) s->meta.emplace_back(kv.first, kv.second.text);
  *out_graph = g.release();
  *out_saved = s.release();
}

const std::vector<ctn_saved_graph::Entry> &list(const ctn_saved_graph *s, int32_t kind, const char *fn) {
  if (kind < 0 || kind > 2) fail(CTN_ERR_INVALID_ARGUMENT, "%s: unknown kind %d", fn, kind);
  return s->lists[kind];
}

}  // namespace

extern "C" {

CTN_API ctn_status ctn_graph_save(ctn_graph *g, ctn_plan *plan, uint32_t n_outputs, const ctn_node *outputs,
                                  const char *const *output_names, const char *metadata_json, const char *path) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(g);
    CTN_IO_NEED(path);
    if (n_outputs) CTN_IO_NEED(outputs);
    save_graph(g, plan, n_outputs, outputs, output_names, metadata_json, path);
  });
}

CTN_API ctn_status ctn_graph_load(ctn_context *ctx, const char *path, ctn_graph **out_graph, ctn_saved_graph **out_saved) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(ctx);
    CTN_IO_NEED(path);
    CTN_IO_NEED(out_graph);
    CTN_IO_NEED(out_saved);
    load_graph(ctx, path, out_graph, out_saved);
  });
}

CTN_API void ctn_saved_graph_release(ctn_saved_graph *saved) { delete saved; }

CTN_API ctn_status ctn_saved_graph_count(const ctn_saved_graph *saved, int32_t kind, uint32_t *out_count) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(saved);
    CTN_IO_NEED(out_count);
    *out_count = static_cast<uint32_t>(list(saved, kind, ctn_io_fn).size());
  });
}

CTN_API ctn_status ctn_saved_graph_entry(const ctn_saved_graph *saved, int32_t kind, uint32_t index, const char **out_name,
                                         ctn_node *out_node) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(saved);
    const auto &l = list(saved, kind, ctn_io_fn);
    if (index >= l.size()) fail(CTN_ERR_INVALID_ARGUMENT, "%s: index %u is out of range (%zu entries)", ctn_io_fn, index, l.size());
    if (out_name) *out_name = l[index].name.c_str();
    if (out_node) *out_node = l[index].node;
  });
}

CTN_API ctn_status ctn_saved_graph_metadata_get(const ctn_saved_graph *saved, const char *key, const char **out_value) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(saved);
    CTN_IO_NEED(key);
    CTN_IO_NEED(out_value);
    *out_value = nullptr;
    for (const auto &kv : saved->meta)
      if (kv.first == key) *out_value = kv.second.c_str();
  });
}

}  // extern "C"
