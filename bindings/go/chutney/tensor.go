package chutney

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"

	"unsafe"
)

// MaxDims is the largest number of dimensions of a tensor.
const MaxDims = C.CTN_MAX_DIMS

// String is the library's name of the dtype ("f32"), "?" for an unknown one.
func (d DType) String() string { return C.GoString(C.ctn_dtype_name(C.ctn_dtype(d))) }

// Size is the size in bytes of one element, 0 for an unknown dtype.
func (d DType) Size() int { return int(C.ctn_dtype_size(C.ctn_dtype(d))) }

// Elem is the set of Go element types a Tensor converts from and to. Float16 and BFloat16
// tensors are read and written as uint16 bit patterns instead (half.go): a []uint16 given to
// NewTensor makes a Uint16 tensor.
type Elem interface {
	float32 | float64 | int32 | int64 | uint8 | int8 | int16 | uint16 | uint32 | uint64 | bool
}

// DTypeOf is the dtype of Go element type T.
func DTypeOf[T Elem]() DType {
	var z T
	switch any(z).(type) {
	case float32:
		return Float32
	case float64:
		return Float64
	case int32:
		return Int32
	case int64:
		return Int64
	case uint8:
		return Uint8
	case int8:
		return Int8
	case int16:
		return Int16
	case uint16:
		return Uint16
	case uint32:
		return Uint32
	case uint64:
		return Uint64
	default:
		return Bool
	}
}

// Tensor is an n-d array in host memory (ctn_tensor). Its dtype and shape never change. A
// Tensor must not be used by two goroutines at once (the library's rule), except that Close may
// be called at any time: the memory is released after the last call in flight.
type Tensor struct {
	h     handle
	ptr   *C.ctn_tensor
	dtype DType
	shape []int64
}

func (t *Tensor) hdl() *handle { return &t.h }

func (t *Tensor) use() error { return useOwner(t, "Tensor") }

func wrapTensor(p *C.ctn_tensor, dtype DType, shape []int64) *Tensor {
	t := &Tensor{ptr: p, dtype: dtype, shape: shape}
	t.h.init("Tensor", func() { C.ctn_tensor_release(p) })
	return track(t)
}

// adoptTensor wraps a tensor the library created, reading its dtype and shape once.
func adoptTensor(p *C.ctn_tensor) (*Tensor, error) {
	var dt C.ctn_dtype
	var ndim C.uint32_t
	var shape [MaxDims]C.int64_t
	if err := check(C.goctn_tensor_dtype(p, &dt)); err != nil {
		C.ctn_tensor_release(p)
		return nil, err
	}
	if err := check(C.goctn_tensor_shape(p, &ndim, &shape[0])); err != nil {
		C.ctn_tensor_release(p)
		return nil, err
	}
	s := make([]int64, int(ndim))
	for i := range s {
		s[i] = int64(shape[i])
	}
	return wrapTensor(p, DType(dt), s), nil
}

// numel checks a shape and returns its element count.
func numel(shape []int64) (int64, error) {
	if len(shape) > MaxDims {
		return 0, newError(StatusShape, "shape %v has %d dimensions; at most %d", shape, len(shape), MaxDims)
	}
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, newError(StatusShape, "shape %v has a negative dimension", shape)
		}
		if d != 0 && n > (1<<62)/d {
			return 0, newError(StatusShape, "shape %v has too many elements", shape)
		}
		n *= d
	}
	return n, nil
}

func shapePtr(shape []int64) *C.int64_t {
	if len(shape) == 0 {
		return nil
	}
	return (*C.int64_t)(unsafe.Pointer(&shape[0]))
}

func newTensor(dt DType, shape []int64, data unsafe.Pointer) (*Tensor, error) {
	var p *C.ctn_tensor
	if err := check(C.goctn_tensor_create(C.ctn_dtype(dt), C.uint32_t(len(shape)), shapePtr(shape), data, &p)); err != nil {
		return nil, err
	}
	return wrapTensor(p, dt, append([]int64(nil), shape...)), nil
}

// NewTensor creates a tensor of shape `shape` holding a copy of data (row-major); no shape is a
// scalar. len(data) must equal the product of the shape.
func NewTensor[T Elem](data []T, shape ...int64) (*Tensor, error) {
	return newTensorOf(DTypeOf[T](), data, shape, "NewTensor")
}

// newTensorOf creates a dtype-dt tensor holding a copy of data, whose length must match the
// shape (what names the caller in the error).
func newTensorOf[T any](dt DType, data []T, shape []int64, what string) (*Tensor, error) {
	n, err := numel(shape)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != n {
		return nil, newError(StatusShape, "%s: %d values for shape %v (%d elements)", what, len(data), shape, n)
	}
	var p unsafe.Pointer
	if n > 0 {
		p = unsafe.Pointer(&data[0])
	}
	return newTensor(dt, shape, p)
}

// Zeros creates a tensor of zeros.
func Zeros(dt DType, shape ...int64) (*Tensor, error) {
	if _, err := numel(shape); err != nil {
		return nil, err
	}
	return newTensor(dt, shape, nil)
}

// Close releases the tensor. Idempotent.
func (t *Tensor) Close() error { return closeOwner(t) }

// DType is the tensor's element type.
func (t *Tensor) DType() DType {
	if t == nil {
		return -1
	}
	return t.dtype
}

// Shape is a copy of the tensor's shape.
func (t *Tensor) Shape() []int64 {
	if t == nil {
		return nil
	}
	return append([]int64(nil), t.shape...)
}

// NumElements is the product of the shape.
func (t *Tensor) NumElements() int64 {
	if t == nil {
		return 0
	}
	n, _ := numel(t.shape)
	return n
}

func (t *Tensor) String() string {
	if t == nil {
		return "Tensor(nil)"
	}
	state := ""
	if t.h.isClosed() {
		state = ", closed"
	}
	return fmt.Sprintf("Tensor(%v, %v%s)", t.dtype, t.shape, state)
}

// Strides are the tensor's strides in elements (views may have gaps or zeros).
func (t *Tensor) Strides() ([]int64, error) {
	if err := t.use(); err != nil {
		return nil, err
	}
	defer t.h.release()
	s := make([]int64, len(t.shape)+1) // +1: never pass a pointer to nothing
	if err := check(C.goctn_tensor_strides(t.ptr, (*C.int64_t)(unsafe.Pointer(&s[0])))); err != nil {
		return nil, err
	}
	return s[:len(t.shape)], nil
}

// IsContiguous tells whether the elements are row-major with no gaps.
func (t *Tensor) IsContiguous() (bool, error) {
	c, err := getOwned(t, "Tensor", func(c *C.int32_t) C.goctn_ret { return C.goctn_tensor_is_contiguous(t.ptr, c) })
	return c != 0, err
}

// checkElems validates a Go slice against the tensor for Read and Write.
func checkElems[T Elem](t *Tensor, n int, what string) error {
	if dt := DTypeOf[T](); dt != t.dtype {
		return newError(StatusDType, "%s: a []%v for a %v tensor", what, dt, t.dtype)
	}
	if want := t.NumElements(); int64(n) != want {
		return newError(StatusShape, "%s: %d elements for a tensor of shape %v (%d elements)", what, n, t.shape, want)
	}
	return nil
}

// Read copies the tensor's elements (row-major, also for views) into dst, which must have the
// tensor's dtype and element count.
func Read[T Elem](t *Tensor, dst []T) error {
	err := withElems(t, dst, "Read", func(p unsafe.Pointer, bytes C.size_t) C.goctn_ret {
		return C.goctn_tensor_read(t.ptr, p, bytes)
	})
	if err != nil || len(dst) == 0 {
		return err
	}
	if t.dtype == Bool {
		// A Go bool must hold 0 or 1; the library promises that, but a byte from elsewhere
		// (a checkpoint, a cast) is normalised rather than trusted.
		b := unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), len(dst))
		for i, v := range b {
			if v > 1 {
				b[i] = 1
			}
		}
	}
	return nil
}

// Values returns a copy of the tensor's elements as a []T; T must match the dtype.
func Values[T Elem](t *Tensor) ([]T, error) {
	if t == nil {
		return nil, nilError("Tensor")
	}
	out := make([]T, t.NumElements())
	if err := Read(t, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Write copies src (row-major) into the tensor's elements; src must have the tensor's dtype
// and element count.
func Write[T Elem](t *Tensor, src []T) error {
	return withElems(t, src, "Write", func(p unsafe.Pointer, bytes C.size_t) C.goctn_ret {
		return C.goctn_tensor_write(t.ptr, p, bytes)
	})
}

// withElems runs a copy between the tensor and s (op names it in errors) under a use reference,
// once s is checked against the tensor's dtype and element count; nothing to copy is no call.
func withElems[T Elem](t *Tensor, s []T, op string, call func(p unsafe.Pointer, bytes C.size_t) C.goctn_ret) error {
	return withSlice(t, s, func() error { return checkElems[T](t, len(s), op) }, call)
}

// withSlice is withElems with the check given: validate runs under the use reference.
func withSlice[T any](t *Tensor, s []T, validate func() error, call func(p unsafe.Pointer, bytes C.size_t) C.goctn_ret) error {
	if err := t.use(); err != nil {
		return err
	}
	defer t.h.release()
	if err := validate(); err != nil {
		return err
	}
	if len(s) == 0 {
		return nil
	}
	var z T
	return check(call(unsafe.Pointer(&s[0]), C.size_t(uintptr(len(s))*unsafe.Sizeof(z))))
}

// Float32s returns the elements of a Float32 tensor.
func (t *Tensor) Float32s() ([]float32, error) { return Values[float32](t) }

// Float64s returns the elements of a Float64 tensor.
func (t *Tensor) Float64s() ([]float64, error) { return Values[float64](t) }

// Int32s returns the elements of an Int32 tensor.
func (t *Tensor) Int32s() ([]int32, error) { return Values[int32](t) }

// Int64s returns the elements of an Int64 tensor.
func (t *Tensor) Int64s() ([]int64, error) { return Values[int64](t) }

// Uint8s returns the elements of a Uint8 tensor.
func (t *Tensor) Uint8s() ([]uint8, error) { return Values[uint8](t) }

// Int8s returns the elements of an Int8 tensor.
func (t *Tensor) Int8s() ([]int8, error) { return Values[int8](t) }

// Int16s returns the elements of an Int16 tensor.
func (t *Tensor) Int16s() ([]int16, error) { return Values[int16](t) }

// Uint16s returns the elements of a Uint16 tensor.
func (t *Tensor) Uint16s() ([]uint16, error) { return Values[uint16](t) }

// Uint32s returns the elements of a Uint32 tensor.
func (t *Tensor) Uint32s() ([]uint32, error) { return Values[uint32](t) }

// Uint64s returns the elements of a Uint64 tensor.
func (t *Tensor) Uint64s() ([]uint64, error) { return Values[uint64](t) }

// Bools returns the elements of a Bool tensor.
func (t *Tensor) Bools() ([]bool, error) { return Values[bool](t) }

// Item returns the single element of a one-element tensor of any dtype as a float64 (exact
// for every dtype but large 64-bit integers; Float16 and BFloat16 are converted exactly).
func (t *Tensor) Item() (float64, error) {
	if t == nil {
		return 0, nilError("Tensor")
	}
	if n := t.NumElements(); n != 1 {
		return 0, newError(StatusShape, "Item: tensor of shape %v has %d elements, not 1", t.shape, n)
	}
	if read := itemReaders[t.dtype]; read != nil {
		return read(t)
	}
	var v [1]bool
	err := Read(t, v[:])
	if v[0] {
		return 1, err
	}
	return 0, err
}

// itemReaders read the one element of a tensor of each numeric dtype (Bool is Item's own case).
var itemReaders = map[DType]func(*Tensor) (float64, error){
	Float32: itemAs[float32], Float64: itemAs[float64], Int32: itemAs[int32], Int64: itemAs[int64],
	Uint8: itemAs[uint8], Int8: itemAs[int8], Float16: itemHalf, BFloat16: itemHalf,
	Int16: itemAs[int16], Uint16: itemAs[uint16], Uint32: itemAs[uint32], Uint64: itemAs[uint64],
}

func itemHalf(t *Tensor) (float64, error) {
	v, err := t.HalfFloat32s()
	if err != nil {
		return 0, err
	}
	return float64(v[0]), nil
}

func itemAs[T float32 | float64 | int32 | int64 | uint8 | int8 | int16 | uint16 | uint32 | uint64](t *Tensor) (float64, error) {
	var v [1]T
	err := Read(t, v[:])
	return float64(v[0]), err
}

// view runs a call that returns a new tensor sharing (or copying) t's storage.
func (t *Tensor) view(call func(out **C.ctn_tensor) C.goctn_ret) (*Tensor, error) {
	if err := t.use(); err != nil {
		return nil, err
	}
	defer t.h.release()
	var p *C.ctn_tensor
	if err := check(call(&p)); err != nil {
		return nil, err
	}
	return adoptTensor(p)
}

// Slice is a view of axis `axis` from start (inclusive) to stop (exclusive) with step > 0;
// negative start/stop count from the end and are clamped as in numpy.
func (t *Tensor) Slice(axis int, start, stop, step int64) (*Tensor, error) {
	return t.view(func(out **C.ctn_tensor) C.goctn_ret {
		return C.goctn_tensor_slice(t.ptr, C.int32_t(clampInt32(axis)), C.int64_t(start), C.int64_t(stop), C.int64_t(step), out)
	})
}

// Permute is a view with the axes reordered: out.Shape()[i] = t.Shape()[perm[i]].
func (t *Tensor) Permute(perm ...int) (*Tensor, error) {
	if t == nil {
		return nil, nilError("Tensor")
	}
	if len(perm) != len(t.shape) {
		return nil, newError(StatusShape, "Permute: %d axes for a tensor of shape %v", len(perm), t.shape)
	}
	p32 := int32s(perm)
	return t.view(func(out **C.ctn_tensor) C.goctn_ret {
		return C.goctn_tensor_permute(t.ptr, int32Ptr(p32), out)
	})
}

// Reshape gives the tensor a new shape (one dim may be -1): a view when the strides allow it,
// else a contiguous copy (copied tells which).
func (t *Tensor) Reshape(shape ...int64) (r *Tensor, copied bool, err error) {
	if len(shape) > MaxDims {
		return nil, false, newError(StatusShape, "Reshape: %d dimensions; at most %d", len(shape), MaxDims)
	}
	var c C.int32_t
	r, err = t.view(func(out **C.ctn_tensor) C.goctn_ret {
		return C.goctn_tensor_reshape(t.ptr, C.uint32_t(len(shape)), shapePtr(shape), out, &c)
	})
	return r, c != 0, err
}

// Contiguous returns a contiguous copy.
func (t *Tensor) Contiguous() (*Tensor, error) {
	return t.view(func(out **C.ctn_tensor) C.goctn_ret { return C.goctn_tensor_contiguous(t.ptr, out) })
}

func int32s(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(clampInt32(x))
	}
	return out
}

func int32Ptr(v []int32) *C.int32_t {
	if len(v) == 0 {
		return nil
	}
	return (*C.int32_t)(unsafe.Pointer(&v[0]))
}

// clampInt32 maps an int to int32 without wrapping, so that an absurd axis stays absurd (and
// is rejected by the library) instead of becoming a valid one.
func clampInt32(v int) int {
	if v > 1<<31-1 {
		return 1<<31 - 1
	}
	if v < -1<<31 {
		return -1 << 31
	}
	return v
}
