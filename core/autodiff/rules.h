// One gradient rule per differentiable built-in op (the autodiff rule table).
#pragma once

#include "graph/graph.h"

namespace ctn::rules {

#define CTN_GRAD_RULE(name)                                                                       \
  void name([[maybe_unused]] Graph &g, [[maybe_unused]] ctn_node node, [[maybe_unused]] ctn_node dy, \
            [[maybe_unused]] const bool *need, [[maybe_unused]] ctn_node *dx)
CTN_GRAD_RULE(add);
CTN_GRAD_RULE(sub);
CTN_GRAD_RULE(mul);
CTN_GRAD_RULE(div);
CTN_GRAD_RULE(pow);
CTN_GRAD_RULE(maximum);
CTN_GRAD_RULE(minimum);
CTN_GRAD_RULE(neg);
CTN_GRAD_RULE(exp);
CTN_GRAD_RULE(log);
CTN_GRAD_RULE(sqrt);
CTN_GRAD_RULE(abs);
CTN_GRAD_RULE(tanh);
CTN_GRAD_RULE(sigmoid);
CTN_GRAD_RULE(relu);
CTN_GRAD_RULE(leaky_relu);
CTN_GRAD_RULE(gelu);
CTN_GRAD_RULE(clamp);
CTN_GRAD_RULE(cast);
CTN_GRAD_RULE(copy);
CTN_GRAD_RULE(where);
CTN_GRAD_RULE(matmul);
CTN_GRAD_RULE(sum);
CTN_GRAD_RULE(mean);
CTN_GRAD_RULE(max);
CTN_GRAD_RULE(reshape);
CTN_GRAD_RULE(permute);
CTN_GRAD_RULE(slice);
CTN_GRAD_RULE(slice_grad);
CTN_GRAD_RULE(concat);
CTN_GRAD_RULE(broadcast_to);
CTN_GRAD_RULE(softmax);
CTN_GRAD_RULE(log_softmax);
CTN_GRAD_RULE(cross_entropy);
CTN_GRAD_RULE(zero);  // ops whose gradient is zero everywhere it exists (sign, comparisons)

// Neural-network ops (autodiff/rules_nn.cpp).
CTN_GRAD_RULE(conv2d);
CTN_GRAD_RULE(conv2d_grad_input);
CTN_GRAD_RULE(conv2d_grad_weight);
CTN_GRAD_RULE(conv_transpose2d);
CTN_GRAD_RULE(max_pool2d);
CTN_GRAD_RULE(avg_pool2d);
CTN_GRAD_RULE(avg_pool2d_grad);
CTN_GRAD_RULE(batch_norm);
CTN_GRAD_RULE(batch_norm_inference);
CTN_GRAD_RULE(layer_norm);
CTN_GRAD_RULE(dropout);
CTN_GRAD_RULE(embedding);
CTN_GRAD_RULE(embedding_grad);

// Tangent (forward-mode) rules (autodiff/tangent_rules.cpp): OpDef::tangent of the built-in ops.
#define CTN_TANGENT_RULE(name) ctn_node name(Graph &g, ctn_node node, const ctn_node *t)
CTN_TANGENT_RULE(self_adjoint_jvp);  // symmetric Jacobian in input 0: the gradient rule on the tangent
CTN_TANGENT_RULE(zero_jvp);          // zero (comparisons, sign)
CTN_TANGENT_RULE(linear_jvp);        // linear in input 0: the op itself on the tangent
CTN_TANGENT_RULE(bilinear_jvp);      // product rule (mul, matmul, conv2d, conv_transpose2d)
CTN_TANGENT_RULE(one_element_jvp);   // one output element: <VJP(1), v>
CTN_TANGENT_RULE(add_jvp);
CTN_TANGENT_RULE(sub_jvp);
CTN_TANGENT_RULE(div_jvp);
CTN_TANGENT_RULE(pow_jvp);
CTN_TANGENT_RULE(minmax_jvp);
CTN_TANGENT_RULE(where_jvp);
CTN_TANGENT_RULE(concat_jvp);
CTN_TANGENT_RULE(embedding_jvp);
CTN_TANGENT_RULE(log_softmax_jvp);
CTN_TANGENT_RULE(max_jvp);
CTN_TANGENT_RULE(batch_norm_jvp);
CTN_TANGENT_RULE(masked_grad_jvp);  // relu_grad, leaky_relu_grad, clamp_grad
CTN_TANGENT_RULE(output_grad_jvp);  // tanh_grad, sigmoid_grad
CTN_TANGENT_RULE(cross_entropy_grad_jvp);
// a + b where either may be CTN_NODE_NONE (zero).
ctn_node add_tangents(Graph &g, ctn_node a, ctn_node b);

}  // namespace ctn::rules
