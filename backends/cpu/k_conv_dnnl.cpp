// f32 conv2d, conv2d_grad_input and conv2d_grad_weight through oneDNN (Debian's libdnnl, the
// library PyTorch uses on the CPU), when the plugin is built with it (-Dcpu_onednn, auto).
//
// Threads: the batch is split into one part per pool participant, and each part runs a
// single-threaded oneDNN primitive on the thread that takes it. A forward convolution of one
// image (inference) is split over its output channels instead (over its groups when grouped):
// each part computes a contiguous block of output channels from its rows of the weights (and,
// grouped, its block of input channels), so batch 1 gains from a second thread too. oneDNN's own OpenMP team is
// never used: libgomp's idle workers spin for milliseconds after every parallel region, and on
// a 2-core machine that spinning stole the cores from the pool's next kernels (the CNN step did
// not get faster at all although its convolutions did; docs/BENCHMARKS.md). Grad-weight sums
// the parts' gradients in part order, so results depend on the thread count only, like the own
// kernels.
//
// A kernel holds primitives created at get_kernel for its exact part shapes (at most two batch
// sizes) with `any` layouts, so oneDNN picks its blocked JIT layout (nChw16c on AVX-512): a part
// reorders its NCHW inputs into its slot of the call's workspace, runs the primitive and
// reorders the result back. The scratchpads live in the slots too (scratchpad_mode::user), so
// several threads may run one kernel at once. Weights that are a constant of the plan
// (ctn_sig_const_inputs bit 1, ABI 1.7) are reordered once, on the first call, into memory the
// kernel owns (DnnlWeights, a PrepSlot) and reused while the call's weight pointer is that one;
// otherwise every call reorders them into its slot.
#include "cpu_backend.h"

#ifdef CTN_CPU_HAVE_DNNL

#include <dlfcn.h>
#include <omp.h>

#include "k_dnnl.h"
#include "prep_slot.h"

#include <cstdio>
#include <algorithm>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace ctn_cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

dnnl::engine &cpu_engine() { return onednn_engine(); }
size_t align_up(size_t n) { return dnnl_align_up(n); }

// One tensor argument of the primitive: the caller's plain NCHW/OIHW memory and the layout the
// primitive wants; when they differ the call reorders through the workspace at `offset`.
struct Arg {
  int role = 0;  // DNNL_ARG_*
  memory::desc user, prim;
  bool reorder = false;
  dnnl::reorder r;
  memory::desc r_scratch;
  size_t offset = 0, r_scratch_offset = 0;
};

// The primitive for one batch size with its arguments and scratchpad (offsets within a slot).
struct Variant {
  int64_t n = 0;
  dnnl::primitive prim;
  Arg in[2], out;
  memory::desc bias;  // conv2d_bias_act: the bias [O of the part], read in place (zero: none)
  memory::desc scratch;
  size_t scratch_offset = 0;
  size_t bytes = 0;  // slot bytes it needs
};

// The weights (input 1) in each part's primitive layout, made once from constant weights: w[p]
// is part p's (parts with the same primitive and rows share one buffer); nullptr where the part's
// primitive reads the caller's layout as it is.
struct DnnlWeights {
  std::vector<std::unique_ptr<char[]>> bufs;
  std::vector<const char *> w;
};

struct DnnlConvState : KernelBase {
  int kind = 0;  // 0 forward, 1 grad-input, 2 grad-weight
  // Units split over the parts: images, or for a one-image forward output channels (groups).
  int64_t n = 0, parts = 1;
  int64_t per_image[3] = {0, 0, 0};  // elements per unit of inputs 0, 1 and the output (0: shared)
  int64_t dw_elems = 0;              // grad-weight: elements of the weight gradient
  int64_t bias_per_unit = 0;         // conv2d_bias_act split over output channels: bias per unit
  size_t dw_offset = 0;              // grad-weight: where a part > 0 puts it in its slot
  Variant v[2];
  size_t slot_bytes = 0;
  std::string impl;
  PrepSlot<DnnlWeights> prep;  // inputs 1 << 1 when the weights are constant (forward, grad-input)

  // Part p's units [*n0, *n1) and the variant of its size.
  const Variant &part(int64_t p, int64_t *n0, int64_t *n1) const {
    *n0 = n * p / parts, *n1 = n * (p + 1) / parts;
    return v[*n1 - *n0 == v[0].n ? 0 : 1];
  }
};

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

// Lays out the argument's reorder buffer and scratchpad in the slot (ws: running size).
void plan_arg(Arg &a, int role, const memory::desc &user, const memory::desc &prim, bool to_prim,
              size_t *ws) {
  a.role = role;
  a.user = user;
  a.prim = prim;
  a.reorder = user != prim;
  if (!a.reorder) return;
  dnnl::engine &eng = cpu_engine();
  auto pd = to_prim ? dnnl::reorder::primitive_desc(eng, user, eng, prim, user_scratchpad())
                    : dnnl::reorder::primitive_desc(eng, prim, eng, user, user_scratchpad());
  a.r = dnnl::reorder(pd);
  a.r_scratch = pd.scratchpad_desc();
  a.offset = *ws;
  *ws += align_up(prim.get_size());
  a.r_scratch_offset = *ws;
  *ws += align_up(a.r_scratch.get_size());
}

memory scratch_mem(const memory::desc &d, char *ws, size_t off) {
  return memory(d, cpu_engine(), d.get_size() ? ws + off : nullptr);
}

struct DnnlCall {
  const DnnlConvState *st;
  const float *in[2];
  const float *bias = nullptr;  // conv2d_bias_act
  const DnnlWeights *weights = nullptr;  // the constant weights reordered once, or nullptr
  float *out;
  char *ws;
  // The first failure of any part, reported by the calling thread after the join.
  std::mutex error_mu;
  ctn_status code = CTN_OK;
  std::string error;

  void fail(ctn_status c, const char *what) {
    std::lock_guard<std::mutex> lock(error_mu);
    if (code != CTN_OK) return;
    code = c;
    error = what;
  }

  // Runs part `p` (units [n0, n1): images, or output channels / groups) on the calling thread
  // with one OpenMP thread.
  void run_part(int64_t p) {
    const DnnlConvState &s = *st;
    int64_t n0 = 0, n1 = 0;
    const Variant &v = s.part(p, &n0, &n1);  // the primitive of this batch size
    char *slot = ws + static_cast<size_t>(p) * s.slot_bytes;
    try {
      dnnl::engine &eng = cpu_engine();
      dnnl::stream strm(eng);
      std::unordered_map<int, memory> m;
      m.reserve(4);
      for (int i = 0; i < 2; ++i) {
        const Arg &a = v.in[i];
        if (i == 1 && weights && weights->w[p]) {  // reordered on the first call
          m.emplace(a.role, memory(a.prim, eng, const_cast<char *>(weights->w[p])));
          continue;
        }
        memory user(a.user, eng, const_cast<float *>(in[i]) + n0 * s.per_image[i]);
        if (!a.reorder) {
          m.emplace(a.role, user);
          continue;
        }
        memory pm(a.prim, eng, slot + a.offset);
        a.r.execute(strm, {{DNNL_ARG_FROM, user},
                           {DNNL_ARG_TO, pm},
                           {DNNL_ARG_SCRATCHPAD, scratch_mem(a.r_scratch, slot, a.r_scratch_offset)}});
        m.emplace(a.role, pm);
      }
      // Grad-weight: part 0 writes the output, the others their slot's tail (summed after).
      float *dst = s.kind == 2 ? (p == 0 ? out : reinterpret_cast<float *>(slot + s.dw_offset))
                               : out + n0 * s.per_image[2];
      const Arg &o = v.out;
      memory user_out(o.user, eng, dst);
      memory prim_out = o.reorder ? memory(o.prim, eng, slot + o.offset) : user_out;
      m.emplace(o.role, prim_out);
      m.emplace(DNNL_ARG_SCRATCHPAD, scratch_mem(v.scratch, slot, v.scratch_offset));
      if (bias)
        m.emplace(DNNL_ARG_BIAS, memory(v.bias, eng, const_cast<float *>(bias) + n0 * s.bias_per_unit));
      v.prim.execute(strm, m);
      if (o.reorder)
        o.r.execute(strm, {{DNNL_ARG_FROM, prim_out},
                           {DNNL_ARG_TO, user_out},
                           {DNNL_ARG_SCRATCHPAD, scratch_mem(o.r_scratch, slot, o.r_scratch_offset)}});
      strm.wait();
    } catch (const dnnl::error &e) {
      fail(e.status == dnnl_out_of_memory ? CTN_ERR_OUT_OF_MEMORY : CTN_ERR_INTERNAL, e.what());
    } catch (const std::bad_alloc &) {
      fail(CTN_ERR_OUT_OF_MEMORY, "out of memory");
    }
  }

  static void part_fn(void *ctx, int64_t p0, int64_t p1, int) {
    auto *call = static_cast<DnnlCall *>(ctx);
    omp_set_num_threads(1);  // a pool worker: oneDNN stays on this thread
    for (int64_t p = p0; p < p1; ++p) call->run_part(p);
  }
};

// The weights w reordered into every part's primitive layout (DnnlWeights), on the calling
// thread with one OpenMP thread.
std::unique_ptr<DnnlWeights> reorder_weights(const DnnlConvState &s, const float *w) {
  auto out = std::make_unique<DnnlWeights>();
  out->w.assign(static_cast<size_t>(s.parts), nullptr);
  const int caller_threads = omp_get_max_threads();
  omp_set_num_threads(1);
  struct Restore {
    int t;
    ~Restore() { omp_set_num_threads(t); }
  } restore{caller_threads};
  dnnl::engine &eng = cpu_engine();
  dnnl::stream strm(eng);
  std::vector<char> scratch;
  for (int64_t p = 0; p < s.parts; ++p) {
    int64_t n0 = 0, n1 = 0;
    const Variant &v = s.part(p, &n0, &n1);
    const Arg &a = v.in[1];
    if (!a.reorder) continue;
    const int64_t off = n0 * s.per_image[1];
    for (int64_t q = 0; q < p && !out->w[p]; ++q) {  // an earlier part with the same layout and rows
      int64_t q0 = 0, q1 = 0;
      if (&s.part(q, &q0, &q1) == &v && q0 * s.per_image[1] == off) out->w[p] = out->w[q];
    }
    if (out->w[p]) continue;
    out->bufs.emplace_back(new char[a.prim.get_size() + kDnnlAlign]);
    char *dst = dnnl_workspace(out->bufs.back().get());
    scratch.resize(a.r_scratch.get_size() + kDnnlAlign);
    memory user(a.user, eng, const_cast<float *>(w) + off), pm(a.prim, eng, dst);
    a.r.execute(strm, {{DNNL_ARG_FROM, user},
                       {DNNL_ARG_TO, pm},
                       {DNNL_ARG_SCRATCHPAD, scratch_mem(a.r_scratch, dnnl_workspace(scratch.data()), 0)}});
    strm.wait();
    out->w[p] = dst;
  }
  return out;
}

ctn_status dnnl_conv_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const DnnlConvState *>(state);
  DnnlCall call;
  call.st = st;
  call.in[0] = desc_ptr<const float>(args->inputs[0]);
  call.in[1] = desc_ptr<const float>(args->inputs[1]);
  try {
    call.weights = st->prep.get(args->inputs, [&] { return reorder_weights(*st, call.in[1]); });
  } catch (const dnnl::error &e) {
    return st->host->set_error(e.status == dnnl_out_of_memory ? CTN_ERR_OUT_OF_MEMORY : CTN_ERR_INTERNAL,
                               "cpu conv (oneDNN %s): reordering the constant weights: %s", st->impl.c_str(), e.what());
  } catch (const std::bad_alloc &) {
    return st->host->set_error(CTN_ERR_OUT_OF_MEMORY, "cpu conv (oneDNN %s): reordering the constant weights: out of memory",
                               st->impl.c_str());
  }
  if (st->v[0].bias.get_size()) call.bias = desc_ptr<const float>(args->inputs[2]);
  call.out = desc_ptr<float>(args->outputs[0]);
  call.ws = dnnl_workspace(args->workspace);
  dnnl_run_parts(*st->be, st->parts, DnnlCall::part_fn, &call);
  if (call.code != CTN_OK)
    return st->host->set_error(call.code, "cpu conv (oneDNN %s): %s", st->impl.c_str(),
                               call.error.c_str());
  if (st->kind == 2)  // the other parts' weight gradients, in part order
    for (int64_t p = 1; p < st->parts; ++p) {
      const auto *part = reinterpret_cast<const float *>(
          call.ws + static_cast<size_t>(p) * st->slot_bytes + st->dw_offset);
      for (int64_t i = 0; i < st->dw_elems; ++i) call.out[i] += part[i];
    }
  return CTN_OK;
}

// The activation of a fused convolution (CTN_ACT_*) as oneDNN's eltwise post-op; none for
// CTN_ACT_NONE. Swish's alpha 1 is x * sigmoid(x); logistic and hardswish take no parameters.
void epilogue_post_ops(const ConvEpilogue &epi, dnnl::primitive_attr *attr) {
  using A = dnnl::algorithm;
  static constexpr A kAlg[] = {A::undef,         A::eltwise_relu,  A::eltwise_gelu_erf, A::eltwise_clip,
                               A::eltwise_logistic, A::eltwise_swish, A::eltwise_hardswish};
  if (epi.act <= CTN_ACT_NONE || epi.act > CTN_ACT_HARDSWISH) return;
  const bool clamp = epi.act == CTN_ACT_CLAMP;
  dnnl::post_ops po;
  po.append_eltwise(1.f, kAlg[epi.act], clamp ? static_cast<float>(epi.lo) : epi.act == CTN_ACT_SILU ? 1.f : 0.f,
                    clamp ? static_cast<float>(epi.hi) : 0.f);
  attr->set_post_ops(po);
}

// Builds the primitive of one part of `n` images into `v` (0 forward, 1 grad-input, 2
// grad-weight); returns oneDNN's implementation name.
std::string make_variant(int kind, int64_t n, const int64_t *xs, const int64_t *ws_,
                         const int64_t *ys, const int64_t *at, const memory::dims &pr,
                         Variant *v, const ConvEpilogue *epi, bool nhwc = false) {
  const int64_t sh = at[0], sw = at[1], ph = at[2], pw = at[3], dh = at[4], dw = at[5],
                groups = at[6];
  dnnl::engine &eng = cpu_engine();
  memory::dims x{n, xs[1], xs[2], xs[3]}, y{n, ys[1], ys[2], ys[3]};
  memory::dims w = groups == 1 ? memory::dims{ws_[0], ws_[1], ws_[2], ws_[3]}
                               : memory::dims{groups, ws_[0] / groups, ws_[1], ws_[2], ws_[3]};
  const Tag act_tag = nhwc ? Tag::nhwc : Tag::nchw;  // the caller's activation layout
  memory::desc ux(x, Dt::f32, act_tag), uy(y, Dt::f32, act_tag), uw(w, Dt::f32, groups == 1 ? Tag::oihw : Tag::goihw);
  // NHWC activations are the primitive's own (no reorder); NCHW ones leave oneDNN the choice.
  memory::desc ax = nhwc ? ux : memory::desc(x, Dt::f32, Tag::any), ay = nhwc ? uy : memory::desc(y, Dt::f32, Tag::any),
               aw(w, Dt::f32, Tag::any);
  const memory::dims strides{sh, sw}, dil{dh - 1, dw - 1}, pl{ph, pw};
  dnnl::primitive_attr attr = user_scratchpad();
  if (epi) {
    v->bias = memory::desc({ys[1]}, Dt::f32, Tag::x);
    epilogue_post_ops(*epi, &attr);
  }
  // Inference (forward_inference) when fused: no training workspace; conv2d itself keeps
  // forward_training, the descriptor its backward primitives are made from.
  dnnl::convolution_forward::desc fd =
      epi ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                            ax, aw, v->bias, ay, strides, dil, pl, pr)
          : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                            ax, aw, ay, strides, dil, pl, pr);
  dnnl::convolution_forward::primitive_desc fpd(fd, attr, eng);
  // Per direction: the primitive and its arguments in kernel order (inputs 0, 1, output) as
  // oneDNN roles and the caller's plain layouts; the primitive's layouts are queried by role.
  static constexpr int kRoles[3][3] = {
      {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},             // conv2d(x, w) -> y
      {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},   // grad_input(dy, w) -> dx
      {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS}};  // grad_weight(x, dy) -> dw
  const memory::desc *users[3][3] = {{&ux, &uw, &uy}, {&uy, &uw, &ux}, {&ux, &uy, &uw}};
  dnnl::primitive_desc_base pd = fpd;
  switch (kind) {
    case 0:
      v->prim = dnnl::convolution_forward(fpd);
      break;
    case 1: {
      dnnl::convolution_backward_data::primitive_desc bpd(
          {dnnl::algorithm::convolution_direct, ax, aw, ay, strides, dil, pl, pr}, attr, eng, fpd);
      v->prim = dnnl::convolution_backward_data(bpd);
      pd = bpd;
      break;
    }
    default: {
      dnnl::convolution_backward_weights::primitive_desc bpd(
          {dnnl::algorithm::convolution_direct, ax, aw, ay, strides, dil, pl, pr}, attr, eng, fpd);
      v->prim = dnnl::convolution_backward_weights(bpd);
      pd = bpd;
      break;
    }
  }
  v->n = n;
  size_t ws = 0;
  Arg *args[3] = {&v->in[0], &v->in[1], &v->out};
  for (int i = 0; i < 3; ++i) {
    const int role = kRoles[kind][i];
    plan_arg(*args[i], role, *users[kind][i], pd.query_md(dnnl::query::exec_arg_md, role), i < 2,
             &ws);
  }
  v->scratch = pd.scratchpad_desc();
  v->scratch_offset = ws;
  ws += align_up(v->scratch.get_size());
  v->bytes = ws;
  const char *impl = pd.impl_info_str();
  return impl ? impl : "?";
}

// A one-image forward convolution split over output channels: `units` output channels (groups
// when grouped) over `parts` threads; parts 1 when the batch split applies or the convolution is
// too small for a second thread to pay (the pool's hand-off costs a few microseconds).
struct ChannelSplit {
  int64_t units = 0, parts = 1;
  int64_t per_unit[3] = {0, 0, 0};  // elements of x, w and y per unit (x 0: every part reads all)

  // The primitive of a part of k units: a convolution of the part's channels (k groups when
  // grouped, the rows of w [k * O/G, C/G, KH, KW]).
  std::string make(int64_t k, const int64_t *xs, const int64_t *ws_, const int64_t *ys, const int64_t *at,
                   const memory::dims &pr, Variant *v, const ConvEpilogue *epi) const {
    const int64_t g = at[6], uo = g == 1 ? 1 : ws_[0] / g, cg = ws_[1];  // uo: output channels per unit
    const int64_t px[4] = {1, g == 1 ? xs[1] : k * cg, xs[2], xs[3]};
    const int64_t pw[4] = {k * uo, cg, ws_[2], ws_[3]};
    const int64_t py[4] = {1, k * uo, ys[2], ys[3]};
    int64_t pat[7];
    std::copy(at, at + 7, pat);
    pat[6] = g == 1 ? 1 : k;
    std::string impl = make_variant(0, 1, px, pw, py, pat, pr, v, epi);
    v->n = k;  // selects the variant by part size, like a batch part's image count
    return impl;
  }
};

ChannelSplit channel_split(int kind, int threads, const int64_t *xs, const int64_t *ws_, const int64_t *ys,
                           int64_t groups) {
  ChannelSplit s;
  if (kind != 0 || xs[0] != 1 || threads < 2) return s;
  const int64_t macs = ys[1] * ys[2] * ys[3] * ws_[1] * ws_[2] * ws_[3];
  s.units = groups == 1 ? ws_[0] : groups;
  if (s.units < 2 || macs < (int64_t{1} << 17)) return s;
  s.parts = std::min<int64_t>(threads, s.units);
  const int64_t uo = groups == 1 ? 1 : ws_[0] / groups, cg = ws_[1];
  s.per_unit[0] = groups == 1 ? 0 : cg * xs[2] * xs[3];
  s.per_unit[1] = uo * cg * ws_[2] * ws_[3];
  s.per_unit[2] = uo * ys[2] * ys[3];
  return s;
}

}  // namespace

bool onednn_built_in() { return true; }

// libgomp and libdnnl use initial-exec TLS, which comes from the process's small static TLS
// block: unloaded and loaded again with every context (the plugin is dlclose-d with the last one)
// while other plugins' libraries (PoCL, Mesa) sit between them, they ran it out after eight
// contexts ("cannot allocate memory in static TLS block"). Once loaded, they stay loaded.
void onednn_pin_libraries() {
  for (void *sym : {reinterpret_cast<void *>(&dnnl_version),
                    reinterpret_cast<void *>(&omp_set_num_threads)}) {
    Dl_info info{};
    if (dladdr(sym, &info) && info.dli_fname)
      dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);  // the handle is never closed
  }
}

std::string onednn_version() {
  const dnnl_version_t *v = dnnl_version();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%d.%d.%d", v->major, v->minor, v->patch);
  return buf;
}

void onednn_limit_isa(const char *isa) {
  dnnl::cpu_isa max = dnnl::cpu_isa::all;
  if (!std::strcmp(isa, "avx2")) max = dnnl::cpu_isa::avx2;
  else if (!std::strcmp(isa, "avx512")) max = dnnl::cpu_isa::avx512_core;
  else if (!std::strcmp(isa, "generic")) max = dnnl::cpu_isa::sse41;
  try {
    dnnl::set_max_cpu_isa(max);  // fails once a primitive was created: the first context wins
  } catch (const dnnl::error &) {
  }
}

// Makes the oneDNN kernel for a convolution of x [N,C,H,W], w [O,C/G,KH,KW] -> y [N,O,Ho,Wo] in
// direction `kind` (0 forward, 1 grad-input, 2 grad-weight). False (no kernel, the caller uses
// its own) when oneDNN has only its reference implementation for the shape or refuses it;
// `why` says which.
bool make_onednn_conv(Backend *be, int kind, const int64_t *xs_in, const int64_t *ws_,
                      const int64_t *ys_in, const int64_t *at, ctn_kernel *out, std::string *why,
                      const ConvEpilogue *epi, bool nhwc, bool w_const) {
  // The sizes below are NCHW's; an NHWC caller's [N,H,W,C] reordered to them.
  const int64_t xn[4] = {xs_in[0], xs_in[3], xs_in[1], xs_in[2]}, yn[4] = {ys_in[0], ys_in[3], ys_in[1], ys_in[2]};
  const int64_t *xs = nhwc ? xn : xs_in, *ys = nhwc ? yn : ys_in;
  if (nhwc && kind != 0) {
    *why = "layout 1 (NHWC) is forward only";
    return false;
  }
  return dnnl_make(why, [&](int caller_threads) {
    const int64_t sh = at[0], sw = at[1], ph = at[2], pw = at[3], dh = at[4], dw = at[5];
    // Right padding that gives oneDNN's output size (it may be negative for a floor output:
    // any value within a stride of it gives the same size).
    int64_t prh = (ys[2] - 1) * sh + (ws_[2] - 1) * dh + 1 - xs[2] - ph;
    int64_t prw = (ys[3] - 1) * sw + (ws_[3] - 1) * dw + 1 - xs[3] - pw;
    if (prh < 0 && prh + sh - 1 >= 0) prh = 0;
    if (prw < 0 && prw + sw - 1 >= 0) prw = 0;
    if (prh < 0 || prw < 0) {
      *why = "right padding below zero";
      return false;
    }
    for (int k = 0; k < 4; ++k)
      if (xs[k] == 0 || ws_[k] == 0 || ys[k] == 0) {
        *why = "empty tensor";
        return false;
      }
    auto st = new_state<DnnlConvState>(be);
    st->kind = kind;
    st->prep.inputs = w_const && kind != 2 ? uint64_t{1} << 1 : 0;  // grad-weight's input 1 is dy
    st->n = xs[0];
    st->parts = std::min<int64_t>(std::max(1, be->num_threads.load()), st->n);
    const int64_t x_img = xs[1] * xs[2] * xs[3], y_img = ys[1] * ys[2] * ys[3];
    st->dw_elems = ws_[0] * ws_[1] * ws_[2] * ws_[3];
    switch (kind) {
      case 0: st->per_image[0] = x_img, st->per_image[2] = y_img; break;
      case 1: st->per_image[0] = y_img, st->per_image[2] = x_img; break;
      default: st->per_image[0] = x_img, st->per_image[1] = y_img; break;
    }
    // NHWC: no channel split (a part's output channels would be strided, not a block).
    const ChannelSplit split = channel_split(kind, nhwc ? 1 : be->num_threads.load(), xs, ws_, ys, at[6]);
    if (split.parts > 1) {
      st->n = split.units;
      st->parts = split.parts;
      std::copy(split.per_unit, split.per_unit + 3, st->per_image);
      st->bias_per_unit = split.per_unit[2] / (ys[2] * ys[3]);  // output channels per unit
    }
    const memory::dims pr{prh, prw};
    const int64_t lo = st->n / st->parts, hi = (st->n + st->parts - 1) / st->parts;
    dnnl_build_primitives(caller_threads, [&] {
      if (split.parts > 1) {
        st->impl = split.make(lo, xs, ws_, ys, at, pr, &st->v[0], epi);
        if (hi != lo) split.make(hi, xs, ws_, ys, at, pr, &st->v[1], epi);
      } else {
        st->impl = make_variant(kind, lo, xs, ws_, ys, at, pr, &st->v[0], epi, nhwc);
        if (hi != lo) make_variant(kind, hi, xs, ws_, ys, at, pr, &st->v[1], epi, nhwc);
      }
    });
    size_t slot = std::max(st->v[0].bytes, st->v[1].bytes);
    st->dw_offset = slot;
    if (kind == 2) slot += static_cast<size_t>(st->dw_elems) * sizeof(float);
    st->slot_bytes = align_up(slot);
    const size_t slot_bytes = st->slot_bytes;
    const std::string impl = st->impl;  // a reference implementation: slower than the own im2col + GEMM
    return dnnl_kernel_set(be, out, dnnl_conv_kernel, std::move(st), slot_bytes, impl, why);
  });
}

}  // namespace ctn_cpu

#else  // !CTN_CPU_HAVE_DNNL

namespace ctn_cpu {

bool onednn_built_in() { return false; }
void onednn_pin_libraries() {}
std::string onednn_version() { return ""; }
void onednn_limit_isa(const char *) {}
bool make_onednn_conv(Backend *, int, const int64_t *, const int64_t *, const int64_t *,
                      const int64_t *, ctn_kernel *, std::string *why, const ConvEpilogue *, bool, bool) {
  *why = "this build has no oneDNN";
  return false;
}

}  // namespace ctn_cpu

#endif
