// Broadcast indexing shared by the elementwise shaders. Params layout (uint words), mirrored by
// ew_params in k_elementwise.cpp:
//   p[0] = nd, p[1..8] = output shape (coalesced), p[9 + 8j + k] = element stride of input j on
//   axis k (0 on broadcast axes), p[52] = i[0], p[56..59] = f[0..3] as float bits, p[60..67] = f[0..3] as
//   double (lo, hi) words.
#define P_SHAPE 1
#define P_STR 9
#define P_I0 52
#define P_F32 56
#define P_F64 60

uint bcast_offset(uint gi, int j) {
  uint nd = p[0];
  uint o = 0u;
  for (int k = int(nd) - 1; k >= 0; --k) {
    uint s = p[P_SHAPE + k];
    uint q = gi / s;
    o += (gi - q * s) * p[P_STR + 8 * j + k];
    gi = q;
  }
  return o;
}

#ifndef NO_ATTR_F
T attr_f(int i) {
#ifdef USE_F64
  return packDouble2x32(uvec2(p[P_F64 + 2 * i], p[P_F64 + 2 * i + 1]));
#else
  return uintBitsToFloat(p[P_F32 + i]);
#endif
}
#endif
