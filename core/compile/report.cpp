// Compile stage report (compile/compile.h): the plan's statistics and its describe text.
#include "compile/compile.h"
#include "compile/data_parallel.h"
#include "util/status.h"

namespace ctn {

void report(const CompileState &cs) {
  Program &out = cs.out;
  const MemoryPlan &mp = cs.alloc.memory;
  ctn_plan_stats &st = out.stats;
  st.struct_size = sizeof st;
  st.n_nodes = cs.user_nodes;
  st.n_steps = static_cast<uint32_t>(out.steps.size());
  st.n_fused = cs.pass_stats.fused;
  st.n_folded = cs.pass_stats.folded;
  st.n_inplace = mp.n_inplace;
  st.planned_peak_bytes = mp.peak_bytes;
  st.naive_bytes = mp.naive_bytes;
  st.persistent_bytes = cs.alloc.persistent_bytes;
  out.describe = format("plan: %zu steps, planned peak %llu bytes (naive %llu), persistent %llu bytes\n",
                        out.steps.size(), static_cast<unsigned long long>(mp.peak_bytes),
                        static_cast<unsigned long long>(mp.naive_bytes),
                        static_cast<unsigned long long>(cs.alloc.persistent_bytes));
  if (cs.dp)
    out.describe += format("data-parallel over %d ranks: %u gradients (%llu bytes) averaged in %u buckets of <= %llu "
                           "bytes, %s\n", cs.dp->size, cs.dp_stats.gradients,
                           static_cast<unsigned long long>(cs.dp_stats.bytes), cs.dp_stats.buckets,
                           static_cast<unsigned long long>(cs.dp_bucket_bytes),
                           cs.dp_stats.overlapped ? "overlapped with backward" : "blocking");
  if (cs.precision != CTN_PRECISION_F32) {
    const char *low = cs.precision == CTN_PRECISION_BF16 ? "bf16" : "f16";
    out.describe += format("autocast %s: %u nodes run in %s, %u casts added, %u kept f32 (no backend has a %s kernel)\n", low,
                           cs.autocast_stats.lowered, low, cs.autocast_stats.casts, cs.autocast_stats.kept, low);
  }
  if (cs.layout_stats.regions)
    out.describe += format("layout: %u channels-last regions, %u convolutions NHWC, %u permutes and %u reshapes at "
                           "their edges, %u pools NHWC\n", cs.layout_stats.regions, cs.layout_stats.convs,
                           cs.layout_stats.permutes, cs.layout_stats.reshapes, cs.layout_stats.pools);
  ctn_plan_memory_report &mr = out.memory;
  mr.peak_bytes = mp.peak_bytes;
  mr.recomputed = out.recomputed.c_str();
  if (mr.budget) {
    // The budget bounds the planned peak; budget_memory predicts it from the schedule
    // (passes/recompute.cpp), this holds it to that when the prediction was off.
    if (mp.peak_bytes > mr.budget)
      fail(CTN_ERR_OUT_OF_MEMORY, "ctn_plan_compile: planned peak %llu bytes exceeds the memory budget %llu bytes "
           "(the budget stage's estimate of the transfers between devices was low)", static_cast<unsigned long long>(mp.peak_bytes),
           static_cast<unsigned long long>(mr.budget));
    out.describe += format("memory budget %llu bytes: peak without budget %llu, achieved %llu, %u steps recomputed, "
                           "extra %llu of %llu FLOPs\n", static_cast<unsigned long long>(mr.budget),
                           static_cast<unsigned long long>(mr.peak_without_budget),
                           static_cast<unsigned long long>(mr.peak_bytes), mr.n_recomputed,
                           static_cast<unsigned long long>(mr.extra_flops), static_cast<unsigned long long>(mr.flops));
  }
  for (size_t si = 0; si < out.steps.size(); ++si) {
    const Program::Step &step = out.steps[si];
    out.describe += format("%4zu  %-18s %-7s %s%s @%llu%s%s\n", si, step.op.c_str(), step.b->name.c_str(),
                           dtype_name(step.out.dtype),
                           shape_str(out.values[static_cast<size_t>(cs.lowered.psteps[si].output)].info.shape).c_str(),
                           static_cast<unsigned long long>(step.out.offset), mp.inplace[si] ? " (in place)" : "",
                           cs.lowered.step_node[si] != CTN_NODE_NONE && cs.lowered.step_node[si] < cs.recomputed.size() &&
                                   cs.recomputed[cs.lowered.step_node[si]] ? " (recompute)" : "");
  }
}

}  // namespace ctn
