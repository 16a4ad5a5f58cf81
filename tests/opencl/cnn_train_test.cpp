// CNN training end to end on the OpenCL backend (placement "always", backends "opencl" only):
// conv2d -> batch_norm -> relu -> max_pool2d -> conv2d -> relu -> avg_pool2d -> dense ->
// cross_entropy, gradients by ctn_grad, SGD updates by ctn_assign. The plan must run the
// convolutions, their gradients, the pooling and batch-norm ops on the device (asserted with
// ctn_plan_backend_steps), the loss must fall, and it must track the CPU backend's run.
// Data: synthetic 12x12 images of four stroke patterns plus noise (no dataset needed).
#include <chutney/chutney.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ocl_util.h"

namespace {

using ocl_test::tensor;

constexpr int kN = 32, kS = 12, kC = 4, kF1 = 8, kF2 = 8, kSteps = 12;

struct Data {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Data make_data(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.3f);
  std::uniform_int_distribution<int> pos(2, kS - 3);
  Data d;
  d.x.assign(static_cast<size_t>(kN * kS * kS), 0.0f);
  for (int i = 0; i < kN; ++i) {
    const int c = i % kC, p = pos(rng);
    d.y.push_back(c);
    float *img = d.x.data() + static_cast<size_t>(i) * kS * kS;
    for (int k = 0; k < kS * kS; ++k) img[k] = nd(rng);
    for (int t = 0; t < kS; ++t) {
      switch (c) {
        case 0: img[p * kS + t] += 1.0f; break;            // horizontal stroke
        case 1: img[t * kS + p] += 1.0f; break;            // vertical stroke
        case 2: img[t * kS + t] += 1.0f; break;            // diagonal
        default: img[t * kS + (kS - 1 - t)] += 1.0f; break;  // anti-diagonal
      }
    }
  }
  return d;
}

struct Result {
  std::vector<float> losses;
  uint32_t conv = 0, conv_gw = 0, conv_gi = 0, maxpool = 0, maxpool_grad = 0, avgpool_grad = 0,
           bn = 0, bn_grad = 0, all_dev = 0;
  double seconds = 0;
};

void train(ctn_context *ctx, const char *backend, const Data &data, Result *r) {
  ctn_graph *g = nullptr;
  OK(ctn_graph_create(ctx, 0, &g));
  std::mt19937_64 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto init = [&](size_t n, float scale) {
    std::vector<float> v(n);
    for (float &x : v) x = scale * nd(rng);
    return v;
  };
  const int kFlat = kF2 * (kS / 4) * (kS / 4);
  std::vector<ctn_tensor *> owned;
  auto var = [&](const char *name, std::vector<int64_t> shape, std::vector<float> v, ctn_node *n) {
    ctn_tensor *t = tensor(shape, v);
    ASSERT_NE(t, nullptr);
    owned.push_back(t);
    OK(ctn_variable(g, name, t, n));
  };
  ctn_node w1, g1, b1, w2, wd, bd;
  ASSERT_NO_FATAL_FAILURE(var("w1", {kF1, 1, 3, 3}, init(kF1 * 9, 0.5f), &w1));
  ASSERT_NO_FATAL_FAILURE(var("g1", {kF1}, std::vector<float>(kF1, 1.0f), &g1));
  ASSERT_NO_FATAL_FAILURE(var("b1", {kF1}, std::vector<float>(kF1, 0.0f), &b1));
  ASSERT_NO_FATAL_FAILURE(var("w2", {kF2, kF1, 3, 3}, init(kF2 * kF1 * 9, 0.2f), &w2));
  ASSERT_NO_FATAL_FAILURE(var("wd", {kFlat, kC}, init(static_cast<size_t>(kFlat * kC), 0.15f), &wd));
  ASSERT_NO_FATAL_FAILURE(var("bd", {kC}, std::vector<float>(kC, 0.0f), &bd));
  int64_t xs[4] = {kN, 1, kS, kS}, ys[1] = {kN};
  ctn_node x, y;
  OK(ctn_input(g, "x", CTN_F32, 4, xs, &x));
  OK(ctn_input(g, "y", CTN_I32, 1, ys, &y));
  ctn_node c1, n1, a1, p1, c2, a2, p2, flat, dense, logits, loss;
  OK(ctn_conv2d(g, x, w1, 1, 1, 1, 1, 1, 1, 1, &c1));      // [N, 8, 12, 12]
  OK(ctn_batch_norm(g, c1, g1, b1, 1e-5, &n1));
  OK(ctn_relu(g, n1, &a1));
  OK(ctn_max_pool2d(g, a1, 2, 2, 2, 2, 0, 0, &p1));        // [N, 8, 6, 6]
  OK(ctn_conv2d(g, p1, w2, 1, 1, 1, 1, 1, 1, 1, &c2));     // [N, 8, 6, 6]
  OK(ctn_relu(g, c2, &a2));
  OK(ctn_avg_pool2d(g, a2, 2, 2, 2, 2, 0, 0, 0, &p2));     // [N, 8, 3, 3]
  int64_t fs[2] = {kN, kFlat};
  OK(ctn_reshape(g, p2, 2, fs, &flat));
  OK(ctn_matmul(g, flat, wd, 0, 0, &dense));
  OK(ctn_add(g, dense, bd, &logits));
  OK(ctn_cross_entropy(g, logits, y, &loss));
  ctn_node params[6] = {w1, g1, b1, w2, wd, bd}, grads[6];
  OK(ctn_grad(g, loss, 6, params, grads));
  ASSERT_NO_FATAL_FAILURE(ocl_test::add_sgd_update(g, 6, params, grads, 0.1));
  ctn_plan *p = nullptr;
  OK(ocl_test::compile_for(g, 1, &loss, backend, &p));
  OK(ctn_plan_backend_steps(p, backend, "conv2d", &r->conv));
  OK(ctn_plan_backend_steps(p, backend, "conv2d_grad_weight", &r->conv_gw));
  OK(ctn_plan_backend_steps(p, backend, "conv2d_grad_input", &r->conv_gi));
  OK(ctn_plan_backend_steps(p, backend, "max_pool2d", &r->maxpool));
  OK(ctn_plan_backend_steps(p, backend, "max_pool2d_grad", &r->maxpool_grad));
  OK(ctn_plan_backend_steps(p, backend, "avg_pool2d_grad", &r->avgpool_grad));
  OK(ctn_plan_backend_steps(p, backend, "batch_norm", &r->bn));
  uint32_t gi = 0, gg = 0;
  OK(ctn_plan_backend_steps(p, backend, "batch_norm_grad_input", &gi));
  OK(ctn_plan_backend_steps(p, backend, "batch_norm_grad_gamma", &gg));
  r->bn_grad = gi + gg;
  OK(ctn_plan_backend_steps(p, backend, nullptr, &r->all_dev));
  ctn_tensor *xt = tensor({kN, 1, kS, kS}, data.x), *yt = nullptr;
  OK(ctn_tensor_create(CTN_I32, 1, ys, data.y.data(), &yt));
  ctn_tensor *lt = nullptr;
  OK(ctn_plan_output_create(p, 0, &lt));
  ctn_node fn[2] = {x, y};
  const ctn_tensor *fv[2] = {xt, yt};
  auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < kSteps; ++s) {
    OK(ctn_plan_run(p, 2, fn, fv, 1, &lt));
    float l = 0;
    OK(ctn_tensor_read(lt, &l, sizeof l));
    r->losses.push_back(l);
  }
  r->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (ctn_tensor *t : owned) ctn_tensor_release(t);
  for (ctn_tensor *t : {xt, yt, lt}) ctn_tensor_release(t);
  ctn_plan_release(p);
  ctn_graph_release(g);
}

TEST(CnnTraining, RunsOnTheDeviceAndLearns) {
  std::string why;
  ctn_context *ctx = ocl_test::opencl_only_context(&why);
  if (!ctx) GTEST_SKIP() << "opencl unavailable: " << why;
  Data data = make_data(5);
  Result ocl, cpu;
  ASSERT_NO_FATAL_FAILURE(train(ctx, "opencl", data, &ocl));
  ASSERT_NO_FATAL_FAILURE(train(ctx, "cpu", data, &cpu));
  std::printf("[opencl] cnn: opencl loss %.4f -> %.4f in %.2f s (%u device steps); cpu loss %.4f -> %.4f\n",
              ocl.losses.front(), ocl.losses.back(), ocl.seconds, ocl.all_dev, cpu.losses.front(),
              cpu.losses.back());
  // The plan was compiled for "opencl" alone, so every step ran there; these name the NN ops.
  EXPECT_EQ(ocl.conv, 2u);
  EXPECT_EQ(ocl.conv_gw, 2u);
  EXPECT_GE(ocl.conv_gi, 1u);
  EXPECT_EQ(ocl.maxpool, 1u);
  EXPECT_EQ(ocl.maxpool_grad, 1u);
  EXPECT_EQ(ocl.avgpool_grad, 1u);
  EXPECT_EQ(ocl.bn, 1u);
  EXPECT_EQ(ocl.bn_grad, 2u);
  ASSERT_EQ(ocl.losses.size(), static_cast<size_t>(kSteps));
  EXPECT_LT(ocl.losses.back(), 0.6 * ocl.losses.front()) << "the loss should fall";
  for (size_t i = 0; i < ocl.losses.size(); ++i)
    EXPECT_NEAR(ocl.losses[i], cpu.losses[i], 2e-3 * std::max(1.0f, cpu.losses[i])) << "step " << i;
  ctn_context_release(ctx);
}

}  // namespace
