#include "compile/planner.h"

#include <iterator>
#include <limits>
#include <map>

namespace ctn {

namespace {

uint64_t align_up(uint64_t v) { return (v + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }

// Free list of one arena: offset -> size, coalesced; best-fit allocation, bump at the top.
class Arena {
 public:
  uint64_t alloc(uint64_t size) {
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->second >= size && (best == free_.end() || it->second < best->second)) best = it;
    if (best != free_.end()) {
      uint64_t off = best->first, rest = best->second - size;
      free_.erase(best);
      if (rest) free_[off + size] = rest;
      return off;
    }
    // Grow: reuse a free block touching the top if there is one.
    if (!free_.empty()) {
      auto last = std::prev(free_.end());
      if (last->first + last->second == top_) {
        uint64_t off = last->first;
        free_.erase(last);
        top_ = off + size;
        return off;
      }
    }
    uint64_t off = top_;
    top_ += size;
    return off;
  }
  void release(uint64_t off, uint64_t size) {
    auto it = free_.emplace(off, size).first;
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
        it = prev;
      }
    }
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
  }
  uint64_t top() const { return top_; }

 private:
  std::map<uint64_t, uint64_t> free_;
  uint64_t top_ = 0;
};

}  // namespace

MemoryPlan plan_memory(const std::vector<PlanValue> &values, const std::vector<PlanStep> &steps, int n_devices,
                       bool reuse) {
  const size_t nv = values.size();
  MemoryPlan mp;
  mp.offset.assign(nv, 0);
  mp.inplace.assign(steps.size(), 0);
  mp.arena_bytes.assign(static_cast<size_t>(n_devices), 0);

  auto root = [&](int v) {
    while (values[static_cast<size_t>(v)].alias_of >= 0) v = values[static_cast<size_t>(v)].alias_of;
    return v;
  };
  auto in_arena = [&](int v) { return !values[static_cast<size_t>(root(v))].persistent; };

  // Remaining uses per storage root; outputs are pinned until the end.
  constexpr int64_t kPinned = std::numeric_limits<int64_t>::max() / 2;
  std::vector<int64_t> uses(nv, 0);
  for (const auto &s : steps)
    for (int v : s.inputs) ++uses[static_cast<size_t>(root(v))];
  for (size_t v = 0; v < nv; ++v)
    if (values[v].is_output) uses[static_cast<size_t>(root(static_cast<int>(v)))] = kPinned;  // set, not added: a root pinned by several outputs must not overflow

  std::vector<Arena> arenas(static_cast<size_t>(n_devices));
  std::vector<uint64_t> size(nv, 0);
  for (size_t v = 0; v < nv; ++v)
    if (values[v].alias_of < 0 && !values[v].persistent) {
      size[v] = align_up(values[v].bytes ? values[v].bytes : 1);
      mp.naive_bytes += size[v];
    }

  for (size_t si = 0; si < steps.size(); ++si) {
    const PlanStep &s = steps[si];
    const int out = s.output;
    if (out >= 0 && values[static_cast<size_t>(out)].alias_of < 0 && in_arena(out)) {
      const size_t o = static_cast<size_t>(out);
      Arena &ar = arenas[static_cast<size_t>(values[o].device)];
      bool placed = false;
      if (reuse && s.inplace_ok && !s.inputs.empty()) {
        int in0 = root(s.inputs[0]);
        size_t i0 = static_cast<size_t>(in0);
        int64_t mine = 0;
        for (int v : s.inputs) mine += root(v) == in0;
        if (in_arena(in0) && uses[i0] == mine && values[i0].device == values[o].device && size[i0] == size[o]) {
          mp.offset[o] = mp.offset[i0];
          uses[i0] = 0;  // ownership of the block moves to the output
          size[i0] = 0;
          mp.inplace[si] = 1;
          ++mp.n_inplace;
          placed = true;
        }
      }
      if (!placed) mp.offset[o] = reuse ? ar.alloc(size[o]) : ar.alloc(size[o]);
    }
    // Consume the inputs; a block whose last use this was goes back to the free list.
    for (int v : s.inputs) {
      size_t r = static_cast<size_t>(root(v));
      if (!in_arena(static_cast<int>(r)) || size[r] == 0) continue;
      if (--uses[r] == 0 && reuse) {
        arenas[static_cast<size_t>(values[r].device)].release(mp.offset[r], size[r]);
        size[r] = 0;
      }
    }
    // A value nobody reads is dead right after its step.
    if (out >= 0) {
      size_t r = static_cast<size_t>(root(out));
      if (in_arena(static_cast<int>(r)) && uses[r] == 0 && size[r] && reuse) {
        arenas[static_cast<size_t>(values[r].device)].release(mp.offset[r], size[r]);
        size[r] = 0;
      }
    }
  }
  for (size_t d = 0; d < arenas.size(); ++d) {
    mp.arena_bytes[d] = arenas[d].top();
    mp.peak_bytes += arenas[d].top();
  }
  return mp;
}

}  // namespace ctn
