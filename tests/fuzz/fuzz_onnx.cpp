// libFuzzer target for the ONNX protobuf reader (core/onnx/proto.cpp) and the TensorProto
// conversion (core/onnx/tensor_proto.cpp): any input either parses or is refused with a
// ctn::Error; nothing may crash, hang, read out of bounds or allocate beyond the input's size.
// The same bytes are also read as a bare TensorProto (the backend-test .pb files).
// Build: clang++ -fsanitize=fuzzer,address (see docs/ONNX.md); corpus: tests/fuzz/corpus/onnx.
#include "onnx/importer.h"
#include "onnx/proto.h"
#include "util/status.h"

#include <cstddef>
#include <cstdint>

namespace {

// External data points nowhere: the fuzzer must not read files.
const std::string kNoDir = "/nonexistent-chutney-fuzz-dir";

void convert(const ctn::onnx::TensorP &t) {
  try {
    (void)ctn::onnx::tensor_from_proto(t, kNoDir, "fuzz");
  } catch (const ctn::Error &) {
  }
}

void walk(const ctn::onnx::GraphP &g) {
  for (const auto &t : g.initializers) convert(t);
  for (const auto &n : g.nodes)
    for (const auto &a : n.attrs) {
      if (a.t) convert(*a.t);
      for (const auto &t : a.tensors) convert(t);
      if (a.g) walk(*a.g);
      for (const auto &sub : a.graphs) walk(sub);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    ctn::onnx::ModelP m = ctn::onnx::parse_model(data, size, "fuzz");
    walk(m.graph);
  } catch (const ctn::Error &) {
  }
  try {
    convert(ctn::onnx::parse_tensor(data, size, "fuzz"));
  } catch (const ctn::Error &) {
  }
  return 0;
}
