/* The API example shown in README.md, kept here so that it is compiled and run (suite 'abi').
 * Fits w in x @ w = t by gradient descent: build, differentiate, compile, run. Exits 1 unless
 * the loss fell a hundredfold. Keep README.md in step with this file. */
#include <chutney/chutney.h>
#include <stdio.h>

#define TRY(call) do { if ((call) != CTN_OK) { \
  fprintf(stderr, "%s: %s\n", #call, ctn_last_error()); return 1; } } while (0)

int main(void) {
  const int64_t xs[2] = {4, 3}, ws[2] = {3, 1}, ts[2] = {4, 1};
  const float xd[12] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, td[4] = {1, 2, 3, 6};
  ctn_context *ctx; ctn_graph *g; ctn_plan *plan; ctn_tensor *w0, *xv, *tv, *lv;
  ctn_node x, t, w, y, d, sq, loss, dw, lr, step, w1, upd;
  float l = 0, first = 0;
  TRY(ctn_context_create(NULL, &ctx));
  TRY(ctn_graph_create(ctx, 0, &g));                      /* 1. build: y = x @ w */
  TRY(ctn_tensor_create(CTN_F32, 2, ws, NULL, &w0));      /* NULL data: zeros */
  TRY(ctn_input(g, "x", CTN_F32, 2, xs, &x));
  TRY(ctn_input(g, "t", CTN_F32, 2, ts, &t));
  TRY(ctn_variable(g, "w", w0, &w));
  TRY(ctn_matmul(g, x, w, 0, 0, &y));
  TRY(ctn_sub(g, y, t, &d));
  TRY(ctn_mul(g, d, d, &sq));
  TRY(ctn_mean(g, sq, 0, NULL, 0, &loss));                /* loss = mean((x@w - t)^2) */
  TRY(ctn_grad(g, loss, 1, &w, &dw));                     /* 2. differentiate */
  TRY(ctn_scalar(g, CTN_F32, 0.1, &lr));
  TRY(ctn_mul(g, dw, lr, &step));
  TRY(ctn_sub(g, w, step, &w1));
  TRY(ctn_assign(g, w, w1, &upd));                        /* after each run: w -= 0.1 dw */
  TRY(ctn_plan_compile(g, 1, &loss, NULL, &plan));        /* 3. compile */
  TRY(ctn_tensor_create(CTN_F32, 2, xs, xd, &xv));
  TRY(ctn_tensor_create(CTN_F32, 2, ts, td, &tv));
  TRY(ctn_plan_output_create(plan, 0, &lv));
  for (int i = 0; i < 200; ++i) {                         /* 4. run, many times */
    TRY(ctn_plan_run(plan, 2, (const ctn_node[]){x, t},
                     (const ctn_tensor *const[]){xv, tv}, 1, &lv));
    TRY(ctn_tensor_read(lv, &l, sizeof l));
    if (i == 0) first = l;
  }
  printf("loss %g -> %g\n", first, l);
  ctn_tensor_release(lv); ctn_tensor_release(tv); ctn_tensor_release(xv);
  ctn_plan_release(plan); ctn_graph_release(g); ctn_tensor_release(w0);
  ctn_context_release(ctx);
  return l < first / 100 ? 0 : 1;
}
