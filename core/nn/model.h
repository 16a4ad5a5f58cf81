// Internal state of a ctn_model (abi/chutney/nn.h) and the helpers the layer files share.
// The layer library only calls the public graph API: a failing call becomes a ctn::Error that
// keeps the call's status and message, prefixed with the layer it came from.
#pragma once

#include <chutney/nn.h>

#include "util/status.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

struct ctn_model {
  struct Var {
    std::string name;
    ctn_node node = CTN_NODE_NONE;
    uint32_t kind = 0;
    std::vector<int64_t> shape;
  };

  ctn_graph *g = nullptr;
  ctn_dtype dtype = CTN_F32;
  uint64_t seed = 0;
  bool training = true;
  ctn_init weight_init = CTN_INIT_KAIMING_UNIFORM;
  double weight_gain = 0;
  std::vector<Var> vars;
  std::map<std::string, size_t> by_name;
  std::map<std::string, int> counters;
  std::string next_name;
  // The last list handed out by ctn_model_variables (the model owns it).
  std::vector<const char *> list_names;
  std::vector<ctn_node> list_nodes;
  // step / lr inputs and the values ctn_model_run feeds them.
  ctn_node step = CTN_NODE_NONE, lr = CTN_NODE_NONE;
  ctn_tensor *step_value = nullptr, *lr_value = nullptr;
  int64_t step_now = 1;
  double lr_now = 0.01;
  bool optimizer_built = false;  // one optimizer per graph: a second would assign twice
  // Dynamic loss scaling (ctn_optimizer.loss_scale): non-NONE while ctn_nn_minimize builds the
  // updates, a 0-d bool "every gradient is finite"; each assignment then keeps the old value
  // when it is false (the step is skipped).
  ctn_node update_guard = CTN_NODE_NONE;
};

namespace ctn::nn {

// Throws ctn::Error(status, "<what>: <message>") when a public call failed.
void check(ctn_status s, const std::string &what);

// The name of the layer being built: the pending ctn_model_name_next, else kind + counter.
std::string layer_name(ctn_model &m, const char *kind);

// An internal initialiser for variable(): every element equals `gain` (the loss scale).
constexpr ctn_init kInitValue = static_cast<ctn_init>(-1);

// Get-or-create a variable (see ctn_model_variable).
ctn_node variable(ctn_model &m, const std::string &name, uint32_t kind, const std::vector<int64_t> &shape,
                  ctn_init init, int64_t fan_in, int64_t fan_out, double gain);

std::vector<int64_t> shape_of(ctn_model &m, ctn_node x);
ctn_dtype dtype_of(ctn_model &m, ctn_node x);
// x must have the model's dtype.
void need_model_dtype(ctn_model &m, ctn_node x, const std::string &who);
std::string shape_text(const std::vector<int64_t> &s);

ctn_node step_node(ctn_model &m);
ctn_node lr_node(ctn_model &m);
ctn_node scalar(ctn_model &m, double v);

// Stable 64-bit hash of a string (FNV-1a) and the splitmix64 finaliser, for derived seeds.
uint64_t hash_name(const std::string &s);
uint64_t mix(uint64_t x);

}  // namespace ctn::nn
