// The 16-bit floats (since 1.5): f16 and bf16 elements live in storage buffers as uint16_t
// (storageBuffer16BitAccess, VK_KHR_16bit_storage, core in Vulkan 1.1) and are converted here to
// and from f32, where the arithmetic runs. The narrowing rounds to nearest even in integer
// arithmetic (abi/chutney/desc.h's rule, NaN stays NaN, f16 overflow to infinity), so every
// device rounds alike; widening is exact. Only buffer members may have a 16-bit type (no
// shaderInt16 needed), so the functions take and give the bits as uint: f16_load(uint(m)),
// m = uint16_t(f16_bits(f)).
#extension GL_EXT_shader_16bit_storage : require

float f16_load(uint h) { return unpackHalf2x16(h).x; }
float bf16_load(uint h) { return uintBitsToFloat(h << 16); }

// v >> s rounded to nearest even by the bits shifted out.
uint round_shift(uint v, uint s) {
  uint r = v >> s, rem = v & ((1u << s) - 1u), h = 1u << (s - 1u);
  return r + ((rem > h || (rem == h && (r & 1u) != 0u)) ? 1u : 0u);
}
uint f16_bits(float f) {
  uint x = floatBitsToUint(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  uint r;
  if (ax > 0x7f800000u) r = sign | 0x7e00u | ((ax >> 13) & 0x3ffu);  // NaN
  else if (ax >= 0x477ff000u) r = sign | 0x7c00u;                   // >= 65520: infinity
  else if (ax >= 0x38800000u) r = sign | round_shift(ax - (112u << 23), 13u);
  else if (ax < 0x33000000u) r = sign;                              // at most 2^-25: zero
  else r = sign | round_shift((ax & 0x7fffffu) | 0x800000u, 126u - (ax >> 23));  // subnormal
  return r;
}
uint bf16_bits(float f) {
  uint x = floatBitsToUint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;  // quiet NaN
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}
