/* chutney op catalogue, ABI v1. C99.
 *
 * The names below are what ctn_op() takes and what backends' get_kernel() is asked for.
 * For each op: inputs, attributes (slots of ctn_attrs it reads) and the output.
 *
 * Kernel contract (backends and op libraries):
 *  - Every input and the output is contiguous row-major; strides are filled in for convenience.
 *  - Inputs of broadcasting ops (marked [bcast]) have shapes that broadcast (numpy rules) to the
 *    output shape; the kernel expands them itself (stride 0 on broadcast axes).
 *  - Floating ops support CTN_F32 and CTN_F64; a backend that lacks a dtype says so in
 *    get_kernel with CTN_ERR_UNSUPPORTED.
 *  - Attributes are already normalised by the core: axes are non-negative, slice bounds are
 *    clamped, reshape targets have no -1.
 *
 * The user-facing ops in chutney.h map 1:1 onto these; the *_grad ops are what the autodiff rule
 * table emits for backward passes (backends implement them like any other op).
 */
#ifndef CHUTNEY_OPS_H
#define CHUTNEY_OPS_H

/* ---- elementwise unary: (x) -> same dtype and shape ------------------------------------- */
#define CTN_OP_NEG "neg"
#define CTN_OP_EXP "exp"
#define CTN_OP_LOG "log"
#define CTN_OP_SQRT "sqrt"
#define CTN_OP_ABS "abs"
#define CTN_OP_SIGN "sign"            /* -1, 0 or 1 */
#define CTN_OP_TANH "tanh"
#define CTN_OP_SIGMOID "sigmoid"
#define CTN_OP_RELU "relu"            /* max(x, 0) */
#define CTN_OP_GELU "gelu"            /* exact: 0.5 x (1 + erf(x / sqrt 2)) */
#define CTN_OP_LEAKY_RELU "leaky_relu" /* f[0] = negative slope */
#define CTN_OP_CLAMP "clamp"          /* f[0] = lo, f[1] = hi */
#define CTN_OP_CAST "cast"            /* i[0] = target ctn_dtype; any dtype to any dtype;
                                         to bool: x != 0 */
#define CTN_OP_COPY "copy"            /* identity */

/* ---- elementwise binary [bcast]: (a, b) -> broadcast shape, dtype of a == dtype of b --------- */
#define CTN_OP_ADD "add"
#define CTN_OP_SUB "sub"
#define CTN_OP_MUL "mul"
#define CTN_OP_DIV "div"
#define CTN_OP_POW "pow"
#define CTN_OP_MAXIMUM "maximum"
#define CTN_OP_MINIMUM "minimum"
/* comparisons [bcast]: (a, b) -> CTN_BOOL */
#define CTN_OP_EQ "eq"
#define CTN_OP_NE "ne"
#define CTN_OP_LT "lt"
#define CTN_OP_LE "le"
#define CTN_OP_GT "gt"
#define CTN_OP_GE "ge"
/* where [bcast]: (cond: bool, a, b) -> cond ? a : b */
#define CTN_OP_WHERE "where"

/* ---- backward helpers, elementwise: (x or y, dy) -> dx, same shape ------------------------ */
#define CTN_OP_RELU_GRAD "relu_grad"         /* (x or y = relu(x), dy): dy * (x > 0) */
#define CTN_OP_LEAKY_RELU_GRAD "leaky_relu_grad" /* (x, dy), f[0] slope: dy * (x > 0 ? 1 : s) */
#define CTN_OP_GELU_GRAD "gelu_grad"         /* (x, dy) */
#define CTN_OP_CLAMP_GRAD "clamp_grad"       /* (x, dy), f[0] lo, f[1] hi: dy * (lo<=x<=hi) */
#define CTN_OP_TANH_GRAD "tanh_grad"         /* (y, dy): dy * (1 - y^2), y = tanh(x) */
#define CTN_OP_SIGMOID_GRAD "sigmoid_grad"   /* (y, dy): dy * y * (1 - y), y = sigmoid(x) */

/* ---- matmul ---------------------------------------------------------------------------------
 * (a [..., M, K], b [..., K, N]) -> [..., M, N]; i[0] = trans_a, i[1] = trans_b (transpose the
 * operand's last two dims first); leading (batch) dims broadcast. Both operands >= 2-d. */
#define CTN_OP_MATMUL "matmul"
/* Fused: (a, b, bias [N]) -> act(a @ b + bias); i[0], i[1] as matmul; i[2] = activation:
 * 0 none, 1 relu, 2 gelu. Emitted by the fusion pass only when the backend offers it. */
#define CTN_OP_MATMUL_BIAS_ACT "matmul_bias_act"

/* ---- reductions: (x) -> reduced; i[0] = bitmask of reduced axes (bit k = axis k),
 * i[1] = keepdims (0/1). The core expands "all axes" into the full mask, so the mask is empty
 * only for a 0-d input, where the reduction is the identity. ------------------------------------ */
#define CTN_OP_SUM "sum"
#define CTN_OP_MEAN "mean"
#define CTN_OP_MAX "max"

/* ---- shape ops -------------------------------------------------------------------------------- */
#define CTN_OP_RESHAPE "reshape"       /* i[0..ni-1] = new shape (no -1) */
#define CTN_OP_PERMUTE "permute"       /* i[0..ndim-1] = perm: out.shape[k] = x.shape[perm[k]] */
#define CTN_OP_SLICE "slice"           /* i[0] axis, i[1] start, i[2] stop, i[3] step (> 0) */
#define CTN_OP_SLICE_GRAD "slice_grad" /* (dy) -> zeros of the source shape with dy scattered;
                                          i[0] axis, i[1] start, i[2] stop, i[3] step,
                                          i[4] = source size along axis */
#define CTN_OP_CONCAT "concat"         /* (x0, x1, ...) i[0] = axis */
#define CTN_OP_BROADCAST_TO "broadcast_to" /* [bcast] i[0..ni-1] = target shape */

/* ---- softmax family; i[0] = axis ------------------------------------------------------------ */
#define CTN_OP_SOFTMAX "softmax"
#define CTN_OP_LOG_SOFTMAX "log_softmax"
#define CTN_OP_SOFTMAX_GRAD "softmax_grad"         /* (y, dy): y * (dy - sum(dy * y, axis)) */
#define CTN_OP_LOG_SOFTMAX_GRAD "log_softmax_grad" /* (y, dy): dy - exp(y) * sum(dy, axis) */
/* (logits [N, C], labels [N] i32|i64) -> 0-d mean of -log softmax(logits)[n, label[n]]. A label
 * outside [0, C) is an error (CTN_ERR_INVALID_ARGUMENT) reported by the kernel. */
#define CTN_OP_CROSS_ENTROPY "cross_entropy"
/* (logits, labels, dy 0-d) -> [N, C]: (softmax(logits) - onehot(labels)) * dy / N */
#define CTN_OP_CROSS_ENTROPY_GRAD "cross_entropy_grad"

/* Activation codes for matmul_bias_act i[2]. */
#define CTN_ACT_NONE 0
#define CTN_ACT_RELU 1
#define CTN_ACT_GELU 2

#endif /* CHUTNEY_OPS_H */
