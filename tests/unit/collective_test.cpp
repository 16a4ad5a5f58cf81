// The collective C API and data-parallel plans in one process (docs/DISTRIBUTED.md): ctn-mpi.so
// as a 1-rank MPI job (a singleton, no mpirun), ctn-nccl.so open or "unavailable: why". The
// multi-rank checks (bit-identical ranks, equality with one process, failures) are in
// tools/test.d/60-mpi.sh, under mpirun. MPI starts once per process: one communicator serves
// every test here.
#include <chutney/collective.h>

#include <cstddef>
#include <cstdio>
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

// The op names of a plan's steps, in the order they run (ctn_plan_describe's step lines).
std::vector<std::string> step_ops(ctn_plan *p) {
  const char *text = nullptr;
  EXPECT_EQ(ctn_plan_describe(p, &text), CTN_OK) << ctn_last_error();
  std::vector<std::string> ops;
  std::string line;
  for (const char *c = text ? text : ""; *c; ++c) {
    if (*c != '\n') {
      line += *c;
      continue;
    }
    char op[64] = {};
    int idx = 0;
    if (std::sscanf(line.c_str(), "%d %63s", &idx, op) == 2 && idx == static_cast<int>(ops.size())) ops.push_back(op);
    line.clear();
  }
  return ops;
}

size_t first_index(const std::vector<std::string> &ops, const std::string &needle) {
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].find(needle) != std::string::npos) return i;
  return ops.size();
}
size_t last_index(const std::vector<std::string> &ops, const std::string &needle) {
  for (size_t i = ops.size(); i-- > 0;)
    if (ops[i].find(needle) != std::string::npos) return i;
  return ops.size();
}

// A data-parallel plan over one rank computes what the plain plan does, bit for bit, with the
// gradients in several buckets (copies through reshape/concat/slice change no bits), blocking
// (CTN_DP_BLOCKING) and overlapped (the default where the plugin has allreduce_start). The
// overlapped plan starts the last layer's bucket before backward's last matmul (the first
// layer's weight gradient), earlier than the blocking plan reduces it, and waits only at the
// optimizer.
void data_parallel_plan_matches_plain(ctn_collective *comm, bool can_overlap) {
  ctn_graph *g = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(g_ctx, 0, &g));
  int64_t xs[2] = {4, 3};
  ctn_node x, w, b, v, h, y, l, loss;
  CTN_ASSERT_OK(ctn_input(g, "x", CTN_F32, 2, xs, &x));
  ctn_tensor *w0 = make_f32({3, 2}, {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f});
  ctn_tensor *b0 = make_f32({2}, {0.01f, -0.02f});
  ctn_tensor *v0 = make_f32({2, 2}, {0.7f, -0.1f, 0.2f, 0.5f});
  CTN_ASSERT_OK(ctn_variable(g, "w", w0, &w));
  CTN_ASSERT_OK(ctn_variable(g, "b", b0, &b));
  CTN_ASSERT_OK(ctn_variable(g, "v", v0, &v));
  CTN_ASSERT_OK(ctn_matmul(g, x, w, 0, 0, &h));
  CTN_ASSERT_OK(ctn_add(g, h, b, &h));
  CTN_ASSERT_OK(ctn_mul(g, h, h, &h));
  CTN_ASSERT_OK(ctn_matmul(g, h, v, 0, 0, &y));
  CTN_ASSERT_OK(ctn_mul(g, y, y, &l));
  CTN_ASSERT_OK(ctn_sum(g, l, 0, nullptr, 0, &loss));
  ctn_node wrt[3] = {w, b, v}, grads[3];
  CTN_ASSERT_OK(ctn_grad(g, loss, 3, wrt, grads));
  ctn_node lr, step;
  CTN_ASSERT_OK(ctn_scalar(g, CTN_F32, 0.01, &lr));
  for (int i = 0; i < 3; ++i) {
    CTN_ASSERT_OK(ctn_mul(g, grads[i], lr, &step));
    CTN_ASSERT_OK(ctn_sub(g, wrt[i], step, &step));
    CTN_ASSERT_OK(ctn_assign(g, wrt[i], step, &step));
  }
  ctn_compile_options plain{};
  plain.struct_size = sizeof plain;
  ctn_compile_options blocking = plain, overlapped = plain;
  blocking.data_parallel = overlapped.data_parallel = comm;
  blocking.dp_bucket_bytes = overlapped.dp_bucket_bytes = 16;  // w (24 bytes), b (8), v (16): a bucket each
  blocking.dp_flags = CTN_DP_BLOCKING;
  ctn_plan *p[3] = {nullptr, nullptr, nullptr};
  CTN_ASSERT_OK(ctn_plan_compile(g, 1, &loss, &plain, &p[0]));
  CTN_ASSERT_OK(ctn_plan_compile(g, 1, &loss, &blocking, &p[1]));
  CTN_ASSERT_OK(ctn_plan_compile(g, 1, &loss, &overlapped, &p[2]));
  const char *text = nullptr;
  CTN_ASSERT_OK(ctn_plan_describe(p[1], &text));
  EXPECT_NE(std::string(text).find("data-parallel over 1 ranks: 3 gradients (48 bytes) averaged in 3 buckets of <= 16 "
                                   "bytes, blocking"),
            std::string::npos) << text;
  CTN_ASSERT_OK(ctn_plan_describe(p[2], &text));
  EXPECT_NE(std::string(text).find(can_overlap ? "3 buckets of <= 16 bytes, overlapped with backward"
                                               : "3 buckets of <= 16 bytes, blocking"),
            std::string::npos) << text;
  auto count = [&](ctn_plan *plan, const char *op) {
    uint32_t n = 0;
    EXPECT_EQ(ctn_plan_backend_steps(plan, "cpu", op, &n), CTN_OK) << ctn_last_error();
    return n;
  };
  EXPECT_EQ(count(p[0], "dp_allreduce"), 0u);
  EXPECT_EQ(count(p[1], "dp_allreduce"), 3u);
  EXPECT_EQ(count(p[1], "dp_allreduce_start"), 0u);
  EXPECT_EQ(count(p[2], "dp_allreduce"), can_overlap ? 0u : 3u);
  EXPECT_EQ(count(p[2], "dp_allreduce_start"), can_overlap ? 3u : 0u);
  EXPECT_EQ(count(p[2], "dp_allreduce_wait"), can_overlap ? 3u : 0u);
  // The schedules: backward's last matmul computes w's gradient (the first layer's).
  const std::vector<std::string> ob = step_ops(p[1]), oo = step_ops(p[2]);
  std::string sched;
  for (const std::string &o : ob) sched += o + " ";
  sched += "| ";
  for (const std::string &o : oo) sched += o + " ";
  EXPECT_LT(first_index(ob, "dp_allreduce"), ob.size()) << sched;
  if (can_overlap) {
    EXPECT_LT(first_index(oo, "dp_allreduce_start"), first_index(ob, "dp_allreduce")) << sched;
    EXPECT_LT(first_index(oo, "dp_allreduce_start"), last_index(oo, "matmul")) << sched;
    EXPECT_GT(first_index(oo, "dp_allreduce_wait"), last_index(oo, "matmul")) << sched;
    EXPECT_GT(first_index(oo, "dp_allreduce_wait"), last_index(oo, "dp_allreduce_start")) << sched;
  }
  ctn_tensor *xv = make_f32({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const ctn_tensor *feeds[1] = {xv};
  for (int k = 0; k < 3; ++k)
    for (int it = 0; it < 3; ++it) CTN_ASSERT_OK(ctn_plan_run(p[k], 1, &x, feeds, 0, nullptr));
  for (ctn_node var : {w, b, v}) {
    ctn_tensor *a = nullptr;
    CTN_ASSERT_OK(ctn_plan_variable_read(p[0], var, &a));
    const std::vector<float> va = read_f32(a);
    ctn_tensor_release(a);
    EXPECT_NE(va, read_f32(var == w ? w0 : var == b ? b0 : v0)) << "the updates ran";
    for (int k = 1; k < 3; ++k) {
      CTN_ASSERT_OK(ctn_plan_variable_read(p[k], var, &a));
      const std::vector<float> vk = read_f32(a);
      ctn_tensor_release(a);
      EXPECT_EQ(0, std::memcmp(va.data(), vk.data(), va.size() * 4)) << "variable " << var << ", plan " << k;
    }
  }
  ctn_tensor_release(xv);
  ctn_tensor_release(w0);
  ctn_tensor_release(b0);
  ctn_tensor_release(v0);
  for (ctn_plan *q : p) ctn_plan_release(q);
  ctn_graph_release(g);
}

TEST(Collective, DataParallelPlanOneRankMatchesPlain) { data_parallel_plan_matches_plain(g_mpi, true); }

// ctn_compile_options.dp_flags (since 1.7): unknown bits fail naming the field and change
// nothing; a caller built against 1.6 (a smaller struct_size) gets the default, whatever lies
// past its struct.
TEST(Collective, DataParallelFlags) {
  ctn_graph *g = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(g_ctx, 0, &g));
  int64_t xs[1] = {3};
  ctn_node x, w, l, grad, step;
  CTN_ASSERT_OK(ctn_input(g, "x", CTN_F32, 1, xs, &x));
  ctn_tensor *w0 = make_f32({3}, {0.5f, -1.0f, 2.0f});
  CTN_ASSERT_OK(ctn_variable(g, "w", w0, &w));
  CTN_ASSERT_OK(ctn_mul(g, x, w, &l));
  CTN_ASSERT_OK(ctn_sum(g, l, 0, nullptr, 0, &l));
  CTN_ASSERT_OK(ctn_grad(g, l, 1, &w, &grad));
  CTN_ASSERT_OK(ctn_sub(g, w, grad, &step));
  CTN_ASSERT_OK(ctn_assign(g, w, step, &step));
  ctn_compile_options o{};
  o.struct_size = sizeof o;
  o.data_parallel = g_mpi;
  o.dp_flags = 0x80;
  ctn_plan *p = nullptr;
  EXPECT_EQ(ctn_plan_compile(g, 1, &l, &o, &p), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ctn_last_error()).find("dp_flags 0x80"), std::string::npos) << ctn_last_error();
  EXPECT_EQ(p, nullptr);
  o.dp_flags = CTN_DP_BLOCKING;
  o.struct_size = offsetof(ctn_compile_options, dp_flags);  // 1.6: dp_flags is not read
  CTN_ASSERT_OK(ctn_plan_compile(g, 1, &l, &o, &p));
  uint32_t n = 0;
  CTN_ASSERT_OK(ctn_plan_backend_steps(p, "cpu", "dp_allreduce_start", &n));
  EXPECT_EQ(n, 1u);
  ctn_plan_release(p);
  o.struct_size = sizeof o;
  CTN_ASSERT_OK(ctn_plan_compile(g, 1, &l, &o, &p));
  CTN_ASSERT_OK(ctn_plan_backend_steps(p, "cpu", "dp_allreduce", &n));
  EXPECT_EQ(n, 1u);
  ctn_plan_release(p);
  ctn_tensor_release(w0);
  ctn_graph_release(g);
}

// since 1.7: allreduce_start without allreduce_wait is refused while loading, naming the slot,
// and the context keeps only the collectives it had.
TEST(Collective, HalfAnAsyncPairIsRejected) {
  EXPECT_EQ(ctn_context_load_plugin(g_ctx, CTN_TEST_HALF_ASYNC), CTN_ERR_PLUGIN);
  EXPECT_NE(std::string(ctn_last_error()).find("has allreduce_start without allreduce_wait"), std::string::npos)
      << ctn_last_error();
  ctn_collective *c = nullptr;
  EXPECT_EQ(ctn_collective_open(g_ctx, "halfasync", nullptr, &c), CTN_ERR_UNAVAILABLE);
  EXPECT_EQ(c, nullptr);
}

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
    data_parallel_plan_matches_plain(c, false);  // ctn-nccl.so: no allreduce_start yet
    ctn_collective_release(c);
  } else {
    EXPECT_EQ(s, CTN_ERR_UNAVAILABLE);
    EXPECT_NE(std::string(ctn_last_error()).find("unavailable: "), std::string::npos) << ctn_last_error();
    EXPECT_NE(std::string(report).find("unavailable"), std::string::npos) << report;
  }
}

}  // namespace
