package chutney

/*
#include "shim.h"
*/
import "C"

import (
	"math"
	"unsafe"
)

// Float16 and BFloat16 tensors (since ABI 1.5) hold 16-bit floats that Go has no type for:
// their elements cross as uint16 bit patterns, unchanged (NaN payloads, -0 and subnormals
// included). The converters below round float32 to the nearest representable value, ties to
// even, as chutney, PyTorch and numpy do.

// Float32ToF16 returns the IEEE binary16 bit pattern nearest to f (ties to even): values beyond
// 65504 (from 65520 on) become infinity, values below 2^-25 become zero; a NaN stays a NaN
// (quiet, with the top bits of its payload).
func Float32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(man>>13)
	}
	e := exp - 127 + 15 // the binary16 exponent field
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 { // a binary16 subnormal, or zero
		if e < -10 {
			return sign
		}
		return sign | uint16(roundShift(man|0x800000, uint32(14-e)))
	}
	// A carry out of the mantissa moves into the exponent, which is right (up to infinity).
	return sign | uint16(roundShift(uint32(e)<<23|man, 13))
}

// roundShift is v >> s rounded to nearest, ties to even (0 < s < 32).
func roundShift(v, s uint32) uint32 {
	r := v >> s
	rem, half := v&(1<<s-1), uint32(1)<<(s-1)
	if rem > half || (rem == half && r&1 == 1) {
		r++
	}
	return r
}

// F16ToFloat32 is the value of the IEEE binary16 bit pattern h (exact: every binary16 value is a
// float32).
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		v := float32(man) / (1 << 24) // a subnormal: man * 2^-24
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// Float32ToBF16 returns the bfloat16 bit pattern nearest to f (ties to even); a NaN stays a
// quiet NaN.
func Float32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16(roundShift(b, 16))
}

// BF16ToFloat32 is the value of the bfloat16 bit pattern b (exact).
func BF16ToFloat32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

func isHalf(dt DType) bool { return dt == Float16 || dt == BFloat16 }

// checkHalf validates a []uint16 of n elements against a Float16 or BFloat16 tensor.
func checkHalf(t *Tensor, n int, what string) error {
	if !isHalf(t.dtype) {
		return newError(StatusDType, "%s: a []uint16 of 16-bit float bits for a %v tensor (f16 and bf16 only)", what, t.dtype)
	}
	if want := t.NumElements(); int64(n) != want {
		return newError(StatusShape, "%s: %d elements for a tensor of shape %v (%d elements)", what, n, t.shape, want)
	}
	return nil
}

// NewHalfTensor creates a Float16 or BFloat16 tensor (dt) of shape `shape` holding a copy of the
// bit patterns `bits` (row-major).
func NewHalfTensor(dt DType, bits []uint16, shape ...int64) (*Tensor, error) {
	if !isHalf(dt) {
		return nil, newError(StatusDType, "NewHalfTensor: dtype %v is not f16 or bf16", dt)
	}
	return newTensorOf(dt, bits, shape, "NewHalfTensor")
}

// NewHalfTensorFromFloat32 creates a Float16 or BFloat16 tensor from float32 values, each
// rounded to nearest, ties to even (Float32ToF16, Float32ToBF16).
func NewHalfTensorFromFloat32(dt DType, values []float32, shape ...int64) (*Tensor, error) {
	conv := Float32ToF16
	if dt == BFloat16 {
		conv = Float32ToBF16
	}
	bits := make([]uint16, len(values))
	for i, v := range values {
		bits[i] = conv(v)
	}
	return NewHalfTensor(dt, bits, shape...)
}

// ReadHalfBits copies the bit patterns of a Float16 or BFloat16 tensor (row-major, also for
// views) into dst, which must have the tensor's element count.
func (t *Tensor) ReadHalfBits(dst []uint16) error {
	return withSlice(t, dst, func() error { return checkHalf(t, len(dst), "ReadHalfBits") },
		func(p unsafe.Pointer, bytes C.size_t) C.goctn_ret { return C.goctn_tensor_read(t.ptr, p, bytes) })
}

// WriteHalfBits copies bit patterns (row-major) into a Float16 or BFloat16 tensor.
func (t *Tensor) WriteHalfBits(src []uint16) error {
	return withSlice(t, src, func() error { return checkHalf(t, len(src), "WriteHalfBits") },
		func(p unsafe.Pointer, bytes C.size_t) C.goctn_ret { return C.goctn_tensor_write(t.ptr, p, bytes) })
}

// HalfBits returns a copy of the bit patterns of a Float16 or BFloat16 tensor.
func (t *Tensor) HalfBits() ([]uint16, error) {
	if t == nil {
		return nil, nilError("Tensor")
	}
	out := make([]uint16, t.NumElements())
	if err := t.ReadHalfBits(out); err != nil {
		return nil, err
	}
	return out, nil
}

// HalfFloat32s returns the values of a Float16 or BFloat16 tensor as float32 (exact).
func (t *Tensor) HalfFloat32s() ([]float32, error) {
	bits, err := t.HalfBits()
	if err != nil {
		return nil, err
	}
	conv := F16ToFloat32
	if t.dtype == BFloat16 {
		conv = BF16ToFloat32
	}
	out := make([]float32, len(bits))
	for i, b := range bits {
		out[i] = conv(b)
	}
	return out, nil
}
