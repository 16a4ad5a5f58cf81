// Internal declarations shared by the CPU backend's source files. Nothing here crosses the ABI.
#ifndef CTN_CPU_BACKEND_H
#define CTN_CPU_BACKEND_H

#include <chutney/backend.h>
#include <chutney/ops.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gemm.h"
#include "isa_variant.h"
#include "thread_pool.h"
#include "../common/kernel_util.h"

namespace ctn_cpu {

// Shared descriptor helpers and kernel-maker scaffolding (backends/common/desc_util.h,
// kernel_util.h).
using namespace ctn_backend_util;

enum class GemmMode { kAuto, kOpenBLAS, kOwn };
// Convolution provider: oneDNN where it has a JIT kernel for the shape (f32), the own im2col +
// GEMM otherwise (k_conv.cpp, k_conv_dnnl.cpp).
enum class ConvMode { kAuto, kOneDNN, kOwn };
enum class HalfMatmul { kAuto, kConvert, kOwn, kOneDNN };

// Kernels run on whichever thread calls them, several at once (plans and eager graphs on one
// context from several threads; the eager cache shares one kernel between graphs): a kernel's
// state is read-only after get_kernel, per-call memory comes from the call's workspace or the
// calling thread (GEMM scratch), and the options below may change while kernels run.
struct Backend {
  const ctn_host_api *host = nullptr;
  std::unique_ptr<ThreadPool> pool;  // created by init, resized in place: never replaced
  std::atomic<GemmMode> gemm_mode{GemmMode::kAuto};
  std::atomic<const GemmIsa *> gemm_isa{nullptr};
  std::atomic<ConvMode> conv_mode{ConvMode::kAuto};
  std::atomic<uint64_t> onednn_kernels{0};  // conv kernels made by oneDNN (tests, diagnostics)
  // 16-bit matmuls and convolutions made from now on (option half_matmul): kAuto and kConvert,
  // the f32 kernels between conversions (the faster on this project's CPU, whose VDPBF16PS runs
  // at half the f32 FMA's rate: docs/BENCHMARKS.md, "16-bit floats on the CPU"); kOwn, the own
  // bf16 GEMM for all-bf16 ones where the CPU has AVX512_BF16 (gemm_bf16.h), else as kConvert;
  // kOneDNN, oneDNN's 16-bit matmul for plain matmuls.
  std::atomic<HalfMatmul> half_matmul{HalfMatmul::kAuto};
  std::atomic<int> num_threads{1};
  std::mutex option_mu;  // serialises set_option (and the description it rewrites)
  std::string description;
};

// True when OpenBLAS runs the GEMM calls now ("auto": unless OpenBLAS runs a pre-AVX core and
// the own GEMM has AVX2/AVX-512 kernels).
bool gemm_uses_openblas(const Backend &be);
const char *gemm_active_name(const Backend &be);
// "onednn", "own" or "auto" (oneDNN where it is faster per shape); "own" without oneDNN.
const char *conv_active_name(const Backend &be);

// Elements below which a kernel stays on the calling thread: waking the pool costs a few us,
// which is more than a cheap pass over this many elements.
constexpr int64_t kParallelThreshold = 32768;
constexpr int64_t kParallelThresholdHeavy = 4096;  // exp/tanh/erf per element

// Common head of every kernel state; `release` deletes through the virtual destructor.
struct KernelBase {
  Backend *be = nullptr;
  const ctn_host_api *host = nullptr;
  virtual ~KernelBase() = default;
};

void kernel_release(void *state);

// A kernel state of type S for backend `be` (be and host set).
template <class S>
std::unique_ptr<S> new_state(Backend *be) {
  auto st = std::make_unique<S>();
  st->be = be;
  st->host = be->host;
  return st;
}



template <class T>
inline T *desc_ptr(const ctn_tensor_desc &d) {
  return reinterpret_cast<T *>(static_cast<char *>(d.data) + d.offset);
}


// Fills `kernel` with a heap state; takes ownership of `state` (deleted on failure paths by the
// caller's unique_ptr).
void kernel_set(ctn_kernel *kernel, ctn_kernel_fn fn, KernelBase *state, uint32_t flags = 0,
                uint64_t workspace = 0);

// get_kernel makers, one per op family; each returns CTN_ERR_UNSUPPORTED (not handled) only
// after recording a reason, and validates the signature. *handled says whether `sig` was the
// family's (cpu_get_kernel asks each family in turn).
using KernelMaker = ctn_status(Backend *be, const ctn_op_signature *sig, ctn_kernel *out,
                               bool *handled);
KernelMaker make_elementwise_kernel, make_reduce_kernel, make_shape_kernel, make_matmul_kernel;
KernelMaker make_optim_kernel;  // k_optim.cpp

// The kernel of the family that owns sig->op, as that family makes it (plugin.cpp):
// CTN_ERR_UNSUPPORTED with a reason for an op no family knows.
ctn_status make_native_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out);
// k_widen.cpp: whether an operand of `sig` is f16 or bf16, and the fallback for such a signature
// whose op has no 16-bit kernel: the f32 kernel of the same signature between conversions.
bool sig_has_half(const ctn_op_signature *sig);
// `inner` makes the f32 kernel (default: the op family's own, make_native_kernel).
using InnerMaker = ctn_status (*)(Backend *be, const ctn_op_signature *sig, ctn_kernel *out);
ctn_status make_widened_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out,
                               InnerMaker inner = make_native_kernel);
// k_matmul_dnnl.cpp: a plain (unbatched, unfused) bf16 or f16 matmul through oneDNN, 16-bit in and
// out, f32 accumulation; false, with the reason in `why`, where oneDNN is not built in or has
// only its reference code for it.
bool make_onednn_matmul_half(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, std::string *why);
// The own bf16 GEMM (gemm_bf16.h) where the backend runs its AVX-512 GEMM and the CPU has
// AVX512_BF16, else nullptr (k_matmul_bf16.cpp).
const Bf16Gemm *bf16_gemm_for(const Backend &be);
// A matmul / matmul_bias_act whose operands and output are all bf16, on that GEMM; false (out
// untouched) where it does not apply. The signature must have been validated.
bool make_bf16_matmul(Backend *be, const ctn_op_signature *sig, ctn_kernel *out);
// An f32 convolution (any of make_conv_kernel's ops) whose GEMMs run in bf16: for a bf16
// convolution between conversions (make_widened_kernel's `inner`), when bf16_gemm_for has one.
ctn_status make_conv_kernel_bf16(Backend *be, const ctn_op_signature *sig, ctn_kernel *out);

// A matmul kernel's shape (k_matmul.cpp, k_matmul_bf16.cpp): C = A B per batch, A(i, p) at
// i * rsa + p * csa and B(p, j) at p * rsb + j * csb (elements).
struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  int64_t rsa = 0, csa = 0, rsb = 0, csb = 0;
  // The offsets of batch i are computed when it runs (dims.offsets), not tabled: a table per
  // batch is O(batches) memory at compile time (8 TB for a [1, 2^39, 2, 2] input, found by
  // fuzz_graph).
  MatmulDims dims;
  int64_t batches = 0;  // 0 for an empty output: nothing to compute
  int64_t c_step = 0;   // elements between output matrices
  int act = -1;         // -1: plain matmul; else CTN_ACT_*
  void set_shape(MatmulDims d, bool fused, const ctn_tensor_desc &out) {
    ta = d.ta, tb = d.tb, k = d.k, n = d.n;
    rsa = d.ta ? 1 : d.k, csa = d.ta ? d.m : 1;
    rsb = d.tb ? 1 : d.n, csb = d.tb ? d.k : 1;
    if (fused) act = d.act;
    fold_batches(d);  // one GEMM of B*M rows where the right operand is shared
    c_step = d.m * d.n;
    m = d.m;
    batches = desc_numel(out) ? d.batches : 0;
    dims = d;
  }
};

// Neural-network ops: k_conv.cpp, k_pool.cpp, k_norm.cpp, k_nn_misc.cpp (dropout, embedding).
KernelMaker make_conv_kernel, make_pool_kernel, make_norm_kernel, make_nn_misc_kernel;
// int8 quantization (k_quant.cpp, k_qlinear.cpp).
KernelMaker make_quant_kernel;

// oneDNN (k_conv_dnnl.cpp): whether the plugin is built with it, its version, and the kernel
// maker for an f32 convolution of x [N,C,H,W], w [O,C/G,KH,KW] -> y [N,O,Ho,Wo] (`kind`: 0
// forward, 1 grad-input, 2 grad-weight; `attrs`: the conv2d attributes). make_onednn_conv
// returns false with the reason in `why` when oneDNN has no fast kernel for the shape.
bool onednn_built_in();
std::string onednn_version();
// Keeps libdnnl and libgomp loaded for the life of the process (their TLS; k_conv_dnnl.cpp).
void onednn_pin_libraries();
// Caps oneDNN's JIT at CHUTNEY_CPU_ISA's level (avx2, avx512, generic); before any primitive.
void onednn_limit_isa(const char *isa);
// A forward convolution's epilogue (conv2d_bias_act): + bias[o] (input 2), then act (CTN_ACT_*;
// clamp to [lo, hi]), inside oneDNN's kernel (a bias and an eltwise post-op).
struct ConvEpilogue {
  int act = 0;
  double lo = 0, hi = 0;
};
// nhwc (forward only, layout 1 of ABI 1.7): x [N,H,W,C] and y [N,Ho,Wo,O], given to oneDNN as
// they are (format nhwc), so no activation reorder runs. w_const: input 1 (the weights; forward
// and grad-input) is a constant of the plan (ctn_sig_const_inputs), reordered once and reused.
bool make_onednn_conv(Backend *be, int kind, const int64_t *x, const int64_t *w, const int64_t *y,
                      const int64_t *attrs, ctn_kernel *out, std::string *why,
                      const ConvEpilogue *epilogue = nullptr, bool nhwc = false, bool w_const = false);

// Broadcast of `in` (numpy rules, right-aligned) to `out`'s shape: element strides of `in`
// indexed by out's axes (0 on broadcast axes). False when the shapes do not broadcast.

}  // namespace ctn_cpu

#endif
