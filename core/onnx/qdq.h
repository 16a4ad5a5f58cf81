// The QDQ format of onnxruntime's quantize_static: DequantizeLinear on an operator's inputs and
// QuantizeLinear on its output, the operator itself in float. The importer fuses the pattern
// into chutney's integer ops so that QDQ models run int8 kernels (qdq.cpp).
#pragma once

#include "onnx/importer.h"

namespace ctn::onnx {

// Called by QuantizeLinear's converter (node `c`, its input 0 the float value to quantize, with
// y_scale, y_zero_point (CTN_NODE_NONE: absent) and the output dtype qdt): when the value is
//   [relu](conv2d(DQ(xq), DQ(wq)) [+ DQ(bias i32)])   -> qlinear_conv2d
//   matmul(DQ(aq), DQ(bq)) [+ DQ(bias i32)]           -> qlinear_matmul
//   add(DQ(aq), DQ(bq)), aq and bq of one shape         -> qlinear_add (since 1.7)
// with per-tensor activations, per-tensor or per-output-channel weights and a bias quantized
// with scale x_scale * w_scale (zero point 0), returns the fused node; CTN_NODE_NONE otherwise
// (the caller quantizes the float value).
ctn_node qdq_fuse(NodeCtx &c, ctn_node y_scale, ctn_node y_zp, int32_t qdt);

}  // namespace ctn::onnx
