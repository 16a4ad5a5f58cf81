// The subset of ONNX's protobuf messages the importer reads, and a reader of the protobuf wire
// format written for them: no libprotobuf (it aborts a process holding two copies of onnx.proto,
// as a Python host with `onnx` imported does, and caps messages at 2 GiB).
//
// Every length is checked against the bytes that remain; unknown fields are skipped by wire
// type; varints may be up to 10 bytes (negative int64 and int32 are sign-extended to 64 bits);
// repeated scalars are accepted packed and unpacked. Malformed input throws ctn::Error
// (CTN_ERR_CORRUPT) with the message and field where it went wrong; nothing else can happen.
// Strings and raw_data are views into the caller's buffer, which must outlive the structs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ctn::onnx {

// TensorProto.DataType values.
enum DataType : int32_t {
  DT_UNDEFINED = 0, DT_FLOAT = 1, DT_UINT8 = 2, DT_INT8 = 3, DT_UINT16 = 4, DT_INT16 = 5,
  DT_INT32 = 6, DT_INT64 = 7, DT_STRING = 8, DT_BOOL = 9, DT_FLOAT16 = 10, DT_DOUBLE = 11,
  DT_UINT32 = 12, DT_UINT64 = 13, DT_COMPLEX64 = 14, DT_COMPLEX128 = 15, DT_BFLOAT16 = 16,
  DT_FLOAT8E4M3FN = 17, DT_FLOAT8E4M3FNUZ = 18, DT_FLOAT8E5M2 = 19, DT_FLOAT8E5M2FNUZ = 20,
};
const char *data_type_name(int32_t dt);  // "FLOAT", or "type 42"

// AttributeProto.AttributeType values.
enum AttrType : int32_t {
  AT_UNDEFINED = 0, AT_FLOAT = 1, AT_INT = 2, AT_STRING = 3, AT_TENSOR = 4, AT_GRAPH = 5,
  AT_FLOATS = 6, AT_INTS = 7, AT_STRINGS = 8, AT_TENSORS = 9, AT_GRAPHS = 10,
  AT_SPARSE_TENSOR = 11, AT_SPARSE_TENSORS = 12, AT_TYPE_PROTO = 13, AT_TYPE_PROTOS = 14,
};

struct GraphP;

struct TensorP {
  std::string_view name;
  int32_t data_type = DT_UNDEFINED;
  std::vector<int64_t> dims;
  bool has_raw = false;
  std::string_view raw;
  std::vector<float> floats;
  std::vector<int32_t> int32s;
  std::vector<int64_t> int64s;
  std::vector<double> doubles;
  std::vector<uint64_t> uint64s;
  std::vector<std::string_view> strings;
  std::vector<std::pair<std::string_view, std::string_view>> external;  // key, value
  int32_t data_location = 0;                                            // 1: EXTERNAL
  bool has_segment = false;
};

struct AttributeP {
  std::string_view name;
  std::string_view ref_attr_name;
  int32_t type = AT_UNDEFINED;
  float f = 0;
  int64_t i = 0;
  std::string_view s;
  std::unique_ptr<TensorP> t;
  std::unique_ptr<GraphP> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string_view> strings;
  std::vector<TensorP> tensors;
  std::vector<GraphP> graphs;
  uint32_t fields_seen = 0;  // bit k: field k was present (type may be missing in old files)
};

struct NodeP {
  std::vector<std::string_view> inputs, outputs;
  std::string_view name, op_type, domain;
  std::vector<AttributeP> attrs;
};

struct ValueInfoP {
  std::string_view name;
  bool is_tensor = false;  // a tensor type (not a sequence, map, optional...)
  int32_t elem_type = DT_UNDEFINED;
  bool has_shape = false;
  std::vector<int64_t> dims;                 // -1 where symbolic or unknown
  std::vector<std::string_view> dim_params;  // "" where known
};

struct GraphP {
  std::string_view name;
  std::vector<NodeP> nodes;
  std::vector<TensorP> initializers;
  std::vector<ValueInfoP> inputs, outputs, value_info;
  size_t n_sparse_initializers = 0;
};

struct OpsetP {
  std::string_view domain;
  int64_t version = 0;
};

struct FunctionP {
  std::string_view name, domain;
};

struct ModelP {
  int64_t ir_version = 0;
  std::vector<OpsetP> opsets;
  std::string_view producer_name, producer_version, domain;
  bool has_graph = false;
  GraphP graph;
  std::vector<FunctionP> functions;
};

// Parse one serialized message. `what` names the source in error messages (a file name).
ModelP parse_model(const uint8_t *data, size_t size, const std::string &what);
TensorP parse_tensor(const uint8_t *data, size_t size, const std::string &what);

}  // namespace ctn::onnx
