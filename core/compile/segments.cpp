// Compile stage record_segments (compile/compile.h): runs of consecutive kernel steps handed to
// backends that record plans (plan_prepare), as one unit each.
#include "compile/compile.h"
#include "util/status.h"

namespace ctn {

void record_segments(Program &out) {
  // Consecutive kernel steps on a backend that records plans go to it as one unit.
  out.calls.reserve(out.steps.size());  // segments point into it: no reallocation below
  for (size_t si = 0; si < out.steps.size();) {
    Program::Segment seg;
    seg.first = si;
    seg.b = out.steps[si].b;
    const bool records = !out.steps[si].transfer && seg.b->desc.plan_prepare && seg.b->desc.plan_run &&
                         seg.b->desc.plan_release;
    size_t end = si + 1;
    if (records)
      while (end < out.steps.size() && !out.steps[end].transfer && out.steps[end].b == seg.b) ++end;
    seg.count = end - si;
    if (records) {
      size_t c0 = out.calls.size();
      for (size_t k = si; k < end; ++k) out.calls.push_back(ctn_plan_call{&out.steps[k].kernel, &out.steps[k].args});
      Backend::Serial serial(*seg.b);
      take_plugin_error();
      CTN_CHECK_PLUGIN(seg.b->desc.plan_prepare(seg.b->state, static_cast<uint32_t>(seg.count), out.calls.data() + c0,
                                                &seg.handle),
                       "backend " + seg.b->name + ": plan_prepare");
    }
    out.segments.push_back(seg);
    si = end;
  }
}

}  // namespace ctn
