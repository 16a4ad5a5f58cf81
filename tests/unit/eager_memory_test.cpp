// What eager dispatch allocates from: the output buffer pool (core/tensor/pool.h: size classes,
// reuse with zeroing, the bound on cached bytes, closing with buffers still out, concurrent takes
// and gives) and the nodes' in-place input lists (core/util/small_vec.h).
#include "tensor/pool.h"
#include "util/small_vec.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

using ctn::BufferPool;

namespace {
// A pool owned by the test; close() deletes it (now or with the last buffer given back).
struct Pool {
  BufferPool *p = new BufferPool;
  ~Pool() { p->close(); }
};
}  // namespace

TEST(BufferPool, ClassesCoverTheRequestWithBoundedWaste) {
  size_t prev = 0;
  for (size_t b = 1; b <= BufferPool::kMaxPooledBytes; b += b < 4096 ? 1 : 997) {
    const size_t c = BufferPool::class_bytes(b);
    ASSERT_GE(c, b) << b;
    ASSERT_EQ(c % 64, 0u) << b;
    ASSERT_GE(c, prev) << b;  // monotone: a bigger request never gets a smaller class
    ASSERT_LE(c, b + b / 4 + 64) << b;
    prev = c;
  }
  EXPECT_EQ(BufferPool::class_bytes(0), 64u);
  EXPECT_EQ(BufferPool::class_bytes(1024), 1024u);
  EXPECT_EQ(BufferPool::class_bytes(1025), 1280u);
  EXPECT_EQ(BufferPool::class_bytes(BufferPool::kMaxPooledBytes), BufferPool::kMaxPooledBytes);
  EXPECT_EQ(BufferPool::class_bytes(BufferPool::kMaxPooledBytes + 1), 0u);  // not pooled
}

TEST(BufferPool, GivenBuffersAreReusedZeroedAndAligned) {
  Pool pool;
  auto *a = static_cast<unsigned char *>(pool.p->take(100));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a[i], 0) << i;
  std::memset(a, 0xab, 128);
  pool.p->give(a, 100);
  EXPECT_EQ(pool.p->cached_bytes(), 128u);
  EXPECT_EQ(pool.p->outstanding(), 0u);
  auto *b = static_cast<unsigned char *>(pool.p->take(120));  // the same class (128 bytes)
  EXPECT_EQ(b, a);
  for (int i = 0; i < 120; ++i) ASSERT_EQ(b[i], 0) << i;  // zeroed again
  EXPECT_EQ(pool.p->cached_bytes(), 0u);
  void *c = pool.p->take(100);  // the class is empty now: a fresh buffer
  EXPECT_NE(c, b);
  EXPECT_EQ(pool.p->outstanding(), 2u);
  void *d = pool.p->take(4096, false);  // not zeroed on request: just usable
  std::memset(d, 1, 4096);
  pool.p->give(b, 120);
  pool.p->give(c, 100);
  pool.p->give(d, 4096);
  EXPECT_EQ(pool.p->outstanding(), 0u);
}

TEST(BufferPool, CachedBytesStayBounded) {
  Pool pool;
  const size_t big = BufferPool::kMaxPooledBytes;
  const size_t n = BufferPool::kMaxCachedBytes / big + 4;
  std::vector<void *> out;
  for (size_t i = 0; i < n; ++i) out.push_back(pool.p->take(big, false));
  for (void *p : out) pool.p->give(p, big);  // the ones past the bound are freed
  EXPECT_LE(pool.p->cached_bytes(), BufferPool::kMaxCachedBytes);
  EXPECT_GE(pool.p->cached_bytes(), BufferPool::kMaxCachedBytes - big);
  EXPECT_EQ(pool.p->outstanding(), 0u);
}

TEST(BufferPool, BuffersOutliveAClosedPool) {
  // The owner closes the pool while two buffers are out: they stay usable, and giving them back
  // frees them and then the pool (ASan/LSan report a leak or a use after free otherwise).
  auto *pool = new BufferPool;
  void *kept = pool->take(64);
  pool->give(pool->take(64), 64);  // one cached buffer: freed by close
  void *late = pool->take(5000);
  pool->close();
  std::memset(kept, 7, 64);
  std::memset(late, 7, 5000);
  pool->give(kept, 64);
  pool->give(late, 5000);  // the last one: the pool deletes itself
}

TEST(BufferPool, AllocatorServesSharedObjects) {
  Pool pool;
  {
    auto v = std::allocate_shared<std::vector<int>>(ctn::PoolAllocator<std::vector<int>>(pool.p), 3, 5);
    EXPECT_EQ(pool.p->outstanding(), 1u);
    EXPECT_EQ((*v)[2], 5);
  }
  EXPECT_EQ(pool.p->outstanding(), 0u);
  EXPECT_GT(pool.p->cached_bytes(), 0u);
}

TEST(BufferPool, ConcurrentTakesAndGivesKeepBuffersPrivate) {
  Pool pool;
  std::vector<std::thread> ts;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        const size_t bytes = 64u << (i % 5);
        auto *p = static_cast<unsigned char *>(pool.p->take(bytes));
        for (size_t k = 0; k < bytes; ++k) bad[t] += p[k] != 0;
        std::memset(p, t + 1, bytes);
        std::this_thread::yield();
        for (size_t k = 0; k < bytes; ++k) bad[t] += p[k] != t + 1;  // nobody else wrote it
        pool.p->give(p, bytes);
      }
    });
  for (auto &th : ts) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[t], 0) << t;
  EXPECT_EQ(pool.p->outstanding(), 0u);
}

TEST(SmallVec, StaysInPlaceUpToNThenMovesToTheHeap) {
  ctn::SmallVec<uint32_t, 4> v{1, 2, 3};
  const uint32_t *inplace = v.data();
  v.push_back(4);
  EXPECT_EQ(v.data(), inplace);  // four fit in place
  v.push_back(5);
  EXPECT_NE(v.data(), inplace);  // the fifth moved them to the heap
  EXPECT_EQ(std::vector<uint32_t>(v), (std::vector<uint32_t>{1, 2, 3, 4, 5}));
  ctn::SmallVec<uint32_t, 4> copy = v, moved = std::move(v);
  EXPECT_EQ(copy, moved);
  EXPECT_TRUE(v.empty());  // NOLINT: a moved-from SmallVec is empty and usable
  v.push_back(9);
  EXPECT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0], 9u);
  copy.erase(copy.begin() + 1);
  copy.insert(copy.begin(), 7);
  EXPECT_EQ(std::vector<uint32_t>(copy), (std::vector<uint32_t>{7, 1, 3, 4, 5}));
  ctn::SmallVec<uint32_t, 4> small{8, 9};
  moved = std::move(small);  // a heap list takes an in-place one
  EXPECT_EQ(std::vector<uint32_t>(moved), (std::vector<uint32_t>{8, 9}));
  moved.resize(6, 1);
  EXPECT_EQ(std::vector<uint32_t>(moved), (std::vector<uint32_t>{8, 9, 1, 1, 1, 1}));
  ctn::SmallVec<uint32_t, 4> self{1, 2, 3, 4};
  for (int i = 0; i < 20; ++i) self.push_back(self[0]);  // an element of its own, across regrowth
  EXPECT_EQ(self.size(), 24u);
  EXPECT_EQ(self.back(), 1u);
  const std::vector<uint32_t> from{4, 3, 2, 1, 0};
  ctn::SmallVec<uint32_t, 4> fv = from;
  EXPECT_EQ(fv.size(), 5u);
  EXPECT_EQ(fv.back(), 0u);
}
