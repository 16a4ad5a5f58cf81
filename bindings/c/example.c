/* A complete C99 program against the public chutney API (chutney.h only):
 * builds y = relu(x @ W + b), compiles it into a plan, runs it twice with new inputs and
 * prints the output. Checks every value against a plain C computation and exits non-zero on
 * any mismatch or error, so it doubles as a test of the C ABI (suite 'abi').
 *
 * Build outside the tree:  cc -std=c99 example.c $(pkg-config --cflags --libs chutney)
 */
#include <chutney/chutney.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define N 2 /* batch */
#define K 3 /* input features */
#define M 4 /* output features */

/* Prints the failing call and the library's message, then leaves main through `fail`. */
#define CHECK(call)                                                                           \
  do {                                                                                        \
    ctn_status st_ = (call);                                                                  \
    if (st_ != CTN_OK) {                                                                      \
      fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call,                 \
              ctn_status_name(st_), ctn_last_error());                                        \
      goto fail;                                                                              \
    }                                                                                         \
  } while (0)

/* y = relu(x W + b) computed directly, the reference the plan's output must match. */
static void reference(const float *x, const float *w, const float *b, float *y) {
  int i, j, k;
  for (i = 0; i < N; ++i) {
    for (j = 0; j < M; ++j) {
      float acc = b[j];
      for (k = 0; k < K; ++k) acc += x[i * K + k] * w[k * M + j];
      y[i * M + j] = acc > 0.0f ? acc : 0.0f;
    }
  }
}

static void print_matrix(const char *name, const float *v) {
  int i, j;
  printf("%s =\n", name);
  for (i = 0; i < N; ++i) {
    printf("  [");
    for (j = 0; j < M; ++j) printf(" %8.4f", v[i * M + j]);
    printf(" ]\n");
  }
}

int main(void) {
  static const float w_data[K * M] = {0.5f, -1.0f, 0.25f, 2.0f,  /* */
                                      -0.5f, 1.5f, 0.75f, -1.0f, /* */
                                      1.0f, 0.5f, -0.25f, 0.5f};
  static const float b_data[M] = {0.1f, -0.2f, 0.3f, -0.4f};
  const int64_t x_shape[2] = {N, K};
  const int64_t w_shape[2] = {K, M};
  const int64_t b_shape[1] = {M};

  ctn_context *ctx = NULL;
  ctn_graph *g = NULL;
  ctn_tensor *w = NULL, *b = NULL, *x = NULL, *y = NULL;
  ctn_plan *plan = NULL;
  ctn_plan_stats stats;
  ctn_node nx, nw, nb, nxw, nsum, ny;
  uint32_t cpu_steps = 0;
  int run, i, errors = 0, rc = EXIT_FAILURE;

  printf("chutney %s (ABI %u.%u)\n", ctn_version_string(), CTN_ABI_VERSION_MAJOR(ctn_abi_version()),
         CTN_ABI_VERSION_MINOR(ctn_abi_version()));
  if (CTN_ABI_VERSION_MAJOR(ctn_abi_version()) != CTN_ABI_MAJOR) {
    fprintf(stderr, "library ABI major %u, header %d\n",
            CTN_ABI_VERSION_MAJOR(ctn_abi_version()), CTN_ABI_MAJOR);
    return EXIT_FAILURE;
  }

  /* Default options: plugins from CHUTNEY_PLUGIN_PATH, the install dir and the build tree. */
  CHECK(ctn_context_create(NULL, &ctx));

  /* 1. Build: shapes are checked as each node is added. */
  CHECK(ctn_tensor_create(CTN_F32, 2, w_shape, w_data, &w));
  CHECK(ctn_tensor_create(CTN_F32, 1, b_shape, b_data, &b));
  CHECK(ctn_graph_create(ctx, 0, &g));
  CHECK(ctn_input(g, "x", CTN_F32, 2, x_shape, &nx));
  CHECK(ctn_constant(g, w, &nw));
  CHECK(ctn_constant(g, b, &nb));
  CHECK(ctn_matmul(g, nx, nw, 0, 0, &nxw));
  CHECK(ctn_add(g, nxw, nb, &nsum)); /* [N, M] + [M] broadcasts */
  CHECK(ctn_relu(g, nsum, &ny));

  /* 2. Compile: passes, placement, memory planning. The graph is not needed afterwards. */
  CHECK(ctn_plan_compile(g, 1, &ny, NULL, &plan));
  ctn_graph_release(g);
  g = NULL;
  stats.struct_size = sizeof stats;
  CHECK(ctn_plan_stats_get(plan, &stats));
  CHECK(ctn_plan_backend_steps(plan, "cpu", NULL, &cpu_steps));
  printf("plan: %u nodes -> %u steps (%u on cpu), %u fused, peak %llu bytes (naive %llu)\n",
         stats.n_nodes, stats.n_steps, cpu_steps, stats.n_fused,
         (unsigned long long)stats.planned_peak_bytes, (unsigned long long)stats.naive_bytes);
  if (stats.n_steps == 0) {
    fprintf(stderr, "plan has no steps\n");
    goto fail;
  }

  /* 3. Run: the same plan, new inputs each time. */
  CHECK(ctn_tensor_create(CTN_F32, 2, x_shape, NULL, &x));
  CHECK(ctn_plan_output_create(plan, 0, &y));
  for (run = 0; run < 2; ++run) {
    float x_data[N * K], y_data[N * M], want[N * M];
    for (i = 0; i < N * K; ++i) x_data[i] = (float)((i + run) % 5) - 1.5f;
    CHECK(ctn_tensor_write(x, x_data, sizeof x_data));
    {
      const ctn_tensor *feeds[1];
      ctn_tensor *outs[1];
      feeds[0] = x;
      outs[0] = y;
      CHECK(ctn_plan_run(plan, 1, &nx, feeds, 1, outs));
    }
    CHECK(ctn_tensor_read(y, y_data, sizeof y_data));
    reference(x_data, w_data, b_data, want);
    printf("run %d:\n", run);
    print_matrix("  y", y_data);
    for (i = 0; i < N * M; ++i) {
      if (fabsf(y_data[i] - want[i]) > 1e-5f) {
        fprintf(stderr, "run %d: y[%d] = %g, expected %g\n", run, i, y_data[i], want[i]);
        ++errors;
      }
    }
  }
  rc = errors == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
  printf("%s\n", errors == 0 ? "ok: output matches the C reference" : "MISMATCH");

fail:
  /* Release in reverse order; every release accepts NULL. */
  ctn_tensor_release(y);
  ctn_tensor_release(x);
  ctn_plan_release(plan);
  ctn_graph_release(g);
  ctn_tensor_release(b);
  ctn_tensor_release(w);
  ctn_context_release(ctx);
  return rc;
}
