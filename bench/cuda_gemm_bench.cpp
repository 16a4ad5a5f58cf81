// cuda_gemm_bench: the CUDA plugin's matmul kernel vs a direct cublasGemmEx on the same device
// buffers, same shapes, same run (f32 and TF32), plus the host time per node of a replayed plan
// segment (CUDA graph). Loads ctn-cuda.so through its ABI table only. JSON on stdout.
//
//   cuda_gemm_bench [path/to/ctn-cuda.so] [iterations]
//
// Built only when CUDA is present (backends/cuda/meson.build); needs a GPU to run.
#include <chutney/backend.h>
#include <chutney/ops.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_plugin.h"

namespace {

// An f32 descriptor of contiguous device memory.
ctn_tensor_desc desc(void *data, const std::vector<int64_t> &shape) {
  return ctn_test_host::contiguous_desc(CTN_F32, shape, data);
}

#define CHECK(x)                                                                     \
  do {                                                                               \
    if (!(x)) {                                                                      \
      std::fprintf(stderr, "failed: %s (%s) at line %d\n", #x, bench_plugin_error(), __LINE__); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

}  // namespace

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "backends/cuda/ctn-cuda.so";
  const int iters = argc > 2 ? std::atoi(argv[2]) : 50;
  const ctn_host_api host = bench_host();
  const ctn_backend_desc *be = bench_load_backend("cuda_gemm_bench", path, &host);
  if (!be) return 1;
  ctn_backend_config cfg{sizeof cfg, 1};
  void *state = nullptr;
  if (be->init(&host, &cfg, &state) != CTN_OK) {
    std::printf("{\"error\": \"%s\"}\n", bench_plugin_error());
    return 2;
  }
  auto get_stream = reinterpret_cast<void *(*)(void *)>(be->get_proc_address(state, "ctn_cuda_stream"));
  CHECK(get_stream != nullptr);
  cudaStream_t stream = static_cast<cudaStream_t>(get_stream(state));
  cublasHandle_t blas;
  CHECK(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS);
  cublasSetStream(blas, stream);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);

  std::printf("{\n  \"device\": \"%s\",\n  \"backend\": \"%s\",\n  \"gemm\": [\n", prop.name,
              be->describe(state));
  const int sizes[][3] = {{1024, 1024, 1024}, {4096, 4096, 4096}, {8192, 8192, 8192},
                          {256, 4096, 1024}, {4096, 256, 4096}};
  bool first = true;
  for (int tf32 = 0; tf32 <= 1; ++tf32) {
    CHECK(be->set_option(state, "tf32", tf32 ? "1" : "0") == CTN_OK);
    for (const auto &sz : sizes) {
      const int64_t m = sz[0], n = sz[1], k = sz[2];
      void *a = nullptr, *b = nullptr, *c = nullptr;
      CHECK(be->buffer_alloc(state, m * k * 4, &a) == CTN_OK);
      CHECK(be->buffer_alloc(state, k * n * 4, &b) == CTN_OK);
      CHECK(be->buffer_alloc(state, m * n * 4, &c) == CTN_OK);
      cudaMemset(a, 0, m * k * 4);
      cudaMemset(b, 0, k * n * 4);
      ctn_tensor_desc in[2] = {desc(a, {m, k}), desc(b, {k, n})};
      ctn_tensor_desc out = desc(c, {m, n});
      ctn_attrs attrs{};
      attrs.ni = 2;
      ctn_op_signature sig{sizeof sig, 2, CTN_OP_MATMUL, in, &out, &attrs};
      ctn_kernel kern{};
      CHECK(be->get_kernel(state, &sig, &kern) == CTN_OK);
      ctn_kernel_args args{2, 1, in, &out, &attrs, nullptr, 0};
      cudaEvent_t e0, e1;
      cudaEventCreate(&e0);
      cudaEventCreate(&e1);
      // The plugin's kernel.
      for (int w = 0; w < 3; ++w) CHECK(kern.fn(kern.state, &args) == CTN_OK);
      cudaEventRecord(e0, stream);
      for (int i = 0; i < iters; ++i) kern.fn(kern.state, &args);
      cudaEventRecord(e1, stream);
      cudaEventSynchronize(e1);
      float ms_plugin = 0;
      cudaEventElapsedTime(&ms_plugin, e0, e1);
      // Direct cuBLAS, row-major via the transposed product, same compute type.
      const float one = 1, zero = 0;
      const cublasComputeType_t ct = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      auto direct = [&] {
        cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                     static_cast<int>(k), &one, b, CUDA_R_32F, static_cast<int>(n), a, CUDA_R_32F,
                     static_cast<int>(k), &zero, c, CUDA_R_32F, static_cast<int>(n), ct,
                     CUBLAS_GEMM_DEFAULT);
      };
      for (int w = 0; w < 3; ++w) direct();
      cudaEventRecord(e0, stream);
      for (int i = 0; i < iters; ++i) direct();
      cudaEventRecord(e1, stream);
      cudaEventSynchronize(e1);
      float ms_direct = 0;
      cudaEventElapsedTime(&ms_direct, e0, e1);
      const double flops = 2.0 * m * n * k * iters;
      std::printf("%s    {\"m\": %lld, \"n\": %lld, \"k\": %lld, \"mode\": \"%s\", "
                  "\"plugin_tflops\": %.2f, \"cublas_tflops\": %.2f, \"ratio\": %.3f}",
                  first ? "" : ",\n", static_cast<long long>(m), static_cast<long long>(n),
                  static_cast<long long>(k), tf32 ? "tf32" : "f32", flops / (ms_plugin * 1e9),
                  flops / (ms_direct * 1e9), ms_direct / ms_plugin);
      first = false;
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      kern.release(kern.state);
      be->buffer_free(state, a);
      be->buffer_free(state, b);
      be->buffer_free(state, c);
    }
  }
  std::printf("\n  ],\n");

  // Host time per node of a replayed segment: 1000 small relu calls recorded once.
  {
    const int nodes = 1000;
    void *x = nullptr;
    CHECK(be->buffer_alloc(state, 256 * 4, &x) == CTN_OK);
    ctn_tensor_desc d = desc(x, {256});
    ctn_attrs attrs{};
    ctn_op_signature sig{sizeof sig, 1, CTN_OP_RELU, &d, &d, &attrs};
    ctn_kernel kern{};
    CHECK(be->get_kernel(state, &sig, &kern) == CTN_OK);
    ctn_kernel_args args{1, 1, &d, &d, &attrs, nullptr, 0};
    std::vector<ctn_plan_call> calls(nodes, ctn_plan_call{&kern, &args});
    void *seg = nullptr;
    CHECK(be->plan_prepare(state, nodes, calls.data(), &seg) == CTN_OK);
    for (int w = 0; w < 3; ++w) be->plan_run(state, seg);
    be->synchronize(state);
    const int reps = 20;
    double host_us = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) {
      auto h0 = std::chrono::steady_clock::now();
      be->plan_run(state, seg);
      host_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count();
      be->synchronize(state);
    }
    double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    std::printf("  \"graph_replay\": {\"nodes\": %d, \"host_us_per_node\": %.4f, "
                "\"wall_us_per_node\": %.4f}\n}\n",
                nodes, host_us / (reps * nodes), wall_us / (reps * nodes));
    be->plan_release(state, seg);
    kern.release(kern.state);
    be->buffer_free(state, x);
  }
  cublasDestroy(blas);
  be->shutdown(state);
  return 0;
}
