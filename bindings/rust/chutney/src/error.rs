//! Errors: the status of the failed C call, its name and the message of `ctn_last_error()`.
use chutney_sys as sys;
use std::ffi::CStr;
use std::fmt;

/// A chutney status code (`ctn_status`), e.g. [`Status::SHAPE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(pub i32);

impl Status {
    /// A bad value: null handle, unknown name, out-of-range index, a released handle.
    pub const INVALID_ARGUMENT: Status = Status(sys::CTN_ERR_INVALID_ARGUMENT);
    /// Shapes do not agree.
    pub const SHAPE: Status = Status(sys::CTN_ERR_SHAPE);
    /// Dtypes do not agree or are not supported.
    pub const DTYPE: Status = Status(sys::CTN_ERR_DTYPE);
    /// Allocation failed.
    pub const OUT_OF_MEMORY: Status = Status(sys::CTN_ERR_OUT_OF_MEMORY);
    /// A backend, device or driver is absent.
    pub const UNAVAILABLE: Status = Status(sys::CTN_ERR_UNAVAILABLE);
    /// A backend does not implement the op/dtype combination.
    pub const UNSUPPORTED: Status = Status(sys::CTN_ERR_UNSUPPORTED);
    /// A plugin was rejected.
    pub const PLUGIN: Status = Status(sys::CTN_ERR_PLUGIN);
    /// A file could not be read or written.
    pub const IO: Status = Status(sys::CTN_ERR_IO);
    /// A file or buffer is malformed.
    pub const CORRUPT: Status = Status(sys::CTN_ERR_CORRUPT);
    /// The call is not valid in the object's current state.
    pub const STATE: Status = Status(sys::CTN_ERR_STATE);
    /// A bug or an unexpected exception in the library.
    pub const INTERNAL: Status = Status(sys::CTN_ERR_INTERNAL);
    /// A run was cancelled ([`crate::CancelToken`]) or passed its timeout; variables unchanged.
    pub const CANCELLED: Status = Status(sys::CTN_ERR_CANCELLED);
    /// A run with `check_numerics` met a NaN or infinity; the message names the op.
    pub const NUMERICS: Status = Status(sys::CTN_ERR_NUMERICS);

    /// The library's constant name of the status ("CTN_ERR_SHAPE").
    pub fn name(self) -> String {
        // SAFETY: ctn_status_name never fails and returns a static string.
        unsafe { cstr(sys::ctn_status_name(self.0)) }
    }
}

/// Every error of this crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A call failed: its status, the status name and the message. For a library call the
    /// message is `ctn_last_error()`, read on the calling thread right after the call; for a
    /// check done in Rust (a slice of the wrong length) the status the library would use.
    Call {
        /// The status code.
        status: Status,
        /// Its name, e.g. "CTN_ERR_SHAPE".
        name: String,
        /// What went wrong, without the leading status name.
        message: String,
    },
    /// The loaded libchutney implements an ABI this crate cannot use: another major version, or
    /// an older minor than the one the crate was written for.
    AbiMismatch {
        /// (major, minor) the crate was written for.
        built: (u32, u32),
        /// (major, minor) of the loaded library.
        found: (u32, u32),
    },
}

impl Error {
    /// The status of the error (`Status::PLUGIN` for an ABI mismatch).
    pub fn status(&self) -> Status {
        match self {
            Error::Call { status, .. } => *status,
            Error::AbiMismatch { .. } => Status::PLUGIN,
        }
    }

    /// The message without the status name.
    pub fn message(&self) -> String {
        match self {
            Error::Call { message, .. } => message.clone(),
            e @ Error::AbiMismatch { .. } => e.to_string(),
        }
    }

    /// An error of `status` with `message` (the name filled in), e.g. for the callbacks of an
    /// [`crate::OpDef`] to return.
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error::Call { status, name: status.name(), message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Call { name, message, .. } if message.is_empty() => write!(f, "{name}"),
            Error::Call { name, message, .. } => write!(f, "{name}: {message}"),
            Error::AbiMismatch { built, found } => write!(
                f,
                "libchutney implements ABI {}.{}, this crate needs {}.x with x >= {}",
                found.0, found.1, built.0, built.1
            ),
        }
    }
}

impl std::error::Error for Error {}

/// `Result<T, chutney::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

/// Turns a status into a Result, reading the thread's last error message on failure.
pub(crate) fn check(st: sys::ctn_status) -> Result<()> {
    if st == sys::CTN_OK {
        return Ok(());
    }
    // SAFETY: ctn_last_error never fails; the string is valid until the next failing call on
    // this thread, and it is copied at once.
    let message = unsafe { cstr(sys::ctn_last_error()) };
    let status = Status(st);
    let name = status.name();
    // The library's messages start with the status name; Display puts it back.
    let message = match message.strip_prefix(&name).and_then(|m| m.strip_prefix(": ")) {
        Some(m) => m.to_string(),
        None => message,
    };
    Err(Error::Call { status, name, message })
}

/// Copies a C string (NULL gives "").
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays valid during the call.
pub(crate) unsafe fn cstr(p: *const sys::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    CStr::from_ptr(p).to_string_lossy().into_owned()
}

/// A C string of `s`, or CTN_ERR_INVALID_ARGUMENT when it holds a NUL byte.
pub(crate) fn cstring(s: &str, what: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(s)
        .map_err(|_| Error::new(Status::INVALID_ARGUMENT, format!("{what} contains a NUL byte")))
}
