// Memory planner over a linear schedule. Each arena value lives from the step that produces it
// to its last consumer: when the number of remaining uses of its storage block (its in-degree)
// reaches zero, the block returns to the free list. Offsets are chosen by best fit within one
// arena per device. An elementwise step whose kernel allows it writes over its first input
// when that input has no other remaining use. Views (reshape) share their source's block.
#pragma once

#include <cstdint>
#include <vector>

namespace ctn {

struct PlanValue {
  uint64_t bytes = 0;
  int device = 0;
  bool persistent = false;  // feeds, constants, variables: own buffers, never reused
  int alias_of = -1;        // a view of another value: shares its storage
  bool is_output = false;   // must survive until the end of the run
};

struct PlanStep {
  std::vector<int> inputs;  // value ids read by the step (duplicates allowed)
  int output = -1;          // value id written (-1: none)
  bool inplace_ok = false;  // the kernel may write its output over inputs[0]
};

struct MemoryPlan {
  std::vector<uint64_t> offset;       // per value: byte offset in its device arena (arena values)
  std::vector<char> inplace;          // per step: output placed over inputs[0]
  std::vector<uint64_t> arena_bytes;  // per device
  uint64_t peak_bytes = 0;            // sum of arena sizes
  uint64_t naive_bytes = 0;           // sum of every arena value's size
  uint32_t n_inplace = 0;
};

// `reuse` false gives every value its own region (the naive layout), for comparison and debugging.
MemoryPlan plan_memory(const std::vector<PlanValue> &values, const std::vector<PlanStep> &steps, int n_devices,
                       bool reuse);

constexpr uint64_t kArenaAlign = 64;

}  // namespace ctn
