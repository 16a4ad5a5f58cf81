// The stored element type ELEM of the elementwise, reduction, softmax and matmul shaders and its conversions to and from the
// arithmetic type T: ELEM = T, or with -DF16 / -DBF16 a 16-bit float (T = float) that LD widens and
// ST narrows (half.glsl); -DS16 stores 16-bit words without arithmetic (where).
#if defined(F16) || defined(BF16) || defined(S16)
#include "half.glsl"
#define ELEM uint16_t
#ifdef F16
#define LD(v) f16_load(uint(v))
#define ST(v) uint16_t(f16_bits(v))
#else
#define LD(v) bf16_load(uint(v))
#define ST(v) uint16_t(bf16_bits(v))
#endif
#else
#define ELEM T
#define LD(v) (v)
#define ST(v) (v)
#endif
