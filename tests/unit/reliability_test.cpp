// Regression tests of issue 12's findings (hostile or edge arguments through the C API). Each
// case failed on the main branch before its fix: an over-read (ASan), undefined behaviour (UBSan,
// the asan stage runs this suite with halt_on_error), a hang, or a wrong status.
#include "test_helpers.h"

#include "../fuzz/raw_dtype.h"

#include <chutney/checkpoint.h>
#include <chutney/data.h>

#include <fcntl.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <functional>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

namespace {

bool contains(const char *hay, const char *needle) { return std::strstr(hay, needle) != nullptr; }

struct Graph {
  Ctx c;
  ctn_graph *g = nullptr;
  explicit Graph(uint32_t flags = 0) {
    if (ctn_graph_create(c.ctx, flags, &g) != CTN_OK) ADD_FAILURE() << ctn_last_error();
  }
  ~Graph() { ctn_graph_release(g); }
};

// ctn_op copied 8*ni bytes of a 128-byte array into the eager cache key (ASan over-read), and
// op libraries received the unchecked counts.
TEST(Reliability, AttributeCountsPastTheArraysAreRefused) {
  for (uint32_t flags : {0u, CTN_GRAPH_EAGER}) {
    Graph G(flags);
    ctn_tensor *t = make_f32({2, 3}, {1, 2, 3, 4, 5, 6});
    ctn_node x;
    CTN_ASSERT_OK(ctn_constant(G.g, t, &x));
    ctn_tensor_release(t);
    ctn_attrs at{};
    at.ni = 1000;
    ctn_node out = 77;
    EXPECT_EQ(ctn_op(G.g, "relu", 1, &x, &at, &out), CTN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(out, 77u);
    EXPECT_TRUE(contains(ctn_last_error(), "attrs.ni")) << ctn_last_error();
    at.ni = CTN_ATTR_INTS + 1;
    EXPECT_EQ(ctn_op(G.g, "relu", 1, &x, &at, &out), CTN_ERR_INVALID_ARGUMENT);
    at.ni = 0;
    at.nf = CTN_ATTR_FLOATS + 1;
    EXPECT_EQ(ctn_op(G.g, "leaky_relu", 1, &x, &at, &out), CTN_ERR_INVALID_ARGUMENT);
    // The limits themselves are fine.
    at.ni = CTN_ATTR_INTS;
    at.nf = CTN_ATTR_FLOATS;
    CTN_EXPECT_OK(ctn_op(G.g, "relu", 1, &x, &at, &out));
  }
}

// An out-of-range dtype was loaded as the enum before it was validated (UBSan: load of a value
// not valid for ctn_dtype).
TEST(Reliability, OutOfRangeDtypesAreRefusedBeforeUse) {
  // Passed through C shims (tests/fuzz/raw_dtype.c), as a C caller can.
  for (int32_t d : {13, 14, 1000, -1, std::numeric_limits<int32_t>::min()}) {  // 6-8 (1.5) and 9-12 (1.6) are valid
    const int64_t shape[1] = {2};
    ctn_tensor *t = nullptr;
    EXPECT_EQ(raw_tensor_create(d, 1, shape, nullptr, &t), CTN_ERR_DTYPE) << d;
    EXPECT_EQ(t, nullptr);
    EXPECT_EQ(raw_dtype_size(d), 0u) << d;
    EXPECT_NE(raw_dtype_name(d), nullptr);
    Graph G;
    ctn_node n = 5;
    EXPECT_EQ(raw_input(G.g, "x", d, 1, shape, &n), CTN_ERR_DTYPE) << d;
    EXPECT_EQ(raw_scalar(G.g, d, 1.0, &n), CTN_ERR_DTYPE) << d;
    ctn_node one;
    CTN_ASSERT_OK(ctn_scalar(G.g, CTN_F32, 1.0, &one));
    EXPECT_NE(raw_cast(G.g, one, d, &n), CTN_OK) << d;
    EXPECT_EQ(n, 5u);
  }
}

// ctn_scalar cast inf, NaN and 1e30 to integer dtypes (undefined behaviour).
TEST(Reliability, ScalarsAnIntegerDtypeCannotHoldAreRefused) {
  Graph G;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  struct Case {
    ctn_dtype dt;
    double v;
  } bad[] = {{CTN_I32, inf},   {CTN_I32, nan},     {CTN_I32, 1e30},   {CTN_I32, 2147483648.0},
             {CTN_I64, -inf},  {CTN_I64, 1e30},    {CTN_I64, 9.3e18}, {CTN_U8, -1.0},
             {CTN_U8, 256.0},  {CTN_U8, nan}};
  for (const Case &c : bad) {
    ctn_node n = 9;
    EXPECT_EQ(ctn_scalar(G.g, c.dt, c.v, &n), CTN_ERR_INVALID_ARGUMENT) << ctn_dtype_name(c.dt) << " " << c.v;
    EXPECT_EQ(n, 9u);
    EXPECT_TRUE(contains(ctn_last_error(), "does not fit")) << ctn_last_error();
  }
  ctn_node n;
  CTN_EXPECT_OK(ctn_scalar(G.g, CTN_I32, 2147483647.0, &n));
  CTN_EXPECT_OK(ctn_scalar(G.g, CTN_I32, -2147483648.0, &n));
  CTN_EXPECT_OK(ctn_scalar(G.g, CTN_U8, 255.9, &n));
  CTN_EXPECT_OK(ctn_scalar(G.g, CTN_F32, inf, &n));
  CTN_EXPECT_OK(ctn_scalar(G.g, CTN_BOOL, nan, &n));
}

// The CPU backend's strided elementwise path divided by a zero-length dimension (SIGFPE on x86
// where it runs): [2,0,3] + [2,1,3] broadcasts through it.
TEST(Reliability, EmptyBroadcastThroughTheStridedPath) {
  for (uint32_t flags : {0u, CTN_GRAPH_EAGER}) {
    Graph G(flags);
    ctn_tensor *a = make_f32({2, 0, 3}, {});
    ctn_tensor *b = make_f32({2, 1, 3}, {1, 2, 3, 4, 5, 6});
    ctn_tensor *c = make_f32({1, 0, 1}, {});
    ctn_node na, nb, nc, s, s2;
    CTN_ASSERT_OK(ctn_constant(G.g, a, &na));
    CTN_ASSERT_OK(ctn_constant(G.g, b, &nb));
    CTN_ASSERT_OK(ctn_constant(G.g, c, &nc));
    CTN_ASSERT_OK(ctn_add(G.g, na, nb, &s));
    CTN_ASSERT_OK(ctn_mul(G.g, nb, nc, &s2));
    ctn_tensor_release(a);
    ctn_tensor_release(b);
    ctn_tensor_release(c);
    uint32_t nd = 0;
    int64_t shape[8];
    CTN_ASSERT_OK(ctn_node_info(G.g, s2, nullptr, &nd, shape));
    ASSERT_EQ(nd, 3u);
    EXPECT_EQ(shape[1], 0);
    if (!flags) {
      auto r = run_once(G.g, {s, s2});
      ASSERT_EQ(r.size(), 2u);
      EXPECT_TRUE(r[0].empty());
      EXPECT_TRUE(r[1].empty());
    }
  }
}

// Slices with a step near 2^63 overflowed (e - s + step - 1) and stride * step.
TEST(Reliability, SliceWithAHugeStepTakesOneElement) {
  const int64_t huge = std::numeric_limits<int64_t>::max();
  ctn_tensor *t = make_f32({5}, {1, 2, 3, 4, 5});
  ctn_tensor *v = nullptr;
  CTN_ASSERT_OK(ctn_tensor_slice(t, 0, 1, 5, huge, &v));
  EXPECT_EQ(read_f32(v), std::vector<float>({2}));
  ctn_tensor_release(v);
  CTN_ASSERT_OK(ctn_tensor_slice(t, 0, -huge, huge, huge - 1, &v));
  EXPECT_EQ(read_f32(v), std::vector<float>({1}));
  ctn_tensor_release(v);
  Graph G;
  ctn_node x, s;
  CTN_ASSERT_OK(ctn_constant(G.g, t, &x));
  CTN_ASSERT_OK(ctn_slice(G.g, x, 0, 2, huge, huge, &s));
  auto r = run_once(G.g, {s});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0], std::vector<float>({3}));
  ctn_tensor_release(t);
}

// Reshape multiplied the target's dims without an overflow check (signed overflow), so a huge
// target could even "match" the element count after wrapping.
TEST(Reliability, ReshapeToAnOverflowingShapeIsAShapeError) {
  ctn_tensor *t = make_f32({4}, {1, 2, 3, 4});
  const int64_t wraps[3] = {int64_t(1) << 32, int64_t(1) << 32, 4};  // 2^66 wraps to 0 * ...
  const int64_t wraps4[2] = {(int64_t(1) << 62) + 1, 4};               // 2^64 + 4 wraps to 4
  ctn_tensor *r = nullptr;
  EXPECT_EQ(ctn_tensor_reshape(t, 3, wraps, &r, nullptr), CTN_ERR_SHAPE);
  EXPECT_EQ(ctn_tensor_reshape(t, 2, wraps4, &r, nullptr), CTN_ERR_SHAPE);
  EXPECT_EQ(r, nullptr);
  const int64_t with_infer[3] = {int64_t(1) << 62, 8, -1};
  EXPECT_EQ(ctn_tensor_reshape(t, 3, with_infer, &r, nullptr), CTN_ERR_SHAPE);
  Graph G;
  ctn_node x, y = 3;
  CTN_ASSERT_OK(ctn_constant(G.g, t, &x));
  EXPECT_EQ(ctn_reshape(G.g, x, 2, wraps4, &y), CTN_ERR_SHAPE);
  EXPECT_EQ(y, 3u);
  // A zero anywhere makes the count 0, however large the rest.
  ctn_tensor *e = make_f32({0}, {});
  const int64_t zero[3] = {int64_t(1) << 62, 0, int64_t(1) << 62};
  CTN_EXPECT_OK(ctn_tensor_reshape(e, 3, zero, &r, nullptr));
  ctn_tensor_release(r);
  ctn_tensor_release(e);
  ctn_tensor_release(t);
}

// A value that is an output several times was pinned by adding a huge count once per listing:
// three listings overflowed the planner's use counter (and could let it free the output).
TEST(Reliability, AnOutputListedThreeTimesStaysPinned) {
  Graph G;
  ctn_tensor *t = make_f32({4}, {1, -2, 3, -4});
  ctn_node x, r, e;
  CTN_ASSERT_OK(ctn_constant(G.g, t, &x));
  ctn_tensor_release(t);
  CTN_ASSERT_OK(ctn_relu(G.g, x, &r));
  CTN_ASSERT_OK(ctn_exp(G.g, r, &e));
  auto out = run_once(G.g, {r, r, r, e});
  ASSERT_EQ(out.size(), 4u);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(out[k], std::vector<float>({1, 0, 3, 0}));
  EXPECT_FLOAT_EQ(out[3][2], std::exp(3.0f));
}

// A FIFO given as a checkpoint or dataset blocked in open() forever. Each call runs in a child
// with a deadline so that a regression fails instead of hanging the suite.
int status_in_child(const std::function<ctn_status()> &fn, int seconds) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(static_cast<unsigned>(seconds));
    _exit(static_cast<int>(fn()));
  }
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFSIGNALED(st)) return -WTERMSIG(st);
  return WEXITSTATUS(st);
}

TEST(Reliability, FifosAreRefusedWithoutBlocking) {
  std::string dir = temp_template("ctn-rel");
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string fifo = std::string(dir) + "/pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  int s = status_in_child(
      [&] {
        ctn_checkpoint *ck = nullptr;
        return ctn_checkpoint_load(fifo.c_str(), &ck);
      },
      10);
  EXPECT_EQ(s, CTN_ERR_IO) << "checkpoint: " << (s == -SIGALRM ? "blocked" : "wrong status");
  s = status_in_child(
      [&] {
        ctn_dataset *ds = nullptr;
        return ctn_dataset_open_idx(fifo.c_str(), fifo.c_str(), &ds);
      },
      10);
  EXPECT_EQ(s, CTN_ERR_IO) << "dataset: " << (s == -SIGALRM ? "blocked" : "wrong status");
  ctn_checkpoint *ck = nullptr;
  if (s == CTN_ERR_IO) {  // the message, in this process now that it is known not to block
    EXPECT_EQ(ctn_checkpoint_load(fifo.c_str(), &ck), CTN_ERR_IO);
    EXPECT_TRUE(contains(ctn_last_error(), "not a regular file")) << ctn_last_error();
    EXPECT_TRUE(contains(ctn_last_error(), fifo.c_str())) << ctn_last_error();
  }
  unlink(fifo.c_str());
  rmdir(dir.c_str());
}

// A FIFO among the plugin candidates (CHUTNEY_PLUGIN_PATH, options.plugin_path or an explicit
// load) once blocked ctn_context_create forever in dlopen's open().
TEST(Reliability, FifoPluginCandidatesAreRefusedWithoutBlocking) {
  std::string dir = temp_template("ctn-rel");
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string fifo = dir + "/ctn-x.so";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // Without autoload only plugin_path is searched (the same loader path CHUTNEY_PLUGIN_PATH takes),
  // so the child does not spend the deadline measuring the GPU backends' placement policies.
  auto create_with = [&](const char *plugin_path) -> ctn_status {
    ctn_context_options o{};
    o.struct_size = sizeof o;
    o.flags = CTN_CONTEXT_NO_AUTOLOAD;
    o.plugin_path = plugin_path;
    ctn_context *ctx = nullptr;
    ctn_status st = ctn_context_create(&o, &ctx);
    ctn_context_release(ctx);
    return st;
  };
  EXPECT_EQ(status_in_child([&] { return create_with(dir.c_str()); }, 20), CTN_OK) << "directory scan";
  EXPECT_EQ(status_in_child([&] { return create_with(fifo.c_str()); }, 20), CTN_OK) << "file in plugin_path";
  const int s = status_in_child(
      [&]() -> ctn_status {
        ctn_context_options o{};
        o.struct_size = sizeof o;
        o.flags = CTN_CONTEXT_NO_AUTOLOAD;
        ctn_context *ctx = nullptr;
        if (ctn_context_create(&o, &ctx) != CTN_OK) return CTN_ERR_INTERNAL;
        const ctn_status st = ctn_context_load_plugin(ctx, fifo.c_str());
        ctn_context_release(ctx);
        return st;
      },
      20);
  ASSERT_EQ(s, CTN_ERR_PLUGIN) << (s == -SIGALRM ? "blocked" : "wrong status");
  // In this process, now that it is known not to block: the message and the report.
  ctn_context_options o{};
  o.struct_size = sizeof o;
  o.flags = CTN_CONTEXT_NO_AUTOLOAD;
  o.plugin_path = dir.c_str();
  ctn_context *ctx = nullptr;
  ASSERT_EQ(ctn_context_create(&o, &ctx), CTN_OK);
  EXPECT_EQ(ctn_context_load_plugin(ctx, fifo.c_str()), CTN_ERR_PLUGIN);
  EXPECT_TRUE(contains(ctn_last_error(), "not a regular file (a FIFO)")) << ctn_last_error();
  EXPECT_TRUE(contains(ctn_last_error(), fifo.c_str())) << ctn_last_error();
  const char *report = nullptr;
  ASSERT_EQ(ctn_context_plugin_report(ctx, &report), CTN_OK);
  EXPECT_TRUE(contains(report, "rejected") && contains(report, "ctn-x.so: not a regular file (a FIFO)")) << report;
  ctn_context_release(ctx);
  unlink(fifo.c_str());
  rmdir(dir.c_str());
}

}  // namespace

namespace {

// A plan whose memory cannot exist fails to compile, saying how many bytes it planned, and the
// context keeps working. (2^47 bytes: past any x86-64 or AArch64 user address space.)
TEST(Reliability, APlanTooLargeForMemoryFailsAtCompileTime) {
  Graph G;
  const int64_t shape[2] = {int64_t(1) << 22, int64_t(1) << 23};
  ctn_node x, y;
  CTN_ASSERT_OK(ctn_input(G.g, "x", CTN_F32, 2, shape, &x));
  CTN_ASSERT_OK(ctn_relu(G.g, x, &y));
  ctn_plan *p = nullptr;
  EXPECT_EQ(ctn_plan_compile(G.g, 1, &y, nullptr, &p), CTN_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(p, nullptr);
  EXPECT_TRUE(contains(ctn_last_error(), "140737488355328")) << ctn_last_error();
  ctn_tensor *t = make_f32({2}, {-1, 1});
  ctn_node c, r;
  CTN_ASSERT_OK(ctn_constant(G.g, t, &c));
  ctn_tensor_release(t);
  CTN_ASSERT_OK(ctn_relu(G.g, c, &r));
  auto out = run_once(G.g, {r});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], std::vector<float>({0, 1}));
}

}  // namespace

namespace {

// Issue 12: ctn_plan_compile failed with CTN_ERR_INTERNAL ("map::at") on graphs where an op read
// an assignment's node: assignments run last, so the op was scheduled before its input had a
// value. Reading an assignment's node now reads the assigned value.
TEST(Reliability, AnOpReadingAnAssignmentCompilesAndRuns) {
  Graph G;
  ctn_tensor *init = make_f32({3}, {0, 0, 0});
  ctn_tensor *xv = make_f32({3}, {-1, 2, -3});
  ctn_node v, x, a, r, a2, s;
  CTN_ASSERT_OK(ctn_variable(G.g, "v", init, &v));
  CTN_ASSERT_OK(ctn_constant(G.g, xv, &x));
  CTN_ASSERT_OK(ctn_assign(G.g, v, x, &a));
  CTN_ASSERT_OK(ctn_relu(G.g, a, &r));
  CTN_ASSERT_OK(ctn_assign(G.g, v, a, &a2));  // an assignment of an assignment's node
  CTN_ASSERT_OK(ctn_add(G.g, r, v, &s));      // v: the old value in this run
  ctn_plan *p = nullptr;
  ctn_node outs[3] = {r, s, a2};
  ASSERT_EQ(ctn_plan_compile(G.g, 3, outs, nullptr, &p), CTN_OK) << ctn_last_error();
  ctn_tensor *o[3];
  for (uint32_t k = 0; k < 3; ++k) CTN_ASSERT_OK(ctn_plan_output_create(p, k, &o[k]));
  CTN_ASSERT_OK(ctn_plan_run(p, 0, nullptr, nullptr, 3, o));
  EXPECT_EQ(read_f32(o[0]), std::vector<float>({0, 2, 0}));
  EXPECT_EQ(read_f32(o[1]), std::vector<float>({0, 2, 0}));
  EXPECT_EQ(read_f32(o[2]), std::vector<float>({-1, 2, -3}));
  ctn_tensor *now = nullptr;
  CTN_ASSERT_OK(ctn_plan_variable_read(p, v, &now));
  EXPECT_EQ(read_f32(now), std::vector<float>({-1, 2, -3}));
  ctn_tensor_release(now);
  for (ctn_tensor *t : o) ctn_tensor_release(t);
  ctn_plan_release(p);
  ctn_tensor_release(init);
  ctn_tensor_release(xv);
}

}  // namespace

namespace {

std::vector<std::string> list_dir(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

// A checkpoint written to a full file system (a 256 KiB tmpfs; needs root, skipped otherwise)
// fails with a clear error naming the file, leaves the previous checkpoint intact and no
// temporary file.
TEST(Reliability, CheckpointOnAFullFileSystemKeepsThePreviousOne) {
  std::string dir = temp_template("ctn-rel-full");
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  if (geteuid() != 0 || mount("ctn-rel", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=256k") != 0) {
    rmdir(dir.c_str());
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root / CAP_SYS_ADMIN)";
  }
  const std::string path = dir + "/model.safetensors";
  ctn_tensor *small = make_f32({16}, std::vector<float>(16, 1.5f));
  const char *name = "w";
  CTN_EXPECT_OK(ctn_checkpoint_save(path.c_str(), 1, &name, &small, nullptr));
  struct stat before {};
  ASSERT_EQ(stat(path.c_str(), &before), 0);
  ctn_tensor *big = make_f32({256 * 1024}, {});  // 1 MiB: does not fit
  EXPECT_EQ(ctn_checkpoint_save(path.c_str(), 1, &name, &big, nullptr), CTN_ERR_IO);
  const std::string msg = ctn_last_error();
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No space left"), std::string::npos) << msg;
  EXPECT_EQ(list_dir(dir), std::vector<std::string>({"model.safetensors"})) << "a partial file was left";
  ctn_checkpoint *ck = nullptr;
  ASSERT_EQ(ctn_checkpoint_load(path.c_str(), &ck), CTN_OK) << ctn_last_error();
  ctn_tensor *w = nullptr;
  CTN_EXPECT_OK(ctn_checkpoint_get(ck, "w", &w));
  if (w) {
    EXPECT_EQ(read_f32(w), std::vector<float>(16, 1.5f));
  }
  ctn_tensor_release(w);
  ctn_checkpoint_release(ck);
  ctn_tensor_release(small);
  ctn_tensor_release(big);
  umount2(dir.c_str(), MNT_DETACH);
  rmdir(dir.c_str());
}

// The CPU plugin is dlclose-d with the last context and loaded again with the next. Its
// libraries' initial-exec TLS (libgomp, libdnnl) came out of the static TLS block anew each
// time while PoCL's and Mesa's libraries stayed between them: the ninth context had no CPU
// backend ("cannot allocate memory in static TLS block").
TEST(Reliability, ManyContextsOneAfterAnotherAllHaveTheCpuBackend) {
  for (int i = 0; i < 24; ++i) {
    Ctx c;
    const char *report = nullptr;
    ASSERT_EQ(ctn_context_plugin_report(c.ctx, &report), CTN_OK) << ctn_last_error();
    ASSERT_TRUE(contains(report, "backend \"cpu\"")) << "context " << i << ":\n" << report;
  }
}

}  // namespace

namespace {

// Issue 30: a ctn_grad that failed in a gradient rule (an op with none, met after the seed and
// the later ops' gradients had been appended) left those nodes in the graph; a failed call
// changes no state.
TEST(Reliability, AFailedGradLeavesTheGraphAsItWas) {
  Graph G;
  const int64_t shape[1] = {3};
  ctn_node x, y, d, l;
  CTN_ASSERT_OK(ctn_input(G.g, "x", CTN_F32, 1, shape, &x));
  CTN_ASSERT_OK(ctn_input(G.g, "y", CTN_F32, 1, shape, &y));
  const ctn_node in[2] = {x, y};
  CTN_ASSERT_OK(ctn_op(G.g, "relu_grad", 2, in, nullptr, &d));  // no gradient rule of its own
  CTN_ASSERT_OK(ctn_sum(G.g, d, 0, nullptr, 0, &l));
  uint32_t before = 0, after = 0;
  CTN_ASSERT_OK(ctn_graph_node_count(G.g, &before));
  ctn_node grad = 77;
  EXPECT_EQ(ctn_grad(G.g, l, 1, &x, &grad), CTN_ERR_UNSUPPORTED);
  EXPECT_TRUE(contains(ctn_last_error(), "relu_grad")) << ctn_last_error();
  CTN_ASSERT_OK(ctn_graph_node_count(G.g, &after));
  EXPECT_EQ(after, before);
  EXPECT_EQ(grad, 77u);
  ctn_tensor *xv = make_f32({3}, {-1, 2, 3});
  ctn_tensor *yv = make_f32({3}, {5, 6, 7});
  auto out = run_once(G.g, {l}, {x, y}, {xv, yv});
  ctn_tensor_release(xv);
  ctn_tensor_release(yv);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], std::vector<float>({13}));
}

// Issue 30: ctn_plan_compile failed with CTN_ERR_INTERNAL ("map::at", thrown by the memory
// budget pass's planner simulation, which runs on every compile) when an assignment's value was
// an op created before its variable and the plan was compiled without dead-code elimination:
// that schedule follows creation order, so the op came before the variable, yet the assignment
// was elided (the op writing straight into the variable's storage, which had no value yet).
// Found by a graph fuzzer; the elision now requires the variable to be scheduled first.
TEST(Reliability, AnAssignmentWhoseValueIsMadeBeforeItsVariableCompilesWithoutDce) {
  const uint32_t disables[] = {0, CTN_PASS_DCE, CTN_PASS_DCE | CTN_PASS_CONSTANT_FOLDING | CTN_PASS_SIMPLIFY,
                               CTN_PASS_DCE | CTN_PASS_FUSION};
  for (uint32_t disable : disables)
    for (uint64_t budget : {uint64_t(0), uint64_t(CTN_MEMORY_BUDGET_AUTO)}) {
      SCOPED_TRACE("disable " + std::to_string(disable) + ", budget " + std::to_string(budget));
      Graph G;
      const int64_t shape[1] = {3};
      ctn_node x, r, v, a;
      CTN_ASSERT_OK(ctn_input(G.g, "x", CTN_F32, 1, shape, &x));
      CTN_ASSERT_OK(ctn_relu(G.g, x, &r));  // the value, made before the variable
      ctn_tensor *init = make_f32({3}, {7, 7, 7});
      CTN_ASSERT_OK(ctn_variable(G.g, "v", init, &v));
      ctn_tensor_release(init);
      CTN_ASSERT_OK(ctn_assign(G.g, v, r, &a));
      ctn_compile_options opt{};
      opt.struct_size = sizeof opt;
      opt.disable = disable;
      opt.memory_budget = budget;
      ctn_tensor *xv = make_f32({3}, {-1, 2, -3});
      const ctn_tensor *feeds[1] = {xv};
      auto out = run_once(G.g, {a}, {x}, {feeds[0]}, &opt);
      ctn_tensor_release(xv);
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0], std::vector<float>({0, 2, 0}));
    }
}

}  // namespace
