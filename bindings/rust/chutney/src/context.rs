//! Contexts: plugins, backends and the ABI check.
use crate::error::{check, cstr, cstring, Error, Result};
use chutney_sys as sys;
use std::path::Path;
use std::ptr;
use std::sync::Mutex;

/// The ABI version of the loaded library, (major, minor).
pub fn abi_version() -> (u32, u32) {
    // SAFETY: never fails.
    let v = unsafe { sys::ctn_abi_version() };
    (v >> 16, v & 0xffff)
}

/// The library's release, "major.minor.patch".
pub fn version() -> String {
    // SAFETY: a static string.
    unsafe { cstr(sys::ctn_version_string()) }
}

/// Checks that the loaded library implements the ABI this crate was written for: the same
/// major and at least its minor. [`Context::new`] calls it first.
pub fn check_abi() -> Result<()> {
    check_abi_version(abi_version())
}

pub(crate) fn check_abi_version(found: (u32, u32)) -> Result<()> {
    let built = (sys::CTN_ABI_MAJOR, sys::CTN_ABI_MINOR);
    if found.0 != built.0 || found.1 < built.1 {
        return Err(Error::AbiMismatch { built, found });
    }
    Ok(())
}

/// Serialises `Context::add_ops` across the process: `ctn_context_add_oplib`'s query function
/// takes no argument, so it hands the library one pending descriptor at a time. (Creating,
/// releasing and loading plugins into contexts needs no lock here: the library serialises
/// plugin initialisation and unloading process-wide itself.)
static LIFECYCLE: Mutex<()> = Mutex::new(());

pub(crate) fn lifecycle() -> std::sync::MutexGuard<'static, ()> {
    LIFECYCLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Options of [`Context::with_options`]; `Options::default()` gives the library's defaults.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Preferred backends, ','-separated ("opencl,cpu"); None: `CHUTNEY_BACKEND`, else "cpu".
    pub backends: Option<String>,
    /// Extra plugin folders or files to search first, ':'-separated.
    pub plugin_path: Option<String>,
    /// Worker threads of host backends (1..1024); 0: `CHUTNEY_NUM_THREADS`, else the cores.
    pub num_threads: i32,
    /// Do not search the default plugin locations.
    pub no_autoload: bool,
}

/// One backend known to a context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendInfo {
    /// "cpu", "opencl"...
    pub name: String,
    /// Whether it initialised and is usable.
    pub available: bool,
    /// Device name, or why it is unavailable.
    pub description: String,
    /// The plugin file.
    pub path: String,
    /// The ABI (major, minor) the plugin was built against.
    pub abi: (u32, u32),
}

/// A chutney context (`ctn_context`): plugins, backends, and the factory of graphs.
///
/// `Send + Sync`: the C API lets several threads build, compile and run graphs and plans of one
/// context at once, and change its backends, thread count and options meanwhile (chutney.h).
/// Creating and releasing contexts and loading plugins are serialised process-wide (see
/// `LIFECYCLE` in the source: a workaround for a crash of concurrent context creation with the
/// OpenCL backend). The two calls that must not overlap anything on one context are the release (`Drop`, which needs
/// ownership, so no graph or plan borrowing the context can be alive) and
/// [`Context::load_plugin`] (which takes `&mut self` for the same reason).
///
/// Graphs and plans borrow their context, so they cannot outlive it:
///
/// ```compile_fail,E0597
/// let g = {
///     let ctx = chutney::Context::new().unwrap();
///     ctx.graph().unwrap()
/// }; // error: `ctx` does not live long enough
/// ```
pub struct Context {
    ptr: *mut sys::ctn_context,
    // Serialises the calls returning strings owned by the context (the plugin report is
    // replaced by the next report call).
    strings: Mutex<()>,
    // Op libraries added in process (Context::add_ops): the host points into them until the
    // context is released, so they are dropped after it (fields drop after Drop::drop). Boxed:
    // the descriptor must not move when the vector grows (oplib.h).
    #[allow(clippy::vec_box)]
    oplibs: Vec<Box<crate::oplib::OpLibrary>>,
}

// SAFETY: see the type's documentation: the C contract allows concurrent use of a context;
// the exceptions need &mut self or ownership.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

release_on_drop!(Context => sys::ctn_context_release); // we own the handle; nothing borrows it (the borrow checker saw to that).

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Context({:p})", self.ptr)
    }
}

impl Context {
    /// A context with the default options.
    pub fn new() -> Result<Context> {
        Context::with_options(&Options::default())
    }

    /// A context: checks the library's ABI ([`check_abi`]), then searches and loads plugins. A
    /// rejected plugin or an absent device does not make this fail: see
    /// [`Context::plugin_report`].
    pub fn with_options(options: &Options) -> Result<Context> {
        check_abi()?;
        let backends = options.backends.as_deref().map(|s| cstring(s, "backends")).transpose()?;
        let plugin_path =
            options.plugin_path.as_deref().map(|s| cstring(s, "plugin_path")).transpose()?;
        let o = sys::ctn_context_options {
            struct_size: std::mem::size_of::<sys::ctn_context_options>() as u32,
            flags: if options.no_autoload { sys::CTN_CONTEXT_NO_AUTOLOAD } else { 0 },
            plugin_path: plugin_path.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
            backends: backends.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
            num_threads: options.num_threads,
            reserved: 0,
        };
        let mut out = ptr::null_mut();
        // SAFETY: o and its strings outlive the call.
        check(unsafe { sys::ctn_context_create(&o, &mut out) })?;
        Ok(Context { ptr: out, strings: Mutex::new(()), oplibs: Vec::new() })
    }

    pub(crate) fn raw(&self) -> *mut sys::ctn_context {
        self.ptr
    }

    pub(crate) fn keep_oplib(&mut self, lib: Box<crate::oplib::OpLibrary>) {
        self.oplibs.push(lib);
    }

    /// Loads one plugin file (backend or op library). `&mut self`: no other call on the
    /// context may run meanwhile (the op registry changes).
    pub fn load_plugin(&mut self, path: &Path) -> Result<()> {
        let p = cstring(&path.to_string_lossy(), "plugin path")?;
        // SAFETY: exclusive access to the context, p outlives the call.
        check(unsafe { sys::ctn_context_load_plugin(self.ptr, p.as_ptr()) })
    }

    /// Every plugin candidate seen, with its verdict and reason (one per line).
    pub fn plugin_report(&self) -> Result<String> {
        let _g = self.strings.lock().unwrap_or_else(|e| e.into_inner());
        let mut text = ptr::null();
        // SAFETY: the string is copied before the lock is released.
        check(unsafe { sys::ctn_context_plugin_report(self.ptr, &mut text) })?;
        // SAFETY: valid until the next report call, which the lock holds off.
        Ok(unsafe { cstr(text) })
    }

    /// Every backend known to the context, available or not.
    pub fn backends(&self) -> Result<Vec<BackendInfo>> {
        let _g = self.strings.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: valid handle and out-pointer.
        self.list(|n| unsafe { sys::ctn_context_backend_count(self.ptr, n) }, |i| {
            let mut info = sys::ctn_backend_info::sized();
            // SAFETY: info is sized by struct_size; the strings are copied at once.
            check(unsafe { sys::ctn_context_backend_info(self.ptr, i, &mut info) })?;
            // SAFETY: strings owned by the context, alive while no plugin loads (&self).
            Ok(unsafe {
                BackendInfo {
                    name: cstr(info.name),
                    available: info.available != 0,
                    description: cstr(info.description),
                    path: cstr(info.path),
                    abi: (info.abi_major, info.abi_minor),
                }
            })
        })
    }

    /// One of the context's numbered lists: `count` writes its length, `item` makes the entry
    /// of an index (the first error ends the list).
    pub(crate) fn list<T>(
        &self,
        count: impl FnOnce(&mut u32) -> sys::ctn_status,
        item: impl FnMut(u32) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut n = 0u32;
        check(count(&mut n))?;
        (0..n).map(item).collect()
    }

    /// Sets the preferred backends for later compiles and eager ops ("opencl,cpu").
    pub fn set_backends(&self, backends: &str) -> Result<()> {
        let b = cstring(backends, "backends")?;
        // SAFETY: allowed concurrently with other calls (chutney.h).
        check(unsafe { sys::ctn_context_set_backends(self.ptr, b.as_ptr()) })
    }

    /// Sets the worker-thread count of host backends (1..1024).
    pub fn set_num_threads(&self, n: i32) -> Result<()> {
        // SAFETY: allowed concurrently with other calls (chutney.h).
        check(unsafe { sys::ctn_context_set_num_threads(self.ptr, n) })
    }

    /// Sets a backend option, e.g. `("cpu", "gemm", "own")`.
    pub fn set_option(&self, backend: &str, key: &str, value: &str) -> Result<()> {
        let (b, k, v) = (cstring(backend, "backend")?, cstring(key, "key")?, cstring(value, "value")?);
        // SAFETY: allowed concurrently with other calls (chutney.h).
        check(unsafe { sys::ctn_context_set_option(self.ptr, b.as_ptr(), k.as_ptr(), v.as_ptr()) })
    }

    /// A lazy graph: build it, then compile it into a [`crate::Plan`].
    pub fn graph(&self) -> Result<crate::Graph<'_>> {
        crate::Graph::create(self, 0)
    }

    /// An eager graph: each op runs as it is added; read values with [`crate::Graph::value`].
    pub fn eager_graph(&self) -> Result<crate::Graph<'_>> {
        crate::Graph::create(self, sys::CTN_GRAPH_EAGER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Status;

    #[test]
    fn abi_mismatch_is_typed() {
        let built = (sys::CTN_ABI_MAJOR, sys::CTN_ABI_MINOR);
        assert_eq!(check_abi_version(built), Ok(()));
        assert_eq!(check_abi_version((built.0, built.1 + 1)), Ok(()));
        assert_eq!(
            check_abi_version((2, 0)),
            Err(Error::AbiMismatch { built, found: (2, 0) })
        );
        if built.1 > 0 {
            assert!(matches!(
                check_abi_version((built.0, built.1 - 1)),
                Err(Error::AbiMismatch { .. })
            ));
        }
        let e = check_abi_version((2, 0)).unwrap_err();
        assert_eq!(e.status(), Status::PLUGIN);
        assert!(e.to_string().contains("ABI 2.0"), "{e}");
    }
}
