// ONNX import: the driver (importer.cpp) walks the model's nodes in order and hands each to the
// converter of its op type (ops_*.cpp), which lowers it onto chutney graph ops through NodeCtx.
// A node whose inputs are all constants is converted on a throw-away eager graph and its outputs
// enter the model graph as constants (shape arithmetic, folded weights).
#pragma once

#include <chutney/onnx.h>

#include "graph/graph.h"
#include "onnx/proto.h"

#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace ctn::onnx {

// The oldest default-domain opset accepted. Attributes that later became inputs (axes, pads,
// split, min/max...) are read in either form, so opsets 7..12 mostly work; 13 and newer are
// what the backend suite checks.
constexpr int64_t kMinOpset = 7;
constexpr int64_t kMaxOpset = 28;

// Constants the importer builds itself (ranges, index maps, one-hot ramps, filled tensors) are
// capped, so that a hostile or mistaken attribute cannot make an import allocate without bound.
constexpr int64_t kMaxBuiltElements = int64_t{1} << 28;

struct InputSpec {
  std::string name;
  const Tensor *value = nullptr;
  bool as_constant = false;
};

struct Options {
  bool initializers_as_constants = false;
  bool inspect_only = false;
  bool symbolic_dims_as_one = false;  // an input's symbolic dim not given by `inputs` is 1
  Context *context = nullptr;         // for op libraries of custom domains (inspect_only has no graph)
  std::string external_data_dir;  // "" : the model's directory
  std::vector<InputSpec> inputs;
};

struct ModelInfo {
  struct Entry {
    std::string name;
    ctn_node node = CTN_NODE_NONE;
  };
  struct OpType {
    std::string name;
    uint32_t uses = 0;
    bool supported = false;
    std::string lowered;  // chutney ops, ','-separated
  };
  std::vector<Entry> inputs, outputs, initializers;
  std::vector<OpType> op_types;
  int64_t opset = 0, ir_version = 0;
};

// Reads `path` and builds the model into `g` (which must be empty; nullptr with inspect_only).
ModelInfo import_model(Graph *g, const std::string &path, const Options &opts);

// Converts a TensorProto into a host tensor; `base_dir` resolves external data. Throws
// CTN_ERR_UNSUPPORTED for a dtype chutney lacks, CTN_ERR_CORRUPT for inconsistent data.
Tensor tensor_from_proto(const TensorP &t, const std::string &base_dir, const std::string &what);
std::vector<double> tensor_reals(const Tensor &t);  // any numeric dtype, as doubles
int32_t dtype_from_onnx(int32_t onnx_type);  // -1 when chutney has no such dtype

// The ONNX FLOAT8 types (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ) have no chutney dtype: the importer
// carries them as f16, which holds every float8 value exactly (tensors are converted as they are
// read; Cast to a float8 type rounds to its grid and stays f16). docs/ONNX.md, "Float8".
struct Float8 {
  int mbits, bias;  // mantissa bits, exponent bias
  double max;       // the largest finite value
  bool fnuz;        // no -0 and no infinity; 0x80 is the NaN
  bool has_inf;     // E5M2 only: IEEE infinities (the others overflow to NaN)
};
const Float8 *float8_format(int32_t onnx_type);  // nullptr for another type
double float8_value(uint8_t bits, const Float8 &f);  // exact; NaN for the NaN encodings

// One ONNX node being lowered.
class NodeCtx {
 public:
  NodeCtx(Graph &graph, const NodeP &n, int64_t opset_version, std::vector<ctn_node> inputs);

  Graph &g;
  const NodeP &node;
  const int64_t opset;
  std::vector<ctn_node> outs;  // the converter's result, one per ONNX output (NONE: not made)

  // ---- inputs (missing optional inputs have empty names) ----
  size_t n_in() const { return in_.size(); }
  bool has(size_t i) const { return i < in_.size() && in_[i] != CTN_NODE_NONE; }
  ctn_node in(size_t i) const;  // fails naming the node when the input is absent
  int32_t dtype(size_t i) const { return g.info(in(i)).dtype; }
  const Shape &shape(size_t i) const { return g.info(in(i)).shape; }
  const Tensor *konst(size_t i) const;  // the input's constant value, or nullptr
  // The ONNX element type the model declares for input i (a top-level graph input, initializer
  // or value_info), or 0: float8 values are f16 here, and CastLike reads its target's real type.
  int32_t declared_type(size_t i) const;
  const std::unordered_map<std::string, int32_t> *declared = nullptr;  // set by the importer
  // A constant integer (or floating, for reals) input as a flat list; fails naming the node and
  // `what` when the input is not a constant.
  std::vector<int64_t> ints(size_t i, const char *what) const;
  std::vector<double> reals(size_t i, const char *what) const;

  // ---- attributes: every attribute must be read (or ignored on purpose) by the converter;
  // the driver then refuses the node naming any attribute left unread ----
  const AttributeP *attr(const char *name) const;
  bool has_attr(const char *name) const { return attr(name) != nullptr; }
  int64_t attr_i(const char *name, int64_t def) const;
  double attr_f(const char *name, double def) const;
  std::string attr_s(const char *name, const char *def) const;
  std::vector<int64_t> attr_ints(const char *name) const;  // empty when absent
  std::vector<float> attr_floats(const char *name) const;
  std::vector<double> attr_tensor_reals(const char *name) const;  // a tensor attribute's values; empty when absent
  // A per-dim attribute: `n` entries, or n copies of `def` when absent; fails naming the node otherwise.
  std::vector<int64_t> attr_ints_n(const char *name, int64_t def, size_t n) const;
  void ignore(const char *name) const { attr(name); }
  void check_attrs_used() const;

  [[noreturn]] void unsupported(const char *fmt, ...) const __attribute__((format(printf, 2, 3)));
  [[noreturn]] void invalid(const char *fmt, ...) const __attribute__((format(printf, 2, 3)));
  std::string where() const;  // "node 'conv1' (Conv)"

  // Fails naming the node when an import-time constant of `n` elements exceeds the cap.
  void limit(double n, const char *what) const;

  // The input axis normalised against `ndim`, failing with the node's name.
  int32_t axis(int64_t a, uint32_t ndim) const;

 private:
  std::vector<ctn_node> in_;
  mutable std::vector<bool> used_;
};

using ConvertFn = void (*)(NodeCtx &c);
struct OpEntry {
  const char *op_type;
  ConvertFn fn;
};
std::span<const OpEntry> math_ops();    // ops_math.cpp: elementwise, reductions
std::span<const OpEntry> tensor_ops();  // ops_tensor.cpp: shape and indexing ops
std::span<const OpEntry> nn_ops();      // ops_nn.cpp: conv, pooling, norms, matmul, losses, recurrent
std::span<const OpEntry> resize_ops();  // ops_resize.cpp: Resize, Upsample
std::span<const OpEntry> ml_ops();      // ops_ml.cpp: the ai.onnx.ml domain (scikit-learn exports)
std::span<const OpEntry> attention_ops();  // ops_attention.cpp: Attention, RotaryEmbedding, SwiGLU...
std::span<const OpEntry> signal_ops();     // ops_signal.cpp: DFT, STFT, windows, MelWeightMatrix
std::span<const OpEntry> sampling_ops();   // ops_sampling.cpp: GridSample, RoiAlign
std::span<const OpEntry> dynamic_ops();    // ops_dynamic.cpp: NonZero, Unique, TopK... (data-dependent shapes)
std::span<const OpEntry> quant_ops();  // ops_quant.cpp: QuantizeLinear, DequantizeLinear, QLinearMatMul...
const OpEntry *find_converter(std::string_view op_type);

// Sequences (ops_sequence.cpp, since 1.6) are lowered at import: a sequence is the list of its
// tensors' nodes, every length and position known at import.
using Seq = std::vector<ctn_node>;
bool is_sequence_op(std::string_view op_type);
// in[i]: input i's sequence, nullptr for a tensor input (then c.in(i)). An op that makes a
// sequence fills *out and sets *made; the others set c.outs.
void convert_sequence(NodeCtx &c, const std::vector<const Seq *> &in, Seq *out, bool *made);

}  // namespace ctn::onnx
