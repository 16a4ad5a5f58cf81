// What a 32-bit build (armhf) cannot hold, and that it says so instead of wrapping a size: no
// single buffer over PTRDIFF_MAX (2 GiB - 1) -- host tensors, a plan's arena, a checkpoint file --
// and, on every build, no shape over 2^60 elements (whose bytes could overflow an int64). The 32-bit cases run where pointers are 32
// bits (the armhf stage runs this suite under qemu) and are skipped on 64-bit builds, where the
// same sizes would really be allocated.
#include "test_helpers.h"

#include <chutney/checkpoint.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace {

constexpr bool k32Bit = sizeof(void *) == 4;

#define SKIP_UNLESS_32BIT() \
  if (!k32Bit) GTEST_SKIP() << "32-bit limits: run by the armhf cross stage (qemu-arm)"

std::string last_error() { return ctn_last_error(); }

TEST(Limits, ShapeOverTwoToThe60ElementsIsAShapeError) {
  const int64_t huge[3] = {int64_t(1) << 31, int64_t(1) << 31, int64_t(1) << 31};
  ctn_tensor *t = nullptr;
  EXPECT_EQ(ctn_tensor_create(CTN_F32, 3, huge, nullptr, &t), CTN_ERR_SHAPE);
  EXPECT_EQ(t, nullptr);
  EXPECT_NE(last_error().find("more than 2^60"), std::string::npos) << last_error();
  Ctx c;
  ctn_graph *g = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
  ctn_node x = CTN_NODE_NONE;
  EXPECT_EQ(ctn_input(g, "x", CTN_F32, 3, huge, &x), CTN_ERR_SHAPE);
  // 2^63 - 1 elements count in an int64 but their bytes do not: refused too (found by fuzz_graph:
  // the CPU backend computed numel * 8 of such an input and overflowed).
  const int64_t wide[2] = {1, INT64_MAX};
  EXPECT_EQ(ctn_input(g, "w", CTN_I64, 2, wide, &x), CTN_ERR_SHAPE);
  EXPECT_NE(last_error().find("more than 2^60"), std::string::npos) << last_error();
  const int64_t over60[2] = {2, int64_t(1) << 60};
  EXPECT_EQ(ctn_tensor_create(CTN_U8, 2, over60, nullptr, &t), CTN_ERR_SHAPE);
  // A zero dimension makes a shape empty, not an overflow...
  const int64_t empty[3] = {int64_t(1) << 30, int64_t(1) << 30, 0};
  CTN_EXPECT_OK(ctn_tensor_create(CTN_F32, 3, empty, nullptr, &t));
  ctn_tensor_release(t);
  t = nullptr;
  // ...but its strides (products of the trailing dims) must fit too: [0, 2^63 - 1, 4, 2] made
  // the CPU backend overflow computing byte strides (found by fuzz_graph).
  const int64_t empty_wide[4] = {0, INT64_MAX, 4, 2};
  EXPECT_EQ(ctn_tensor_create(CTN_F32, 4, empty_wide, nullptr, &t), CTN_ERR_SHAPE);
  EXPECT_EQ(ctn_input(g, "e", CTN_F32, 4, empty_wide, &x), CTN_ERR_SHAPE);
  ctn_graph_release(g);
}

TEST(Limits32, TensorsOver2GiBAreRefusedNotWrapped) {
  SKIP_UNLESS_32BIT();
  // 4 GiB is 0 in a 32-bit size_t: this used to "succeed" with a 64-byte buffer.
  for (int64_t n : {int64_t(1) << 30, (int64_t(1) << 29) + 16}) {
    ctn_tensor *t = nullptr;
    EXPECT_EQ(ctn_tensor_create(CTN_F32, 1, &n, nullptr, &t), CTN_ERR_OUT_OF_MEMORY) << n;
    EXPECT_EQ(t, nullptr);
    const std::string bytes = std::to_string(4 * n) + " bytes";
    EXPECT_NE(last_error().find(bytes), std::string::npos) << last_error();
    EXPECT_NE(last_error().find("32-bit build"), std::string::npos) << last_error();
  }
  // One byte past the limit, as bytes.
  const int64_t n = int64_t(1) << 31;
  ctn_tensor *t = nullptr;
  EXPECT_EQ(ctn_tensor_create(CTN_U8, 1, &n, nullptr, &t), CTN_ERR_OUT_OF_MEMORY);
  // What fits still works.
  const int64_t ok = int64_t(1) << 20;
  CTN_EXPECT_OK(ctn_tensor_create(CTN_F32, 1, &ok, nullptr, &t));
  ctn_tensor_release(t);
}

TEST(Limits32, PlanWhoseArenaPasses2GiBFailsToCompile) {
  SKIP_UNLESS_32BIT();
  Ctx c;
  ctn_graph *g = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g));
  const int64_t n = int64_t(3) << 28;  // 3 GiB of f32: the graph is fine, no buffer holds it
  ctn_node x, y;
  CTN_ASSERT_OK(ctn_input(g, "x", CTN_F32, 1, &n, &x));
  CTN_ASSERT_OK(ctn_relu(g, x, &y));
  ctn_plan *p = nullptr;
  ctn_status st = ctn_plan_compile(g, 1, &y, nullptr, &p);
  EXPECT_EQ(st, CTN_ERR_OUT_OF_MEMORY) << last_error();
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(last_error().find("32-bit build"), std::string::npos) << last_error();
  ctn_plan_release(p);
  // The graph is unharmed: a small plan from the same context compiles and runs.
  ctn_graph *g2 = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(c.ctx, 0, &g2));
  const int64_t s = 4;
  ctn_node a, b;
  CTN_ASSERT_OK(ctn_input(g2, "a", CTN_F32, 1, &s, &a));
  CTN_ASSERT_OK(ctn_relu(g2, a, &b));
  ctn_tensor *av = make_f32({4}, {-1, 2, -3, 4});
  auto out = run_once(g2, {b}, {a}, {av});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], (std::vector<float>{0, 2, 0, 4}));
  ctn_tensor_release(av);
  ctn_graph_release(g2);
  ctn_graph_release(g);
}

TEST(Limits32, CheckpointFileOver2GiBIsRefusedBeforeReading) {
  SKIP_UNLESS_32BIT();
  // A sparse 3 GiB file with a valid header length: nothing is written to disk, and the loader
  // must refuse it from its size, not try to read it into a truncated buffer.
  std::string tmpl = temp_template("chutney-limits");
  char *path = tmpl.data();
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const unsigned char head[10] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
  ASSERT_EQ(write(fd, head, sizeof head), static_cast<ssize_t>(sizeof head));
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(int64_t(3) << 30)), 0);
  close(fd);
  ctn_checkpoint *ck = nullptr;
  EXPECT_EQ(ctn_checkpoint_load(path, &ck), CTN_ERR_OUT_OF_MEMORY) << last_error();
  EXPECT_EQ(ck, nullptr);
  EXPECT_NE(last_error().find("3221225472 bytes"), std::string::npos) << last_error();
  unlink(path);
}

}  // namespace
