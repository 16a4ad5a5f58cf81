// Helpers shared by the OpenCL suite's test files (opencl_test.cpp, mlp_train_test.cpp,
// cnn_train_test.cpp): building tensors, compiling a plan for named backends, the SGD update and
// a context that places every op on the device. C API only.
#pragma once

#include <chutney/chutney.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../common/ok.h"

namespace ocl_test {

// An f32 tensor of `shape` holding `v` (nullptr when creation fails).
inline ctn_tensor *tensor(std::vector<int64_t> shape, const std::vector<float> &v) {
  ctn_tensor *t = nullptr;
  ctn_tensor_create(CTN_F32, static_cast<uint32_t>(shape.size()), shape.data(), v.data(), &t);
  return t;
}

// Compiles `outs` with ctn_compile_options.backends = `backends` ("opencl", "cpu,opencl", ...).
// With CTN_TEST_VERBOSE set, prints the plan.
inline ctn_status compile_for(ctn_graph *g, uint32_t n_outs, const ctn_node *outs, const char *backends,
                              ctn_plan **p) {
  ctn_compile_options co{};
  co.struct_size = sizeof co;
  co.backends = backends;
  ctn_status s = ctn_plan_compile(g, n_outs, outs, &co, p);
  if (s == CTN_OK && std::getenv("CTN_TEST_VERBOSE")) {
    const char *text = nullptr;
    if (ctn_plan_describe(*p, &text) == CTN_OK) std::printf("%s\n", text);
  }
  return s;
}

// Adds the plain SGD update params[i] <- params[i] - lr * grads[i] (ctn_assign) for each of the
// `n` parameters; it runs with every plan compiled from `g`.
inline void add_sgd_update(ctn_graph *g, int n, const ctn_node *params, const ctn_node *grads, double lr) {
  ctn_node lr_node;
  OK(ctn_scalar(g, CTN_F32, lr, &lr_node));
  for (int i = 0; i < n; ++i) {
    ctn_node step, nw, as;
    OK(ctn_mul(g, grads[i], lr_node, &step));
    OK(ctn_sub(g, params[i], step, &nw));
    OK(ctn_assign(g, params[i], nw, &as));
  }
}

// A context whose plans put every op on OpenCL ("placement always", backends "opencl"). When
// OpenCL is unavailable: nullptr, with the reason in *why. A failure to create the context at all
// is a test failure.
inline ctn_context *opencl_only_context(std::string *why) {
  ctn_context *ctx = nullptr;
  if (ctn_context_create(nullptr, &ctx) != CTN_OK) {
    *why = ctn_last_error();
    ADD_FAILURE() << "ctn_context_create: " << *why;
    return nullptr;
  }
  if (ctn_context_set_option(ctx, "opencl", "placement", "always") != CTN_OK ||
      ctn_context_set_backends(ctx, "opencl") != CTN_OK) {
    *why = ctn_last_error();
    ctn_context_release(ctx);
    return nullptr;
  }
  return ctx;
}

}  // namespace ocl_test
