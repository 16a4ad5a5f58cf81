// Neural-network op schemas (convolution, pooling, normalisation, dropout, embedding...).
// Gradient rules live in autodiff/rules_nn.cpp. Empty until those ops land.
#include "graph/op.h"

namespace ctn {

OpTable nn_op_table() { return {nullptr, 0}; }

}  // namespace ctn
