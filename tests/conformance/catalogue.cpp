// The op catalogue of the suite comes from the context's op registry (ctn_context_op_count /
// ctn_context_op_info), not from a list kept by hand: the matrix has a row for every registered
// op, and ConformanceCatalogue.EveryRegisteredOpHasACase fails when an op has no case, so adding
// an op without a conformance case is caught. An op may be exempted only in kExempt, with the
// reason.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "conformance.hpp"
#include "nn_cases.hpp"

namespace conf {

const std::vector<OpCase> &optim_cases();  // optim_cases.cpp

std::vector<RegisteredOp> registered_ops() {
  std::vector<RegisteredOp> ops;
  ctn_context *ctx = context();
  uint32_t n = 0;
  if (ctx == nullptr || ctn_context_op_count(ctx, &n) != CTN_OK) return ops;
  for (uint32_t i = 0; i < n; ++i) {
    ctn_op_info info{};
    info.struct_size = sizeof info;
    if (ctn_context_op_info(ctx, i, &info) != CTN_OK || info.name == nullptr) continue;
    ops.push_back({info.name, info.origin != nullptr ? info.origin : ""});
  }
  return ops;
}

namespace {

// Registered ops with no conformance case, each with the reason. Keep this empty where possible.
struct Exemption {
  const char *op;
  const char *reason;
};
#define CTN_HOST_OP_REASON \
  "no backend kernel: the core computes it on the host (data-dependent output shape, since 1.6); tested by tests/unit/dynamic_shapes_test.cpp and the ONNX backend suite"
const std::vector<Exemption> kExempt = {
    {"nonzero", CTN_HOST_OP_REASON},
    {"compress", CTN_HOST_OP_REASON},
    {"unique", CTN_HOST_OP_REASON},
    {"topk", CTN_HOST_OP_REASON},
    {"non_max_suppression", CTN_HOST_OP_REASON},
};
#undef CTN_HOST_OP_REASON

std::set<std::string> covered_ops() {
  std::set<std::string> ops;
  for (const auto *list : {&forward_cases(), &grad_cases(), &nn_forward_cases(), &nn_grad_cases(),
                           &optim_cases(), &quant_cases()})
    for (const OpCase &c : *list) ops.insert(c.op);
  return ops;
}

TEST(ConformanceCatalogue, EveryRegisteredOpHasACase) {
  ASSERT_NE(context(), nullptr) << setup_error();
  const std::vector<RegisteredOp> ops = registered_ops();
  uint32_t n = 0;
  ASSERT_EQ(ctn_context_op_count(context(), &n), CTN_OK) << status_text(CTN_ERR_INTERNAL);
  ASSERT_EQ(ops.size(), n) << "ctn_context_op_info failed for some index";
  ASSERT_GT(ops.size(), 0u);
  const std::set<std::string> covered = covered_ops();
  std::set<std::string> exempt;
  for (const Exemption &e : kExempt) {
    ASSERT_TRUE(e.reason != nullptr && *e.reason) << e.op << " is exempt without a reason";
    exempt.insert(e.op);
  }
  std::vector<std::string> missing;
  std::set<std::string> registered;
  for (const RegisteredOp &op : ops) {
    registered.insert(op.name);
    // Ops of op libraries (plugins/, or a vendor's) bring their own tests.
    if (op.origin != "builtin") continue;
    if (!covered.count(op.name) && !exempt.count(op.name)) missing.push_back(op.name);
  }
  std::string list;
  for (const auto &m : missing) list += " " + m;
  EXPECT_TRUE(missing.empty()) << missing.size() << " registered op(s) have no conformance case "
                               << "(add one, or list the op in kExempt with the reason):" << list;
  // An exemption or a case for an op that is not registered is stale.
  for (const auto &e : exempt)
    EXPECT_TRUE(registered.count(e)) << "kExempt names " << e << ", which is not registered";
  for (const auto &c : covered)
    EXPECT_TRUE(registered.count(c)) << "a case tests op " << c << ", which is not registered";
}

}  // namespace
}  // namespace conf
