// The ONNX import C API (abi/chutney/onnx.h) over onnx/importer.
#include <chutney/onnx.h>

#include "capi/handles.h"
#include "io/io_common.h"
#include "onnx/exporter.h"
#include "util/files.h"
#include "onnx/importer.h"
#include "plugin/context.h"
#include "util/wall.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>

struct ctn_onnx_model {
  ctn::onnx::ModelInfo info;
};

using namespace ctn;

namespace {

const std::vector<onnx::ModelInfo::Entry> &entries(const ctn_onnx_model *m, int32_t kind) {
  switch (kind) {
    case CTN_ONNX_INPUTS: return m->info.inputs;
    case CTN_ONNX_OUTPUTS: return m->info.outputs;
    case CTN_ONNX_INITIALIZERS: return m->info.initializers;
    default: fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_model: unknown kind %d", kind);
  }
}

}  // namespace

extern "C" {

CTN_API ctn_status ctn_onnx_load(ctn_context *ctx, const char *path, const ctn_onnx_options *options,
                                 ctn_graph **out_graph, ctn_onnx_model **out_model) {
  return wall([&] {
    if (!ctx || !path || !out_graph || !out_model)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_load: %s is NULL",
           !ctx ? "ctx" : !path ? "path" : !out_graph ? "out_graph" : "out_model");
    ctn_onnx_options o{};
    o.struct_size = sizeof o;
    if (options) {
      if (options->struct_size < offsetof(ctn_onnx_options, external_data_dir) + sizeof(const char *))
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_load: options.struct_size %u is too small", options->struct_size);
      std::memcpy(&o, options, std::min<size_t>(options->struct_size, sizeof o));
    }
    if (o.flags & ~(CTN_ONNX_INITIALIZERS_AS_CONSTANTS | CTN_ONNX_INSPECT_ONLY | CTN_ONNX_SYMBOLIC_DIMS_AS_ONE))
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_load: unknown flags 0x%x", o.flags);
    if (o.n_inputs && !o.inputs) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_load: options.inputs is NULL but n_inputs is %u", o.n_inputs);
    onnx::Options opts;
    opts.initializers_as_constants = o.flags & CTN_ONNX_INITIALIZERS_AS_CONSTANTS;
    opts.inspect_only = o.flags & CTN_ONNX_INSPECT_ONLY;
    opts.symbolic_dims_as_one = o.flags & CTN_ONNX_SYMBOLIC_DIMS_AS_ONE;
    opts.context = ctx;
    if (o.external_data_dir) opts.external_data_dir = o.external_data_dir;
    for (uint32_t i = 0; i < o.n_inputs; ++i) {
      const ctn_onnx_input_spec &s = o.inputs[i];
      if (!s.name || !s.value) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_load: options.inputs[%u] has a NULL name or value", i);
      if (s.as_constant > 1 || s.reserved) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_load: options.inputs[%u]: as_constant must be 0 or 1 and reserved 0", i);
      for (uint32_t j = 0; j < i; ++j)
        if (!std::strcmp(o.inputs[j].name, s.name)) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_load: input '%s' is given twice", s.name);
      opts.inputs.push_back({s.name, s.value, s.as_constant != 0});
    }
    auto model = std::make_unique<ctn_onnx_model>();
    std::unique_ptr<ctn_graph> g;
    if (!opts.inspect_only) g.reset(new ctn_graph(ctx, false));
    model->info = onnx::import_model(g.get(), path, opts);
    *out_graph = g.release();
    *out_model = model.release();
  });
}

CTN_API void ctn_onnx_model_release(ctn_onnx_model *model) { delete model; }

CTN_API ctn_status ctn_onnx_model_count(const ctn_onnx_model *model, int32_t kind, uint32_t *out_count) {
  return wall([&] {
    if (!model || !out_count) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_model_count: NULL argument");
    *out_count = static_cast<uint32_t>(kind == CTN_ONNX_OP_TYPES ? model->info.op_types.size() : entries(model, kind).size());
  });
}

CTN_API ctn_status ctn_onnx_model_entry(const ctn_onnx_model *model, int32_t kind, uint32_t index, const char **out_name,
                                        ctn_node *out_node) {
  return wall([&] {
    if (!model) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_model_entry: model is NULL");
    const std::string *name;
    ctn_node node = CTN_NODE_NONE;
    if (kind == CTN_ONNX_OP_TYPES) {
      if (index >= model->info.op_types.size()) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_model_entry: index %u is out of range", index);
      name = &model->info.op_types[index].name;
    } else {
      const auto &v = entries(model, kind);
      if (index >= v.size()) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_model_entry: index %u is out of range (%zu)", index, v.size());
      name = &v[index].name;
      node = v[index].node;
    }
    if (out_name) *out_name = name->c_str();
    if (out_node) *out_node = node;
  });
}

CTN_API ctn_status ctn_onnx_model_op_type(const ctn_onnx_model *model, uint32_t index, uint32_t *out_uses,
                                          int32_t *out_supported, const char **out_lowered_to) {
  return wall([&] {
    if (!model) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_model_op_type: model is NULL");
    if (index >= model->info.op_types.size()) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_model_op_type: index %u is out of range", index);
    const auto &o = model->info.op_types[index];
    if (out_uses) *out_uses = o.uses;
    if (out_supported) *out_supported = o.supported;
    if (out_lowered_to) *out_lowered_to = o.lowered.c_str();
  });
}

CTN_API ctn_status ctn_onnx_model_version(const ctn_onnx_model *model, int64_t *out_opset, int64_t *out_ir_version) {
  return wall([&] {
    if (!model) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_model_version: model is NULL");
    if (out_opset) *out_opset = model->info.opset;
    if (out_ir_version) *out_ir_version = model->info.ir_version;
  });
}

CTN_API ctn_status ctn_onnx_tensor_load(const char *path, ctn_tensor **out, const char **out_name) {
  return wall([&] {
    if (!path || !out) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_tensor_load: %s is NULL", path ? "out" : "path");
    const std::string bytes = read_regular_file(path, "ctn_onnx_tensor_load:");
    onnx::TensorP tp = onnx::parse_tensor(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(), path);
    std::string dir = path;
    dir = dir.find('/') == std::string::npos ? "." : dir.substr(0, dir.rfind('/'));
    Tensor t = onnx::tensor_from_proto(tp, dir, path);
    thread_local std::string name;
    name = std::string(tp.name);
    *out = new ctn_tensor(std::move(t));
    if (out_name) *out_name = name.c_str();
  });
}

CTN_API ctn_status ctn_onnx_export(ctn_graph *g, ctn_plan *plan, uint32_t n_outputs, const ctn_node *outputs,
                                   const char *const *output_names, const char *path) {
  return wall([&] {
    if (!g || !path || (n_outputs && !outputs))
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_export: %s is NULL", !g ? "g" : !path ? "path" : "outputs");
    if (n_outputs == 0) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_onnx_export: a model needs at least one output");
    if (g->eager()) fail(CTN_ERR_STATE, "ctn_onnx_export: the graph is eager; build the model in a lazy graph to export it");
    std::vector<std::string> names = ctn::output_names(*g, n_outputs, outputs, output_names, "ctn_onnx_export");
    const std::string bytes = onnx::export_model(*g, plan, std::vector<ctn_node>(outputs, outputs + n_outputs), names);
    io::atomic_write("ctn_onnx_export", path,
                     [&](int fd, const std::string &tmp) { io::write_all(fd, bytes.data(), bytes.size(), tmp); });
  });
}

}  // extern "C"
