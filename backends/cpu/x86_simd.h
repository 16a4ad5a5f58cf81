// The x86 intrinsics for the CPU backend's ISA-specific files (half.cpp, gemm_bf16_avx512.cpp),
// whose functions carry target attributes. Nothing on other architectures.
#ifndef CTN_CPU_X86_SIMD_H
#define CTN_CPU_X86_SIMD_H

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports inside the header (a known false positive); nothing here reads an undefined lane.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <cpuid.h>
#include <immintrin.h>
#endif

#endif
