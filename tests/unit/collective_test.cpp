// The collective C API and data-parallel plans in one process (docs/DISTRIBUTED.md): ctn-mpi.so
// as a 1-rank MPI job (a singleton, no mpirun), ctn-nccl.so open or "unavailable: why". The
// multi-rank checks (bit-identical ranks, equality with one process, failures) are in
// tools/test.d/60-mpi.sh, under mpirun. MPI starts once per process: one communicator serves
// every test here.
#include <chutney/collective.h>

#include <cstring>
#include <string>
#include <vector>

#include "test_helpers.h"

namespace {

ctn_context *g_ctx = nullptr;
ctn_collective *g_mpi = nullptr;

class MpiEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_EQ(ctn_context_create(nullptr, &g_ctx), CTN_OK) << ctn_last_error();
    ctn_collective_config cfg{};
    cfg.struct_size = sizeof cfg;
    cfg.rank = -1;
    cfg.world_size = -1;
    cfg.timeout_s = 30;
    ASSERT_EQ(ctn_collective_open(g_ctx, "mpi", &cfg, &g_mpi), CTN_OK) << ctn_last_error();
  }
  void TearDown() override {
    ctn_collective_release(g_mpi);
    ctn_context_release(g_ctx);
  }
};
const auto *g_env = ::testing::AddGlobalTestEnvironment(new MpiEnv);

TEST(Collective, OneRankMpi) {
  int32_t rank = -1, size = -1;
  CTN_ASSERT_OK(ctn_collective_rank(g_mpi, &rank, &size));
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(size, 1);
  const char *d = nullptr;
  CTN_ASSERT_OK(ctn_collective_describe(g_mpi, &d));
  EXPECT_NE(std::string(d).find("rank 0 of 1"), std::string::npos) << d;
  ctn_tensor *t = make_f32({3}, {1.5f, -2.0f, 3.25f});
  CTN_ASSERT_OK(ctn_collective_allreduce(g_mpi, t, CTN_REDUCE_MEAN));
  CTN_ASSERT_OK(ctn_collective_allreduce(g_mpi, t, CTN_REDUCE_SUM));
  EXPECT_EQ(read_f32(t), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  CTN_ASSERT_OK(ctn_collective_broadcast(g_mpi, t, 0));
  CTN_ASSERT_OK(ctn_collective_barrier(g_mpi));
  // Errors: a root outside the job, an unknown reduction; the message is kept.
  EXPECT_EQ(ctn_collective_broadcast(g_mpi, t, 1), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("root 1"), std::string::npos) << ctn_last_error();
  EXPECT_NE(std::string(ctn_collective_last_error(g_mpi)).find("root 1"), std::string::npos);
  EXPECT_EQ(ctn_collective_allreduce(g_mpi, t, 7), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(read_f32(t), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  ctn_tensor_release(t);
}

TEST(Collective, OpenErrors) {
  ctn_collective *c = nullptr;
  EXPECT_EQ(ctn_collective_open(g_ctx, "no-such-transport", nullptr, &c), CTN_ERR_UNAVAILABLE);
  EXPECT_NE(std::string(ctn_last_error()).find("loaded: mpi"), std::string::npos) << ctn_last_error();
  EXPECT_EQ(ctn_collective_open(g_ctx, "mpi", nullptr, &c), CTN_ERR_STATE);  // one per process
  EXPECT_EQ(c, nullptr);
  EXPECT_EQ(ctn_collective_open(nullptr, "mpi", nullptr, &c), CTN_ERR_INVALID_ARGUMENT);
}

// A data-parallel plan over one rank computes what the plain plan does, bit for bit, with the
// gradients in several buckets (copies through reshape/concat/slice change no bits).
void data_parallel_plan_matches_plain(ctn_collective *comm) {
  ctn_graph *g = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(g_ctx, 0, &g));
  int64_t xs[2] = {4, 3};
  ctn_node x, w, b, y, l, loss;
  CTN_ASSERT_OK(ctn_input(g, "x", CTN_F32, 2, xs, &x));
  ctn_tensor *w0 = make_f32({3, 2}, {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f});
  ctn_tensor *b0 = make_f32({2}, {0.01f, -0.02f});
  CTN_ASSERT_OK(ctn_variable(g, "w", w0, &w));
  CTN_ASSERT_OK(ctn_variable(g, "b", b0, &b));
  CTN_ASSERT_OK(ctn_matmul(g, x, w, 0, 0, &y));
  CTN_ASSERT_OK(ctn_add(g, y, b, &y));
  CTN_ASSERT_OK(ctn_mul(g, y, y, &l));
  CTN_ASSERT_OK(ctn_sum(g, l, 0, nullptr, 0, &loss));
  ctn_node wrt[2] = {w, b}, grads[2];
  CTN_ASSERT_OK(ctn_grad(g, loss, 2, wrt, grads));
  ctn_node lr, step;
  CTN_ASSERT_OK(ctn_scalar(g, CTN_F32, 0.01, &lr));
  for (int i = 0; i < 2; ++i) {
    CTN_ASSERT_OK(ctn_mul(g, grads[i], lr, &step));
    CTN_ASSERT_OK(ctn_sub(g, wrt[i], step, &step));
    CTN_ASSERT_OK(ctn_assign(g, wrt[i], step, &step));
  }
  ctn_compile_options plain{};
  plain.struct_size = sizeof plain;
  ctn_compile_options dp = plain;
  dp.data_parallel = comm;
  dp.dp_bucket_bytes = 16;  // w (24 bytes) and b (8 bytes) in buckets of their own
  ctn_plan *p[2] = {nullptr, nullptr};
  CTN_ASSERT_OK(ctn_plan_compile(g, 1, &loss, &plain, &p[0]));
  CTN_ASSERT_OK(ctn_plan_compile(g, 1, &loss, &dp, &p[1]));
  const char *text = nullptr;
  CTN_ASSERT_OK(ctn_plan_describe(p[1], &text));
  EXPECT_NE(std::string(text).find("data-parallel over 1 ranks: 2 gradients (32 bytes) averaged in 2 buckets"),
            std::string::npos) << text;
  uint32_t n_ar = 0;
  CTN_ASSERT_OK(ctn_plan_backend_steps(p[1], "cpu", "dp_allreduce", &n_ar));
  EXPECT_EQ(n_ar, 2u);
  CTN_ASSERT_OK(ctn_plan_backend_steps(p[0], "cpu", "dp_allreduce", &n_ar));
  EXPECT_EQ(n_ar, 0u);
  ctn_tensor *xv = make_f32({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const ctn_tensor *feeds[1] = {xv};
  for (int k = 0; k < 2; ++k)
    for (int it = 0; it < 3; ++it) CTN_ASSERT_OK(ctn_plan_run(p[k], 1, &x, feeds, 0, nullptr));
  for (ctn_node v : {w, b}) {
    ctn_tensor *a = nullptr, *c = nullptr;
    CTN_ASSERT_OK(ctn_plan_variable_read(p[0], v, &a));
    CTN_ASSERT_OK(ctn_plan_variable_read(p[1], v, &c));
    std::vector<float> va = read_f32(a), vc = read_f32(c);
    EXPECT_EQ(0, std::memcmp(va.data(), vc.data(), va.size() * 4)) << "variable " << v;
    EXPECT_NE(va, read_f32(v == w ? w0 : b0)) << "the updates ran";
    ctn_tensor_release(a);
    ctn_tensor_release(c);
  }
  ctn_tensor_release(xv);
  ctn_tensor_release(w0);
  ctn_tensor_release(b0);
  ctn_plan_release(p[0]);
  ctn_plan_release(p[1]);
  ctn_graph_release(g);
}

TEST(Collective, DataParallelPlanOneRankMatchesPlain) { data_parallel_plan_matches_plain(g_mpi); }

// ctn-nccl.so loads everywhere; without a GPU it is listed unavailable with its reason.
TEST(Collective, NcclOpensOrSaysWhyNot) {
  const char *report = nullptr;
  CTN_ASSERT_OK(ctn_context_plugin_report(g_ctx, &report));
  if (!std::strstr(report, "ctn-nccl.so")) GTEST_SKIP() << "ctn-nccl.so not built (no nccl.h)";
  ctn_collective *c = nullptr;
  ctn_status s = ctn_collective_open(g_ctx, "nccl", nullptr, &c);
  if (s == CTN_OK) {  // a GPU machine: a 1-rank communicator reduces and trains
    ctn_tensor *t = make_f32({2}, {1.0f, 2.0f});
    CTN_EXPECT_OK(ctn_collective_allreduce(c, t, CTN_REDUCE_MEAN));
    EXPECT_EQ(read_f32(t), (std::vector<float>{1.0f, 2.0f}));
    ctn_tensor_release(t);
    data_parallel_plan_matches_plain(c);
    ctn_collective_release(c);
  } else {
    EXPECT_EQ(s, CTN_ERR_UNAVAILABLE);
    EXPECT_NE(std::string(ctn_last_error()).find("unavailable: "), std::string::npos) << ctn_last_error();
    EXPECT_NE(std::string(report).find("unavailable"), std::string::npos) << report;
  }
}

}  // namespace
