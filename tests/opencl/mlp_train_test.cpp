// MLP training end to end on the OpenCL backend: forward, backward (ctn_grad) and the SGD update
// (ctn_assign of w - lr * g) all run on the device; the accuracy reached matches the CPU
// backend's within tolerance. Data: a synthetic 4-class problem (Gaussian blobs in 8-d), so the
// test needs no dataset and stays fast on PoCL.
#include <chutney/chutney.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ocl_util.h"

namespace {

using ocl_test::tensor;

constexpr int kN = 256, kD = 8, kH = 32, kC = 4, kSteps = 80;

struct Data {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Data make_data(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> centers(kC * kD);
  for (float &c : centers) c = 1.6f * nd(rng);
  Data d;
  for (int i = 0; i < kN; ++i) {
    int c = i % kC;
    d.y.push_back(c);
    for (int k = 0; k < kD; ++k) d.x.push_back(centers[c * kD + k] + 1.5f * nd(rng));
  }
  return d;
}

struct TrainResult {
  double accuracy = 0, first_loss = 0, last_loss = 0;
  uint32_t matmul_dev = 0, assign_dev = 0, sub_dev = 0, on_other = 0, all_dev = 0;
};

void train(ctn_context *ctx, const char *backend, const char *other, const Data &data,
           TrainResult *r) {
  ctn_graph *g = nullptr;
  OK(ctn_graph_create(ctx, 0, &g));
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto init = [&](int rows, int cols, float scale) {
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (float &x : v) x = scale * nd(rng);
    return v;
  };
  ctn_tensor *w1t = tensor({kD, kH}, init(kD, kH, 0.4f)), *b1t = tensor({kH}, std::vector<float>(kH, 0.0f));
  ctn_tensor *w2t = tensor({kH, kC}, init(kH, kC, 0.3f)), *b2t = tensor({kC}, std::vector<float>(kC, 0.0f));
  ctn_node w1, b1, w2, b2, x, y;
  OK(ctn_variable(g, "w1", w1t, &w1));
  OK(ctn_variable(g, "b1", b1t, &b1));
  OK(ctn_variable(g, "w2", w2t, &w2));
  OK(ctn_variable(g, "b2", b2t, &b2));
  int64_t xs[2] = {kN, kD}, ys[1] = {kN};
  OK(ctn_input(g, "x", CTN_F32, 2, xs, &x));
  OK(ctn_input(g, "y", CTN_I32, 1, ys, &y));
  ctn_node h, hb, ha, o, logits, loss;
  OK(ctn_matmul(g, x, w1, 0, 0, &h));
  OK(ctn_add(g, h, b1, &hb));
  OK(ctn_relu(g, hb, &ha));
  OK(ctn_matmul(g, ha, w2, 0, 0, &o));
  OK(ctn_add(g, o, b2, &logits));
  OK(ctn_cross_entropy(g, logits, y, &loss));
  ctn_node params[4] = {w1, b1, w2, b2}, grads[4];
  OK(ctn_grad(g, loss, 4, params, grads));
  ASSERT_NO_FATAL_FAILURE(ocl_test::add_sgd_update(g, 4, params, grads, 0.3));
  ctn_node outs[2] = {loss, logits};
  ctn_plan *p = nullptr;
  OK(ocl_test::compile_for(g, 2, outs, backend, &p));
  uint32_t fused = 0;
  OK(ctn_plan_backend_steps(p, backend, "matmul", &r->matmul_dev));
  OK(ctn_plan_backend_steps(p, backend, "matmul_bias_act", &fused));
  r->matmul_dev += fused;
  OK(ctn_plan_backend_steps(p, backend, nullptr, &r->all_dev));
  OK(ctn_plan_backend_steps(p, backend, "assign", &r->assign_dev));
  OK(ctn_plan_backend_steps(p, backend, "sub", &r->sub_dev));
  if (other) OK(ctn_plan_backend_steps(p, other, nullptr, &r->on_other));
  ctn_tensor *xt = tensor({kN, kD}, data.x), *yt = nullptr;
  OK(ctn_tensor_create(CTN_I32, 1, ys, data.y.data(), &yt));
  ctn_tensor *lt = nullptr, *ot = nullptr;
  OK(ctn_plan_output_create(p, 0, &lt));
  OK(ctn_plan_output_create(p, 1, &ot));
  ctn_node fn[2] = {x, y};
  const ctn_tensor *fv[2] = {xt, yt};
  ctn_tensor *res[2] = {lt, ot};
  for (int s = 0; s < kSteps; ++s) {
    OK(ctn_plan_run(p, 2, fn, fv, 2, res));
    float l = 0;
    OK(ctn_tensor_read(lt, &l, sizeof l));
    if (s == 0) r->first_loss = l;
    r->last_loss = l;
  }
  std::vector<float> lg(static_cast<size_t>(kN * kC));
  OK(ctn_tensor_read(ot, lg.data(), lg.size() * sizeof(float)));
  int correct = 0;
  for (int i = 0; i < kN; ++i) {
    int best = 0;
    for (int c = 1; c < kC; ++c)
      if (lg[i * kC + c] > lg[i * kC + best]) best = c;
    correct += best == data.y[i];
  }
  r->accuracy = static_cast<double>(correct) / kN;
  for (ctn_tensor *t : {w1t, b1t, w2t, b2t, xt, yt, lt, ot}) ctn_tensor_release(t);
  ctn_plan_release(p);
  ctn_graph_release(g);
}

TEST(MlpTraining, OpenClMatchesCpuAccuracy) {
  std::string why;
  ctn_context *ctx = ocl_test::opencl_only_context(&why);
  if (!ctx) GTEST_SKIP() << "opencl unavailable: " << why;
  Data data = make_data(42);
  TrainResult ocl, cpu;
  ASSERT_NO_FATAL_FAILURE(train(ctx, "opencl", "cpu", data, &ocl));
  ASSERT_NO_FATAL_FAILURE(train(ctx, "cpu", "opencl", data, &cpu));
  std::printf("[opencl] mlp: opencl acc %.3f loss %.4f -> %.4f; cpu acc %.3f loss %.4f -> %.4f\n",
              ocl.accuracy, ocl.first_loss, ocl.last_loss, cpu.accuracy, cpu.first_loss,
              cpu.last_loss);
  // Every step of the training plan ran on the device: matmuls (forward and backward), the
  // update arithmetic and the assigns into the weights.
  EXPECT_GE(ocl.matmul_dev, 4u);
  // The updates (w - lr * g) are the optimizer step; the core writes them straight into the
  // variables' storage, so they show as "sub" steps instead of separate assigns.
  EXPECT_EQ(ocl.sub_dev + ocl.assign_dev, 4u);
  EXPECT_GE(ocl.all_dev, 14u);
  EXPECT_EQ(ocl.on_other, 0u);
  EXPECT_EQ(cpu.on_other, 0u);
  EXPECT_LT(ocl.last_loss, 0.7 * ocl.first_loss);
  EXPECT_GE(cpu.accuracy, 0.7) << "the problem should be learnable";
  EXPECT_NEAR(ocl.accuracy, cpu.accuracy, 0.03);
  EXPECT_NEAR(ocl.last_loss, cpu.last_loss, 0.02 * std::max(1.0, cpu.last_loss));
  ctn_context_release(ctx);
}

}  // namespace
