// Runs one variant of a case on one backend: forward against the naive reference, or gradients
// (compiled plan and eager graph) against central finite differences.
#include <cmath>
#include <memory>
#include <sstream>

#include "conformance.hpp"

namespace conf {
namespace {

std::string shape_str(const Shape &s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << ']';
  return os.str();
}

std::string describe(ctn_plan *p) {
  const char *text = nullptr;
  if (ctn_plan_describe(p, &text) != CTN_OK || text == nullptr) return "(no description)";
  return text;
}

// Inputs of a variant drawn from `rng`, rounded to the dtype they will be stored in, so the
// reference sees exactly what the backend sees.
void make_inputs(const Variant &v, ctn_dtype fdt, Rng &rng, std::vector<Arr> *ins,
                 std::vector<ctn_dtype> *dts) {
  for (const auto &spec : v.ins) {
    ctn_dtype dt = spec.dtype < 0 ? fdt : static_cast<ctn_dtype>(spec.dtype);
    Arr a = make_arr(spec.shape);
    for (double &x : a.v) x = round_to(spec.gen(rng), dt);
    ins->push_back(std::move(a));
    dts->push_back(dt);
  }
}

// Compile; "unsupported" goes to *unsupported (never for cpu, which must support everything).
void compile(ctn_graph *g, const std::vector<ctn_node> &outs, const std::string &backend,
             bool all_passes, const std::string &what, PlanPtr *plan, std::string *unsupported) {
  ctn_compile_options o = compile_options(backend, all_passes);
  ctn_plan *p = nullptr;
  ctn_status s = ctn_plan_compile(g, static_cast<uint32_t>(outs.size()), outs.data(), &o, &p);
  if (s == CTN_ERR_UNSUPPORTED && backend != "cpu") {
    *unsupported = what + ": " + ctn_last_error();
    return;
  }
  ASSERT_EQ(s, CTN_OK) << "compile " << what << ": " << status_text(s);
  plan->reset(p);
}

// Without the rewriting passes the op under test must have run on `backend` and none of it
// elsewhere (no silent fallback). With every pass on, the op may legitimately be rewritten away
// (copy, reshape...), so only "no step on another backend" is checked.
void assert_placement(ctn_plan *p, const std::string &backend, const OpCase &c,
                      bool all_passes, const std::string &what) {
  const std::string &op = c.op;
  const char *op_name = c.composite ? nullptr : op.c_str();  // nullptr: any step
  if (!all_passes) {
    uint32_t n = 0;
    CTN_ASSERT_OK(ctn_plan_backend_steps(p, backend.c_str(), op_name, &n));
    // A view op (reshape) is lowered to an alias of its input: no kernel runs anywhere, so
    // there is nothing that could have fallen back (the loop below still checks the others).
    if (!c.view_ok) {
      ASSERT_GE(n, 1u) << what << ": op '" << op << "' has no step on " << backend << "\n"
                     << describe(p);
    }
  }
  for (const auto &b : backend_entries()) {
    if (b.name == backend) continue;
    uint32_t other = 0;
    CTN_ASSERT_OK(ctn_plan_backend_steps(p, b.name.c_str(), all_passes ? nullptr : op_name,
                                         &other));
    ASSERT_EQ(other, 0u) << what << ": " << other << " step(s) ran on " << b.name << "\n"
                         << describe(p);
  }
}

void compare(const Arr &y, ctn_dtype ydt, const Arr &r, ctn_dtype rdt, const Variant &v,
             const std::string &what) {
  ASSERT_EQ(ydt, rdt) << what << ": output dtype " << ctn_dtype_name(ydt) << ", expected "
                      << ctn_dtype_name(rdt);
  ASSERT_EQ(shape_str(y.shape), shape_str(r.shape)) << what << ": output shape";
  ASSERT_EQ(y.v.size(), r.v.size()) << what;
  if (rdt == CTN_F32 || rdt == CTN_F64 || rdt == CTN_F16 || rdt == CTN_BF16) {
    double e = nmse(y, r);
    double tol = rdt == CTN_F32 ? v.tol32 : rdt == CTN_F64 ? v.tol64 : rdt == CTN_F16 ? v.tol16 : v.tolbf16;
    std::ostringstream first;
    for (size_t i = 0; i < r.v.size() && i < 12; ++i)
      first << " [" << i << "] got " << y.v[i] << " want " << r.v[i];
    EXPECT_LE(e, tol) << what << ": normalised MSE " << e << " > " << tol << first.str();
    return;
  }
  size_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < r.v.size(); ++i)
    if (y.v[i] != r.v[i] && bad++ < 6) first << " [" << i << "] got " << y.v[i] << " want " << r.v[i];
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " mismatches:" << first.str();
}

void forward(const std::string &backend, const OpCase &c, const Variant &v, ctn_dtype fdt,
             uint64_t seed, bool all_passes, std::string *unsupported) {
  const std::string what = c.row + " [" + v.label + ", " + ctn_dtype_name(fdt) +
                           (all_passes ? ", all passes" : "") + "] on " + backend;
  Rng rng(seed);
  std::vector<Arr> ins;
  std::vector<ctn_dtype> dts;
  make_inputs(v, fdt, rng, &ins, &dts);
  Arr ref = v.ref(ins, fdt);
  ctn_dtype rdt = v.out_dtype ? v.out_dtype(fdt) : fdt;

  ctn_graph *graw = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(context(), 0, &graw));
  GraphPtr g(graw);
  Nodes nodes;
  for (size_t i = 0; i < ins.size(); ++i) {
    ctn_node n = CTN_NODE_NONE;
    std::string name = "in" + std::to_string(i);
    CTN_ASSERT_OK(ctn_input(g.get(), name.c_str(), dts[i],
                            static_cast<uint32_t>(ins[i].shape.size()), ins[i].shape.data(), &n));
    nodes.push_back(n);
  }
  ctn_node out = CTN_NODE_NONE;
  ctn_status s = v.build(g.get(), nodes, fdt, &out);
  ASSERT_EQ(s, CTN_OK) << what << ": building the graph: " << status_text(s);

  // Shape inference at build time must agree with the reference too.
  ctn_dtype ndt = CTN_F32;
  uint32_t nd = 0;
  int64_t nshape[CTN_MAX_DIMS] = {};
  CTN_ASSERT_OK(ctn_node_info(g.get(), out, &ndt, &nd, nshape));
  EXPECT_EQ(ndt, rdt) << what << ": inferred dtype";
  EXPECT_EQ(shape_str(Shape(nshape, nshape + nd)), shape_str(ref.shape)) << what
                                                                         << ": inferred shape";

  PlanPtr plan;
  compile(g.get(), {out}, backend, all_passes, what, &plan, unsupported);
  if (!plan) return;
  ASSERT_NO_FATAL_FAILURE(assert_placement(plan.get(), backend, c, all_passes, what));

  std::vector<TensorPtr> feeds;
  std::vector<const ctn_tensor *> feed_ptrs;
  for (size_t i = 0; i < ins.size(); ++i) {
    feeds.emplace_back(make_tensor(dts[i], ins[i].shape, ins[i].v));
    ASSERT_NE(feeds.back(), nullptr) << what << ": " << ctn_last_error();
    feed_ptrs.push_back(feeds.back().get());
  }
  ctn_tensor *oraw = nullptr;
  CTN_ASSERT_OK(ctn_plan_output_create(plan.get(), 0, &oraw));
  TensorPtr o(oraw);
  ctn_tensor *const outs[] = {o.get()};
  s = ctn_plan_run(plan.get(), static_cast<uint32_t>(nodes.size()), nodes.data(), feed_ptrs.data(),
                   1, outs);
  ASSERT_EQ(s, CTN_OK) << what << ": run: " << status_text(s);
  ctn_dtype ydt = CTN_F32;
  Arr y = read_tensor(o.get(), &ydt);
  compare(y, ydt, ref, rdt, v, what);
}

// ---- gradients -----------------------------------------------------------------------------------

struct GradSetup {
  std::vector<Arr> ins;
  std::vector<ctn_dtype> dts;
  std::vector<size_t> wrt;  // indices of the floating inputs
  Arr weights;              // loss = sum(op(inputs) * weights)
};

// Appends loss = sum(y * W) to `g`.
ctn_status add_loss(ctn_graph *g, ctn_node y, const Arr &w, ctn_node *loss) {
  TensorPtr wt(make_tensor(CTN_F64, w.shape, w.v));
  if (!wt) return CTN_ERR_INTERNAL;
  ctn_node wn = CTN_NODE_NONE, prod = CTN_NODE_NONE;
  ctn_status s = ctn_constant(g, wt.get(), &wn);
  if (s == CTN_OK) s = ctn_mul(g, y, wn, &prod);
  if (s != CTN_OK) return s;
  if (w.shape.empty()) {
    *loss = prod;
    return CTN_OK;
  }
  return ctn_sum(g, prod, 0, nullptr, 0, loss);
}

void check_grads(const std::vector<Arr> &analytic, const std::vector<Arr> &fd,
                 const Variant &v, const std::string &what) {
  ASSERT_EQ(analytic.size(), fd.size());
  for (size_t k = 0; k < fd.size(); ++k) {
    ASSERT_EQ(shape_str(analytic[k].shape), shape_str(fd[k].shape)) << what << ": grad " << k;
    size_t bad = 0;
    std::ostringstream first;
    for (size_t i = 0; i < fd[k].v.size(); ++i) {
      double a = analytic[k].v[i], f = fd[k].v[i];
      double bound = v.grad_tol * std::max({1.0, std::fabs(a), std::fabs(f)});
      if (!(std::fabs(a - f) <= bound) && bad++ < 6)
        first << " [" << i << "] analytic " << a << " finite-diff " << f;
    }
    EXPECT_EQ(bad, 0u) << what << ": d loss / d input" << k << ": " << bad
                       << " elements off:" << first.str();
  }
}

void grad_lazy(const std::string &backend, const OpCase &c, const Variant &v, const GradSetup &gs,
               std::vector<Arr> *fd_out, std::string *unsupported) {
  const std::string what = c.row + " [" + v.label + ", plan] on " + backend;
  ctn_graph *graw = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(context(), 0, &graw));
  GraphPtr g(graw);
  Nodes nodes;
  for (size_t i = 0; i < gs.ins.size(); ++i) {
    ctn_node n = CTN_NODE_NONE;
    CTN_ASSERT_OK(ctn_input(g.get(), nullptr, gs.dts[i],
                            static_cast<uint32_t>(gs.ins[i].shape.size()),
                            gs.ins[i].shape.data(), &n));
    nodes.push_back(n);
  }
  ctn_node y = CTN_NODE_NONE, loss = CTN_NODE_NONE;
  ctn_status s = v.build(g.get(), nodes, CTN_F64, &y);
  ASSERT_EQ(s, CTN_OK) << what << ": build: " << status_text(s);
  CTN_ASSERT_OK(add_loss(g.get(), y, gs.weights, &loss));
  Nodes wrt, grads(gs.wrt.size(), CTN_NODE_NONE);
  for (size_t k : gs.wrt) wrt.push_back(nodes[k]);
  s = ctn_grad(g.get(), loss, static_cast<uint32_t>(wrt.size()), wrt.data(), grads.data());
  ASSERT_EQ(s, CTN_OK) << what << ": ctn_grad: " << status_text(s);

  Nodes outs = {loss};
  outs.insert(outs.end(), grads.begin(), grads.end());
  PlanPtr plan;
  compile(g.get(), outs, backend, false, what, &plan, unsupported);
  if (!plan) return;
  ASSERT_NO_FATAL_FAILURE(assert_placement(plan.get(), backend, c, false, what));

  std::vector<TensorPtr> feeds;
  std::vector<const ctn_tensor *> feed_ptrs;
  for (size_t i = 0; i < gs.ins.size(); ++i) {
    feeds.emplace_back(make_tensor(gs.dts[i], gs.ins[i].shape, gs.ins[i].v));
    ASSERT_NE(feeds.back(), nullptr);
    feed_ptrs.push_back(feeds.back().get());
  }
  std::vector<TensorPtr> results;
  std::vector<ctn_tensor *> result_ptrs;
  for (uint32_t i = 0; i < outs.size(); ++i) {
    ctn_tensor *t = nullptr;
    CTN_ASSERT_OK(ctn_plan_output_create(plan.get(), i, &t));
    results.emplace_back(t);
    result_ptrs.push_back(t);
  }
  auto run = [&](uint32_t n_out) -> ctn_status {
    return ctn_plan_run(plan.get(), static_cast<uint32_t>(nodes.size()), nodes.data(),
                        feed_ptrs.data(), n_out, result_ptrs.data());
  };
  s = run(static_cast<uint32_t>(outs.size()));
  ASSERT_EQ(s, CTN_OK) << what << ": run: " << status_text(s);
  std::vector<Arr> analytic;
  for (size_t k = 0; k < grads.size(); ++k) analytic.push_back(read_tensor(results[k + 1].get()));

  // Central differences of the same plan's loss, one element at a time.
  std::vector<Arr> fd;
  for (size_t k : gs.wrt) {
    Arr d = make_arr(gs.ins[k].shape);
    for (size_t i = 0; i < d.v.size(); ++i) {
      double lv[2];
      for (int side = 0; side < 2; ++side) {
        std::vector<double> x = gs.ins[k].v;
        x[i] += side == 0 ? v.eps : -v.eps;
        CTN_ASSERT_OK(ctn_tensor_write(feeds[k].get(), x.data(), x.size() * sizeof(double)));
        s = run(1);
        ASSERT_EQ(s, CTN_OK) << what << ": run: " << status_text(s);
        lv[side] = read_tensor(results[0].get()).v.at(0);
      }
      d.v[i] = (lv[0] - lv[1]) / (2 * v.eps);
    }
    CTN_ASSERT_OK(ctn_tensor_write(feeds[k].get(), gs.ins[k].v.data(),
                                   gs.ins[k].v.size() * sizeof(double)));
    fd.push_back(std::move(d));
  }
  check_grads(analytic, fd, v, what);
  *fd_out = std::move(fd);
}

void grad_eager(const std::string &backend, const OpCase &c, const Variant &v,
                const GradSetup &gs, const std::vector<Arr> &fd, std::string *unsupported) {
  const std::string what = c.row + " [" + v.label + ", eager] on " + backend;
  ctn_status s = ctn_context_set_backends(context(), backend.c_str());
  ASSERT_EQ(s, CTN_OK) << what << ": set_backends: " << status_text(s);
  ctn_graph *graw = nullptr;
  CTN_ASSERT_OK(ctn_graph_create(context(), CTN_GRAPH_EAGER, &graw));
  GraphPtr g(graw);
  Nodes nodes;
  for (size_t i = 0; i < gs.ins.size(); ++i) {
    TensorPtr t(make_tensor(gs.dts[i], gs.ins[i].shape, gs.ins[i].v));
    ASSERT_NE(t, nullptr);
    ctn_node n = CTN_NODE_NONE;
    std::string name = "x" + std::to_string(i);
    CTN_ASSERT_OK(ctn_variable(g.get(), name.c_str(), t.get(), &n));
    nodes.push_back(n);
  }
  ctn_node y = CTN_NODE_NONE, loss = CTN_NODE_NONE;
  s = v.build(g.get(), nodes, CTN_F64, &y);
  if (s == CTN_ERR_UNSUPPORTED && backend != "cpu") {
    *unsupported = what + ": " + ctn_last_error();
    return;
  }
  ASSERT_EQ(s, CTN_OK) << what << ": build: " << status_text(s);
  // The op under test ran eagerly on the backend under test, not on a fallback.
  const char *ran = nullptr;
  CTN_ASSERT_OK(ctn_graph_node_backend(g.get(), y, &ran));
  EXPECT_EQ(std::string(ran), backend) << what << ": eager node ran on \"" << ran << "\"";
  s = add_loss(g.get(), y, gs.weights, &loss);  // eager: the loss's mul and sum run there too
  if (s == CTN_ERR_UNSUPPORTED && backend != "cpu") {
    *unsupported = what + ": " + ctn_last_error();
    return;
  }
  ASSERT_EQ(s, CTN_OK) << what << ": loss: " << status_text(s);
  Nodes wrt, grads(gs.wrt.size(), CTN_NODE_NONE);
  for (size_t k : gs.wrt) wrt.push_back(nodes[k]);
  s = ctn_grad(g.get(), loss, static_cast<uint32_t>(wrt.size()), wrt.data(), grads.data());
  if (s == CTN_ERR_UNSUPPORTED && backend != "cpu") {
    *unsupported = what + ": " + ctn_last_error();
    return;
  }
  ASSERT_EQ(s, CTN_OK) << what << ": ctn_grad: " << status_text(s);
  std::vector<Arr> analytic;
  for (ctn_node gn : grads) {
    ctn_tensor *t = nullptr;
    CTN_ASSERT_OK(ctn_graph_value(g.get(), gn, &t));
    TensorPtr tp(t);
    analytic.push_back(read_tensor(t));
  }
  check_grads(analytic, fd, v, what);
}

}  // namespace

std::string run_forward_variant(const std::string &backend, const OpCase &c, const Variant &v,
                                ctn_dtype fdt, uint64_t seed, bool all_passes) {
  std::string unsupported;
  forward(backend, c, v, fdt, seed, all_passes, &unsupported);
  return unsupported;
}

std::string run_grad_variant(const std::string &backend, const OpCase &c, const Variant &v,
                             uint64_t seed) {
  GradSetup gs;
  Rng rng(seed);
  make_inputs(v, CTN_F64, rng, &gs.ins, &gs.dts);
  for (size_t i = 0; i < v.ins.size(); ++i)
    if (v.ins[i].dtype < 0) gs.wrt.push_back(i);
  Arr ref = v.ref ? v.ref(gs.ins, CTN_F64) : Arr{};
  // The weights need the output shape: take it from the reference when there is one, else
  // from shape inference on a scratch graph.
  Shape yshape = ref.shape;
  if (!v.ref) {
    ctn_graph *graw = nullptr;
    if (ctn_graph_create(context(), 0, &graw) != CTN_OK) return "";
    GraphPtr g(graw);
    Nodes nodes;
    for (size_t i = 0; i < gs.ins.size(); ++i) {
      ctn_node n = CTN_NODE_NONE;
      ctn_input(g.get(), nullptr, gs.dts[i], static_cast<uint32_t>(gs.ins[i].shape.size()),
                gs.ins[i].shape.data(), &n);
      nodes.push_back(n);
    }
    ctn_node y = CTN_NODE_NONE;
    ctn_status s = v.build(g.get(), nodes, CTN_F64, &y);
    EXPECT_EQ(s, CTN_OK) << c.row << " [" << v.label << "]: build: " << status_text(s);
    if (s != CTN_OK) return "";
    uint32_t nd = 0;
    int64_t shp[CTN_MAX_DIMS] = {};
    ctn_dtype ydt = CTN_F64;
    ctn_node_info(g.get(), y, &ydt, &nd, shp);
    yshape.assign(shp, shp + nd);
  }
  gs.weights = make_arr(yshape);
  std::uniform_real_distribution<double> wd(-1.0, 1.0);
  for (double &w : gs.weights.v) w = wd(rng);

  std::string unsupported;
  std::vector<Arr> fd;
  grad_lazy(backend, c, v, gs, &fd, &unsupported);
  if (!unsupported.empty() || ::testing::Test::HasFatalFailure() || fd.empty()) return unsupported;
  grad_eager(backend, c, v, gs, fd, &unsupported);
  return unsupported;
}

}  // namespace conf

// ---- input generators ------------------------------------------------------------------------------

namespace conf {

Gen uni(double lo, double hi) {
  return [lo, hi](Rng &r) { return std::uniform_real_distribution<double>(lo, hi)(r); };
}

Gen away(double lo, double hi, double gap) {
  return [lo, hi, gap](Rng &r) {
    for (;;) {
      double x = std::uniform_real_distribution<double>(lo, hi)(r);
      if (std::fabs(x) >= gap) return x;
    }
  };
}

Gen ints(int lo, int hi) {
  return [lo, hi](Rng &r) { return static_cast<double>(std::uniform_int_distribution<int>(lo, hi)(r)); };
}

Gen with_zeros(Gen g, double p_zero) {
  return [g, p_zero](Rng &r) {
    return std::uniform_real_distribution<double>(0, 1)(r) < p_zero ? 0.0 : g(r);
  };
}

Gen choice(std::vector<double> values) {
  return [values](Rng &r) {
    return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(r)];
  };
}

}  // namespace conf
