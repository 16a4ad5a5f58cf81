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
CTN_GRAD_RULE(external);  // op libraries: calls ctn_op_def.grad through the host API

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

}  // namespace ctn::rules
