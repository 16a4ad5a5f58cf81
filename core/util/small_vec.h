// A vector of trivially copyable elements that keeps up to N in place (no allocation) and moves
// to the heap beyond: graph nodes' input lists (graph/graph.h), which an eager op would otherwise
// allocate for every node it records.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <type_traits>
#include <vector>

namespace ctn {

template <class T, uint32_t N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVec copies its elements as bytes");

 public:
  using value_type = T;
  using iterator = T *;
  using const_iterator = const T *;

  SmallVec() = default;
  SmallVec(std::initializer_list<T> l) { assign(l.begin(), l.end()); }
  template <class It>
  SmallVec(It first, It last) {
    assign(first, last);
  }
  SmallVec(const std::vector<T> &v) { assign(v.begin(), v.end()); }  // NOLINT: converts like a vector copy
  SmallVec(const SmallVec &o) { assign(o.begin(), o.end()); }
  SmallVec(SmallVec &&o) noexcept { take(o); }
  SmallVec &operator=(const SmallVec &o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVec &operator=(SmallVec &&o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  SmallVec &operator=(std::initializer_list<T> l) {
    assign(l.begin(), l.end());
    return *this;
  }
  ~SmallVec() { release(); }

  template <class It>
  void assign(It first, It last) {
    size_ = 0;
    for (; first != last; ++first) push_back(*first);
  }

  uint32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T *data() { return heap_ ? heap_ : inl_; }
  const T *data() const { return heap_ ? heap_ : inl_; }
  T *begin() { return data(); }
  T *end() { return data() + size_; }
  const T *begin() const { return data(); }
  const T *end() const { return data() + size_; }
  T &operator[](size_t i) { return data()[i]; }
  const T &operator[](size_t i) const { return data()[i]; }
  T &back() { return data()[size_ - 1]; }
  const T &back() const { return data()[size_ - 1]; }
  void clear() { size_ = 0; }

  void push_back(const T &v) {
    const T copy = v;  // v may be an element of this vector, which grow() frees
    if (size_ == cap_) grow(cap_ * 2);
    data()[size_++] = copy;
  }
  template <class... A>
  T &emplace_back(A &&...a) {
    push_back(T(static_cast<A &&>(a)...));
    return back();
  }
  void pop_back() { --size_; }
  void resize(size_t n, const T &v = T()) {
    const T copy = v;
    if (n > cap_) grow(static_cast<uint32_t>(n));
    for (size_t i = size_; i < n; ++i) data()[i] = copy;
    size_ = static_cast<uint32_t>(n);
  }
  void reserve(size_t n) {
    if (n > cap_) grow(static_cast<uint32_t>(n));
  }
  T *insert(const T *pos, const T &v) {
    const size_t at = static_cast<size_t>(pos - data());
    push_back(v);
    std::rotate(data() + at, data() + size_ - 1, data() + size_);
    return data() + at;
  }
  T *erase(const T *pos) {
    const size_t at = static_cast<size_t>(pos - data());
    std::memmove(data() + at, data() + at + 1, (size_ - at - 1) * sizeof(T));
    --size_;
    return data() + at;
  }

  bool operator==(const SmallVec &o) const { return size_ == o.size_ && std::equal(begin(), end(), o.begin()); }
  bool operator!=(const SmallVec &o) const { return !(*this == o); }
  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT: as a vector copy

 private:
  void grow(uint32_t cap) {
    T *p = static_cast<T *>(std::malloc(sizeof(T) * cap));
    if (!p) throw std::bad_alloc();
    if (size_) std::memcpy(p, data(), sizeof(T) * size_);
    std::free(heap_);
    heap_ = p;
    cap_ = cap;
  }
  void release() {
    std::free(heap_);
    heap_ = nullptr;
    cap_ = N;
    size_ = 0;
  }
  void take(SmallVec &o) {
    size_ = o.size_;
    cap_ = o.cap_;
    heap_ = o.heap_;
    if (!heap_) std::memcpy(inl_, o.inl_, sizeof inl_);  // a fixed size: no call to memcpy
    o.heap_ = nullptr;
    o.size_ = 0;
    o.cap_ = N;
  }

  uint32_t size_ = 0;
  uint32_t cap_ = N;
  T *heap_ = nullptr;
  T inl_[N] = {};
};

}  // namespace ctn
