// Integer GEMM for the quantized ops (k_quant.cpp): int16 operands (u8/i8 values less their
// zero points), i32 accumulation, and an epilogue per output tile (i32 store or requantisation).
#ifndef CTN_CPU_IGEMM_H
#define CTN_CPU_IGEMM_H

#include <cstdint>

namespace ctn_cpu {

// Tile of the micro-kernel: kIgMr rows of A by kIgNr columns of B.
constexpr int64_t kIgMr = 4;
constexpr int64_t kIgNr = 64;

// Packed operands. A: [M][kp2 * 2] int16 (row-major, K padded with zeros to even). B: pairs of
// rows, [kp2][ldb][2] int16 (element (k, n) at ((k / 2) * ldb + n) * 2 + k % 2), ldb a multiple
// of kIgNr, padded with zeros. kp2 = ceil(K / 2).
struct IgemmOperands {
  const int16_t *a;
  const int16_t *b;
  int64_t m, kp2, ldb;
};

// acc[i][j] (i < mb <= kIgMr, j < kIgNr) = sum over k of A[m0 + i][k] * B[k][n0 + j], wrapping
// in i32. Rows i >= mb of acc are left undefined.
using IgemmTileFn = void (*)(const IgemmOperands &op, int64_t m0, int64_t mb, int64_t n0, int32_t *acc);

// u8 x s8 with i32 sums in one instruction per 4 products (AVX-512 VNNI vpdpbusd): A s8
// [M][kq * 4] (K padded with zeros to a multiple of 4), B u8 quads [kq][ldb][4] (element (k, n)
// at ((k / 4) * ldb + n) * 4 + k % 4). The sums are of the stored values: zero points are the
// caller's (igemm's users subtract x_zp * sum_k w[m][k] per row; weights' zero points are 0).
// n: B's valid columns; a tile whose panel holds fewer than kIgNr of them computes only the
// 16-column vectors that hold some (the columns past those are left undefined in acc), so a
// 14 x 14 image's last panel (4 columns) costs one vector, not four.
// The u8 x s8 tile's rows: 6 x 4 accumulators, 4 B vectors and a broadcast fit the 32 AVX-512
// registers, and each B load serves 6 rows.
constexpr int64_t kIgQ8Mr = 6;
// brow: when set, B's row of quads kq starts at brow[kq] (the columns contiguous from there)
// instead of at b + kq * ldb * 4.
struct IgemmQ8Operands {
  const int8_t *a;
  const uint8_t *b;
  int64_t m, kq, ldb, n;
  const uint8_t *const *brow = nullptr;
};
// acc[i][j] for i < mb <= kIgQ8Mr (rows past mb undefined), j < kIgNr.
using IgemmQ8TileFn = void (*)(const IgemmQ8Operands &op, int64_t m0, int64_t mb, int64_t n0, int32_t *acc);
// The VNNI u8 x s8 tile, or nullptr where the CPU lacks AVX-512 VNNI or `cap` is below "avx512".
IgemmQ8TileFn igemm_q8_tile_select(const char *cap);
// sum of w[0..k) (s8) with the same instruction (ones times the weights); only where the tile is.
int32_t igemm_q8_rowsum(const int8_t *w, int64_t k);

// The fastest micro-kernel this CPU runs ("avx512_vnni", "avx512bw", "avx2", "generic") at or
// below `cap` (the GEMM ISA name: "avx512", "avx2", "generic"; nullptr: no cap); `name` receives
// the variant's name when not null.
IgemmTileFn igemm_tile_select(const char *cap, const char **name);

}  // namespace ctn_cpu

#endif
