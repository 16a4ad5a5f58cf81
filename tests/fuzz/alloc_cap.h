/* The fuzz stage's allocation cap, linked into every fuzz target and replay (alloc_cap.c). */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The largest single allocation this process may make, checked by alloc_cap.c; 0 where the
 * cap is not checked there (a sanitizer's allocator applies it, or the C library is not glibc). */
size_t fuzz_alloc_cap_bytes(void);

#ifdef __cplusplus
}
#endif
