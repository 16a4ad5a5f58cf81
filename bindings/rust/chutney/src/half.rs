//! 16-bit floats: [`f16`] (IEEE 754 binary16) and [`bf16`] (bfloat16), the element types of
//! [`Dtype::F16`](crate::Dtype::F16) and [`Dtype::BF16`](crate::Dtype::BF16) (ABI 1.5).
//!
//! Each is its bit pattern (`u16`, `#[repr(transparent)]`), so tensors of them copy in and out
//! unchanged (NaN payloads, -0 and subnormals included); `from_f32` rounds to nearest, ties to
//! even (as chutney, PyTorch and numpy do), `to_f32` is exact. Standard library only.
//!
//! ```
//! use chutney::{bf16, f16, Dtype, Tensor};
//!
//! let t = Tensor::new(&[f16::from_f32(0.1), f16::from_bits(0x7c00)], &[2])?;
//! assert_eq!(t.dtype()?, Dtype::F16);
//! let v = t.to_vec::<f16>()?;
//! assert_eq!(v[0].to_bits(), 0x2e66); // 0.0999755859375
//! assert_eq!(v[1].to_f32(), f32::INFINITY);
//! assert_eq!(bf16::from_f32(1.0 + 1.0 / 256.0).to_f32(), 1.0); // a tie: to the even neighbour
//! # Ok::<(), chutney::Error>(())
//! ```

/// `v >> s` rounded to nearest, ties to even (0 < s < 32).
fn round_shift(v: u32, s: u32) -> u32 {
    let r = v >> s;
    let (rem, half) = (v & ((1 << s) - 1), 1 << (s - 1));
    if rem > half || (rem == half && r & 1 == 1) {
        r + 1
    } else {
        r
    }
}

/// An IEEE 754 binary16 value, stored as its bit pattern.
#[allow(non_camel_case_types)]
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct f16(u16);

impl f16 {
    /// The value with bit pattern `bits`.
    pub const fn from_bits(bits: u16) -> f16 {
        f16(bits)
    }

    /// The bit pattern.
    pub const fn to_bits(self) -> u16 {
        self.0
    }

    /// The binary16 value nearest to `x` (ties to even): from 65520 on it is infinity, below
    /// 2^-25 zero; a NaN stays a (quiet) NaN.
    pub fn from_f32(x: f32) -> f16 {
        let b = x.to_bits();
        let sign = ((b >> 16) & 0x8000) as u16;
        let exp = ((b >> 23) & 0xff) as i32;
        let man = b & 0x7f_ffff;
        if exp == 0xff {
            return f16(sign | if man == 0 { 0x7c00 } else { 0x7e00 | (man >> 13) as u16 });
        }
        let e = exp - 127 + 15; // the binary16 exponent field
        if e >= 0x1f {
            return f16(sign | 0x7c00);
        }
        if e <= 0 {
            // A subnormal or zero; below 2^-25 (e < -10) everything rounds to zero.
            if e < -10 {
                return f16(sign);
            }
            return f16(sign | round_shift(man | 0x80_0000, (14 - e) as u32) as u16);
        }
        // A carry out of the mantissa moves into the exponent, which is right (up to infinity).
        f16(sign | round_shift(((e as u32) << 23) | man, 13) as u16)
    }

    /// The value as an `f32` (exact).
    pub fn to_f32(self) -> f32 {
        let h = self.0 as u32;
        let sign = (h & 0x8000) << 16;
        let exp = (h >> 10) & 0x1f;
        let man = h & 0x3ff;
        match exp {
            0x1f => f32::from_bits(sign | 0x7f80_0000 | (man << 13)),
            0 => {
                let v = man as f32 / (1u32 << 24) as f32; // man * 2^-24
                if sign != 0 {
                    -v
                } else {
                    v
                }
            }
            _ => f32::from_bits(sign | ((exp + 112) << 23) | (man << 13)),
        }
    }
}

/// A bfloat16 value (the upper half of an `f32`), stored as its bit pattern.
#[allow(non_camel_case_types)]
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct bf16(u16);

impl bf16 {
    /// The value with bit pattern `bits`.
    pub const fn from_bits(bits: u16) -> bf16 {
        bf16(bits)
    }

    /// The bit pattern.
    pub const fn to_bits(self) -> u16 {
        self.0
    }

    /// The bfloat16 value nearest to `x` (ties to even); a NaN stays a quiet NaN.
    pub fn from_f32(x: f32) -> bf16 {
        let b = x.to_bits();
        if b & 0x7fff_ffff > 0x7f80_0000 {
            return bf16((b >> 16) as u16 | 0x40);
        }
        bf16(round_shift(b, 16) as u16)
    }

    /// The value as an `f32` (exact).
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

impl From<f16> for f32 {
    fn from(h: f16) -> f32 {
        h.to_f32()
    }
}

impl From<bf16> for f32 {
    fn from(b: bf16) -> f32 {
        b.to_f32()
    }
}
