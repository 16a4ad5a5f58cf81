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
 *  - get_kernel only sees signatures the host's infer accepted: the number and dtypes of the
 *    inputs, the output's shape and dtype and the attributes are those the op's definition
 *    (built-in, composite part or op library) checked and produced. A kernel maker does not
 *    re-validate them: it checks only what it supports (a dtype, a rank, a size limit) and
 *    answers CTN_ERR_UNSUPPORTED with the reason otherwise.
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
                                         to bool: x != 0; float to integer (u8, i8 included):
                                         toward zero, saturating at the type's limits, NaN -> 0;
                                         integer to a narrower integer: modulo 2^bits (C's
                                         conversion); since 1.5 to f16 / bf16: round to nearest
                                         even, NaN stays NaN, past the largest finite -> inf */
#define CTN_OP_COPY "copy"            /* identity */
#define CTN_OP_ERF "erf"              /* since 1.4: the error function, 2/sqrt(pi) int_0^x e^(-t^2) dt
                                         (ONNX Erf); f32|f64 */
#define CTN_OP_ATAN "atan"            /* since 1.4: arctangent, in (-pi/2, pi/2) (ONNX Atan); f32|f64 */
#define CTN_OP_SIN "sin"              /* since 1.4: sine (ONNX Sin); f32|f64 */
#define CTN_OP_COS "cos"              /* since 1.4: cosine (ONNX Cos); f32|f64 */
#define CTN_OP_TAN "tan"              /* since 1.4: tangent (ONNX Tan); f32|f64 */
/* since 1.5: the inverse and hyperbolic functions of ONNX (Asin, Acos, Sinh, Cosh, Asinh, Acosh,
 * Atanh); f32|f64 (and the 16-bit floats on the CPU). Outside the domain (|x| > 1 for asin,
 * acos, atanh; x < 1 for acosh) the result is NaN, atanh(+-1) is +-inf. */
#define CTN_OP_ASIN "asin"
#define CTN_OP_ACOS "acos"
#define CTN_OP_SINH "sinh"
#define CTN_OP_COSH "cosh"
#define CTN_OP_ASINH "asinh"
#define CTN_OP_ACOSH "acosh"
#define CTN_OP_ATANH "atanh"

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

/* ---- composite ops (since 1.2): (x) -> same dtype and shape, f32|f64. The core defines each as
 * a decomposition into the ops above: ctn_op adds those parts to the graph instead, so backends
 * and op libraries never see these names in get_kernel, every backend runs them, and their
 * gradient is the parts' gradient. Float attributes are optional: none gives the defaults
 * shown; giving some means giving all. ------------------------------------------------------ */
#define CTN_OP_SOFTSIGN "softsign"       /* x / (1 + |x|) */
#define CTN_OP_SOFTPLUS "softplus"       /* log(1 + e^x), without overflow for large x */
#define CTN_OP_ELU "elu"                 /* f[0] alpha (1): x > 0 ? x : alpha (e^x - 1) */
#define CTN_OP_SELU "selu"               /* 1.0507... * elu(x, 1.6732...) (Klambauer et al.) */
#define CTN_OP_HARDSIGMOID "hardsigmoid" /* f[0] alpha (1/6), f[1] beta (1/2): clamp(alpha x + beta, 0, 1) */
#define CTN_OP_HARDSWISH "hardswish"     /* x clamp(x / 6 + 1/2, 0, 1) */
#define CTN_OP_MISH "mish"               /* x tanh(softplus(x)) */
#define CTN_OP_RECIPROCAL "reciprocal"   /* 1 / x */

/* Activation codes for matmul_bias_act i[2] and conv2d_bias_act i[7]. */
#define CTN_ACT_NONE 0
#define CTN_ACT_RELU 1
#define CTN_ACT_GELU 2
#define CTN_ACT_CLAMP 3 /* since 1.5, conv2d_bias_act only: clamp(v, f[0], f[1]) (ONNX Clip, relu6) */
/* Conv epilogue activations (issue 25), since 1.6, conv2d_bias_act only; the fusion pass emits
 * them for conv2d -> add(bias) followed by the ops shown. */
#define CTN_ACT_SIGMOID 4   /* 1 / (1 + e^-v): sigmoid */
#define CTN_ACT_SILU 5      /* v sigmoid(v): SiLU / Swish (PyTorch exports Sigmoid + Mul) */
#define CTN_ACT_HARDSWISH 6 /* v clamp(v / 6 + 1/2, 0, 1): ONNX HardSwish as imported */
/* (x, w, bias [O], r [N,O,Ho,Wo]) -> act(conv2d(x, w) + bias[o] + r): conv2d_bias_act with a
 * residual add before the activation (ResNet's conv -> bias -> add(shortcut) -> relu, MobileNetV2's
 * add without one); attributes as conv2d_bias_act, r has the output's dtype and shape. Emitted by
 * the fusion pass only when the backend offers it (docs/OPS.md); f32. */
#define CTN_OP_CONV2D_BIAS_ADD_ACT "conv2d_bias_add_act"
/* ---- since 1.7: channels-last convolutions (issue 25) -------------------------------------------
 * A trailing layout attribute on conv2d (i[7]), conv2d_bias_act and conv2d_bias_add_act (i[8]):
 * CTN_LAYOUT_NCHW (0, also when the slot is absent: ni 7 / 8) as before, or CTN_LAYOUT_NHWC (1):
 * x is [N,H,W,C], the output (and conv2d_bias_add_act's r) [N,Ho,Wo,O]; the weight stays
 * [O,C/groups,KH,KW] and the bias [O]. Forward only: conv2d's gradient rule refuses a layout 1
 * node (CTN_ERR_UNSUPPORTED). The core normalises layout 0 away (ni 7 / 8). The compile stage
 * "layout" (CTN_PASS_LAYOUT, chutney.h) makes layout 1 nodes, only for a backend built against
 * 1.7 or later whose get_kernel accepts them; a backend refuses them with CTN_ERR_UNSUPPORTED
 * (the CPU: oneDNN's f32 convolution only).
 * The same attribute on max_pool2d (i[6]) and avg_pool2d (i[7]; 0 or absent: ni 6 / 7 after
 * normalisation): layout 1 pools x [N,H,W,C] into [N,Ho,Wo,C], same windows, padding and
 * count_include_pad. Forward only: their gradient rules refuse a layout 1 node
 * (CTN_ERR_UNSUPPORTED); the layout stage lets a pool the backend accepts in NHWC join a region
 * (the CPU: f32 and f64; the GPU backends refuse it). */
#define CTN_LAYOUT_NCHW 0
#define CTN_LAYOUT_NHWC 1
/* ---- end of channels-last convolutions ---- */

/* ---- optimizer steps (since 1.1): elementwise, write the new value of one state tensor; the
 * caller ctn_assign's it into the variable (the core writes in place when legal). w, g and the
 * state tensors share dtype (f32|f64) and shape; lr is a 0-d value of that dtype and step a 0-d
 * i64 (>= 1), both inputs so that schedules need no recompile. Not differentiable. ---------- */
/* (v, g, w; f[0] momentum, f[1] weight_decay) -> v' = momentum*v + (g + wd*w) */
#define CTN_OP_SGD_VELOCITY "sgd_velocity"
/* (w, v', g, lr; f[0] momentum, f[1] weight_decay, i[0] nesterov 0/1) ->
 * w' = w - lr * (nesterov ? (g + wd*w) + momentum*v' : v'). Nesterov needs momentum > 0. */
#define CTN_OP_SGD_APPLY "sgd_apply"
/* (m, g; f[0] beta1 in [0,1)) -> m' = beta1*m + (1-beta1)*g */
#define CTN_OP_ADAM_MOMENT1 "adam_moment1"
/* (v, g; f[0] beta2 in [0,1)) -> v' = beta2*v + (1-beta2)*g*g */
#define CTN_OP_ADAM_MOMENT2 "adam_moment2"
/* (w, m', v', lr, step; f[0] beta1, f[1] beta2, f[2] eps, f[3] weight_decay, i[0] decoupled
 * 0/1 (1 = AdamW)) -> w' = w - lr * (mhat / (sqrt(vhat) + eps) + (decoupled ? wd*w : 0)),
 * mhat = m'/(1-beta1^step), vhat = v'/(1-beta2^step). With decoupled 0, g already holds wd*w. */
#define CTN_OP_ADAM_APPLY "adam_apply"

/* ---- neural-network ops (since 1.1). Layout NCHW; f32 and f64. ------------------------------
 * Convolution attributes, shared: i[0], i[1] stride h, w (>= 1); i[2], i[3] padding h, w (>= 0,
 * the same on both sides); i[4], i[5] dilation h, w (>= 1); i[6] groups (>= 1, divides the input
 * and output channels). The core normalises 0 in a stride/dilation/groups slot to 1. */
/* (x [N,C,H,W], w [O,C/groups,KH,KW]) -> [N,O,Ho,Wo], Ho = (H + 2 ph - dh (KH-1) - 1) / sh + 1
 * (floor; Wo alike). No bias: add one with a broadcasting add of [O,1,1]. */
#define CTN_OP_CONV2D "conv2d"
/* since 1.5. Fused: (x, w, bias [O]) -> act(conv2d(x, w) + bias[o] over each output channel o);
 * conv attrs + i[7] = activation (CTN_ACT_*; CTN_ACT_CLAMP reads f[0] lo, f[1] hi). Emitted by
 * the fusion pass for conv2d -> add(bias [O,1,1]) [-> relu / gelu / clamp; since 1.6 also sigmoid,
 * x * sigmoid(x), hardswish] only when the backend offers it (docs/OPS.md); f32. */
#define CTN_OP_CONV2D_BIAS_ACT "conv2d_bias_act"
/* (dy [N,O,Ho,Wo], w [O,C/groups,KH,KW]) -> dx [N,C,H,W]; conv attrs + i[7], i[8] = H, W (stride
 * makes the input size ambiguous). The adjoint of conv2d w.r.t. x. */
#define CTN_OP_CONV2D_GRAD_INPUT "conv2d_grad_input"
/* (x [N,C,H,W], dy [N,O,Ho,Wo]) -> dw [O,C/groups,KH,KW]; conv attrs + i[7], i[8] = KH, KW. */
#define CTN_OP_CONV2D_GRAD_WEIGHT "conv2d_grad_weight"
/* (x [N,C,H,W], w [C,O/groups,KH,KW]) -> [N,O,Ho,Wo], Ho = (H-1) sh - 2 ph + dh (KH-1) + oph + 1;
 * conv attrs + i[7], i[8] = output padding h, w (each >= 0 and smaller than its stride).
 * Equals conv2d_grad_input(x, w) with H, W = Ho, Wo. */
#define CTN_OP_CONV_TRANSPOSE2D "conv_transpose2d"
/* Pooling attributes: i[0], i[1] kernel h, w (>= 1); i[2], i[3] stride h, w (>= 1; the core
 * normalises 0 to the kernel size); i[4], i[5] padding h, w (<= kernel / 2). Ho = (H + 2 ph -
 * KH) / sh + 1 (floor). */
#define CTN_OP_MAX_POOL2D "max_pool2d"           /* (x [N,C,H,W]) -> [N,C,Ho,Wo]; padding is -inf */
/* (x, y, dy) -> dx: each window's gradient goes to the first maximum of the window in row-major
 * order (ties: the first one only); overlapping windows add up. */
#define CTN_OP_MAX_POOL2D_GRAD "max_pool2d_grad"
/* (x) -> y; pool attrs + i[6] = count_include_pad (0: divide by the number of real elements of
 * the window, 1: by KH * KW). */
#define CTN_OP_AVG_POOL2D "avg_pool2d"
#define CTN_OP_AVG_POOL2D_GRAD "avg_pool2d_grad" /* (dy) -> dx; avg attrs + i[7], i[8] = H, W */
/* (x [N,C,...], gamma [C], beta [C]); f[0] = eps -> y. Training mode: mean and biased variance
 * over every axis except 1; y = (x - mean) / sqrt(var + eps) * gamma + beta. Running statistics
 * are not updated by the op (the caller computes and assigns them). */
#define CTN_OP_BATCH_NORM "batch_norm"
#define CTN_OP_BATCH_NORM_GRAD_INPUT "batch_norm_grad_input" /* (x, gamma, dy); f[0] eps -> dx */
#define CTN_OP_BATCH_NORM_GRAD_GAMMA "batch_norm_grad_gamma" /* (x, dy); f[0] eps -> [C] */
/* (x [N,C,...], gamma, beta, running_mean [C], running_var [C]); f[0] = eps -> y with the given
 * statistics. */
#define CTN_OP_BATCH_NORM_INFERENCE "batch_norm_inference"
/* (x, gamma, beta); i[0] = first normalised axis a (normalises over axes a..ndim-1; gamma and
 * beta have the shape of those axes); f[0] = eps -> y. Biased variance. */
#define CTN_OP_LAYER_NORM "layer_norm"
#define CTN_OP_LAYER_NORM_GRAD_INPUT "layer_norm_grad_input" /* (x, gamma, dy); same attrs */
#define CTN_OP_LAYER_NORM_GRAD_GAMMA "layer_norm_grad_gamma" /* (x, dy); same attrs -> gamma's shape */
/* (x, step [] i64); f[0] = p in [0, 1), i[0] = seed -> y = keep(k) ? x[k] * T(1 / (1 - p)) : 0,
 * k the row-major element index. Counter-based, identical on every backend:
 *   mix(z) = splitmix64 finaliser: z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27;
 *            z *= 0x94D049BB133111EB; z ^= z >> 31   (uint64 arithmetic)
 *   key = mix(seed + mix(step + 0x9E3779B97F4A7C15))
 *   keep(k) = (mix(key + (k + 1) * 0x9E3779B97F4A7C15) >> 40) >= floor(p * 2^24)
 * Linear in x: the gradient is dropout(dy, step) with the same attributes. Never folded. */
#define CTN_OP_DROPOUT "dropout"
/* (table [V,D], ids [...] i32|i64) -> [..., D]: rows of the table. An id outside [0, V) is an
 * error reported by the kernel (CTN_ERR_INVALID_ARGUMENT). */
#define CTN_OP_EMBEDDING "embedding"
/* (ids [...], dy [..., D]); i[0] = V -> [V, D]: dy rows added up per id (scatter-add). */
#define CTN_OP_EMBEDDING_GRAD "embedding_grad"

/* ---- since 1.6: data-dependent shapes ----------------------------------------------------------
 * The output's shape depends on the input values. Inference gives an upper bound (the shape
 * ctn_plan_output_create makes and ctn_plan_output_info reports); the value has its actual
 * shape, each dim at most the bound, and ctn_plan_run gives an output that shape. A plan holding
 * one runs in stages, what follows the op compiled for the shape it produced (docs/EXECUTION.md,
 * "Data-dependent shapes"). The core computes these ops on the host: no backend's get_kernel is
 * asked for them. No gradient. */
#define CTN_OP_NONZERO "nonzero"   /* (x) -> i64 [max(ndim, 1), count]: the indices of the non-zero
                                      elements in row-major order (ONNX NonZero) */
#define CTN_OP_COMPRESS "compress" /* (x, cond [m], m <= the axis) i[0] axis, -1: x flattened ->
                                      the slices k with cond[k] != 0 (ONNX Compress) */
#define CTN_OP_UNIQUE "unique"     /* (x) i[0] axis (-1: flattened), i[1] sorted, i[2] output: 0 the
                                      unique slices (sorted, or in order of first occurrence), 1 i64
                                      index of each one's first occurrence, 2 i64 per slice of x its
                                      index in output 0, 3 i64 counts (ONNX Unique) */
#define CTN_OP_TOPK "topk"         /* (x, k i64|i32 [1] or []) i[0] axis, i[1] largest, i[2] sorted,
                                      i[3] output: 0 values, 1 i64 indices; ties: lower index first */
#define CTN_OP_NON_MAX_SUPPRESSION "non_max_suppression"
/* (boxes [B, N, 4], scores [B, C, N], max per class i64 [1], iou threshold [1], score threshold
 * [1]) i[0] center_point_box (0: [y1, x1, y2, x2] corners, 1: [xc, yc, w, h]) -> i64 [count, 3]
 * rows (batch, class, box): per batch and class, boxes with score > threshold by falling score,
 * each kept unless its IoU with a kept one exceeds the threshold (ONNX NonMaxSuppression). */
/* ---- int8 quantization (since 1.6) --------------------------------------------------------------
 * Affine quantization: real = (q - zero_point) * scale, q a u8 or i8 (the zero point's dtype).
 * Rounding is to nearest, ties to even; results saturate to the dtype's range. Scales and zero
 * points are tensors (constants in a model), read by the kernel when it runs. None of these ops
 * has a gradient rule: ctn_grad along a path through one of their float operands fails naming
 * the op, and their integer results carry no gradient (like a cast to an integer dtype). The CPU
 * backend runs them; other backends decline them and the ops fall back to the CPU. */
/* (x float, scale float (x's dtype), zero_point u8|i8) -> q of zero_point's dtype:
 * saturate(round(x / scale) + zero_point). scale and zero_point have the same shape and
 * broadcast against x (numpy rules): [] per tensor, [C, 1, 1] per channel of [N, C, H, W]. */
#define CTN_OP_QUANTIZE_LINEAR "quantize_linear"
/* (q u8|i8|i32, scale float, zero_point of q's dtype) -> (q - zero_point) * scale, of scale's
 * dtype; scale and zero_point broadcast against q as in quantize_linear. */
#define CTN_OP_DEQUANTIZE_LINEAR "dequantize_linear"
/* (a [..., M, K] u8|i8, b [..., K, N] u8|i8, a_zero_point [] of a's dtype, b_zero_point [] or
 * [N] of b's dtype) -> i32 [..., M, N]: sum_k (a - a_zp) (b - b_zp), exact in i32. Batch dims
 * broadcast (numpy rules). */
#define CTN_OP_MATMUL_INTEGER "matmul_integer"
/* (a, a_scale [] f32, a_zero_point [], b, b_scale [] or [N] f32, b_zero_point [] or [N],
 * y_scale [] f32, y_zero_point [] u8|i8, bias [N] i32) -> y of y_zero_point's dtype:
 * saturate(round((acc + bias[n]) * f32(a_scale * b_scale[n] / y_scale)) + y_zp), acc
 * matmul_integer's (ONNX QLinearMatMul: bias 0). */
#define CTN_OP_QLINEAR_MATMUL "qlinear_matmul"
/* (x [N,C,H,W] u8|i8, w [O,C/groups,KH,KW] u8|i8, x_zero_point [], w_zero_point [] or [O]);
 * conv2d's attributes -> i32 [N,O,Ho,Wo]: the convolution of (x - x_zp) and (w - w_zp[o]); the
 * padding is x_zp (a real zero). */
#define CTN_OP_CONV2D_INTEGER "conv2d_integer"
/* (x, x_scale [] f32, x_zero_point [], w, w_scale [] or [O] f32, w_zero_point [] or [O],
 * y_scale [] f32, y_zero_point [] u8|i8, bias [O] i32); conv2d's attributes i[0..6], i[7]
 * activation (CTN_ACT_NONE or CTN_ACT_RELU, applied before rounding) -> y of y_zero_point's
 * dtype: saturate(round(act((acc[o] + bias[o]) * f32(x_scale * w_scale[o] / y_scale))) + y_zp),
 * acc conv2d_integer's. */
#define CTN_OP_QLINEAR_CONV2D "qlinear_conv2d"
/* ---- since 1.7: u8 residual add (issue 27 part 4) ---- */
/* (a u8|i8, a_scale [] f32, a_zero_point [] of a's dtype, b of a's dtype, b_scale [] f32,
 * b_zero_point [], y_scale [] f32, y_zero_point [] of a's dtype) -> y of a's dtype, a and b
 * broadcast (numpy rules): with ra = f32(a_scale / y_scale), rb = f32(b_scale / y_scale) and
 * c = f32(y_zp) - fma(ra, f32(a_zp), rb * f32(b_zp)) (f32 operations, fma rounded once),
 * y = saturate(round_half_even(fma(f32(a), ra, fma(f32(b), rb, c)))); a value past the i32
 * range gives the dtype's minimum. onnxruntime's QLinearAdd (com.microsoft, its AVX2 kernel)
 * computes this for operands of one shape. since 1.7 */
#define CTN_OP_QLINEAR_ADD "qlinear_add"
/* ---- end of u8 residual add ---- */
/* ---- end of int8 quantization ---- */

/* ---- since 1.6: batch-norm statistics ------------------------------------------------------------
 * (x [N,C,...] float) -> [2, C] of x's dtype: row 0 the mean, row 1 the biased variance of each
 * channel over every axis except 1 (the statistics batch_norm normalises with), taken in one
 * sweep over x. No gradient rule: the result is for the running statistics (ctn_assign), which
 * are never differentiated; ctn_grad along a path through it fails naming the op. The CPU
 * backend runs it; for a plan whose first backend has no kernel for it, the compiler computes it
 * with mean, sub, mul and mean on that backend instead. */
#define CTN_OP_BATCH_NORM_STATS "batch_norm_stats"
/* (x [N,C,...], gamma [C], beta [C]); f[0] = eps -> relu(batch_norm(x, gamma, beta)): the fusion
 * pass's batch_norm followed by relu (the relu the only reader of the batch_norm), offered only to
 * a backend built against 1.6 or later that has a kernel for it. No gradient rule (the pass runs
 * after ctn_grad: relu_grad reads this node's output). */
#define CTN_OP_BATCH_NORM_RELU "batch_norm_relu"
/* ---- end of batch-norm statistics ---- */

#endif /* CHUTNEY_OPS_H */
