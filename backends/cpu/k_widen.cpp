// The f16 / bf16 fallback: any CPU op without a native 16-bit kernel runs as its f32 kernel. The
// kernel for the same signature with f32 in place of each 16-bit operand is made once; a call
// converts the 16-bit inputs into f32 scratch (the call's workspace), runs the f32 kernel there
// and rounds its output back (to nearest even). Accumulation is therefore f32's. Operands of
// other dtypes (indices, masks, labels) are handed over as they are.
#include "cpu_backend.h"
#include "half.h"

namespace ctn_cpu {
namespace {

constexpr uint64_t kAlign = 64;
uint64_t align_up(uint64_t b) { return (b + kAlign - 1) / kAlign * kAlign; }

struct WidenState : KernelBase {
  ctn_kernel inner{};  // the f32 kernel; released with this state
  const HalfIsa *hi = nullptr;
  // Per operand (the inputs, then the output): its 16-bit dtype or -1 (passed through), its
  // element count and its f32 scratch offset in the workspace.
  std::vector<int32_t> dt;
  std::vector<int64_t> n;
  std::vector<uint64_t> off;
  uint64_t inner_off = 0;  // the f32 kernel's own workspace
  ~WidenState() override {
    if (inner.release) inner.release(inner.state);
  }
};

struct Convert {
  const void *src;
  void *dst;
  HalfToF32 widen;
  F32ToHalf narrow;
};

void convert_part(void *ctx, int64_t i0, int64_t i1, int) {
  const auto *c = static_cast<const Convert *>(ctx);
  if (c->widen) c->widen(static_cast<const uint16_t *>(c->src) + i0, static_cast<float *>(c->dst) + i0, i1 - i0);
  else c->narrow(static_cast<const float *>(c->src) + i0, static_cast<uint16_t *>(c->dst) + i0, i1 - i0);
}

// One array conversion, over the pool when it is long.
void convert(Backend &be, Convert c, int64_t n) {
  if (n < kParallelThreshold || be.pool->size() == 1) convert_part(&c, 0, n, 0);
  else be.pool->parallel_for(n, kParallelThreshold / 2, convert_part, &c);
}

ctn_status widen_kernel(void *state, const ctn_kernel_args *args) {
  const auto *st = static_cast<const WidenState *>(state);
  const uint32_t nin = args->n_inputs;
  char *ws = static_cast<char *>(args->workspace);
  std::vector<ctn_tensor_desc> ins(args->inputs, args->inputs + nin);
  ctn_tensor_desc out = args->outputs[0];
  for (uint32_t i = 0; i <= nin; ++i) {
    if (st->dt[i] < 0) continue;
    ctn_tensor_desc &d = i < nin ? ins[i] : out;
    if (i < nin)
      convert(*st->be, Convert{desc_ptr<const char>(d), ws + st->off[i], st->hi->widen(st->dt[i]), nullptr}, st->n[i]);
    d.data = ws;
    d.offset = st->off[i];
    d.dtype = CTN_F32;
  }
  ctn_kernel_args a = *args;
  a.inputs = ins.data();
  a.outputs = &out;
  a.workspace = ws + st->inner_off;
  a.workspace_size = st->inner.workspace_size;
  if (ctn_status s = st->inner.fn(st->inner.state, &a); s != CTN_OK) return s;
  if (st->dt[nin] >= 0)
    convert(*st->be, Convert{ws + st->off[nin], desc_ptr<char>(args->outputs[0]), nullptr, st->hi->narrow(st->dt[nin])},
            st->n[nin]);
  return CTN_OK;
}

}  // namespace

bool sig_has_half(const ctn_op_signature *sig) {
  for (uint32_t i = 0; i < sig->n_inputs; ++i)
    if (ctn_desc_is_half(sig->inputs[i].dtype)) return true;
  return ctn_desc_is_half(sig->output->dtype);
}

ctn_status make_widened_kernel(Backend *be, const ctn_op_signature *sig, ctn_kernel *out, InnerMaker inner) {
  auto st = new_state<WidenState>(be);
  const uint32_t nin = sig->n_inputs;
  std::vector<ctn_tensor_desc> ins(sig->inputs, sig->inputs + nin);
  ctn_tensor_desc o = *sig->output;
  uint64_t ws = 0;
  for (uint32_t i = 0; i <= nin; ++i) {
    ctn_tensor_desc &d = i < nin ? ins[i] : o;
    const bool half = ctn_desc_is_half(d.dtype);
    st->dt.push_back(half ? d.dtype : -1);
    st->n.push_back(desc_numel(d));
    st->off.push_back(ws);
    if (half) {
      ws += align_up(static_cast<uint64_t>(st->n.back()) * sizeof(float));
      d.dtype = CTN_F32;
    }
  }
  ctn_op_signature fsig = *sig;
  fsig.inputs = ins.data();
  fsig.output = &o;
  // A refusal of the f32 kernel (its message recorded) is the 16-bit op's refusal.
  if (ctn_status s = inner(be, &fsig, &st->inner); s != CTN_OK) return s;
  st->inner_off = ws;
  st->hi = &half_for(be->gemm_isa.load()->name);
  const uint64_t total = ws + st->inner.workspace_size;
  kernel_set(out, widen_kernel, st.release(), 0, total);
  return CTN_OK;
}

}  // namespace ctn_cpu
