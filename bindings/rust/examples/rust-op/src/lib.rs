//! An op library written in Rust, loaded by chutney like any plugin (`ctn_context_load_plugin`
//! or `Context::load_plugin`): it exports `ctn_plugin_query` returning a `ctn_oplib_desc` with
//! one op, `rust_softsign`: y = x / (1 + |x|), f32 and f64, any shape. Shape inference, a
//! gradient rule built from graph ops through the host API (dy / (1 + |x|)^2) and a CPU kernel.
//! It links nothing of chutney (chutney-sys only declares types; the host functions arrive
//! through `ctn_host_api`), as the ABI requires of plugins.
//!
//! Every callback catches panics: unwinding into C is undefined behaviour.
use chutney_sys::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

const OP_NAME: &[u8] = b"rust_softsign\0";

fn cstr(b: &'static [u8]) -> *const c_char {
    b.as_ptr() as *const c_char
}

/// Records `msg` as the error of the current call through the host; returns `code`.
///
/// # Safety
/// `host` is the host table passed to the callback.
unsafe fn fail(host: *const ctn_host_api, code: ctn_status, msg: &str) -> ctn_status {
    let text = std::ffi::CString::new(msg.replace('\0', " ")).unwrap_or_default();
    match host.as_ref().and_then(|h| h.set_error) {
        Some(set_error) => set_error(code, b"%s\0".as_ptr() as *const c_char, text.as_ptr()),
        None => code,
    }
}

/// Runs `f`, turning a panic into CTN_ERR_INTERNAL.
fn guard(host: *const ctn_host_api, f: impl FnOnce() -> ctn_status) -> ctn_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(st) => st,
        // SAFETY: host is the table of the current call.
        Err(_) => unsafe { fail(host, CTN_ERR_INTERNAL, "rust_softsign: panic in the op library") },
    }
}

unsafe extern "C" fn infer(
    host: *const ctn_host_api,
    n_inputs: u32,
    inputs: *const ctn_tensor_desc,
    _attrs: *const ctn_attrs,
    out: *mut ctn_tensor_desc,
) -> ctn_status {
    guard(host, || {
        if n_inputs != 1 || inputs.is_null() || out.is_null() {
            return fail(host, CTN_ERR_INVALID_ARGUMENT, "rust_softsign: takes one input");
        }
        let x = &*inputs;
        if x.dtype != CTN_F32 && x.dtype != CTN_F64 {
            return fail(host, CTN_ERR_DTYPE, &format!("rust_softsign: input dtype {} is not f32 or f64", x.dtype));
        }
        let o = &mut *out;
        o.dtype = x.dtype;
        o.ndim = x.ndim;
        o.shape = x.shape;
        CTN_OK
    })
}

/// dx = dy / (1 + |x|)^2, built from graph ops.
unsafe extern "C" fn grad(
    host: *const ctn_host_api,
    g: *mut ctn_graph,
    n_inputs: u32,
    inputs: *const ctn_node,
    _output: ctn_node,
    grad_out: ctn_node,
    _attrs: *const ctn_attrs,
    grad_inputs: *mut ctn_node,
) -> ctn_status {
    guard(host, || {
        let h = match host.as_ref() {
            Some(h) => h,
            None => return CTN_ERR_INVALID_ARGUMENT,
        };
        let (op, scalar, info) = match (h.graph_op, h.graph_scalar, h.graph_node_info) {
            (Some(a), Some(b), Some(c)) => (a, b, c),
            _ => return fail(host, CTN_ERR_PLUGIN, "rust_softsign: the host lacks graph functions"),
        };
        if n_inputs != 1 {
            return fail(host, CTN_ERR_INVALID_ARGUMENT, "rust_softsign: takes one input");
        }
        let x = *inputs;
        let mut dtype = 0;
        let mut ndim = 0;
        let st = info(g, x, &mut dtype, &mut ndim, ptr::null_mut());
        if st != CTN_OK {
            return st;
        }
        let call = |name: &'static [u8], args: &[ctn_node]| -> Result<ctn_node, ctn_status> {
            let mut out = CTN_NODE_NONE;
            let st = op(g, cstr(name), args.len() as u32, args.as_ptr(), ptr::null(), &mut out);
            if st == CTN_OK {
                Ok(out)
            } else {
                Err(st)
            }
        };
        let build = || -> Result<ctn_node, ctn_status> {
            let a = call(b"abs\0", &[x])?;
            let mut one = CTN_NODE_NONE;
            let st = scalar(g, dtype, 1.0, &mut one);
            if st != CTN_OK {
                return Err(st);
            }
            let s = call(b"add\0", &[a, one])?;
            let s2 = call(b"mul\0", &[s, s])?;
            call(b"div\0", &[grad_out, s2])
        };
        match build() {
            Ok(dx) => {
                *grad_inputs = dx;
                CTN_OK
            }
            Err(st) => st,
        }
    })
}

/// The CPU kernel; `state` carries the dtype.
unsafe extern "C" fn kernel(state: *mut c_void, args: *const ctn_kernel_args) -> ctn_status {
    let dtype = state as usize as i32;
    let r = catch_unwind(AssertUnwindSafe(|| {
        let a = &*args;
        let (x, y) = (&*a.inputs, &*a.outputs);
        let n: i64 = x.shape[..x.ndim as usize].iter().product();
        let n = n as usize;
        let xp = (x.data as *const u8).add(x.offset as usize);
        let yp = (y.data as *mut u8).add(y.offset as usize);
        if dtype == CTN_F32 {
            let (xs, ys) = (std::slice::from_raw_parts(xp as *const f32, n), std::slice::from_raw_parts_mut(yp as *mut f32, n));
            for (o, v) in ys.iter_mut().zip(xs) {
                *o = v / (1.0 + v.abs());
            }
        } else {
            let (xs, ys) = (std::slice::from_raw_parts(xp as *const f64, n), std::slice::from_raw_parts_mut(yp as *mut f64, n));
            for (o, v) in ys.iter_mut().zip(xs) {
                *o = v / (1.0 + v.abs());
            }
        }
    }));
    if r.is_ok() {
        CTN_OK
    } else {
        CTN_ERR_INTERNAL
    }
}

unsafe extern "C" fn get_kernel(
    host: *const ctn_host_api,
    _n_inputs: u32,
    inputs: *const ctn_tensor_desc,
    _output: *const ctn_tensor_desc,
    _attrs: *const ctn_attrs,
    out: *mut ctn_kernel,
) -> ctn_status {
    guard(host, || {
        let d = (*inputs).dtype;
        if d != CTN_F32 && d != CTN_F64 {
            return fail(host, CTN_ERR_UNSUPPORTED, "rust_softsign: cpu kernel for f32 and f64 only");
        }
        *out = ctn_kernel {
            fn_: Some(kernel),
            state: d as usize as *mut c_void,
            release: None,
            workspace_size: 0,
            flags: CTN_KERNEL_INPLACE_OK,
            reserved: 0,
        };
        CTN_OK
    })
}

static KERNELS: [ctn_oplib_kernel; 1] =
    [ctn_oplib_kernel { backend: b"cpu\0" as *const u8 as *const c_char, get_kernel: Some(get_kernel) }];

static OPS: [ctn_op_def; 1] = [ctn_op_def {
    struct_size: std::mem::size_of::<ctn_op_def>() as u32,
    n_inputs: 1,
    name: OP_NAME as *const [u8] as *const u8 as *const c_char,
    doc: b"x / (1 + |x|), written in Rust\0" as *const u8 as *const c_char,
    infer: Some(infer),
    grad: Some(grad),
    n_kernels: 1,
    kernels: &KERNELS as *const [ctn_oplib_kernel; 1] as *const ctn_oplib_kernel,
    // ABI 1.2 slots: unused, the 1.0 callbacks above serve this op.
    user_data: ptr::null_mut(),
    infer_ex: None,
    grad_ex: None,
    n_kernels_ex: 0,
    reserved: 0,
    kernels_ex: ptr::null(),
    jvp_ex: None,
}];

static DESC: ctn_oplib_desc = ctn_oplib_desc {
    header: ctn_plugin_header {
        struct_size: std::mem::size_of::<ctn_oplib_desc>() as u32,
        abi_major: CTN_ABI_MAJOR as u16,
        abi_minor: CTN_ABI_MINOR as u16,
        kind: CTN_PLUGIN_OPLIB as u32,
        reserved: 0,
        name: b"rust-ops\0" as *const u8 as *const c_char,
    },
    init: None,
    shutdown: None,
    n_ops: 1,
    ops: &OPS as *const [ctn_op_def; 1] as *const ctn_op_def,
};

/// The plugin's one exported symbol. Nothing runs at load time; the host checks the versions.
#[no_mangle]
pub extern "C" fn ctn_plugin_query(_host_abi_version: u32, _host: *const ctn_host_api) -> *const ctn_plugin_header {
    &DESC.header
}
