// Neural-network op cases (convolution, pooling, normalisation, dropout, embedding): naive
// direct-loop references in nn_reference.cpp, case tables in nn_forward_cases.cpp and
// nn_grad_cases.cpp, the tests themselves in nn_tests.cpp.
#pragma once

#include "case_helpers.hpp"

namespace conf {

// Convolution attributes as the ops take them (ops.h, "neural-network ops").
struct ConvP {
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, g = 1;
  ctn_attrs attrs(std::initializer_list<int64_t> extra = {}) const;
  std::string label() const;
};

struct PoolP {
  int64_t kh = 2, kw = 2, sh = 2, sw = 2, ph = 0, pw = 0;
  bool include_pad = false;
  ctn_attrs attrs(bool avg, std::initializer_list<int64_t> extra = {}) const;
  std::string label() const;
};

Arr ref_conv2d(const Arr &x, const Arr &w, const ConvP &p);
Arr ref_conv2d_grad_input(const Arr &dy, const Arr &w, const ConvP &p, int64_t h, int64_t wd);
Arr ref_conv2d_grad_weight(const Arr &x, const Arr &dy, const ConvP &p, int64_t kh, int64_t kw);
Arr ref_conv_transpose2d(const Arr &x, const Arr &w, const ConvP &p, int64_t oph, int64_t opw);
Arr ref_max_pool2d(const Arr &x, const PoolP &p);
Arr ref_max_pool2d_grad(const Arr &x, const Arr &dy, const PoolP &p);
Arr ref_avg_pool2d(const Arr &x, const PoolP &p);
Arr ref_avg_pool2d_grad(const Arr &dy, const PoolP &p, int64_t h, int64_t w);
// Batch norm over every axis but 1; `stats` NULL: training mode (batch statistics).
Arr ref_batch_norm(const Arr &x, const Arr &gamma, const Arr &beta, double eps, const Arr *mean = nullptr,
                   const Arr *var = nullptr);
Arr ref_batch_norm_stats(const Arr &x);
Arr ref_batch_norm_grad_input(const Arr &x, const Arr &gamma, const Arr &dy, double eps);
Arr ref_batch_norm_grad_gamma(const Arr &x, const Arr &dy, double eps);
Arr ref_layer_norm(const Arr &x, const Arr &gamma, const Arr &beta, int axis, double eps);
Arr ref_layer_norm_grad_input(const Arr &x, const Arr &gamma, const Arr &dy, int axis, double eps);
Arr ref_layer_norm_grad_gamma(const Arr &x, const Arr &dy, int axis, double eps);
// The documented counter-based mask (ops.h), written independently of the backend.
bool ref_dropout_keep(uint64_t seed, uint64_t step, uint64_t k, double p);
Arr ref_dropout(const Arr &x, int64_t step, double p, int64_t seed, ctn_dtype dt);
Arr ref_embedding(const Arr &table, const Arr &ids);
Arr ref_embedding_grad(const Arr &ids, const Arr &dy, int64_t v);

// One conv_transpose2d variant: input and weight uniform in [-1, 1]; `ref` NULL for a gradient case.
struct ConvTCase {
  Shape x, w;
  ConvP p;
  int64_t oph, opw;
};
Variant conv_transpose_variant(const ConvTCase &t, Ref ref = nullptr);

const std::vector<OpCase> &nn_forward_cases();
const std::vector<OpCase> &nn_grad_cases();
const std::vector<OpCase> &quant_cases();  // quant_cases.cpp: the int8 quantization ops

}  // namespace conf
