#include "gemm.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "cpu_backend.h"
#include "gemm_arm32.h"
#include "x86_simd.h"

#ifdef CTN_CPU_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace ctn_cpu {

namespace {

// MR x (NV * W) tile of C from packed panels: pa holds k columns of MR values, pb k rows of
// NV * W values. Kept always_inline so each target-attributed wrapper below compiles it for its
// own instruction set.
template <class T, int W, int MR, int NV>
inline __attribute__((always_inline)) void micro_kernel_body(int64_t k, const T *__restrict pa,
                                                             const T *__restrict pb,
                                                             T *__restrict c, int64_t ldc,
                                                             int accumulate) {
  typedef T V __attribute__((vector_size(W * sizeof(T))));
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = V{};
  for (int64_t p = 0; p < k; ++p) {
    V bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) std::memcpy(&bv[j], pb + j * W, sizeof(V));
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const T av = pa[i];
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] += bv[j] * av;
    }
    pa += MR;
    pb += NV * W;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      T *cp = c + i * ldc + j * W;
      if (accumulate) {
        V old;
        std::memcpy(&old, cp, sizeof(V));
        old += acc[i][j];
        std::memcpy(cp, &old, sizeof(V));
      } else {
        std::memcpy(cp, &acc[i][j], sizeof(V));
      }
    }
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void uk_f32_avx512(int64_t k, const float *pa,
                                                      const float *pb, float *c, int64_t ldc,
                                                      int acc) {
  micro_kernel_body<float, 16, 6, 2>(k, pa, pb, c, ldc, acc);
}
__attribute__((target("avx512f"))) void uk_f64_avx512(int64_t k, const double *pa,
                                                      const double *pb, double *c, int64_t ldc,
                                                      int acc) {
  micro_kernel_body<double, 8, 6, 2>(k, pa, pb, c, ldc, acc);
}
__attribute__((target("avx2,fma"))) void uk_f32_avx2(int64_t k, const float *pa, const float *pb,
                                                     float *c, int64_t ldc, int acc) {
  micro_kernel_body<float, 8, 6, 2>(k, pa, pb, c, ldc, acc);
}
__attribute__((target("avx2,fma"))) void uk_f64_avx2(int64_t k, const double *pa,
                                                     const double *pb, double *c, int64_t ldc,
                                                     int acc) {
  micro_kernel_body<double, 4, 6, 2>(k, pa, pb, c, ldc, acc);
}
#endif

// 128-bit vectors: SSE2 on x86-64, NEON on aarch64 (32 registers there: a taller tile).
#if defined(__aarch64__)
constexpr int kGenericMR = 8;
#else
constexpr int kGenericMR = 6;
#endif
void uk_f32_generic(int64_t k, const float *pa, const float *pb, float *c, int64_t ldc, int acc) {
  micro_kernel_body<float, 4, kGenericMR, 2>(k, pa, pb, c, ldc, acc);
}
void uk_f64_generic(int64_t k, const double *pa, const double *pb, double *c, int64_t ldc,
                    int acc) {
  micro_kernel_body<double, 2, kGenericMR, 2>(k, pa, pb, c, ldc, acc);
}

#if defined(__x86_64__)
// A transposed B panel (a weight stored [N, K], as every linear layer's forward reads it) for
// NR = 32: 16 x 16 blocks, each read as 16 rows of B and transposed in registers (the generic
// loop moved one element at a time and was ~10 % of a 128-row forward GEMM).
__attribute__((target("avx512f"))) void transpose16(__m512 *r) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int g = 0; g < 16; g += 4)
    for (int h = 0; h < 2; ++h) {  // per 128-bit lane: column 2h (+1) of rows g..g+3
      const __m512d lo = _mm512_castps_pd(t[g + h]), hi = _mm512_castps_pd(t[g + h + 2]);
      u[g + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo, hi));
      u[g + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo, hi));
    }
  // u[4g + c], lane L: rows 4g..4g+3 of column 4L + c. Gather the lanes of each column.
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88),
                 v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
    r[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(v0, v2, 0xdd);
    r[4 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xdd);
  }
}

__attribute__((target("avx512f"))) void pack_bt32_avx512(const float *b, int64_t csb, int64_t kc, float *dst) {
  int64_t p = 0;
  for (; p + 16 <= kc; p += 16)
    for (int h = 0; h < 32; h += 16) {
      __m512 r[16];
      for (int j = 0; j < 16; ++j) r[j] = _mm512_loadu_ps(b + (h + j) * csb + p);
      transpose16(r);
      for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + (p + i) * 32 + h, r[i]);
    }
  for (; p < kc; ++p)
    for (int j = 0; j < 32; ++j) dst[p * 32 + j] = b[j * csb + p];
}
#endif

// Blocking: a KC x NR panel of B stays in L1, an MC x KC block of A in L2, KC x NC of B in L3.
#if defined(__x86_64__)
const GemmIsa kIsaAvx512 = {"avx512", uk_f32_avx512, 6, 32, 144, 256, 3072,
                            uk_f64_avx512, 6, 16, 96, 256, 1536, pack_bt32_avx512};
const GemmIsa kIsaAvx2 = {"avx2", uk_f32_avx2, 6, 16, 144, 256, 3072,
                          uk_f64_avx2, 6, 8, 96, 256, 1536, nullptr};
#endif
const GemmIsa kIsaGeneric = {"generic", uk_f32_generic, kGenericMR, 8, kGenericMR * 24, 256,
                             3072, uk_f64_generic, kGenericMR, 4, kGenericMR * 12, 256, 1536, nullptr};

constexpr size_t kScratchA = 200 * 1024;
constexpr size_t kScratchB = 256 * 3072 * sizeof(float);
constexpr size_t kScratchC = 8 * 32 * sizeof(double);
constexpr size_t kSharedMax = size_t{16} << 20;  // 2048 x 2048 f32
static_assert(kScratchA >= Bf16Gemm::kBytesA && kScratchB >= Bf16Gemm::kBytesB && kScratchC >= Bf16Gemm::kBytesTile,
              "the bf16 GEMM packs into the f32 GEMM's scratch");

// Packing memory belongs to the thread that packs: every pool worker and every thread that
// calls a GEMM kernel has its own (gemm_scratch_ready), so concurrent callers of one backend
// never share it. Freed when the thread exits.
struct GemmScratch {
  void *a = nullptr;
  void *b = nullptr;
  void *c = nullptr;  // one MR x NR edge tile
  // The B that a parallel GEMM called on this thread shares with the pool's workers: grown to
  // the largest such GEMM run here (at most kSharedMax bytes) and kept, so that a plan's steady
  // state allocates nothing.
  void *shared = nullptr;
  size_t shared_bytes = 0;
  ~GemmScratch() {
    std::free(a);
    std::free(b);
    std::free(c);
    std::free(shared);
  }
};
// The calling thread's scratch. Pool workers get theirs from gemm_worker_init (freed by
// gemm_worker_fini): a thread_local with a destructor registers it with glibc on first use,
// which allocates, and glibc aborts the process when that fails ("failed to register TLS
// destructor") -- as it did for workers started under an address-space limit
// (thread_limits_test). Other threads (callers of kernels) use t_own.
// Initial-exec TLS: this plugin is dlopen'ed, and a dlopen'ed module's thread_locals otherwise
// live in dynamic TLS, which glibc allocates on a thread's first access and aborts when it
// cannot ("cannot allocate memory for thread-local data: ABORT", exit 127, seen for workers
// under RLIMIT_AS). With it the module's 48-byte TLS block sits in the static TLS every thread
// is created with.
#define CTN_STATIC_TLS __attribute__((tls_model("initial-exec")))
thread_local GemmScratch *t_scratch_ptr CTN_STATIC_TLS = nullptr;  // trivially destructible
thread_local bool t_worker CTN_STATIC_TLS = false;                 // t_scratch_ptr is gemm_worker_init's
thread_local GemmScratch t_own CTN_STATIC_TLS;                     // only threads that are not workers
GemmScratch &scratch() {
  if (!t_scratch_ptr) t_scratch_ptr = &t_own;
  return *t_scratch_ptr;
}

void *aligned_scratch(size_t bytes) { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }

template <class T>
struct Blocking {
  void (*uk)(int64_t, const T *, const T *, T *, int64_t, int);
  int mr, nr, mc, kc, nc;
  void (*pack_bt)(const T *b, int64_t csb, int64_t kc, T *dst);  // GemmIsa::pack_bt32, or NULL
};

Blocking<float> blocking_of(const GemmIsa &isa, float) {
  return {isa.f32, isa.mr32, isa.nr32, isa.mc32, isa.kc32, isa.nc32, isa.pack_bt32};
}
Blocking<double> blocking_of(const GemmIsa &isa, double) {
  return {isa.f64, isa.mr64, isa.nr64, isa.mc64, isa.kc64, isa.nc64, nullptr};
}

// Packs the mc x kc block of A at (0, 0) into MR-row panels, zero-padding the last one.
template <class T>
void pack_a(const T *a, int64_t rsa, int64_t csa, int64_t mc, int64_t kc, int mr, T *dst) {
  for (int64_t ir = 0; ir < mc; ir += mr) {
    int64_t rows = std::min<int64_t>(mr, mc - ir);
    if (rows == mr && csa == 1 && mr <= 16) {
      // Row-major A: read MR rows side by side and write the panel contiguously (the stores
      // stream; a row-at-a-time loop scatters them MR apart).
      const T *src[16];
      for (int i = 0; i < mr; ++i) src[i] = a + (ir + i) * rsa;
      T *d = dst;
      if (mr == 6) {
        for (int64_t p = 0; p < kc; ++p, d += 6) {
          d[0] = src[0][p]; d[1] = src[1][p]; d[2] = src[2][p];
          d[3] = src[3][p]; d[4] = src[4][p]; d[5] = src[5][p];
        }
      } else {
        for (int64_t p = 0; p < kc; ++p, d += mr)
          for (int i = 0; i < mr; ++i) d[i] = src[i][p];
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        const T *src = a + ir * rsa + p * csa;
        for (int64_t i = 0; i < rows; ++i) dst[p * mr + i] = src[i * rsa];
        for (int64_t i = rows; i < mr; ++i) dst[p * mr + i] = T(0);
      }
    }
    dst += mr * kc;
  }
}

// Packs the kc x nc block of B into NR-column panels, zero-padding the last one. `bt` (when not
// NULL) packs a full panel of a transposed B (rsb == 1).
template <class T>
void pack_b(const T *b, int64_t rsb, int64_t csb, int64_t kc, int64_t nc, int nr, T *dst,
            void (*bt)(const T *, int64_t, int64_t, T *)) {
  for (int64_t jr = 0; jr < nc; jr += nr) {
    int64_t cols = std::min<int64_t>(nr, nc - jr);
    if (bt && rsb == 1 && csb != 1 && cols == nr) {
      bt(b + jr * csb, csb, kc, dst);
      dst += nr * kc;
      continue;
    }
    for (int64_t p = 0; p < kc; ++p) {
      const T *src = b + p * rsb + jr * csb;
      T *d = dst + p * nr;
      if (csb == 1) {
        std::memcpy(d, src, static_cast<size_t>(cols) * sizeof(T));
      } else {
        for (int64_t j = 0; j < cols; ++j) d[j] = src[j * csb];
      }
      for (int64_t j = cols; j < nr; ++j) d[j] = T(0);
    }
    dst += nr * kc;
  }
}

// C[0:mc, 0:cols] (+)= packed A block (mc x kc, MR-row panels) * one packed B panel (kc x NR,
// of which the first `cols` columns count). Edge tiles go through `tile` (MR x NR).
template <class T>
void macro_panel(const Blocking<T> &bl, int64_t mc, int64_t cols, int64_t kc, const T *pa,
                 const T *pbp, T *c, int64_t ldc, int accumulate, T *tile) {
  for (int64_t ir = 0; ir < mc; ir += bl.mr) {
    int64_t rows = std::min<int64_t>(bl.mr, mc - ir);
    T *cp = c + ir * ldc;
    const T *pap = pa + ir * kc;
    if (rows == bl.mr && cols == bl.nr) {
      bl.uk(kc, pap, pbp, cp, ldc, accumulate);
    } else {
      bl.uk(kc, pap, pbp, tile, bl.nr, 0);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          T v = tile[i * bl.nr + j];
          cp[i * ldc + j] = accumulate ? cp[i * ldc + j] + v : v;
        }
    }
  }
}

// The calling thread's scratch must be ready (gemm_scratch_ready).
template <class T>
void gemm_serial(const Blocking<T> &bl, int64_t m, int64_t n, int64_t k,
                 const T *a, int64_t rsa, int64_t csa, const T *b, int64_t rsb, int64_t csb,
                 T *c, int64_t ldc, bool acc_c = false) {
  if (k == 0) {
    if (!acc_c)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  const GemmScratch &s = *t_scratch_ptr;
  T *pa = static_cast<T *>(s.a);
  T *pb = static_cast<T *>(s.b);
  T *tile = static_cast<T *>(s.c);
  for (int64_t jc = 0; jc < n; jc += bl.nc) {
    int64_t nc = std::min<int64_t>(bl.nc, n - jc);
    for (int64_t pc = 0; pc < k; pc += bl.kc) {
      int64_t kc = std::min<int64_t>(bl.kc, k - pc);
      int accumulate = pc > 0 || acc_c;
      pack_b(b + pc * rsb + jc * csb, rsb, csb, kc, nc, bl.nr, pb, bl.pack_bt);
      for (int64_t ic = 0; ic < m; ic += bl.mc) {
        int64_t mc = std::min<int64_t>(bl.mc, m - ic);
        pack_a(a + ic * rsa + pc * csa, rsa, csa, mc, kc, bl.mr, pa);
        for (int64_t jr = 0; jr < nc; jr += bl.nr)
          macro_panel(bl, mc, std::min<int64_t>(bl.nr, nc - jr), kc, pa, pb + jr * kc,
                      c + ic * ldc + jc + jr, ldc, accumulate, tile);
      }
    }
  }
}

// The operands of one C = A B: A m x k and B k x n, each with a row and a column stride, and C
// m x n with row stride ldc.
template <class T>
struct GemmOperands {
  int64_t m, n, k;
  const T *a;
  int64_t rsa, csa;
  const T *b;
  int64_t rsb, csb;
  T *c;
  int64_t ldc;
};

// A static split of the work: units of `unit` columns (split_n) or rows per part.
template <class T>
struct GemmJob : GemmOperands<T> {
  Blocking<T> bl;
  bool split_n;
  int64_t unit;
};

template <class T>
void gemm_part(void *ctx, int64_t begin, int64_t end, int) {
  const auto &j = *static_cast<const GemmJob<T> *>(ctx);
  if (j.split_n) {
    int64_t j0 = begin * j.unit, j1 = std::min(end * j.unit, j.n);
    gemm_serial(j.bl, j.m, j1 - j0, j.k, j.a, j.rsa, j.csa, j.b + j0 * j.csb,
                j.rsb, j.csb, j.c + j0, j.ldc);
  } else {
    int64_t i0 = begin * j.unit, i1 = std::min(end * j.unit, j.m);
    gemm_serial(j.bl, i1 - i0, j.n, j.k, j.a + i0 * j.rsa, j.rsa, j.csa, j.b,
                j.rsb, j.csb, j.c + i0 * j.ldc, j.ldc);
  }
}

// The parallel GEMM: B is packed once, into memory all participants share, panel by panel by
// whichever participant needs a panel first; the rows of C go out in blocks on demand (an atomic
// counter), each block packing its own rows of A. A participant that starts late, or whose core
// is busy with another process, takes fewer blocks instead of holding up the call: the pool
// splits work statically, and a static half-and-half split ran at the speed of the slower core.
template <class T>
struct SharedGemm : GemmOperands<T> {
  Blocking<T> bl;
  int64_t chunk, chunks;  // rows per block (a multiple of MR, at most MC), number of blocks
  int64_t panels, npad;   // NR-column panels of B, panels * NR
  T *pb;                  // packed B: K block at row pc starts at pb + pc * npad, panel jp of
                          // it at + jp * kc * NR
  std::atomic<int> *state;  // per (K block, panel): 0 not packed, 1 being packed, 2 ready
  std::atomic<int64_t> next{0};
};

inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");
#endif
}

// Panel jp of the K block at row pc (kc rows), packed here if nobody has; NULL while another
// participant is packing it.
template <class T>
const T *shared_panel(SharedGemm<T> &g, int64_t pc, int64_t kc, int64_t jp) {
  T *dst = g.pb + pc * g.npad + jp * kc * g.bl.nr;
  std::atomic<int> &st = g.state[pc / g.bl.kc * g.panels + jp];
  int s = st.load(std::memory_order_acquire);
  if (s == 2) return dst;
  if (s == 0 && st.compare_exchange_strong(s, 1, std::memory_order_acquire)) {
    const int64_t j0 = jp * g.bl.nr;
    pack_b(g.b + pc * g.rsb + j0 * g.csb, g.rsb, g.csb, kc, std::min<int64_t>(g.bl.nr, g.n - j0),
           g.bl.nr, dst, g.bl.pack_bt);
    st.store(2, std::memory_order_release);
    return dst;
  }
  return s == 2 ? dst : nullptr;
}

template <class T>
void shared_part(void *ctx, int64_t, int64_t, int) {
  auto &g = *static_cast<SharedGemm<T> *>(ctx);
  const GemmScratch &s = *t_scratch_ptr;
  T *pa = static_cast<T *>(s.a);
  T *tile = static_cast<T *>(s.c);
  for (;;) {
    const int64_t blk = g.next.fetch_add(1, std::memory_order_relaxed);
    if (blk >= g.chunks) return;
    const int64_t i0 = blk * g.chunk, mc = std::min(g.chunk, g.m - i0);
    for (int64_t pc = 0; pc < g.k; pc += g.bl.kc) {
      const int64_t kc = std::min<int64_t>(g.bl.kc, g.k - pc);
      pack_a(g.a + i0 * g.rsa + pc * g.csa, g.rsa, g.csa, mc, kc, g.bl.mr, pa);
      // Panels in any order (each writes its own columns of C): one that another participant
      // is packing is left for later rather than waited for. Waiting happens only when every
      // panel left is being packed elsewhere, by a participant that waits for nothing: no
      // deadlock, also when the pool runs the parts one after another on the caller.
      for (int64_t j0 = 0; j0 < g.panels; j0 += 64) {
        const int64_t count = std::min<int64_t>(64, g.panels - j0);
        uint64_t todo = count == 64 ? ~uint64_t{0} : (uint64_t{1} << count) - 1;
        for (unsigned spins = 0; todo;) {
          bool progress = false;
          for (uint64_t left = todo; left; left &= left - 1) {
            const int64_t jp = j0 + __builtin_ctzll(left);
            const T *pbp = shared_panel(g, pc, kc, jp);
            if (!pbp) continue;
            macro_panel(g.bl, mc, std::min<int64_t>(g.bl.nr, g.n - jp * g.bl.nr), kc, pa, pbp,
                        g.c + i0 * g.ldc + jp * g.bl.nr, g.ldc, pc > 0, tile);
            todo &= ~(uint64_t{1} << (jp - j0));
            progress = true;
          }
          if (progress) {
            spins = 0;
          } else if (++spins < 4096) {
            spin_pause();
          } else {
            std::this_thread::yield();  // the packer lost its core: let it have this one
          }
        }
      }
    }
  }
}

// The calling thread's buffer that a parallel GEMM shares with the pool's workers: `states`
// counters, set to 0, then (64-byte aligned) room for `elems` elements. Grown to the largest
// such GEMM run here (at most kSharedMax bytes) and kept, so that a plan's steady state
// allocates nothing; NULL past that or when memory is short. The thread's scratch must be ready.
template <class T>
T *shared_buffer(size_t states, size_t elems, std::atomic<int> **state) {
  const size_t state_bytes = (states * sizeof(std::atomic<int>) + 63) / 64 * 64;
  const size_t need = state_bytes + elems * sizeof(T);
  if (need > kSharedMax) return nullptr;
  GemmScratch &s = *t_scratch_ptr;
  if (s.shared_bytes < need) {
    void *p = aligned_scratch(need);
    if (!p) return nullptr;
    std::free(s.shared);
    s.shared = p;
    s.shared_bytes = need;
  }
  *state = static_cast<std::atomic<int> *>(s.shared);
  for (size_t i = 0; i < states; ++i) new (&(*state)[i]) std::atomic<int>(0);
  return reinterpret_cast<T *>(static_cast<char *>(s.shared) + state_bytes);
}

// False (nothing done) when the shape does not suit or memory is short. The calling thread's
// scratch must be ready.
template <class T>
bool shared_gemm(Backend &be, const Blocking<T> &bl, int threads, int64_t m, int64_t n, int64_t k,
                 const T *a, int64_t rsa, int64_t csa, const T *b, int64_t rsb, int64_t csb, T *c,
                 int64_t ldc) {
  // About four blocks per participant, so that the counter can even out uneven progress.
  if (k <= 0 || m < int64_t{4} * threads * bl.mr) return false;
  const int64_t want = (m + 4 * threads - 1) / (4 * threads);
  const int64_t chunk = std::min<int64_t>((want + bl.mr - 1) / bl.mr * bl.mr, bl.mc / bl.mr * bl.mr);
  const int64_t panels = (n + bl.nr - 1) / bl.nr, npad = panels * bl.nr;
  const int64_t kblocks = (k + bl.kc - 1) / bl.kc;
  std::atomic<int> *state;
  T *pb = shared_buffer<T>(static_cast<size_t>(kblocks * panels), static_cast<size_t>(k * npad), &state);
  if (!pb) return false;
  SharedGemm<T> g{{m, n, k, a, rsa, csa, b, rsb, csb, c, ldc}, bl,
                  chunk, (m + chunk - 1) / chunk, panels, npad, pb, state};
  be.pool->parallel_for(threads, 1, shared_part<T>, &g);
  return true;
}

// The parallel GEMM for few rows (M within one MC block: a training step's batch of 128): the
// participants split N, not M. Splitting M (shared_gemm) gave each participant blocks of ~18 rows,
// so every packed B panel served three register tiles and B went through the caches once per
// block; here each B panel, packed by the participant that claims its columns, serves all of M
// (22 tiles at M = 128), and A, packed once per K block by whichever participant needs it first,
// is what is shared and re-read. Columns go out in groups of panels on demand (an atomic counter),
// so a participant that starts late takes fewer.
template <class T>
struct SplitNGemm : GemmOperands<T> {
  Blocking<T> bl;
  int64_t group, groups;  // NR-panels per claim, number of claims
  int64_t mpad;           // M rounded up to MR: packed A's K block at row pc starts at pa + pc * mpad
  T *pa;
  std::atomic<int> *state;  // per K block of A: 0 not packed, 1 being packed, 2 ready
  std::atomic<int64_t> next{0};
};

// The packed K block of A at row pc, packed here if nobody has; waits while another participant
// packs it (a packer waits for nothing, so this ends; run one after another, no part ever finds
// a block half packed).
template <class T>
const T *split_n_block_a(SplitNGemm<T> &g, int64_t pc, int64_t kc) {
  T *dst = g.pa + pc * g.mpad;
  std::atomic<int> &st = g.state[pc / g.bl.kc];
  int s = st.load(std::memory_order_acquire);
  if (s == 0 && st.compare_exchange_strong(s, 1, std::memory_order_acquire)) {
    pack_a(g.a + pc * g.csa, g.rsa, g.csa, g.m, kc, g.bl.mr, dst);
    st.store(2, std::memory_order_release);
    return dst;
  }
  for (unsigned spins = 0; st.load(std::memory_order_acquire) != 2; ++spins) {
    if (spins < 4096) spin_pause();
    else std::this_thread::yield();
  }
  return dst;
}

template <class T>
void split_n_part(void *ctx, int64_t, int64_t, int) {
  auto &g = *static_cast<SplitNGemm<T> *>(ctx);
  const GemmScratch &s = *t_scratch_ptr;
  T *pb = static_cast<T *>(s.b);
  T *tile = static_cast<T *>(s.c);
  for (;;) {
    const int64_t grp = g.next.fetch_add(1, std::memory_order_relaxed);
    if (grp >= g.groups) return;
    const int64_t j0 = grp * g.group * g.bl.nr, nc = std::min(g.group * g.bl.nr, g.n - j0);
    for (int64_t pc = 0; pc < g.k; pc += g.bl.kc) {
      const int64_t kc = std::min<int64_t>(g.bl.kc, g.k - pc);
      pack_b(g.b + pc * g.rsb + j0 * g.csb, g.rsb, g.csb, kc, nc, g.bl.nr, pb, g.bl.pack_bt);  // before a wait for A
      const T *pa = split_n_block_a(g, pc, kc);
      for (int64_t jr = 0; jr < nc; jr += g.bl.nr)
        macro_panel(g.bl, g.m, std::min<int64_t>(g.bl.nr, nc - jr), kc, pa, pb + jr * kc, g.c + j0 + jr, g.ldc,
                    pc > 0, tile);
    }
  }
}

// False (nothing done) when the shape does not suit or memory is short. The calling thread's
// scratch must be ready.
template <class T>
bool split_n_gemm(Backend &be, const Blocking<T> &bl, int threads, int64_t m, int64_t n, int64_t k, const T *a,
                  int64_t rsa, int64_t csa, const T *b, int64_t rsb, int64_t csb, T *c, int64_t ldc) {
  const int64_t panels = (n + bl.nr - 1) / bl.nr;
  if (k <= 0 || m > bl.mc || panels < 2 * threads) return false;
  // About four claims per participant (at least one panel each; at most what packs in s.b).
  const int64_t group = std::clamp<int64_t>(panels / (4 * threads), 1, bl.nc / bl.nr);
  const int64_t mpad = (m + bl.mr - 1) / bl.mr * bl.mr;
  const int64_t kblocks = (k + bl.kc - 1) / bl.kc;
  std::atomic<int> *state;
  T *pa = shared_buffer<T>(static_cast<size_t>(kblocks), static_cast<size_t>(k * mpad), &state);
  if (!pa) return false;
  SplitNGemm<T> g{{m, n, k, a, rsa, csa, b, rsb, csb, c, ldc}, bl, group, (panels + group - 1) / group, mpad, pa,
                  state};
  be.pool->parallel_for(threads, 1, split_n_part<T>, &g);
  return true;
}

template <class T>
void own_gemm(Backend &be, int64_t m, int64_t n, int64_t k, const T *a, int64_t rsa,
              int64_t csa, const T *b, int64_t rsb, int64_t csb, T *c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  GemmJob<T> job{{m, n, k, a, rsa, csa, b, rsb, csb, c, ldc},
                 blocking_of(*be.gemm_isa.load(std::memory_order_relaxed), T{}), n >= m, 0};
  int threads = be.pool ? be.pool->size() : 1;
  // Below ~1 MFLOP a fork costs more than it saves.
  if (threads <= 1 || m * n * k < 64 * 64 * 64) {
    gemm_serial(job.bl, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc);
    return;
  }
  if (split_n_gemm(be, job.bl, threads, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc)) return;
  if (shared_gemm(be, job.bl, threads, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc)) return;
  // Few rows, or no memory for the shared B: split the larger of M and N statically; units are
  // whole register tiles so no part gets a sliver.
  int64_t tile = job.split_n ? job.bl.nr : job.bl.mr;
  job.unit = job.split_n ? tile : tile * 4;
  int64_t extent = job.split_n ? n : m;
  int64_t units = (extent + job.unit - 1) / job.unit;
  be.pool->parallel_for(units, 1, gemm_part<T>, &job);
}

}  // namespace

const GemmIsa *gemm_isa_select(const char *name) {
  bool any = name == nullptr || name[0] == '\0' || std::strcmp(name, "auto") == 0;
#if defined(__x86_64__)
  __builtin_cpu_init();
  bool has512 = __builtin_cpu_supports("avx512f");
  bool has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (any) return has512 ? &kIsaAvx512 : has2 ? &kIsaAvx2 : &kIsaGeneric;
  if (std::strcmp(name, "avx512") == 0) return has512 ? &kIsaAvx512 : nullptr;
  if (std::strcmp(name, "avx2") == 0) return has2 ? &kIsaAvx2 : nullptr;
#elif defined(__arm__)
  const GemmIsa *neon = gemm_isa_arm32_neon(kIsaGeneric);  // NULL without NEON (AT_HWCAP)
  if (any) return neon ? neon : &kIsaGeneric;
  if (std::strcmp(name, "neon") == 0) return neon;
#else
  if (any) return &kIsaGeneric;
#endif
  if (std::strcmp(name, "generic") == 0) return &kIsaGeneric;
  return nullptr;
}

bool gemm_worker_init() {
  if (!t_scratch_ptr) {
    t_scratch_ptr = new (std::nothrow) GemmScratch;
    t_worker = t_scratch_ptr != nullptr;
  }
  return t_scratch_ptr && gemm_scratch_ready();
}

void gemm_worker_fini() {
  if (t_worker) delete t_scratch_ptr;
  t_scratch_ptr = nullptr;
  t_worker = false;
}

Bf16Scratch gemm_bf16_scratch() {
  const GemmScratch &s = *t_scratch_ptr;
  return {static_cast<uint16_t *>(s.a), static_cast<uint16_t *>(s.b), static_cast<float *>(s.c)};
}

bool gemm_scratch_ready() {
  GemmScratch &s = scratch();
  if (s.a && s.b && s.c) return true;
  if (!s.a) s.a = aligned_scratch(kScratchA);
  if (!s.b) s.b = aligned_scratch(kScratchB);
  if (!s.c) s.c = aligned_scratch(kScratchC);
  return s.a && s.b && s.c;
}

#ifdef CTN_CPU_HAVE_OPENBLAS
namespace {
// One operand's CBLAS form: row-major with a unit column stride (NoTrans) or a unit row stride
// (Trans). False when neither stride is 1 (the own GEMM takes any strides).
bool blas_form(int64_t rs, int64_t cs, int64_t rows, int64_t cols, CBLAS_TRANSPOSE *t, blasint *ld) {
  if (cs == 1 && (rs >= cols || rows <= 1)) {
    *t = CblasNoTrans;
    *ld = static_cast<blasint>(std::max<int64_t>({rs, cols, 1}));
    return true;
  }
  if (rs == 1 && (cs >= rows || cols <= 1)) {
    *t = CblasTrans;
    *ld = static_cast<blasint>(std::max<int64_t>({cs, rows, 1}));
    return true;
  }
  return false;
}

// The calling thread's GEMM through OpenBLAS (set to one thread: our pool does the splitting).
template <class T>
bool blas_serial(int64_t m, int64_t n, int64_t k, const T *a, int64_t rsa, int64_t csa, const T *b,
                 int64_t rsb, int64_t csb, T *c, int64_t ldc, bool accumulate) {
  CBLAS_TRANSPOSE ta, tb;
  blasint lda, ldb;
  if (k <= 0 || !blas_form(rsa, csa, m, k, &ta, &lda) || !blas_form(rsb, csb, k, n, &tb, &ldb)) return false;
  const blasint bm = static_cast<blasint>(m), bn = static_cast<blasint>(n), bk = static_cast<blasint>(k),
                bldc = static_cast<blasint>(ldc);
  if constexpr (sizeof(T) == 4)
    cblas_sgemm(CblasRowMajor, ta, tb, bm, bn, bk, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, bldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, bm, bn, bk, 1.0, a, lda, b, ldb, accumulate ? 1.0 : 0.0, c, bldc);
  return true;
}
}  // namespace
#endif

namespace {
// gemm_serial_f32 / _f64: OpenBLAS when the backend uses it and it takes the strides, else the
// own kernels at the backend's ISA.
template <class T>
void gemm_serial_on(Backend &be, int64_t m, int64_t n, int64_t k, const T *a, int64_t rsa,
                    int64_t csa, const T *b, int64_t rsb, int64_t csb, T *c, int64_t ldc,
                    bool accumulate) {
  if (m <= 0 || n <= 0) return;
#ifdef CTN_CPU_HAVE_OPENBLAS
  if (gemm_uses_openblas(be) && blas_serial(m, n, k, a, rsa, csa, b, rsb, csb, c, ldc, accumulate)) return;
#endif
  gemm_serial(blocking_of(*be.gemm_isa.load(std::memory_order_relaxed), T{}), m, n, k, a, rsa, csa, b, rsb,
              csb, c, ldc, accumulate);
}
}  // namespace

void gemm_serial_f32(Backend &be, int64_t m, int64_t n, int64_t k, const float *a,
                     int64_t rsa, int64_t csa, const float *b, int64_t rsb, int64_t csb, float *c,
                     int64_t ldc, bool accumulate) {
  gemm_serial_on(be, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc, accumulate);
}
void gemm_serial_f64(Backend &be, int64_t m, int64_t n, int64_t k, const double *a,
                     int64_t rsa, int64_t csa, const double *b, int64_t rsb, int64_t csb,
                     double *c, int64_t ldc, bool accumulate) {
  gemm_serial_on(be, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc, accumulate);
}

void own_gemm_f32(Backend &be, int64_t m, int64_t n, int64_t k, const float *a, int64_t rsa,
                  int64_t csa, const float *b, int64_t rsb, int64_t csb, float *c, int64_t ldc) {
  own_gemm<float>(be, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc);
}
void own_gemm_f64(Backend &be, int64_t m, int64_t n, int64_t k, const double *a, int64_t rsa,
                  int64_t csa, const double *b, int64_t rsb, int64_t csb, double *c,
                  int64_t ldc) {
  own_gemm<double>(be, m, n, k, a, rsa, csa, b, rsb, csb, c, ldc);
}

}  // namespace ctn_cpu
