// The C ABI of plans: compiling (the compile/ pipeline), statistics, running with options and
// cancel tokens, variables (see capi.cpp for the conventions).
#include <chutney/chutney.h>

#include "capi/capi_common.h"
#include "compile/compile.h"
#include "exec/plan.h"

#include <algorithm>
#include <cstring>

using namespace ctn;
using namespace ctn::capi;

extern "C" {

/* ---- plans ---- */
CTN_API ctn_status ctn_plan_compile(ctn_graph *g, uint32_t n_outputs, const ctn_node *outputs,
                                    const ctn_compile_options *options, ctn_plan **out) {
  return wall([&] {
    NEED(g);
    NEED(out);
    if (options && options->struct_size < sizeof(uint32_t) * 2)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_compile: options.struct_size %u is too small", options->struct_size);
    ctn_compile_options o{};
    if (options) std::memcpy(&o, options, std::min<size_t>(options->struct_size, sizeof o));
    const ctn_compile_options *opts = options ? &o : nullptr;
    if (needs_stages(*g, n_outputs, outputs))  // since 1.6: data-dependent shapes
      *out = new ctn_plan(make_staged_run(*g, n_outputs, outputs, opts));
    else
      *out = new ctn_plan(*g, [&](Program &prog) { compile_program(*g, n_outputs, outputs, opts, prog); });
  });
}

CTN_API void ctn_plan_release(ctn_plan *p) { delete p; }

CTN_API ctn_status ctn_plan_stats_get(ctn_plan *p, ctn_plan_stats *out) {
  return wall([&] {
    NEED(p);
    NEED(out);
    copy_versioned(out, p->stats(), __func__);
  });
}

CTN_API ctn_status ctn_plan_memory_report_get(ctn_plan *p, ctn_plan_memory_report *out) {
  return wall([&] {
    NEED(p);
    NEED(out);
    copy_versioned(out, p->memory_report(), __func__);
  });
}

CTN_API ctn_status ctn_plan_describe(ctn_plan *p, const char **out_text) {
  return wall([&] {
    NEED(p);
    NEED(out_text);
    *out_text = p->describe().c_str();
  });
}

CTN_API ctn_status ctn_plan_backend_steps(ctn_plan *p, const char *backend, const char *op, uint32_t *out) {
  return wall([&] {
    NEED(p);
    NEED(backend);
    NEED(out);
    *out = p->backend_steps(backend, op);
  });
}

/* ---- since 1.3: run options ---- */
CTN_API ctn_status ctn_cancel_create(ctn_cancel **out) {
  return wall([&] {
    NEED(out);
    *out = new ctn_cancel;
  });
}

CTN_API ctn_status ctn_cancel_request(ctn_cancel *c) {
  return wall([&] {
    NEED(c);
    c->flag.store(1, std::memory_order_relaxed);
  });
}

CTN_API ctn_status ctn_cancel_reset(ctn_cancel *c) {
  return wall([&] {
    NEED(c);
    c->flag.store(0, std::memory_order_relaxed);
  });
}

CTN_API ctn_status ctn_cancel_requested(const ctn_cancel *c, int32_t *out) {
  return wall([&] {
    NEED(c);
    NEED(out);
    *out = c->flag.load(std::memory_order_relaxed) ? 1 : 0;
  });
}

CTN_API void ctn_cancel_release(ctn_cancel *c) { delete c; }

CTN_API ctn_status ctn_plan_run_with_options(ctn_plan *p, const ctn_run_options *options, uint32_t n_feeds,
                                             const ctn_node *feed_nodes, const ctn_tensor *const *feed_values,
                                             uint32_t n_outputs, ctn_tensor *const *outputs) {
  return wall([&] {
    NEED(p);
    RunControl rc;
    if (options) {
      if (options->struct_size < sizeof(ctn_run_options))  // the 1.3 struct is the first one
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run_with_options: options.struct_size %u is smaller than the %zu bytes "
             "of ctn_run_options", options->struct_size, sizeof(ctn_run_options));
      if (options->flags & ~CTN_RUN_CHECK_NUMERICS)
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_plan_run_with_options: unknown flags 0x%x", options->flags & ~CTN_RUN_CHECK_NUMERICS);
      rc.cancel = options->cancel ? &options->cancel->flag : nullptr;
      rc.check_numerics = options->flags & CTN_RUN_CHECK_NUMERICS;
      rc.timeout_us = options->timeout_us;
      rc.has_deadline = options->timeout_us > 0;
      if (rc.has_deadline)
        rc.deadline = std::chrono::steady_clock::now() +
                      std::chrono::microseconds(std::min<uint64_t>(options->timeout_us, uint64_t{1} << 50));
    }
    // The message is formatted only for a read-only output: this runs on every plan run.
    for (uint32_t i = 0; outputs && i < n_outputs; ++i)
      if (outputs[i] && outputs[i]->storage && outputs[i]->storage->read_only)
        need_writable(*outputs[i], "ctn_plan_run", format("output %u", i).c_str());
    p->run(n_feeds, feed_nodes, feed_values, n_outputs, outputs, options ? &rc : nullptr);
  });
}

CTN_API ctn_status ctn_plan_run(ctn_plan *p, uint32_t n_feeds, const ctn_node *feed_nodes,
                                const ctn_tensor *const *feed_values, uint32_t n_outputs, ctn_tensor *const *outputs) {
  return ctn_plan_run_with_options(p, nullptr, n_feeds, feed_nodes, feed_values, n_outputs, outputs);
}

CTN_API ctn_status ctn_plan_output_create(ctn_plan *p, uint32_t index, ctn_tensor **out) {
  return wall([&] {
    NEED(p);
    NEED(out);
    const ValueInfo &v = p->output_info(index);
    *out = wrap(Tensor::empty(v.dtype, v.shape));
  });
}

CTN_API ctn_status ctn_plan_variable_read(ctn_plan *p, ctn_node var, ctn_tensor **out) {
  return wall([&] {
    NEED(p);
    NEED(out);
    *out = wrap(p->read_variable(var));
  });
}

CTN_API ctn_status ctn_plan_variable_write(ctn_plan *p, ctn_node var, const ctn_tensor *value) {
  return wall([&] {
    NEED(p);
    NEED(value);
    p->write_variable(var, *value);
  });
}

}  // extern "C"
