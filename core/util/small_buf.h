// A call's scratch array of n elements: in place up to N (the common case, no allocation), on the
// heap beyond. Not copyable: data() may point into the object itself.
#pragma once

#include <cstddef>
#include <vector>

namespace ctn {

template <class T, size_t N>
class SmallBuf {
 public:
  explicit SmallBuf(size_t n) {
    if (n > N) {
      big_.resize(n);
      p_ = big_.data();
    }
  }
  SmallBuf(const SmallBuf &) = delete;
  SmallBuf &operator=(const SmallBuf &) = delete;
  T *data() { return p_; }

 private:
  T small_[N];
  std::vector<T> big_;
  T *p_ = small_;
};

}  // namespace ctn
