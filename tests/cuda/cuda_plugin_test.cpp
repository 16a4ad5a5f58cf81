// The CUDA backend plugin as a stranger sees it: through its ABI table (dlopen, no libchutney)
// and through a context. On a machine without a driver or GPU (CI) the plugin must load and
// report "unavailable: <reason>"; on a GPU machine it must be available and agree with the CPU
// backend. Either way the CPU backend keeps working beside it.
#include <chutney/backend.h>
#include <chutney/chutney.h>
#include <chutney/cuda.h>
#include <chutney/ops.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../common/plugin_host.h"

#ifndef CTN_CUDA_PLUGIN_PATH
#define CTN_CUDA_PLUGIN_PATH "ctn-cuda.so"
#endif

namespace {

using ctn_test_host::g_error;

const char *plugin_path() {
  const char *p = std::getenv("CTN_CUDA_PLUGIN");
  return p && *p ? p : CTN_CUDA_PLUGIN_PATH;
}

// The plugin file opened and queried with a host table of this test's callbacks; closed when
// it goes out of scope.
struct LoadedPlugin {
  void *dl = nullptr;
  ctn_host_api host{};
  const ctn_plugin_header *header = nullptr;
  ~LoadedPlugin() {
    if (dl) dlclose(dl);
  }
};

void load_plugin(LoadedPlugin *p) {
  p->dl = dlopen(plugin_path(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(p->dl, nullptr) << "the plugin must load even without a driver: " << dlerror();
  auto query = reinterpret_cast<ctn_plugin_query_fn>(dlsym(p->dl, CTN_PLUGIN_ENTRY_SYMBOL));
  ASSERT_NE(query, nullptr);
  p->host = ctn_test_host::make_host();
  p->header = query(CTN_ABI_VERSION, &p->host);
  ASSERT_NE(p->header, nullptr);
}

TEST(CudaPlugin, LoadsAndReportsAvailability) {
  LoadedPlugin p;
  ASSERT_NO_FATAL_FAILURE(load_plugin(&p));
  const ctn_plugin_header *h = p.header;
  EXPECT_STREQ(h->name, "cuda");
  EXPECT_EQ(h->kind, static_cast<uint32_t>(CTN_PLUGIN_BACKEND));
  EXPECT_EQ(h->abi_major, CTN_ABI_MAJOR);
  const auto *desc = reinterpret_cast<const ctn_backend_desc *>(h);
  ASSERT_NE(desc->plan_prepare, nullptr) << "the CUDA backend records plans as CUDA graphs";
  // Only the entry point is exported (version script).
  EXPECT_EQ(dlsym(p.dl, "_ZN8ctn_cuda11cuda_fail"), nullptr);

  ctn_backend_config cfg{sizeof cfg, 1};
  void *state = nullptr;
  g_error.clear();
  ctn_status s = desc->init(&p.host, &cfg, &state);
  if (s == CTN_OK) {
    std::printf("[ cuda     ] available: %s\n", desc->describe(state));
    EXPECT_NE(std::string(desc->describe(state)).find("sm_"), std::string::npos);
    EXPECT_EQ(desc->set_option(state, "placement", "always"), CTN_OK);
    EXPECT_EQ(desc->set_option(state, "placement", "sometimes"), CTN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(desc->set_option(state, "tf32", "1"), CTN_OK);
    EXPECT_EQ(desc->set_option(state, "no_such_key", "1"), CTN_ERR_INVALID_ARGUMENT);
    desc->shutdown(state);
  } else {
    std::printf("[ cuda     ] %s\n", g_error.c_str());
    EXPECT_EQ(s, CTN_ERR_UNAVAILABLE) << g_error;
    EXPECT_EQ(g_error.rfind("unavailable: ", 0), 0u) << g_error;
    EXPECT_GT(g_error.size(), std::string("unavailable: ").size() + 5) << "a reason must follow";
  }
}

// since 1.2: the "ctn_cuda_interop" extra (abi/chutney/cuda.h). Without a GPU only the parts
// that need no device are checked (the extra is offered; NULL and short structs are refused);
// with one, the handles must be those of the backend (its stream) and the driver API reachable.
TEST(CudaPlugin, InteropExtra) {
  LoadedPlugin p;
  ASSERT_NO_FATAL_FAILURE(load_plugin(&p));
  const auto *desc = reinterpret_cast<const ctn_backend_desc *>(p.header);
  ASSERT_NE(desc->get_proc_address, nullptr);
  void *proc = desc->get_proc_address(nullptr, CTN_CUDA_INTEROP_PROC);
  ASSERT_NE(proc, nullptr) << "the cuda backend must offer " CTN_CUDA_INTEROP_PROC;
  auto get = reinterpret_cast<ctn_cuda_interop_fn>(proc);
  ctn_cuda_interop io{};
  io.struct_size = sizeof io;
  EXPECT_EQ(get(nullptr, &io), CTN_ERR_INVALID_ARGUMENT);
  ctn_backend_config cfg{sizeof cfg, 1};
  void *state = nullptr;
  g_error.clear();
  if (desc->init(&p.host, &cfg, &state) != CTN_OK) {
    GTEST_SKIP() << "no CUDA device, the handles are not checked: " << g_error;
  }
  ctn_cuda_interop small{};
  small.struct_size = 8;
  EXPECT_EQ(get(state, &small), CTN_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(get(state, &io), CTN_OK) << g_error;
  EXPECT_EQ(io.struct_size, sizeof io);
  EXPECT_EQ(io.version, CTN_CUDA_INTEROP_VERSION);
  EXPECT_NE(io.context, nullptr);
  EXPECT_GE(io.compute_capability, 50);
  auto stream_fn = reinterpret_cast<void *(*)(void *)>(desc->get_proc_address(state, "ctn_cuda_stream"));
  ASSERT_NE(stream_fn, nullptr);
  EXPECT_EQ(io.stream, stream_fn(state));
  ASSERT_NE(io.get_driver_function, nullptr);
  EXPECT_NE(io.get_driver_function(state, "cuLaunchKernel"), nullptr);
  EXPECT_EQ(io.get_driver_function(state, "cuNoSuchFunction"), nullptr);
  desc->shutdown(state);
}

// Through the public API: the context lists cuda (available or with its reason) and the CPU
// backend still computes.
TEST(CudaPlugin, ContextListsCudaAndCpuStillWorks) {
  ctn_context_options opt{};
  opt.struct_size = sizeof opt;
  opt.flags = CTN_CONTEXT_NO_AUTOLOAD;
  ctn_context *ctx = nullptr;
  ASSERT_EQ(ctn_context_create(&opt, &ctx), CTN_OK) << ctn_last_error();
  ASSERT_EQ(ctn_context_load_plugin(ctx, CTN_CPU_PLUGIN_PATH), CTN_OK) << ctn_last_error();
  ctn_status ls = ctn_context_load_plugin(ctx, plugin_path());
  ASSERT_TRUE(ls == CTN_OK || ls == CTN_ERR_UNAVAILABLE) << ctn_last_error();
  ASSERT_EQ(ctn_context_set_backends(ctx, "cpu"), CTN_OK) << ctn_last_error();
  uint32_t n = 0;
  ASSERT_EQ(ctn_context_backend_count(ctx, &n), CTN_OK);
  bool saw_cuda = false, cuda_available = false, cpu_available = false;
  for (uint32_t i = 0; i < n; ++i) {
    ctn_backend_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(ctn_context_backend_info(ctx, i, &info), CTN_OK);
    std::string name = info.name ? info.name : "";
    if (name == "cuda") {
      saw_cuda = true;
      cuda_available = info.available != 0;
      ASSERT_NE(info.description, nullptr);
      if (!cuda_available) {
        EXPECT_NE(std::string(info.description).find("unavailable: "), std::string::npos)
            << info.description;
      }
      std::printf("[ cuda     ] context: %s: %s\n", cuda_available ? "available" : "unavailable",
                  info.description);
    }
    if (name == "cpu") cpu_available = info.available != 0;
  }
  EXPECT_TRUE(saw_cuda);
  EXPECT_TRUE(cpu_available);
  EXPECT_EQ(ls == CTN_OK, cuda_available);

  // (a @ b) on the CPU, and on CUDA when it is there: same numbers, steps on the right backend.
  const int64_t sa[2] = {3, 4}, sb[2] = {4, 2};
  std::vector<float> av(12), bv(8);
  for (int i = 0; i < 12; ++i) av[i] = 0.25f * static_cast<float>(i) - 1.0f;
  for (int i = 0; i < 8; ++i) bv[i] = 0.5f * static_cast<float>(i % 3) - 0.3f;
  std::vector<const char *> targets = {"cpu"};
  if (cuda_available) targets.push_back("cuda");
  std::vector<std::vector<float>> results;
  for (const char *target : targets) {
    ctn_graph *g = nullptr;
    ASSERT_EQ(ctn_graph_create(ctx, 0, &g), CTN_OK);
    ctn_node a, b, y;
    ASSERT_EQ(ctn_input(g, "a", CTN_F32, 2, sa, &a), CTN_OK);
    ASSERT_EQ(ctn_input(g, "b", CTN_F32, 2, sb, &b), CTN_OK);
    ASSERT_EQ(ctn_matmul(g, a, b, 0, 0, &y), CTN_OK);
    ASSERT_EQ(ctn_relu(g, y, &y), CTN_OK);
    ctn_compile_options co{};
    co.struct_size = sizeof co;
    co.backends = target;
    ctn_plan *p = nullptr;
    ASSERT_EQ(ctn_plan_compile(g, 1, &y, &co, &p), CTN_OK) << ctn_last_error();
    uint32_t steps = 0;
    ASSERT_EQ(ctn_plan_backend_steps(p, target, "matmul", &steps), CTN_OK);
    EXPECT_EQ(steps, 1u) << target;
    ctn_tensor *ta = nullptr, *tb = nullptr, *out = nullptr;
    ASSERT_EQ(ctn_tensor_create(CTN_F32, 2, sa, av.data(), &ta), CTN_OK);
    ASSERT_EQ(ctn_tensor_create(CTN_F32, 2, sb, bv.data(), &tb), CTN_OK);
    ASSERT_EQ(ctn_plan_output_create(p, 0, &out), CTN_OK);
    const ctn_node feeds[2] = {a, b};
    const ctn_tensor *vals[2] = {ta, tb};
    ASSERT_EQ(ctn_plan_run(p, 2, feeds, vals, 1, &out), CTN_OK) << ctn_last_error();
    void *data = nullptr;
    ASSERT_EQ(ctn_tensor_data(out, &data), CTN_OK);
    const float *o = static_cast<const float *>(data);
    results.emplace_back(o, o + 6);
    ctn_tensor_release(ta);
    ctn_tensor_release(tb);
    ctn_tensor_release(out);
    ctn_plan_release(p);
    ctn_graph_release(g);
  }
  // The CPU result against a direct computation.
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      double acc = 0;
      for (int k = 0; k < 4; ++k) acc += double(av[i * 4 + k]) * double(bv[k * 2 + j]);
      EXPECT_NEAR(results[0][i * 2 + j], std::max(acc, 0.0), 1e-5);
    }
  if (results.size() > 1) {
    for (int i = 0; i < 6; ++i) EXPECT_NEAR(results[1][i], results[0][i], 1e-5) << i;
  }
  ctn_context_release(ctx);
}

}  // namespace
