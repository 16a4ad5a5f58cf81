/* The fuzz stage's allocation cap in every build of the fuzz targets (docs/RELIABILITY.md):
 * a single allocation over FUZZ_MAX_ALLOCATION_MB (256 MiB) fails, as ASan's
 * max_allocation_size_mb=256 with allocator_may_return_null=1 makes it fail in
 * tools/test.d/25-fuzz.sh. A corpus input may legitimately declare a 17 GB input or plan arena;
 * ctn_plan_compile allocates it, and `meson test` sets MALLOC_PERTURB_, which writes every byte
 * of it (the graph replay touched 16.7 GB). Capped, the same input tests the library's
 * CTN_ERR_OUT_OF_MEMORY path instead, in the replay build exactly as in the fuzzer.
 *
 * Under ASan the cap is the sanitizer's own option (a default that ASAN_OPTIONS may override);
 * elsewhere with glibc the allocation functions are interposed (the executable's definitions
 * take precedence for the library and its plugins) and forward to glibc's allocator; on other C
 * libraries nothing is capped (fuzz_alloc_cap_bytes() says 0). */
#include "alloc_cap.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define FUZZ_MAX_ALLOCATION_MB 256

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define FUZZ_SANITIZER_ALLOCATOR 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FUZZ_SANITIZER_ALLOCATOR 1
#endif

#if defined(FUZZ_SANITIZER_ALLOCATOR)

#define FUZZ_STR2(x) #x
#define FUZZ_STR(x) FUZZ_STR2(x)
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "allocator_may_return_null=1:max_allocation_size_mb=" FUZZ_STR(FUZZ_MAX_ALLOCATION_MB);
}

size_t fuzz_alloc_cap_bytes(void) { return 0; } /* the sanitizer's, not checked here */

#elif defined(__GLIBC__)

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);

static const size_t kCap = (size_t)FUZZ_MAX_ALLOCATION_MB << 20;

size_t fuzz_alloc_cap_bytes(void) { return kCap; }

void *malloc(size_t n) {
  if (n > kCap) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_malloc(n);
}

void *calloc(size_t n, size_t size) {
  if (size && n > kCap / size) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n) {
  if (n > kCap) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_realloc(p, n);
}

void *memalign(size_t align, size_t n) {
  if (n > kCap) {
    errno = ENOMEM;
    return NULL;
  }
  return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n) { return memalign(align, n); }

int posix_memalign(void **out, size_t align, size_t n) {
  if (align % sizeof(void *) || (align & (align - 1))) return EINVAL;
  if (n > kCap) return ENOMEM;
  void *p = __libc_memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

#else

size_t fuzz_alloc_cap_bytes(void) { return 0; }

#endif
