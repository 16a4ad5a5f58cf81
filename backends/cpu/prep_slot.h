// PrepSlot: what a kernel derives once from its constant inputs (k_qlinear.cpp's int8 kernels,
// k_conv_dnnl.cpp's reordered oneDNN weights).
#ifndef CTN_CPU_PREP_SLOT_H
#define CTN_CPU_PREP_SLOT_H

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include <chutney/backend.h>

namespace ctn_cpu {

// What a kernel derives from its constant inputs (ctn_sig_const_inputs, ABI 1.7: packed
// weights, multipliers), made on the first call (once, whichever thread gets there first) and
// used while a call's pointers for those inputs are the ones it was made from; get() gives
// nullptr otherwise (the caller computes per call). P: the derived data.
template <class P>
class PrepSlot {
 public:
  uint64_t inputs = 0;  // the inputs (bits, below 9) P is made from; 0: nothing is made

  template <class Make>
  const P *get(const ctn_tensor_desc *in, Make make) const {
    if (!inputs) return nullptr;
    const Entry *e = ready_.load(std::memory_order_acquire);
    if (!e) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!made_) {
        auto m = std::make_unique<Entry>();
        for (int i = 0; i < 9; ++i)
          if (inputs >> i & 1) m->key[i] = where(in[i]);
        m->p = make();
        made_ = std::move(m);
      }
      e = made_.get();
      ready_.store(e, std::memory_order_release);
    }
    for (int i = 0; i < 9; ++i)
      if ((inputs >> i & 1) && e->key[i] != where(in[i])) return nullptr;
    return e->p.get();
  }

 private:
  struct Entry {
    const void *key[9] = {};
    std::unique_ptr<const P> p;
  };
  static const void *where(const ctn_tensor_desc &d) { return static_cast<const char *>(d.data) + d.offset; }
  mutable std::mutex mu_;
  mutable std::unique_ptr<Entry> made_;
  mutable std::atomic<const Entry *> ready_{nullptr};
};

}  // namespace ctn_cpu

#endif
