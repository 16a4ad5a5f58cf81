// Bad input through the C ABI: every failure is a status plus a message on this thread, never a
// crash; out-parameters stay untouched; release(NULL) is harmless.
#include <gtest/gtest.h>

#include <chutney/chutney.h>

#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace ctn_test;

namespace {

// Makes a known failure so that the next check can tell whether the call under test recorded
// its own message rather than leaving the previous one.
std::string PrimeLastError() {
  ctn_tensor *t = nullptr;
  const int64_t shape[1] = {-7};
  EXPECT_NE(ctn_tensor_create(CTN_F32, 1, shape, nullptr, &t), CTN_OK);
  return ctn_last_error();
}

#define EXPECT_FAILS_WITH(code, call)                                                          \
  do {                                                                                         \
    const std::string primed_ = PrimeLastError();                                              \
    const ctn_status st_ = (call);                                                             \
    EXPECT_EQ(st_, (code)) << #call << " -> " << Describe(st_);                                \
    EXPECT_STRNE(ctn_last_error(), "") << #call << " gave no message";                         \
    EXPECT_NE(std::string(ctn_last_error()), primed_) << #call << " recorded no message";     \
  } while (0)

#define EXPECT_INVALID(call) EXPECT_FAILS_WITH(CTN_ERR_INVALID_ARGUMENT, call)

// Asserts the current message contains every word.
void ExpectMessageHas(const std::vector<std::string> &words) {
  const std::string msg = ctn_last_error();
  for (const auto &w : words)
    EXPECT_NE(msg.find(w), std::string::npos) << "missing '" << w << "' in: " << msg;
}

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = DefaultContext();
    ASSERT_TRUE(ctx_);
    g_ = NewGraph(ctx_.get());
    ASSERT_TRUE(g_);
  }
  ctn_node Input(const char *name, ctn_dtype dtype, std::vector<int64_t> shape) {
    ctn_node n = CTN_NODE_NONE;
    EXPECT_EQ(ctn_input(g_.get(), name, dtype, static_cast<uint32_t>(shape.size()),
                        shape.data(), &n),
              CTN_OK)
        << ctn_last_error();
    return n;
  }
  Context ctx_;
  Graph g_;
};

constexpr ctn_node kSentinelNode = 0x5eed;

TEST(bad_input, NullHandlesEverywhere) {
  Context ctx = DefaultContext();
  ASSERT_TRUE(ctx);
  const char *text = nullptr;
  uint32_t u32 = 0;
  int32_t i32 = 0;
  int64_t i64 = 0, shape[CTN_MAX_DIMS] = {0};
  ctn_dtype dtype = CTN_F32;
  ctn_node node = kSentinelNode;
  void *ptr = nullptr;
  float buf[4] = {0};
  ctn_context *out_ctx = nullptr;
  ctn_graph *out_graph = nullptr;
  ctn_tensor *out_tensor = nullptr;
  ctn_plan *out_plan = nullptr;
  ctn_backend_info info{};
  info.struct_size = sizeof info;
  ctn_plan_stats stats{};
  stats.struct_size = sizeof stats;

  // Contexts.
  EXPECT_INVALID(ctn_context_create(nullptr, nullptr));
  EXPECT_INVALID(ctn_context_load_plugin(nullptr, "x.so"));
  EXPECT_INVALID(ctn_context_plugin_report(nullptr, &text));
  EXPECT_INVALID(ctn_context_plugin_report(ctx.get(), nullptr));
  EXPECT_INVALID(ctn_context_backend_count(nullptr, &u32));
  EXPECT_INVALID(ctn_context_backend_count(ctx.get(), nullptr));
  EXPECT_INVALID(ctn_context_backend_info(nullptr, 0, &info));
  EXPECT_INVALID(ctn_context_backend_info(ctx.get(), 0, nullptr));
  EXPECT_INVALID(ctn_context_set_backends(nullptr, "cpu"));
  EXPECT_INVALID(ctn_context_set_backends(ctx.get(), nullptr));
  EXPECT_INVALID(ctn_context_set_num_threads(nullptr, 1));
  EXPECT_INVALID(ctn_context_set_option(nullptr, "cpu", "gemm", "own"));
  EXPECT_INVALID(ctn_context_set_option(ctx.get(), nullptr, "gemm", "own"));
  EXPECT_INVALID(ctn_context_set_option(ctx.get(), "cpu", nullptr, "own"));

  // Tensors.
  EXPECT_INVALID(ctn_tensor_create(CTN_F32, 1, shape, nullptr, nullptr));
  EXPECT_INVALID(ctn_tensor_create(CTN_F32, 1, nullptr, nullptr, &out_tensor));
  EXPECT_INVALID(ctn_tensor_dtype(nullptr, &dtype));
  EXPECT_INVALID(ctn_tensor_shape(nullptr, &u32, shape));
  EXPECT_INVALID(ctn_tensor_strides(nullptr, shape));
  EXPECT_INVALID(ctn_tensor_numel(nullptr, &i64));
  EXPECT_INVALID(ctn_tensor_is_contiguous(nullptr, &i32));
  EXPECT_INVALID(ctn_tensor_read(nullptr, buf, sizeof buf));
  EXPECT_INVALID(ctn_tensor_write(nullptr, buf, sizeof buf));
  EXPECT_INVALID(ctn_tensor_data(nullptr, &ptr));
  EXPECT_INVALID(ctn_tensor_slice(nullptr, 0, 0, 1, 1, &out_tensor));
  const int32_t perm[2] = {1, 0};
  EXPECT_INVALID(ctn_tensor_permute(nullptr, perm, &out_tensor));
  EXPECT_INVALID(ctn_tensor_reshape(nullptr, 1, shape, &out_tensor, nullptr));
  EXPECT_INVALID(ctn_tensor_contiguous(nullptr, &out_tensor));

  // Graphs.
  EXPECT_INVALID(ctn_graph_create(nullptr, 0, &out_graph));
  EXPECT_INVALID(ctn_graph_create(ctx.get(), 0, nullptr));
  const int64_t s3[1] = {3};
  EXPECT_INVALID(ctn_input(nullptr, "x", CTN_F32, 1, s3, &node));
  EXPECT_INVALID(ctn_constant(nullptr, nullptr, &node));
  EXPECT_INVALID(ctn_scalar(nullptr, CTN_F32, 1.0, &node));
  EXPECT_INVALID(ctn_variable(nullptr, "v", nullptr, &node));
  EXPECT_INVALID(ctn_assign(nullptr, 0, 1, &node));
  EXPECT_INVALID(ctn_op(nullptr, "relu", 1, &node, nullptr, &node));
  EXPECT_INVALID(ctn_add(nullptr, 0, 1, &node));
  EXPECT_INVALID(ctn_relu(nullptr, 0, &node));
  EXPECT_INVALID(ctn_matmul(nullptr, 0, 1, 0, 0, &node));
  EXPECT_INVALID(ctn_sum(nullptr, 0, 0, nullptr, 0, &node));
  EXPECT_INVALID(ctn_node_info(nullptr, 0, &dtype, &u32, shape));
  EXPECT_INVALID(ctn_graph_node_count(nullptr, &u32));
  EXPECT_INVALID(ctn_grad(nullptr, 0, 1, &node, &node));
  EXPECT_INVALID(ctn_jvp(nullptr, 1, &node, 1, &node, &node, &node));
  EXPECT_INVALID(ctn_graph_value(nullptr, 0, &out_tensor));
  EXPECT_INVALID(ctn_graph_to_dot(nullptr, &text));

  // Plans.
  EXPECT_INVALID(ctn_plan_compile(nullptr, 1, &node, nullptr, &out_plan));
  EXPECT_INVALID(ctn_plan_stats_get(nullptr, &stats));
  ctn_plan_memory_report mrep{};
  mrep.struct_size = sizeof mrep;
  EXPECT_INVALID(ctn_plan_memory_report_get(nullptr, &mrep));
  EXPECT_INVALID(ctn_plan_describe(nullptr, &text));
  EXPECT_INVALID(ctn_plan_backend_steps(nullptr, "cpu", nullptr, &u32));
  EXPECT_INVALID(ctn_plan_run(nullptr, 0, nullptr, nullptr, 0, nullptr));
  EXPECT_INVALID(ctn_plan_output_create(nullptr, 0, &out_tensor));
  EXPECT_INVALID(ctn_plan_variable_read(nullptr, 0, &out_tensor));
  EXPECT_INVALID(ctn_plan_variable_write(nullptr, 0, nullptr));

  // Nothing was written through the out-parameters.
  EXPECT_EQ(out_ctx, nullptr);
  EXPECT_EQ(out_graph, nullptr);
  EXPECT_EQ(out_tensor, nullptr);
  EXPECT_EQ(out_plan, nullptr);
  EXPECT_EQ(node, kSentinelNode);
  EXPECT_EQ(text, nullptr);
  EXPECT_EQ(ptr, nullptr);
}

TEST(bad_input, ReleaseNullIsFine) {
  ctn_context_release(nullptr);
  ctn_tensor_release(nullptr);
  ctn_graph_release(nullptr);
  ctn_plan_release(nullptr);
  SUCCEED();
}

TEST(bad_input, LastErrorIsPerThreadAndSurvivesSuccess) {
  // A thread that never failed sees "".
  std::string fresh = "unset";
  std::thread([&] { fresh = ctn_last_error(); }).join();
  EXPECT_EQ(fresh, "");

  const std::string msg = PrimeLastError();
  EXPECT_NE(msg, "");
  // Another thread's failure does not overwrite ours.
  std::thread([] {
    ctn_tensor *t = nullptr;
    EXPECT_NE(ctn_tensor_create(static_cast<ctn_dtype>(99), 0, nullptr, nullptr, &t), CTN_OK);
  }).join();
  EXPECT_EQ(std::string(ctn_last_error()), msg);

  // "The message of the last failing call": a success does not replace it.
  Tensor t = MakeF32({2}, {1, 2});
  ASSERT_TRUE(t);
  EXPECT_EQ(std::string(ctn_last_error()), msg);
}

TEST(bad_input, StatusAndDtypeNamesNeverFail) {
  for (ctn_status s = CTN_OK; s <= CTN_ERR_INTERNAL; ++s) {
    ASSERT_NE(ctn_status_name(s), nullptr);
    EXPECT_STRNE(ctn_status_name(s), "");
  }
  EXPECT_STREQ(ctn_status_name(CTN_ERR_SHAPE), "CTN_ERR_SHAPE");
  EXPECT_NE(ctn_status_name(12345), nullptr);
  EXPECT_EQ(ctn_dtype_size(CTN_F64), 8u);
  EXPECT_EQ(ctn_dtype_size(static_cast<ctn_dtype>(99)), 0u);
  EXPECT_STREQ(ctn_dtype_name(CTN_F32), "f32");
  EXPECT_STREQ(ctn_dtype_name(static_cast<ctn_dtype>(99)), "?");
}

TEST(bad_input, BadTensorArguments) {
  ctn_tensor *out = nullptr;
  const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_FAILS_WITH(CTN_ERR_SHAPE, ctn_tensor_create(CTN_F32, 9, nine, nullptr, &out));
  ExpectMessageHas({"9", "8"});
  const int64_t neg[2] = {2, -1};
  EXPECT_FAILS_WITH(CTN_ERR_SHAPE, ctn_tensor_create(CTN_F32, 2, neg, nullptr, &out));
  ExpectMessageHas({"-1"});
  EXPECT_FAILS_WITH(CTN_ERR_DTYPE,
                    ctn_tensor_create(static_cast<ctn_dtype>(42), 0, nullptr, nullptr, &out));
  ExpectMessageHas({"42"});
  EXPECT_EQ(out, nullptr);

  Tensor t = MakeF32({2, 3}, {1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(t);
  float small[2];
  EXPECT_INVALID(ctn_tensor_read(t.get(), small, sizeof small));
  EXPECT_INVALID(ctn_tensor_write(t.get(), small, sizeof small));
  EXPECT_INVALID(ctn_tensor_slice(t.get(), 2, 0, 1, 1, &out));   // axis out of range
  EXPECT_INVALID(ctn_tensor_slice(t.get(), 0, 0, 1, 0, &out));   // step 0
  const int32_t dup_perm[2] = {0, 0};
  EXPECT_INVALID(ctn_tensor_permute(t.get(), dup_perm, &out));
  const int64_t bad_shape[2] = {4, 2};
  EXPECT_FAILS_WITH(CTN_ERR_SHAPE, ctn_tensor_reshape(t.get(), 2, bad_shape, &out, nullptr));
  ExpectMessageHas({"[2, 3]", "[4, 2]"});
  const int64_t two_free[2] = {-1, -1};
  EXPECT_FAILS_WITH(CTN_ERR_SHAPE, ctn_tensor_reshape(t.get(), 2, two_free, &out, nullptr));
  ExpectMessageHas({"-1"});
  EXPECT_EQ(out, nullptr);

  // The failed calls left the tensor intact.
  EXPECT_EQ(ReadF32(t.get()), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST_F(BadInput, MismatchedShapesNameTheOpAndBothShapes) {
  ctn_node a = Input("a", CTN_F32, {2, 3}), b = Input("b", CTN_F32, {4});
  ctn_node out = kSentinelNode;
  EXPECT_FAILS_WITH(CTN_ERR_SHAPE, ctn_add(g_.get(), a, b, &out));
  ExpectMessageHas({"add", "[2, 3]", "[4]"});
  EXPECT_EQ(out, kSentinelNode);

  ctn_node c = Input("c", CTN_F32, {2, 3});
  EXPECT_FAILS_WITH(CTN_ERR_SHAPE, ctn_matmul(g_.get(), a, c, 0, 0, &out));
  ExpectMessageHas({"matmul", "[2, 3]"});
  EXPECT_EQ(out, kSentinelNode);
  // With trans_b the same operands agree: the check looks at the transposed shape.
  EXPECT_EQ(ctn_matmul(g_.get(), a, c, 0, 1, &out), CTN_OK) << ctn_last_error();

  ctn_node v = Input("v", CTN_F32, {3});
  out = kSentinelNode;
  // 1-d operands are not promoted.
  EXPECT_FAILS_WITH(CTN_ERR_SHAPE, ctn_matmul(g_.get(), a, v, 0, 0, &out));
  ExpectMessageHas({"matmul"});
  EXPECT_EQ(out, kSentinelNode);

  uint32_t count_before = 0, count_after = 0;
  ASSERT_EQ(ctn_graph_node_count(g_.get(), &count_before), CTN_OK);
  EXPECT_FAILS_WITH(CTN_ERR_SHAPE, ctn_add(g_.get(), a, b, &out));
  ASSERT_EQ(ctn_graph_node_count(g_.get(), &count_after), CTN_OK);
  EXPECT_EQ(count_before, count_after) << "a failed op must not add a node";
}

TEST_F(BadInput, MismatchedDtypes) {
  ctn_node a = Input("a", CTN_F32, {2, 3}), b = Input("b", CTN_F64, {2, 3});
  ctn_node out = kSentinelNode;
  EXPECT_FAILS_WITH(CTN_ERR_DTYPE, ctn_add(g_.get(), a, b, &out));
  ExpectMessageHas({"add", "f32", "f64"});
  EXPECT_FAILS_WITH(CTN_ERR_DTYPE, ctn_matmul(g_.get(), a, b, 0, 1, &out));
  ExpectMessageHas({"matmul"});

  ctn_node labels_f = Input("labels", CTN_F32, {2});
  EXPECT_FAILS_WITH(CTN_ERR_DTYPE, ctn_cross_entropy(g_.get(), a, labels_f, &out));
  ExpectMessageHas({"cross_entropy"});

  ctn_node cond = Input("cond", CTN_F32, {2, 3});
  EXPECT_FAILS_WITH(CTN_ERR_DTYPE, ctn_where(g_.get(), cond, a, a, &out));
  ExpectMessageHas({"where"});
  EXPECT_EQ(out, kSentinelNode);
}

TEST_F(BadInput, BadAxesAndAttributes) {
  ctn_node a = Input("a", CTN_F32, {2, 3});
  ctn_node out = kSentinelNode;
  const int32_t axis5[1] = {5};
  EXPECT_INVALID(ctn_sum(g_.get(), a, 1, axis5, 0, &out));
  ExpectMessageHas({"sum"});
  const int32_t neg3[1] = {-3};
  EXPECT_INVALID(ctn_mean(g_.get(), a, 1, neg3, 0, &out));
  const int32_t twice[2] = {1, -1};  // the same axis twice
  EXPECT_INVALID(ctn_max(g_.get(), a, 2, twice, 0, &out));
  EXPECT_INVALID(ctn_softmax(g_.get(), a, 2, &out));
  ExpectMessageHas({"softmax"});
  EXPECT_INVALID(ctn_slice(g_.get(), a, 2, 0, 1, 1, &out));
  EXPECT_INVALID(ctn_slice(g_.get(), a, 0, 0, 1, 0, &out));  // step 0
  const int32_t perm[2] = {0, 0};
  EXPECT_INVALID(ctn_permute(g_.get(), a, perm, &out));
  ExpectMessageHas({"permute"});
  const ctn_node both[2] = {a, a};
  EXPECT_INVALID(ctn_concat(g_.get(), 2, both, 3, &out));
  const int64_t to[2] = {4, 2};
  EXPECT_FAILS_WITH(CTN_ERR_SHAPE, ctn_reshape(g_.get(), a, 2, to, &out));
  ExpectMessageHas({"reshape", "[2, 3]"});
  const int64_t bto[2] = {5, 3};
  EXPECT_FAILS_WITH(CTN_ERR_SHAPE, ctn_broadcast_to(g_.get(), a, 2, bto, &out));
  EXPECT_INVALID(ctn_compare(g_.get(), "almost", a, a, &out));
  EXPECT_EQ(out, kSentinelNode);
}

TEST_F(BadInput, BadNodesAndOpNames) {
  ctn_node a = Input("a", CTN_F32, {2, 3});
  ctn_node out = kSentinelNode;
  EXPECT_INVALID(ctn_relu(g_.get(), 999, &out));
  EXPECT_INVALID(ctn_add(g_.get(), a, CTN_NODE_NONE, &out));
  EXPECT_INVALID(ctn_op(g_.get(), "no_such_op", 1, &a, nullptr, &out));
  ExpectMessageHas({"no_such_op"});
  EXPECT_INVALID(ctn_op(g_.get(), "add", 1, &a, nullptr, &out));  // wrong arity
  ExpectMessageHas({"add"});
  EXPECT_INVALID(ctn_op(g_.get(), nullptr, 1, &a, nullptr, &out));
  EXPECT_INVALID(ctn_op(g_.get(), "relu", 1, nullptr, nullptr, &out));
  ctn_dtype dtype = CTN_BOOL;
  EXPECT_INVALID(ctn_node_info(g_.get(), 999, &dtype, nullptr, nullptr));
  EXPECT_EQ(dtype, CTN_BOOL);
  EXPECT_EQ(out, kSentinelNode);

  // grad: the loss must be one element, and wrt nodes must exist.
  ctn_node grads[1] = {kSentinelNode};
  EXPECT_NE(ctn_grad(g_.get(), a, 1, &a, grads), CTN_OK);
  EXPECT_STRNE(ctn_last_error(), "");
  ctn_node loss;
  ASSERT_EQ(ctn_sum(g_.get(), a, 0, nullptr, 0, &loss), CTN_OK) << ctn_last_error();
  const ctn_node bad_wrt[1] = {999};
  EXPECT_INVALID(ctn_grad(g_.get(), loss, 1, bad_wrt, grads));
  EXPECT_EQ(grads[0], kSentinelNode);

  // A lazy graph has no values to read.
  ctn_tensor *value = nullptr;
  EXPECT_NE(ctn_graph_value(g_.get(), a, &value), CTN_OK);
  EXPECT_EQ(value, nullptr);
}

TEST_F(BadInput, BadContextSettings) {
  EXPECT_FAILS_WITH(CTN_ERR_INVALID_ARGUMENT, ctn_context_set_backends(ctx_.get(), "nosuchdevice"));  // a typo, not a missing device
  ExpectMessageHas({"nosuchdevice"});
  EXPECT_INVALID(ctn_context_set_num_threads(ctx_.get(), 0));
  EXPECT_INVALID(ctn_context_set_option(ctx_.get(), "nosuchdevice", "k", "v"));
  uint32_t n = 0;
  ASSERT_EQ(ctn_context_backend_count(ctx_.get(), &n), CTN_OK);
  ctn_backend_info info{};
  info.struct_size = sizeof info;
  EXPECT_INVALID(ctn_context_backend_info(ctx_.get(), n, &info));
  EXPECT_EQ(info.name, nullptr);
}

// A plan compiled for x:[2, 3] f32 fed something else.
class BadFeed : public BadInput {
 protected:
  void SetUp() override {
    BadInput::SetUp();
    if (HasFatalFailure()) return;
    x_ = Input("x", CTN_F32, {2, 3});
    ASSERT_EQ(ctn_relu(g_.get(), x_, &y_), CTN_OK) << ctn_last_error();
    ctn_plan *raw = nullptr;
    ctn_status st = ctn_plan_compile(g_.get(), 1, &y_, nullptr, &raw);
    ASSERT_EQ(st, CTN_OK) << Describe(st);
    plan_.reset(raw);
    ctn_tensor *out = nullptr;
    ASSERT_EQ(ctn_plan_output_create(plan_.get(), 0, &out), CTN_OK) << ctn_last_error();
    out_.reset(out);
  }
  ctn_status Run(const ctn_tensor *feed) {
    const ctn_tensor *values[1] = {feed};
    ctn_tensor *outs[1] = {out_.get()};
    return ctn_plan_run(plan_.get(), 1, &x_, values, 1, outs);
  }
  ctn_node x_ = CTN_NODE_NONE, y_ = CTN_NODE_NONE;
  Plan plan_;
  Tensor out_;
};

TEST_F(BadFeed, WrongShapeNamesTheInput) {
  Tensor bad = MakeF32({3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_FAILS_WITH(CTN_ERR_SHAPE, Run(bad.get()));
  ExpectMessageHas({"\"x\"", "[2, 3]", "[3, 2]"});
}

TEST_F(BadFeed, WrongDtypeNamesTheInput) {
  Tensor bad = MakeF64({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_FAILS_WITH(CTN_ERR_DTYPE, Run(bad.get()));
  ExpectMessageHas({"\"x\"", "f32", "f64"});
}

TEST_F(BadFeed, OutputsUntouchedOnErrorAndPlanStillRuns) {
  // Fill the output with a marker; a failing run must not write it.
  const std::vector<float> marker(6, 42.f);
  ASSERT_EQ(ctn_tensor_write(out_.get(), marker.data(), marker.size() * sizeof(float)), CTN_OK);
  Tensor bad = MakeF32({3, 2}, {-1, -1, -1, -1, -1, -1});
  EXPECT_FAILS_WITH(CTN_ERR_SHAPE, Run(bad.get()));
  EXPECT_EQ(ReadF32(out_.get()), marker);

  Tensor good = MakeF32({2, 3}, {-1, 2, -3, 4, -5, 6});
  ASSERT_EQ(Run(good.get()), CTN_OK) << ctn_last_error();
  EXPECT_EQ(ReadF32(out_.get()), (std::vector<float>{0, 2, 0, 4, 0, 6}));
}

TEST_F(BadFeed, MissingFeedAndBadOutputs) {
  ctn_tensor *outs[1] = {out_.get()};
  EXPECT_NE(ctn_plan_run(plan_.get(), 0, nullptr, nullptr, 1, outs), CTN_OK);
  ExpectMessageHas({"x"});

  Tensor good = MakeF32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor wrong_out = MakeF32({6}, {0, 0, 0, 0, 0, 0});
  const ctn_tensor *values[1] = {good.get()};
  ctn_tensor *bad_outs[1] = {wrong_out.get()};
  EXPECT_FAILS_WITH(CTN_ERR_SHAPE, ctn_plan_run(plan_.get(), 1, &x_, values, 1, bad_outs));
  // More outputs than the plan has.
  ctn_tensor *two[2] = {out_.get(), out_.get()};
  EXPECT_INVALID(ctn_plan_run(plan_.get(), 1, &x_, values, 2, two));
  // A feed for a node that is not an input.
  EXPECT_INVALID(ctn_plan_run(plan_.get(), 1, &y_, values, 1, outs));

  ctn_tensor *extra = nullptr;
  EXPECT_INVALID(ctn_plan_output_create(plan_.get(), 1, &extra));
  EXPECT_EQ(extra, nullptr);
}

}  // namespace
