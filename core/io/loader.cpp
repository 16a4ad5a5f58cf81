// The batching loader: worker threads assemble batches (permutation lookup, u8 -> f32 through a
// 256-entry table, augmentation) into a ring of `prefetch` preallocated slots; the consumer
// copies the next one out in order. Batch b always lands in slot b % prefetch and a worker may
// claim b only once the consumer has taken b - prefetch, so a slot is never written while it is
// read, and no allocation happens after creation.
//
// Determinism does not depend on which worker assembles which batch: the permutation is drawn
// from (seed, epoch) on the consumer's thread at reset, and each sample's augmentation from a
// hash of (seed, epoch, sample index).
#include <chutney/data.h>

#include "io/dataset.h"
#include "io/io_common.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

using namespace ctn;
using namespace ctn::io;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t key(uint64_t seed, uint64_t epoch, uint64_t index, uint64_t domain) {
  return splitmix(splitmix(splitmix(seed ^ domain) ^ epoch) ^ index);
}

// The high 64 bits of r * n. 32-bit targets have no __int128: the same value from 32-bit halves,
// so the shuffle order is identical on every platform.
uint64_t mul_high(uint64_t r, uint64_t n) {
#if defined(__SIZEOF_INT128__)
  return static_cast<uint64_t>((static_cast<unsigned __int128>(r) * n) >> 64);
#else
  const uint64_t rl = r & 0xffffffffu, rh = r >> 32, nl = n & 0xffffffffu, nh = n >> 32;
  const uint64_t ll = rl * nl, lh = rl * nh, hl = rh * nl, hh = rh * nh;
  const uint64_t mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
  return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
#endif
}

// Uniform in [0, n) without modulo bias worth caring about (Lemire's multiply-shift).
uint64_t below(uint64_t r, uint64_t n) { return mul_high(r, n); }

constexpr uint64_t kDomainShuffle = 0x53485546464c45ull;  // "SHUFFLE"
constexpr uint64_t kDomainAugment = 0x4155474d454e54ull;  // "AUGMENT"

struct Slot {
  std::vector<float> images;
  std::vector<int32_t> labels;
  int64_t batch = -1;
  int32_t n = 0;
  bool ready = false;
};

}  // namespace

struct ctn_loader {
  std::shared_ptr<const Dataset> ds;
  uint32_t flags = 0;
  int32_t batch_size = 1;
  int32_t pad = 0;
  uint64_t seed = 0;
  int32_t num_workers = 0;  // 0: synchronous
  int32_t prefetch = 1;
  float lut[256] = {};
  int64_t num_batches = 0;
  int32_t shard_index = 0, shard_count = 1;  // data-parallel sharding (data.h)

  std::mutex mu;
  std::condition_variable cv_work;   // workers wait for a claimable batch
  std::condition_variable cv_ready;  // the consumer waits for a slot or for busy == 0
  std::vector<Slot> slots;
  std::vector<uint32_t> order;
  int64_t epoch = 0;
  int64_t next_claim = 0;
  int64_t next_consume = 0;
  int busy = 0;
  bool paused = false;
  bool stop = false;
  std::vector<std::thread> workers;

  uint64_t st_batches = 0, st_samples = 0, st_waits = 0;
  double st_wait = 0, st_copy = 0, st_work = 0;

  ~ctn_loader() {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    cv_work.notify_all();
    for (auto &t : workers)
      if (t.joinable()) t.join();
  }

  int64_t image_size() const { return ds->image_size(); }

  // Fills rows [0, n) of batch b and zeroes the rest (a partial last batch).
  int32_t assemble(int64_t b, float *img, int32_t *lab, int64_t *lab64) const {
    const int64_t first = (b * shard_count + shard_index) * batch_size;
    const int32_t n = static_cast<int32_t>(std::min<int64_t>(batch_size, ds->count - first));
    const int64_t isz = image_size();
    const int32_t R = ds->rows, C = ds->cols;
    for (int32_t i = 0; i < n; ++i) {
      const uint32_t idx = order[static_cast<size_t>(first + i)];
      const uint8_t *src = ds->pixels.data() + static_cast<int64_t>(idx) * isz;
      float *dst = img + i * isz;
      if (lab) lab[i] = ds->labels[idx];
      if (lab64) lab64[i] = ds->labels[idx];
      bool flip = false;
      int32_t dy = pad, dx = pad;  // window offset inside the padded image; pad = centred
      if ((flags & CTN_LOADER_HFLIP) || pad > 0) {
        uint64_t r = key(seed, static_cast<uint64_t>(epoch), idx, kDomainAugment);
        flip = (flags & CTN_LOADER_HFLIP) && (r & 1);
        if (pad > 0) {
          dy = static_cast<int32_t>(below(splitmix(r ^ 1), 2 * static_cast<uint64_t>(pad) + 1));
          dx = static_cast<int32_t>(below(splitmix(r ^ 2), 2 * static_cast<uint64_t>(pad) + 1));
        }
      }
      if (!flip && dy == pad && dx == pad) {
        for (int64_t k = 0; k < isz; ++k) dst[k] = lut[src[k]];
        continue;
      }
      // out(y, x) = padded(y + dy, x' + dx) with x' = x or C-1-x: crop, then flip the window.
      for (int32_t y = 0; y < R; ++y) {
        const int32_t sy = y + dy - pad;
        float *row = dst + static_cast<int64_t>(y) * C;
        if (sy < 0 || sy >= R) {
          std::fill(row, row + C, lut[0]);
          continue;
        }
        const uint8_t *srow = src + static_cast<int64_t>(sy) * C;
        for (int32_t x = 0; x < C; ++x) {
          const int32_t sx = (flip ? C - 1 - x : x) + dx - pad;
          row[x] = (sx < 0 || sx >= C) ? lut[0] : lut[srow[sx]];
        }
      }
    }
    std::fill(img + n * isz, img + static_cast<int64_t>(batch_size) * isz, 0.0f);
    if (lab) std::fill(lab + n, lab + batch_size, 0);
    if (lab64) std::fill(lab64 + n, lab64 + batch_size, 0);
    return n;
  }

  void worker_main() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      cv_work.wait(lk, [&] {
        return stop || (!paused && next_claim < num_batches && next_claim < next_consume + prefetch);
      });
      if (stop) return;
      const int64_t b = next_claim++;
      Slot &s = slots[static_cast<size_t>(b % prefetch)];
      ++busy;
      lk.unlock();
      auto t0 = Clock::now();
      int32_t n = assemble(b, s.images.data(), s.labels.data(), nullptr);
      double dt = seconds_since(t0);
      lk.lock();
      --busy;
      s.batch = b;
      s.n = n;
      s.ready = true;
      st_work += dt;
      cv_ready.notify_all();
    }
  }

  // Called with mu held and no worker busy.
  void start_epoch(int64_t e) {
    epoch = e;
    const size_t count = static_cast<size_t>(ds->count);
    if (order.size() != count) order.resize(count);
    std::iota(order.begin(), order.end(), 0u);
    if (flags & CTN_LOADER_SHUFFLE) {
      uint64_t state = key(seed, static_cast<uint64_t>(e), 0, kDomainShuffle);
      for (size_t i = count; i > 1; --i) {
        state = splitmix(state);
        std::swap(order[i - 1], order[static_cast<size_t>(below(state, i))]);
      }
    }
    next_claim = next_consume = 0;
    for (auto &s : slots) {
      s.ready = false;
      s.batch = -1;
    }
  }
};

namespace {

// Validates a caller tensor and returns its data pointer (NULL tensor: NULL).
void *target(ctn_tensor *t, const char *what, const ctn_loader &L, bool images, ctn_dtype *out_dtype) {
  if (t == nullptr) return nullptr;
  ctn_dtype dt{};
  check(ctn_tensor_dtype(t, &dt), what);
  uint32_t nd = 0;
  int64_t shape[CTN_MAX_DIMS];
  check(ctn_tensor_shape(t, &nd, shape), what);
  // A fixed array: this runs per batch, where nothing may allocate.
  int64_t want[4] = {L.batch_size, 1, L.ds->rows, L.ds->cols};
  uint32_t nwant = 4;
  if (!images) {
    nwant = 1;
  } else if (L.flags & CTN_LOADER_FLAT) {
    want[1] = L.image_size();
    nwant = 2;
  }
  auto str = [](const int64_t *s, size_t n) {
    std::string r = "[";
    for (size_t i = 0; i < n; ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
  };
  if (nd != nwant || !std::equal(want, want + nwant, shape))
    fail(CTN_ERR_SHAPE, "ctn_loader_next: %s has shape %s, expected %s", what, str(shape, nd).c_str(),
         str(want, nwant).c_str());
  if (images ? dt != CTN_F32 : (dt != CTN_I32 && dt != CTN_I64))
    fail(CTN_ERR_DTYPE, "ctn_loader_next: %s is %s, expected %s", what, ctn_dtype_name(dt), images ? "f32" : "i32 or i64");
  int32_t contiguous = 0;
  check(ctn_tensor_is_contiguous(t, &contiguous), what);
  if (!contiguous) fail(CTN_ERR_STATE, "ctn_loader_next: %s is not contiguous", what);
  void *p = nullptr;
  check(ctn_tensor_data(t, &p), what);
  *out_dtype = dt;
  return p;
}

}  // namespace

extern "C" {

CTN_API ctn_status ctn_loader_create(ctn_dataset *ds, const ctn_loader_options *options, ctn_loader **out) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(ds);
    CTN_IO_NEED(options);
    CTN_IO_NEED(out);
    ctn_loader_options o{};
    if (options->struct_size < offsetof(ctn_loader_options, prefetch) + sizeof o.prefetch)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_loader_create: options.struct_size %u is too small (%zu)",
           options->struct_size, sizeof o);
    std::memcpy(&o, options, std::min<size_t>(options->struct_size, sizeof o));
    if (o.batch_size < 1) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_loader_create: batch_size %d < 1", o.batch_size);
    if (o.crop_padding < 0 || o.crop_padding > 64)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_loader_create: crop_padding %d is outside 0..64", o.crop_padding);
    if (o.num_workers < 0 || o.num_workers > 64)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_loader_create: num_workers %d is outside 0..64", o.num_workers);
    if (o.prefetch < 0 || o.prefetch > 1024)
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_loader_create: prefetch %d is outside 0..1024", o.prefetch);
    if (!(o.std >= 0) || !(o.mean == o.mean))
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_loader_create: std %g must be >= 0 and mean a number", o.std);
    if (o.flags & ~uint32_t{31})
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_loader_create: unknown flags 0x%x", o.flags & ~uint32_t{31});

    auto L = std::make_unique<ctn_loader>();
    L->ds = ds->ds;
    L->flags = o.flags;
    L->batch_size = o.batch_size;
    L->pad = o.crop_padding;
    L->seed = o.seed;
    const double sd = o.std == 0 ? 1.0 : o.std;
    for (int v = 0; v < 256; ++v) L->lut[v] = static_cast<float>((v / 255.0 - o.mean) / sd);
    const int64_t count = L->ds->count;
    L->num_batches = (o.flags & CTN_LOADER_DROP_LAST) ? count / o.batch_size : (count + o.batch_size - 1) / o.batch_size;
    if (o.shard_count > 1 || o.shard_index != 0) {
      if (o.shard_count < 1 || o.shard_index < 0 || o.shard_index >= o.shard_count)
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_loader_create: shard_index %d is outside 0..shard_count-1 (shard_count %d)",
             o.shard_index, o.shard_count);
      if (!(o.flags & CTN_LOADER_DROP_LAST))
        fail(CTN_ERR_INVALID_ARGUMENT, "ctn_loader_create: sharding (shard_count %d) needs CTN_LOADER_DROP_LAST", o.shard_count);
      L->shard_index = o.shard_index;
      L->shard_count = o.shard_count;
      L->num_batches = count / (static_cast<int64_t>(o.batch_size) * o.shard_count);
    }
    const bool sync = (o.flags & CTN_LOADER_SYNCHRONOUS) != 0;
    L->num_workers = sync ? 0 : (o.num_workers == 0 ? 1 : o.num_workers);
    L->prefetch = sync ? 1 : (o.prefetch == 0 ? 2 * L->num_workers + 1 : o.prefetch);
    L->slots.resize(static_cast<size_t>(L->prefetch));
    for (auto &s : L->slots) {
      s.images.resize(static_cast<size_t>(o.batch_size * L->image_size()));
      s.labels.resize(static_cast<size_t>(o.batch_size));
    }
    L->start_epoch(0);
    try {
      for (int32_t i = 0; i < L->num_workers; ++i) L->workers.emplace_back([p = L.get()] { p->worker_main(); });
    } catch (const std::exception &e) {
      fail(CTN_ERR_INTERNAL, "ctn_loader_create: cannot start a worker thread: %s", e.what());
    }
    *out = L.release();
  });
}

CTN_API void ctn_loader_release(ctn_loader *loader) { delete loader; }

CTN_API ctn_status ctn_loader_batch_create(ctn_loader *loader, ctn_tensor **out_images, ctn_tensor **out_labels) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(loader);
    CTN_IO_NEED(out_images);
    CTN_IO_NEED(out_labels);
    const ctn_loader &L = *loader;
    int64_t ishape[4] = {L.batch_size, 1, L.ds->rows, L.ds->cols};
    int64_t fshape[2] = {L.batch_size, L.image_size()};
    bool flat = L.flags & CTN_LOADER_FLAT;
    ctn_tensor *img = nullptr, *lab = nullptr;
    check(ctn_tensor_create(CTN_F32, flat ? 2 : 4, flat ? fshape : ishape, nullptr, &img), "images");
    ctn_status s = ctn_tensor_create(CTN_I32, 1, ishape, nullptr, &lab);
    if (s != CTN_OK) {
      ctn_tensor_release(img);
      check(s, "labels");
    }
    *out_images = img;
    *out_labels = lab;
  });
}

CTN_API ctn_status ctn_loader_next(ctn_loader *loader, ctn_tensor *images_out, ctn_tensor *labels_out,
                                   int32_t *out_batch_size) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(loader);
    CTN_IO_NEED(out_batch_size);
    ctn_loader &L = *loader;
    ctn_dtype idt{}, ldt{};
    auto *img = static_cast<float *>(target(images_out, "images_out", L, true, &idt));
    void *lab = target(labels_out, "labels_out", L, false, &ldt);
    auto *lab32 = ldt == CTN_I32 ? static_cast<int32_t *>(lab) : nullptr;
    auto *lab64 = ldt == CTN_I64 ? static_cast<int64_t *>(lab) : nullptr;
    const size_t isz = static_cast<size_t>(L.batch_size * L.image_size());

    if (L.num_workers == 0) {
      if (L.next_consume >= L.num_batches) {
        *out_batch_size = 0;
        return;
      }
      // Synchronous: assemble straight into the caller's tensors; a NULL target gets the slot.
      auto t0 = Clock::now();
      int32_t n = L.assemble(L.next_consume, img ? img : L.slots[0].images.data(), lab32, lab64);
      double dt = seconds_since(t0);
      ++L.next_consume;
      std::lock_guard<std::mutex> lk(L.mu);
      L.st_wait += dt;
      L.st_work += dt;
      ++L.st_waits;
      ++L.st_batches;
      L.st_samples += static_cast<uint64_t>(n);
      *out_batch_size = n;
      return;
    }

    std::unique_lock<std::mutex> lk(L.mu);
    if (L.next_consume >= L.num_batches) {
      *out_batch_size = 0;
      return;
    }
    const int64_t b = L.next_consume;
    Slot &s = L.slots[static_cast<size_t>(b % L.prefetch)];
    if (!(s.ready && s.batch == b)) {
      auto t0 = Clock::now();
      L.cv_ready.wait(lk, [&] { return s.ready && s.batch == b; });
      L.st_wait += seconds_since(t0);
      ++L.st_waits;
    }
    lk.unlock();
    auto t0 = Clock::now();
    if (img) std::memcpy(img, s.images.data(), isz * sizeof(float));
    if (lab32) std::memcpy(lab32, s.labels.data(), static_cast<size_t>(L.batch_size) * sizeof(int32_t));
    if (lab64)
      for (int32_t i = 0; i < L.batch_size; ++i) lab64[i] = s.labels[static_cast<size_t>(i)];
    const int32_t n = s.n;
    double dt = seconds_since(t0);
    lk.lock();
    s.ready = false;
    ++L.next_consume;
    L.st_copy += dt;
    ++L.st_batches;
    L.st_samples += static_cast<uint64_t>(n);
    lk.unlock();
    L.cv_work.notify_all();
    *out_batch_size = n;
  });
}

CTN_API ctn_status ctn_loader_reset(ctn_loader *loader, int64_t epoch) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(loader);
    if (epoch < 0) fail(CTN_ERR_INVALID_ARGUMENT, "ctn_loader_reset: epoch %lld < 0", static_cast<long long>(epoch));
    ctn_loader &L = *loader;
    std::unique_lock<std::mutex> lk(L.mu);
    // Workers still assembling batches of the old epoch write into slots the new epoch will use:
    // stop new claims and let them finish first.
    L.paused = true;
    L.cv_ready.wait(lk, [&] { return L.busy == 0; });
    L.start_epoch(epoch);
    L.paused = false;
    lk.unlock();
    L.cv_work.notify_all();
  });
}

CTN_API ctn_status ctn_loader_num_batches(const ctn_loader *loader, int64_t *out) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(loader);
    CTN_IO_NEED(out);
    *out = loader->num_batches;
  });
}

CTN_API ctn_status ctn_loader_stats_get(ctn_loader *loader, ctn_loader_stats *out) {
  const char *ctn_io_fn = __func__;
  return wall([&] {
    CTN_IO_NEED(loader);
    CTN_IO_NEED(out);
    if (out->struct_size < offsetof(ctn_loader_stats, batches))
      fail(CTN_ERR_INVALID_ARGUMENT, "ctn_loader_stats_get: struct_size %u is too small", out->struct_size);
    ctn_loader_stats s{};
    s.struct_size = out->struct_size;
    {
      std::lock_guard<std::mutex> lk(loader->mu);
      s.num_workers = static_cast<uint32_t>(loader->num_workers);
      s.batches = loader->st_batches;
      s.samples = loader->st_samples;
      s.waits = loader->st_waits;
      s.wait_seconds = loader->st_wait;
      s.copy_seconds = loader->st_copy;
      s.worker_seconds = loader->st_work;
    }
    std::memcpy(out, &s, std::min<size_t>(out->struct_size, sizeof s));
  });
}

}  // extern "C"
