// ONNX export: see exporter.cpp and ctn_onnx_export (abi/chutney/onnx.h).
#pragma once

#include "exec/plan.h"
#include "graph/graph.h"

#include <string>
#include <vector>

namespace ctn::onnx {

constexpr int64_t kExportOpset = 13;      // a default-domain opset the importer and onnxruntime read
constexpr int64_t kExportIrVersion = 7;   // the IR version of opset 13

// The serialized ModelProto computing `outs` (named `names`, unique) of lazy graph `g`; variables
// take their value in `plan` (may be NULL) when it uses them, else their initial value. Throws
// CTN_ERR_UNSUPPORTED naming the first node whose op has no exporter.
std::string export_model(const Graph &g, const Plan *plan, const std::vector<ctn_node> &outs,
                         const std::vector<std::string> &names);

}  // namespace ctn::onnx
