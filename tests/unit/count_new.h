// Replaces the global operator new / delete with malloc / free and counts every allocation in
// the process (libchutney's and its worker threads' included: they resolve to these), so a test
// can assert that a steady-state path allocates nothing: read g_news before and after.
// Replacement functions exist once per program: include this in exactly one file of a test
// executable (exec_test.cpp in core_unit_test, data_test.cpp).
#pragma once

#include <atomic>
#include <cstdlib>
#include <new>

// GCC flags free() of memory from our own operator new as mismatched; here it is matched.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

static std::atomic<long> g_news{0};
void *operator new(std::size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void *p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// The nothrow forms too (std::stable_partition's buffer): otherwise the runtime's own operator
// new(nothrow) pairs with the free() below (ASan: alloc-dealloc-mismatch).
void *operator new(std::size_t n, const std::nothrow_t &) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { std::free(p); }
