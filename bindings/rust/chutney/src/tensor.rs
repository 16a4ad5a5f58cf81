//! Host tensors: creation from slices, copies out to `Vec`s, views.
use crate::error::{check, Error, Result, Status};
use crate::half::{bf16, f16};
use chutney_sys as sys;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr;

/// Element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// 8-bit unsigned integer.
    U8,
    /// Boolean, one byte (0 or 1).
    Bool,
    /// IEEE 754 binary16 (element type [`f16`](crate::f16)). Since ABI 1.5.
    F16,
    /// bfloat16 (element type [`bf16`](crate::bf16)). Since ABI 1.5.
    BF16,
    /// 8-bit signed integer. Since ABI 1.5.
    I8,
    /// 16-bit signed integer. Since ABI 1.6.
    I16,
    /// 16-bit unsigned integer. Since ABI 1.6.
    U16,
    /// 32-bit unsigned integer. Since ABI 1.6.
    U32,
    /// 64-bit unsigned integer. Since ABI 1.6.
    U64,
}

impl Dtype {
    /// The C value (`CTN_F32`...).
    pub fn raw(self) -> sys::ctn_dtype {
        match self {
            Dtype::F32 => sys::CTN_F32,
            Dtype::F64 => sys::CTN_F64,
            Dtype::I32 => sys::CTN_I32,
            Dtype::I64 => sys::CTN_I64,
            Dtype::U8 => sys::CTN_U8,
            Dtype::Bool => sys::CTN_BOOL,
            Dtype::F16 => sys::CTN_F16,
            Dtype::BF16 => sys::CTN_BF16,
            Dtype::I8 => sys::CTN_I8,
            Dtype::I16 => sys::CTN_I16,
            Dtype::U16 => sys::CTN_U16,
            Dtype::U32 => sys::CTN_U32,
            Dtype::U64 => sys::CTN_U64,
        }
    }

    /// The dtype of a C value; CTN_ERR_DTYPE for one this crate does not know.
    pub fn from_raw(v: sys::ctn_dtype) -> Result<Dtype> {
        Ok(match v {
            sys::CTN_F32 => Dtype::F32,
            sys::CTN_F64 => Dtype::F64,
            sys::CTN_I32 => Dtype::I32,
            sys::CTN_I64 => Dtype::I64,
            sys::CTN_U8 => Dtype::U8,
            sys::CTN_BOOL => Dtype::Bool,
            sys::CTN_F16 => Dtype::F16,
            sys::CTN_BF16 => Dtype::BF16,
            sys::CTN_I8 => Dtype::I8,
            sys::CTN_I16 => Dtype::I16,
            sys::CTN_U16 => Dtype::U16,
            sys::CTN_U32 => Dtype::U32,
            sys::CTN_U64 => Dtype::U64,
            _ => return Err(Error::new(Status::DTYPE, format!("unknown dtype {v}"))),
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        // SAFETY: pure function of an integer.
        unsafe { sys::ctn_dtype_size(self.raw()) }
    }

    /// The library's name ("f32").
    pub fn name(self) -> String {
        // SAFETY: returns a static string.
        unsafe { crate::error::cstr(sys::ctn_dtype_name(self.raw())) }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Rust types that are tensor elements: `f32`, `f64`, `i32`, `i64`, `u8`, `i8`, `i16`, `u16`,
/// `u32`, `u64`, and the 16-bit floats [`f16`](crate::f16) and [`bf16`](crate::bf16) (bit patterns). Sealed: every bit
/// pattern of these is a valid value, which is what makes copying from the library sound.
pub trait Element: Copy + Default + sealed::Sealed + 'static {
    /// The dtype of this element type.
    const DTYPE: Dtype;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t { const DTYPE: Dtype = Dtype::$d; }
    )*};
}
element!(f32 => F32, f64 => F64, i32 => I32, i64 => I64, u8 => U8, i8 => I8, f16 => F16, bf16 => BF16,
         i16 => I16, u16 => U16, u32 => U32, u64 => U64);

/// The element count of `shape`, checking every dim >= 0, ndim <= 8 and no overflow.
pub(crate) fn numel_of(shape: &[i64]) -> Result<usize> {
    if shape.len() > sys::CTN_MAX_DIMS {
        return Err(Error::new(
            Status::SHAPE,
            format!("{} dimensions, at most {}", shape.len(), sys::CTN_MAX_DIMS),
        ));
    }
    let mut n: usize = 1;
    for &d in shape {
        let d = usize::try_from(d)
            .map_err(|_| Error::new(Status::SHAPE, format!("negative dimension in {shape:?}")))?;
        n = n
            .checked_mul(d)
            .ok_or_else(|| Error::new(Status::SHAPE, format!("shape {shape:?} overflows")))?;
    }
    Ok(n)
}

/// An n-d array in host memory (`ctn_tensor`), released on drop.
///
/// `Send` (it may move to another thread) but not `Sync`: the C API lets one tensor be read by
/// several threads, but writes need `&mut`, and views ([`TensorView`]) borrow their source, so
/// safe code never writes storage another thread reads.
pub struct Tensor {
    pub(crate) ptr: *mut sys::ctn_tensor,
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

// SAFETY: a ctn_tensor may be used from any thread, one at a time (chutney.h).
unsafe impl Send for Tensor {}

release_on_drop!(Tensor => sys::ctn_tensor_release);

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dtype = self.dtype().map(|d| d.name()).unwrap_or_default();
        write!(f, "Tensor({dtype}, {:?})", self.shape().unwrap_or_default())
    }
}

impl Tensor {
    /// Takes ownership of a handle the library returned.
    ///
    /// # Safety
    /// `ptr` is a valid tensor handle owned by nobody else.
    pub(crate) unsafe fn from_raw(ptr: *mut sys::ctn_tensor) -> Tensor {
        Tensor { ptr, _not_sync: PhantomData }
    }

    fn create(dtype: Dtype, shape: &[i64], data: *const sys::c_void) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        // SAFETY: shape holds shape.len() values; data is NULL or holds numel elements
        // (checked by the callers).
        check(unsafe {
            sys::ctn_tensor_create(dtype.raw(), shape.len() as u32, shape.as_ptr(), data, &mut out)
        })?;
        // SAFETY: a new handle we own.
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// A tensor of `shape` holding a copy of `data` (row-major). CTN_ERR_SHAPE when
    /// `data.len()` is not the product of `shape`.
    ///
    /// ```
    /// let t = chutney::Tensor::new(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    /// assert_eq!(t.shape()?, vec![2, 3]);
    /// assert_eq!(t.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// assert!(chutney::Tensor::new(&[1.0f32, 2.0], &[3]).is_err());
    /// # Ok::<(), chutney::Error>(())
    /// ```
    pub fn new<T: Element>(data: &[T], shape: &[i64]) -> Result<Tensor> {
        let n = numel_of(shape)?;
        if n != data.len() {
            return Err(Error::new(
                Status::SHAPE,
                format!("{} elements given for shape {shape:?} ({n} elements)", data.len()),
            ));
        }
        Tensor::create(T::DTYPE, shape, data.as_ptr() as *const sys::c_void)
    }

    /// A 0-d tensor holding `value`.
    pub fn scalar<T: Element>(value: T) -> Result<Tensor> {
        Tensor::new(&[value], &[])
    }

    /// A tensor of zeros.
    pub fn zeros(dtype: Dtype, shape: &[i64]) -> Result<Tensor> {
        numel_of(shape)?;
        Tensor::create(dtype, shape, ptr::null())
    }

    /// A boolean tensor from `bool`s.
    pub fn from_bools(data: &[bool], shape: &[i64]) -> Result<Tensor> {
        let n = numel_of(shape)?;
        if n != data.len() {
            return Err(Error::new(
                Status::SHAPE,
                format!("{} elements given for shape {shape:?} ({n} elements)", data.len()),
            ));
        }
        let bytes: Vec<u8> = data.iter().map(|&b| b as u8).collect();
        Tensor::create(Dtype::Bool, shape, bytes.as_ptr() as *const sys::c_void)
    }

    /// The element type.
    pub fn dtype(&self) -> Result<Dtype> {
        let mut d = 0;
        // SAFETY: valid handle, valid out-pointer.
        check(unsafe { sys::ctn_tensor_dtype(self.ptr, &mut d) })?;
        Dtype::from_raw(d)
    }

    /// The shape (empty for a scalar).
    pub fn shape(&self) -> Result<Vec<i64>> {
        let mut shape = [0i64; sys::CTN_MAX_DIMS];
        let mut ndim = 0u32;
        // SAFETY: shape has room for CTN_MAX_DIMS values, the most a tensor has.
        check(unsafe { sys::ctn_tensor_shape(self.ptr, &mut ndim, shape.as_mut_ptr()) })?;
        Ok(shape[..(ndim as usize).min(sys::CTN_MAX_DIMS)].to_vec())
    }

    /// Strides in elements.
    pub fn strides(&self) -> Result<Vec<i64>> {
        let ndim = self.shape()?.len();
        let mut s = [0i64; sys::CTN_MAX_DIMS];
        // SAFETY: room for CTN_MAX_DIMS values.
        check(unsafe { sys::ctn_tensor_strides(self.ptr, s.as_mut_ptr()) })?;
        Ok(s[..ndim].to_vec())
    }

    /// Number of elements.
    pub fn numel(&self) -> Result<usize> {
        let mut n = 0i64;
        // SAFETY: valid handle and out-pointer.
        check(unsafe { sys::ctn_tensor_numel(self.ptr, &mut n) })?;
        Ok(n as usize)
    }

    /// Whether the elements are row-major with no gaps.
    pub fn is_contiguous(&self) -> Result<bool> {
        let mut c = 0i32;
        // SAFETY: valid handle and out-pointer.
        check(unsafe { sys::ctn_tensor_is_contiguous(self.ptr, &mut c) })?;
        Ok(c != 0)
    }

    fn expect_dtype(&self, want: Dtype) -> Result<()> {
        let have = self.dtype()?;
        if have != want {
            return Err(Error::new(
                Status::DTYPE,
                format!("the tensor holds {}, not {}", have.name(), want.name()),
            ));
        }
        Ok(())
    }

    /// Copies the elements (row-major) into `dst`, whose length must be the element count.
    pub fn read_into<T: Element>(&self, dst: &mut [T]) -> Result<()> {
        // SAFETY: dst is writable for its size; every bit pattern is a valid T.
        unsafe { self.read_raw(T::DTYPE, dst.as_mut_ptr().cast(), std::mem::size_of_val(dst)) }
    }

    /// Reads the elements into `bytes` bytes at `dst` once the dtype is checked to be `dtype`.
    ///
    /// # Safety
    /// `dst` must be writable for `bytes` bytes; the library checks `bytes` against the
    /// element count and writes at most that many.
    unsafe fn read_raw(&self, dtype: Dtype, dst: *mut sys::c_void, bytes: usize) -> Result<()> {
        self.expect_dtype(dtype)?;
        check(sys::ctn_tensor_read(self.ptr, dst, bytes))
    }

    /// The elements (row-major) as a new `Vec`; CTN_ERR_DTYPE when `T` is not the dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.expect_dtype(T::DTYPE)?;
        let mut v = vec![T::default(); self.numel()?];
        self.read_into(&mut v)?;
        Ok(v)
    }

    /// The elements of a boolean tensor.
    pub fn to_bools(&self) -> Result<Vec<bool>> {
        self.expect_dtype(Dtype::Bool)?;
        let mut v = vec![0u8; self.numel()?];
        // SAFETY: v is writable for its length in bytes.
        unsafe { self.read_raw(Dtype::Bool, v.as_mut_ptr().cast(), v.len())? };
        Ok(v.into_iter().map(|b| b != 0).collect())
    }

    /// The single element of a one-element tensor.
    pub fn item<T: Element>(&self) -> Result<T> {
        let v = self.to_vec::<T>()?;
        if v.len() != 1 {
            return Err(Error::new(Status::SHAPE, format!("{} elements, not 1", v.len())));
        }
        Ok(v[0])
    }

    /// Overwrites the elements with `src` (row-major; same dtype and element count).
    pub fn write<T: Element>(&mut self, src: &[T]) -> Result<()> {
        self.expect_dtype(T::DTYPE)?;
        // SAFETY: the library checks the byte count and reads at most that many bytes.
        check(unsafe {
            sys::ctn_tensor_write(
                self.ptr,
                src.as_ptr() as *const sys::c_void,
                std::mem::size_of_val(src),
            )
        })
    }

    fn view(&self, r: sys::ctn_status, out: *mut sys::ctn_tensor) -> Result<TensorView<'_>> {
        check(r)?;
        // SAFETY: a new handle we own.
        Ok(TensorView { t: unsafe { Tensor::from_raw(out) }, _src: PhantomData })
    }

    /// A view of `start..stop` by `step` along `axis` (negative bounds count from the end).
    pub fn slice(&self, axis: i32, start: i64, stop: i64, step: i64) -> Result<TensorView<'_>> {
        let mut out = ptr::null_mut();
        // SAFETY: valid handle and out-pointer.
        let r = unsafe { sys::ctn_tensor_slice(self.ptr, axis, start, stop, step, &mut out) };
        self.view(r, out)
    }

    /// A view with permuted axes: `out.shape[i] = self.shape[perm[i]]`.
    pub fn permute(&self, perm: &[i32]) -> Result<TensorView<'_>> {
        let ndim = self.shape()?.len();
        if perm.len() != ndim {
            return Err(Error::new(
                Status::INVALID_ARGUMENT,
                format!("permutation of {} axes for a {ndim}-d tensor", perm.len()),
            ));
        }
        let mut out = ptr::null_mut();
        // SAFETY: perm holds ndim values.
        let r = unsafe { sys::ctn_tensor_permute(self.ptr, perm.as_ptr(), &mut out) };
        self.view(r, out)
    }

    /// A view with a new shape (one dim may be -1) when the strides allow, else a copy.
    pub fn reshape(&self, shape: &[i64]) -> Result<TensorView<'_>> {
        if shape.len() > sys::CTN_MAX_DIMS {
            return Err(Error::new(Status::SHAPE, format!("{} dimensions", shape.len())));
        }
        let mut out = ptr::null_mut();
        // SAFETY: shape holds shape.len() values.
        let r = unsafe {
            sys::ctn_tensor_reshape(
                self.ptr,
                shape.len() as u32,
                shape.as_ptr(),
                &mut out,
                ptr::null_mut(),
            )
        };
        self.view(r, out)
    }

    /// A contiguous copy.
    pub fn contiguous(&self) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        // SAFETY: valid handle and out-pointer.
        check(unsafe { sys::ctn_tensor_contiguous(self.ptr, &mut out) })?;
        // SAFETY: a new handle we own.
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// The raw handle, for calls into `chutney-sys`. Still owned by `self`.
    pub fn as_raw(&self) -> *mut sys::ctn_tensor {
        self.ptr
    }
}

/// A view sharing the storage of the tensor it borrows (read-only: it derefs to `&Tensor`).
/// It cannot outlive its source nor let the source be written while it lives:
///
/// ```compile_fail,E0502
/// let mut t = chutney::Tensor::new(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
/// let v = t.slice(0, 0, 2, 1).unwrap();
/// t.write(&[0.0f32, 0.0, 0.0]).unwrap(); // error: `t` is borrowed by `v`
/// drop(v);
/// ```
pub struct TensorView<'a> {
    t: Tensor,
    _src: PhantomData<&'a Tensor>,
}

impl Deref for TensorView<'_> {
    type Target = Tensor;
    fn deref(&self) -> &Tensor {
        &self.t
    }
}

impl std::fmt::Debug for TensorView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "View{:?}", self.t)
    }
}
