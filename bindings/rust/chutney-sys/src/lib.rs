//! Raw declarations of the chutney C ABI: `abi/chutney/chutney.h`, `nn.h`, `data.h`,
//! `checkpoint.h`, `onnx.h`, `collective.h`, the plugin and op-library types of `plugin.h` and
//! `oplib.h`, the device interop of `opencl.h`, `vulkan.h` and `cuda.h`, and the types of
//! `types.h` and `version.h` they use.
//!
//! Generated from the headers (no bindgen, so no libclang at build time): `src/ffi.rs`, the
//! probe and the layout and symbol tests are written by `bindings/go/internal/genabi`, the same
//! parser the Go binding's wrappers come from (`cd bindings/go && GOPROXY=off go generate
//! ./chutney`); the Go test stage fails while a checked-in copy is stale. This file holds the
//! little that is not generated. Checked against the real headers by the tests of this crate:
//! - `tests/layout.rs` compares `size_of`, `align_of` and every field offset of every struct,
//!   and the value of every constant, with what a C probe compiled by `build.rs` prints;
//! - `tests/headers.rs` reads the headers with a second, independent parser and checks that the
//!   probe lists every struct, field and constant;
//! - `tests/completeness.rs` checks that every `CTN_API` function is declared here or listed in
//!   [`LEFT_OUT`] with a reason, and `tests/symbols.rs` links every declared function.
//!
//! Names are the C names (a field that is a Rust keyword gets a trailing underscore: `fn_`);
//! an enum is an `i32` alias with one constant per member; a string macro is a NUL-terminated
//! byte string; a function pointer is an `Option` of an `unsafe extern "C" fn`.
//!
//! Everything here is `unsafe` to call and follows the C contract of the headers (status
//! returns, `ctn_last_error()` on the calling thread, out-parameters untouched on failure,
//! `*_release` accepting NULL). The safe API is the `chutney` crate.
#![allow(non_camel_case_types)]

use std::marker::{PhantomData, PhantomPinned};
/// C `char` and `void` (from `std::os::raw`: Rust 1.63, Debian 12's, lacks `core::ffi::c_char`).
pub use std::os::raw::{c_char, c_void};

/// Opaque C handles: only ever behind a pointer.
macro_rules! opaque {
    ($($(#[$m:meta])* $name:ident;)*) => {$(
        $(#[$m])*
        #[repr(C)]
        pub struct $name {
            _data: [u8; 0],
            // Neither Send, Sync nor Unpin: the safe layer decides.
            _marker: PhantomData<(*mut u8, PhantomPinned)>,
        }
    )*};
}

/// `X::sized()` for the structs that begin with `struct_size` (the list is generated): a zeroed
/// value whose `struct_size` is the struct's size, as the headers' getters and options want.
macro_rules! sized_structs {
    ($($t:ident),*) => {$(
        impl $t {
            /// Zeroed, with `struct_size` set to this struct's size.
            pub fn sized() -> Self {
                // SAFETY: every field of these C structs is a number, a raw pointer, an optional
                // function or such a struct: all-zero bytes are a valid value of each.
                let mut v: Self = unsafe { std::mem::zeroed() };
                v.struct_size = std::mem::size_of::<Self>() as u32;
                v
            }
        }
    )*};
}

include!("ffi.rs");

// SAFETY: descriptors are static, immutable tables of pointers to static data and functions.
unsafe impl Sync for ctn_oplib_desc {}
// SAFETY: as above.
unsafe impl Sync for ctn_op_def {}
// SAFETY: as above.
unsafe impl Sync for ctn_oplib_kernel {}
// SAFETY: as above.
unsafe impl Sync for ctn_op_kernel {}
