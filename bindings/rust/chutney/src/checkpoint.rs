//! Safetensors checkpoints.
use crate::error::{check, cstr, cstring, Error, Result, Status};
use crate::tensor::{Dtype, Tensor};
use chutney_sys as sys;
use std::ffi::CString;
use std::path::Path;
use std::ptr;

pub(crate) fn path_cstring(path: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::new(Status::INVALID_ARGUMENT, "the path contains a NUL byte"))
}

/// Writes `(name, tensor)` pairs to `path` in the safetensors layout, atomically (a temporary
/// file, fsynced and renamed). `metadata_json` is None or a JSON object of strings.
pub fn save(path: &Path, tensors: &[(&str, &Tensor)], metadata_json: Option<&str>) -> Result<()> {
    let names = tensors.iter().map(|(n, _)| cstring(n, "tensor name")).collect::<Result<Vec<_>>>()?;
    let name_ptrs: Vec<*const sys::c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let ts: Vec<*const sys::ctn_tensor> = tensors.iter().map(|(_, t)| t.ptr as *const _).collect();
    let p = path_cstring(path)?;
    let m = metadata_json.map(|m| cstring(m, "metadata")).transpose()?;
    // SAFETY: arrays of len values; tensors and strings outlive the call; tensors only read.
    check(unsafe {
        sys::ctn_checkpoint_save(
            p.as_ptr(),
            ts.len() as u32,
            name_ptrs.as_ptr(),
            ts.as_ptr(),
            m.as_ref().map_or(ptr::null(), |m| m.as_ptr()),
        )
    })
}

/// A loaded checkpoint (`ctn_checkpoint`), immutable: `Send + Sync` (its getters are
/// thread-safe, checkpoint.h).
pub struct Checkpoint {
    ptr: *mut sys::ctn_checkpoint,
}

// SAFETY: a loaded checkpoint is immutable and its getters are thread-safe (checkpoint.h).
unsafe impl Send for Checkpoint {}
// SAFETY: as above.
unsafe impl Sync for Checkpoint {}

release_on_drop!(Checkpoint => sys::ctn_checkpoint_release);

impl std::fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Checkpoint({:?})", self.names().unwrap_or_default())
    }
}

impl Checkpoint {
    /// Reads and validates a whole safetensors file.
    pub fn load(path: &Path) -> Result<Checkpoint> {
        let p = path_cstring(path)?;
        let mut out = ptr::null_mut();
        // SAFETY: p outlives the call.
        check(unsafe { sys::ctn_checkpoint_load(p.as_ptr(), &mut out) })?;
        Ok(Checkpoint { ptr: out })
    }

    /// Tensor names in the file's order.
    pub fn names(&self) -> Result<Vec<String>> {
        let mut n = 0u32;
        // SAFETY: valid handle.
        check(unsafe { sys::ctn_checkpoint_count(self.ptr, &mut n) })?;
        (0..n)
            .map(|i| {
                let mut s = ptr::null();
                // SAFETY: the name lives as long as the checkpoint; copied.
                check(unsafe { sys::ctn_checkpoint_name(self.ptr, i, &mut s) })?;
                // SAFETY: valid string.
                Ok(unsafe { cstr(s) })
            })
            .collect()
    }

    /// dtype and shape of tensor `name`.
    pub fn info(&self, name: &str) -> Result<(Dtype, Vec<i64>)> {
        let n = cstring(name, "tensor name")?;
        let (mut d, mut ndim) = (0, 0u32);
        // First the rank: a file may hold more dims than CTN_MAX_DIMS.
        // SAFETY: out_shape NULL asks only ndim.
        check(unsafe { sys::ctn_checkpoint_info(self.ptr, n.as_ptr(), &mut d, &mut ndim, ptr::null_mut()) })?;
        let mut shape = vec![0i64; ndim as usize];
        // SAFETY: shape has room for ndim values.
        check(unsafe { sys::ctn_checkpoint_info(self.ptr, n.as_ptr(), &mut d, &mut ndim, shape.as_mut_ptr()) })?;
        Ok((Dtype::from_raw(d)?, shape))
    }

    /// A copy of tensor `name`.
    pub fn get(&self, name: &str) -> Result<Tensor> {
        let n = cstring(name, "tensor name")?;
        let mut out = ptr::null_mut();
        // SAFETY: valid handle and strings.
        check(unsafe { sys::ctn_checkpoint_get(self.ptr, n.as_ptr(), &mut out) })?;
        // SAFETY: a new handle we own.
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// The `__metadata__` object as compact JSON ("{}" when absent).
    pub fn metadata(&self) -> Result<String> {
        let mut s = ptr::null();
        // SAFETY: owned by the checkpoint; copied.
        check(unsafe { sys::ctn_checkpoint_metadata(self.ptr, &mut s) })?;
        // SAFETY: valid string.
        Ok(unsafe { cstr(s) })
    }

    /// The metadata value of `key`, None when absent.
    pub fn metadata_get(&self, key: &str) -> Result<Option<String>> {
        let k = cstring(key, "metadata key")?;
        let mut s = ptr::null();
        // SAFETY: owned by the checkpoint; copied.
        check(unsafe { sys::ctn_checkpoint_metadata_get(self.ptr, k.as_ptr(), &mut s) })?;
        // SAFETY: valid string or NULL.
        Ok(if s.is_null() { None } else { Some(unsafe { cstr(s) }) })
    }
}
