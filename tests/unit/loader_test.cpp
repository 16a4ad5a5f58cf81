// Plugin loader: search order, the explain report, duplicate and non-plugin files, backend
// selection errors.
#include "test_helpers.h"

#include <cstdlib>

namespace {
const std::string kCpu = std::string(CTN_TEST_BUILD_ROOT) + "/backends/cpu/ctn-cpu.so";
bool contains(const std::string &s, const std::string &w) { return s.find(w) != std::string::npos; }
}  // namespace

TEST(Loader, AutoloadFindsTheBuildTreeAndExplains) {
  Ctx c;
  const char *rep = nullptr;
  CTN_ASSERT_OK(ctn_context_plugin_report(c.ctx, &rep));
  std::string r = rep;
  EXPECT_TRUE(contains(r, "loaded")) << r;
  EXPECT_TRUE(contains(r, "ctn-cpu.so")) << r;
  uint32_t n = 0;
  CTN_ASSERT_OK(ctn_context_backend_count(c.ctx, &n));
  bool cpu = false;
  for (uint32_t i = 0; i < n; ++i) {
    ctn_backend_info bi{};
    bi.struct_size = sizeof bi;
    CTN_ASSERT_OK(ctn_context_backend_info(c.ctx, i, &bi));
    if (std::string(bi.name) == "cpu") {
      cpu = bi.available;
      EXPECT_EQ(bi.abi_major, static_cast<uint32_t>(CTN_ABI_MAJOR));
    }
  }
  EXPECT_TRUE(cpu);
  ctn_backend_info bad{};
  bad.struct_size = sizeof bad;
  EXPECT_EQ(ctn_context_backend_info(c.ctx, 99, &bad), CTN_ERR_INVALID_ARGUMENT);
}

TEST(Loader, ExplicitPathAndDuplicates) {
  ctn_context_options o{};
  o.struct_size = sizeof o;
  o.flags = CTN_CONTEXT_NO_AUTOLOAD;
  ctn_context *ctx;
  CTN_ASSERT_OK(ctn_context_create(&o, &ctx));
  uint32_t n = 7;
  CTN_ASSERT_OK(ctn_context_backend_count(ctx, &n));
  EXPECT_EQ(n, 0u);
  CTN_ASSERT_OK(ctn_context_load_plugin(ctx, kCpu.c_str()));
  EXPECT_EQ(ctn_context_load_plugin(ctx, kCpu.c_str()), CTN_ERR_PLUGIN);
  EXPECT_TRUE(contains(ctn_last_error(), "already loaded")) << ctn_last_error();
  EXPECT_EQ(ctn_context_load_plugin(ctx, "/nonexistent/ctn-x.so"), CTN_ERR_PLUGIN);
  EXPECT_TRUE(contains(ctn_last_error(), "file not found")) << ctn_last_error();
  // A shared object that is not a chutney plugin.
  std::string lib = std::string(CTN_TEST_BUILD_ROOT) + "/core/libchutney.so";
  EXPECT_EQ(ctn_context_load_plugin(ctx, lib.c_str()), CTN_ERR_PLUGIN);
  EXPECT_TRUE(contains(ctn_last_error(), "ctn_plugin_query")) << ctn_last_error();
  const char *rep;
  ctn_context_plugin_report(ctx, &rep);
  EXPECT_TRUE(contains(rep, "rejected")) << rep;
  // The good plugin still works after the rejections.
  ctn_graph *g;
  CTN_ASSERT_OK(ctn_graph_create(ctx, CTN_GRAPH_EAGER, &g));
  ctn_node a, b;
  CTN_ASSERT_OK(ctn_scalar(g, CTN_F32, -2.0, &a));
  CTN_ASSERT_OK(ctn_abs(g, a, &b));
  ctn_tensor *v;
  CTN_ASSERT_OK(ctn_graph_value(g, b, &v));
  EXPECT_EQ(read_f32(v)[0], 2.0f);
  ctn_tensor_release(v);
  ctn_graph_release(g);
  ctn_context_release(ctx);
}

TEST(Loader, PluginPathEnvironmentIsSearched) {
  ctn_context_options o{};
  o.struct_size = sizeof o;
  std::string dir = std::string(CTN_TEST_BUILD_ROOT) + "/backends/cpu";
  setenv("CHUTNEY_PLUGIN_PATH", ("/nonexistent-dir:" + dir).c_str(), 1);
  ctn_context *ctx;
  CTN_ASSERT_OK(ctn_context_create(&o, &ctx));
  unsetenv("CHUTNEY_PLUGIN_PATH");
  const char *rep;
  ctn_context_plugin_report(ctx, &rep);
  EXPECT_TRUE(contains(rep, "skipped     /nonexistent-dir")) << rep;
  EXPECT_TRUE(contains(rep, "ctn-cpu.so")) << rep;
  uint32_t n = 0;
  ctn_context_backend_count(ctx, &n);
  EXPECT_GE(n, 1u);
  ctn_context_release(ctx);
}

// Issue 12: NO_AUTOLOAD used to search CHUTNEY_PLUGIN_PATH anyway, so an application loading its
// own copy of a backend got "already loaded" whenever the user's environment set the variable.
TEST(Loader, NoAutoloadIgnoresPluginPathEnvironment) {
  ctn_context_options o{};
  o.struct_size = sizeof o;
  o.flags = CTN_CONTEXT_NO_AUTOLOAD;
  std::string cpu = std::string(CTN_TEST_BUILD_ROOT) + "/backends/cpu/ctn-cpu.so";
  setenv("CHUTNEY_PLUGIN_PATH", ("/nonexistent-dir:" + cpu).c_str(), 1);
  ctn_context *ctx;
  ctn_status s = ctn_context_create(&o, &ctx);
  unsetenv("CHUTNEY_PLUGIN_PATH");
  CTN_ASSERT_OK(s);
  uint32_t n = 7;
  CTN_EXPECT_OK(ctn_context_backend_count(ctx, &n));
  EXPECT_EQ(n, 0u) << "NO_AUTOLOAD loaded a plugin of CHUTNEY_PLUGIN_PATH";
  const char *rep = "";
  ctn_context_plugin_report(ctx, &rep);
  EXPECT_FALSE(contains(rep, "/nonexistent-dir")) << rep;
  // The application's own copy loads without "already loaded".
  CTN_EXPECT_OK(ctn_context_load_plugin(ctx, cpu.c_str()));
  CTN_EXPECT_OK(ctn_context_backend_count(ctx, &n));
  EXPECT_EQ(n, 1u);
  ctn_context_release(ctx);
}

// A backend name that is neither loaded nor one of the first-party backends is a typo: an error
// naming it and the known names, even beside a good one (issue 30). A first-party backend that
// is merely not here (no GPU build) is skipped, so one list serves many machines; empty items
// are refused.
TEST(Loader, UnknownBackendPreferenceIsAClearError) {
  ctn_context_options o{};
  o.struct_size = sizeof o;
  o.backends = "warp-drive";
  ctn_context *ctx = nullptr;
  EXPECT_EQ(ctn_context_create(&o, &ctx), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_TRUE(contains(ctn_last_error(), "warp-drive")) << ctn_last_error();
  EXPECT_TRUE(contains(ctn_last_error(), "known backends: cpu, cuda, opencl, vulkan")) << ctn_last_error();
  Ctx c;
  EXPECT_EQ(ctn_context_set_backends(c.ctx, "nope"), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctn_context_set_backends(c.ctx, "cdua,cpu"), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(ctn_last_error(), "unknown backend \"cdua\"")) << ctn_last_error();
  EXPECT_EQ(ctn_context_set_backends(c.ctx, ",,,"), CTN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(ctn_last_error(), "empty backend name")) << ctn_last_error();
  EXPECT_EQ(ctn_context_set_backends(c.ctx, "cpu,,cuda"), CTN_ERR_INVALID_ARGUMENT);
  // A first-party name that is not loaded or not available here is skipped beside a good one.
  CTN_EXPECT_OK(ctn_context_set_backends(c.ctx, "cuda,cpu"));
}
