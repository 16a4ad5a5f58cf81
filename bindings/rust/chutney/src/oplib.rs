//! Ops written in Rust, registered in process (ABI 1.2 `ctn_context_add_oplib`), and the op
//! registry (`ctn_context_op_count` / `_op_info` / `_op_support`).
//!
//! An [`OpDef`] holds boxed closures: shape inference, an optional gradient rule built through a
//! [`GradBuilder`], and a CPU kernel over slices. [`Context::add_ops`] builds a C op-library
//! descriptor whose callbacks are one `extern "C"` trampoline per callback kind; each finds its
//! op through `user_data` (a pointer to the boxed definition), catches panics (nothing unwinds
//! into C) and reports failures through `host->set_error_message`, so they reach the
//! application as [`Error`]s naming the op. The descriptor and the closures are owned by the
//! [`Context`] and dropped after the context is released.
use crate::error::{check, cstr, cstring, Error, Result, Status};
use crate::graph::Attrs;
use crate::tensor::{Dtype, Element};
use crate::Context;
use chutney_sys as sys;
use std::ffi::CString;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The dtype and shape of an op's input or output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorDesc {
    /// Element type.
    pub dtype: Dtype,
    /// Dimensions (at most 8).
    pub shape: Vec<i64>,
}

impl TensorDesc {
    /// A descriptor of `dtype` and `shape`.
    pub fn new(dtype: Dtype, shape: &[i64]) -> TensorDesc {
        TensorDesc { dtype, shape: shape.to_vec() }
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().map(|&d| d.max(0) as usize).product()
    }
}

/// An input tensor handed to a kernel: host memory, contiguous, valid during the call only.
#[derive(Debug)]
pub struct HostTensor<'a> {
    desc: TensorDesc,
    data: *const u8,
    _data: PhantomData<&'a [u8]>,
}

impl HostTensor<'_> {
    /// Dtype and shape.
    pub fn desc(&self) -> &TensorDesc {
        &self.desc
    }

    /// The elements as `T`; `Err(DTYPE)` when `T` is not the tensor's dtype.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        let n = self.desc.numel();
        check_slice::<T>(self.desc.dtype, self.data)?;
        if n == 0 {
            return Ok(&[]);
        }
        // SAFETY: the host gives `n` contiguous elements of this dtype at `data`, aligned for
        // it, readable during the kernel call that this borrow cannot outlive; no output aliases
        // an input (the kernel does not declare CTN_KERNEL_INPLACE_OK).
        Ok(unsafe { std::slice::from_raw_parts(self.data as *const T, n) })
    }
}

/// The output tensor of a kernel: host memory, contiguous, valid during the call only.
#[derive(Debug)]
pub struct HostTensorMut<'a> {
    desc: TensorDesc,
    data: *mut u8,
    _data: PhantomData<&'a mut [u8]>,
}

impl HostTensorMut<'_> {
    /// Dtype and shape.
    pub fn desc(&self) -> &TensorDesc {
        &self.desc
    }

    /// The elements as `T`, to write; `Err(DTYPE)` when `T` is not the tensor's dtype.
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T]> {
        let n = self.desc.numel();
        check_slice::<T>(self.desc.dtype, self.data as *const u8)?;
        if n == 0 {
            return Ok(&mut []);
        }
        // SAFETY: as HostTensor::as_slice, and the output is written by this kernel only.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.data as *mut T, n) })
    }
}

/// The dtype is T's and the data aligned for it (the host aligns; checked, not trusted).
fn check_slice<T: Element>(d: Dtype, p: *const u8) -> Result<()> {
    if T::DTYPE != d {
        return Err(Error::new(Status::DTYPE, format!("tensor is {d:?}, not {:?}", T::DTYPE)));
    }
    if p as usize % std::mem::align_of::<T>() != 0 {
        return Err(Error::new(Status::INTERNAL, format!("tensor data at {p:p} is not aligned for {d:?}")));
    }
    Ok(())
}

/// A node of the graph a gradient rule is building.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpNode(pub u32);

/// Adds nodes to the graph being differentiated, for a gradient rule
/// ([`OpDef::grad`]): the host's `graph_op`, `graph_scalar` and `graph_node_info`.
pub struct GradBuilder<'a> {
    host: &'a sys::ctn_host_api,
    g: *mut sys::ctn_graph,
}

impl GradBuilder<'_> {
    /// Adds op `name` (built-in or from a library) with optional attributes.
    pub fn op(&mut self, name: &str, inputs: &[OpNode], attrs: Option<&Attrs>) -> Result<OpNode> {
        let f = self.host.graph_op.ok_or_else(|| missing("graph_op"))?;
        let n = cstring(name, "op name")?;
        let a = attrs.map(Attrs::raw).transpose()?;
        let ids: Vec<u32> = inputs.iter().map(|n| n.0).collect();
        let mut out = sys::CTN_NODE_NONE;
        // SAFETY: g is the graph of the current gradient call; the arrays outlive the call.
        check(unsafe {
            f(self.g, n.as_ptr(), ids.len() as u32, ids.as_ptr(), a.as_ref().map_or(ptr::null(), |a| a as *const _), &mut out)
        })?;
        Ok(OpNode(out))
    }

    /// Adds a 0-d constant.
    pub fn scalar(&mut self, dtype: Dtype, value: f64) -> Result<OpNode> {
        let f = self.host.graph_scalar.ok_or_else(|| missing("graph_scalar"))?;
        let mut out = sys::CTN_NODE_NONE;
        // SAFETY: as op.
        check(unsafe { f(self.g, dtype.raw(), value, &mut out) })?;
        Ok(OpNode(out))
    }

    /// The dtype and shape of node `n`.
    pub fn desc(&self, n: OpNode) -> Result<TensorDesc> {
        let f = self.host.graph_node_info.ok_or_else(|| missing("graph_node_info"))?;
        let (mut dt, mut nd) = (0, 0u32);
        let mut shape = [0i64; sys::CTN_MAX_DIMS];
        // SAFETY: shape has room for the maximum ndim.
        check(unsafe { f(self.g, n.0, &mut dt, &mut nd, shape.as_mut_ptr()) })?;
        Ok(TensorDesc { dtype: Dtype::from_raw(dt)?, shape: shape[..(nd as usize).min(sys::CTN_MAX_DIMS)].to_vec() })
    }
}

fn missing(what: &str) -> Error {
    Error::new(Status::PLUGIN, format!("the host API lacks {what}"))
}

type InferFn = dyn Fn(&[TensorDesc], &Attrs) -> Result<TensorDesc> + Send + Sync;
type GradFn =
    dyn Fn(&mut GradBuilder<'_>, &[OpNode], OpNode, OpNode, &Attrs) -> Result<Vec<Option<OpNode>>> + Send + Sync;
type KernelFn = dyn Fn(&[HostTensor<'_>], &mut HostTensorMut<'_>, &Attrs) -> Result<()> + Send + Sync;

/// An op written in Rust: name, number of inputs, shape inference, an optional gradient rule
/// and a CPU kernel. Registered with [`Context::add_ops`], it is used like a built-in op:
/// [`crate::Graph::op`] by name, differentiated by [`crate::Graph::grad`], compiled into plans,
/// run eagerly.
///
/// The closures are `Send + Sync`: a context serves several threads, so the library may call
/// them concurrently. An `Err` they return, or a panic, becomes the failing call's
/// [`Error`], its message naming the op.
///
/// ```
/// use chutney::{Context, Dtype, OpDef, Tensor, TensorDesc};
///
/// let square = OpDef::new(
///     "rs_square",
///     1,
///     |inputs, _| Ok(inputs[0].clone()),
///     |inputs, out, _| {
///         let x = inputs[0].as_slice::<f32>()?;
///         for (y, v) in out.as_mut_slice::<f32>()?.iter_mut().zip(x) {
///             *y = v * v;
///         }
///         Ok(())
///     },
/// )
/// .doc("x * x, f32")
/// .grad(|b, x, _y, dy, _| {
///     let d = b.desc(x[0])?;
///     let two = b.scalar(d.dtype, 2.0)?;
///     let dx = b.op("mul", &[x[0], two], None)?;
///     Ok(vec![Some(b.op("mul", &[dx, dy], None)?)])
/// });
/// let mut ctx = Context::new()?;
/// ctx.add_ops("my-ops", vec![square])?;
/// let g = ctx.eager_graph()?;
/// let x = g.constant(&Tensor::new(&[3f32], &[1])?)?;
/// let y = g.op("rs_square", &[x], None)?;
/// assert_eq!(g.value(y)?.to_vec::<f32>()?, vec![9.0]);
/// assert_eq!(g.value(g.grad(g.sum(y, &[], false)?, &[x])?[0])?.to_vec::<f32>()?, vec![6.0]);
/// # let _ = TensorDesc::new(Dtype::F32, &[1]);
/// # Ok::<(), chutney::Error>(())
/// ```
pub struct OpDef {
    name: String,
    n_inputs: u32,
    doc: String,
    infer: Box<InferFn>,
    grad: Option<Box<GradFn>>,
    kernel: Box<KernelFn>,
}

impl std::fmt::Debug for OpDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpDef")
            .field("name", &self.name)
            .field("n_inputs", &self.n_inputs)
            .field("differentiable", &self.grad.is_some())
            .finish()
    }
}

impl OpDef {
    /// An op `name` of exactly `n_inputs` inputs. `infer` gives the output's dtype and shape
    /// from the inputs' (an `Err` says why the inputs are refused: use `Status::DTYPE` or
    /// `Status::SHAPE`); `kernel` computes the output on the CPU from contiguous host tensors.
    pub fn new<I, K>(name: &str, n_inputs: u32, infer: I, kernel: K) -> OpDef
    where
        I: Fn(&[TensorDesc], &Attrs) -> Result<TensorDesc> + Send + Sync + 'static,
        K: Fn(&[HostTensor<'_>], &mut HostTensorMut<'_>, &Attrs) -> Result<()> + Send + Sync + 'static,
    {
        OpDef {
            name: name.to_string(),
            n_inputs,
            doc: String::new(),
            infer: Box::new(infer),
            grad: None,
            kernel: Box::new(kernel),
        }
    }

    /// One line: what the op computes, which attributes it reads.
    pub fn doc(mut self, doc: &str) -> OpDef {
        self.doc = doc.to_string();
        self
    }

    /// The gradient rule, making the op differentiable: given the forward inputs, the output
    /// and the gradient flowing into the output, build d loss / d input i through the
    /// [`GradBuilder`]; `None` for an input without a gradient. One entry per input.
    pub fn grad<G>(mut self, grad: G) -> OpDef
    where
        G: Fn(&mut GradBuilder<'_>, &[OpNode], OpNode, OpNode, &Attrs) -> Result<Vec<Option<OpNode>>>
            + Send
            + Sync
            + 'static,
    {
        self.grad = Some(Box::new(grad));
        self
    }

    /// The op's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// One op of a registered library: its definition and C strings; `user_data` points here.
struct Entry {
    def: OpDef,
    name: CString,
    doc: CString,
}

/// One `add_ops` call's descriptor, owned by the context (boxed: the host keeps pointers into
/// it until the context is released).
pub(crate) struct OpLibrary {
    desc: sys::ctn_oplib_desc,
    _name: CString,
    _ops: Vec<sys::ctn_op_def>,
    _kernels: Vec<sys::ctn_op_kernel>,
    // Boxed: user_data points at each entry, whatever happens to the vector.
    #[allow(clippy::vec_box)]
    _entries: Vec<Box<Entry>>,
}

/// The descriptor `query` hands to the host during one `ctn_context_add_oplib` call
/// (`add_ops` holds the process-wide lifecycle lock around it).
static PENDING: AtomicPtr<sys::ctn_plugin_header> = AtomicPtr::new(ptr::null_mut());

unsafe extern "C" fn query(_host_abi: u32, _host: *const sys::ctn_host_api) -> *const sys::ctn_plugin_header {
    PENDING.load(Ordering::SeqCst)
}

/// Records `msg` as the error of the current callback; returns `code` (never CTN_OK).
///
/// # Safety
/// `host` is NULL or the host table of the current call.
unsafe fn report(host: *const sys::ctn_host_api, code: sys::ctn_status, msg: &str) -> sys::ctn_status {
    let code = if code == sys::CTN_OK { sys::CTN_ERR_INTERNAL } else { code };
    let text = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    let h = match host.as_ref() {
        Some(h) => h,
        None => return code,
    };
    let has_message = h.struct_size as usize >= std::mem::size_of::<sys::ctn_host_api>();
    match (h.set_error_message, h.set_error) {
        (Some(f), _) if has_message => f(code, text.as_ptr()),
        (_, Some(f)) => f(code, b"%s\0".as_ptr() as *const sys::c_char, text.as_ptr()),
        _ => code,
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// Runs one callback of `entry`'s op: an `Err` or a panic is reported through the host with a
/// message naming the callback (the host adds the op's name).
///
/// # Safety
/// `user_data` is NULL or an `Entry` of a live library; `host` as in `report`.
unsafe fn guarded(
    host: *const sys::ctn_host_api,
    user_data: *mut sys::c_void,
    what: &str,
    default: Status,
    f: impl FnOnce(&OpDef) -> Result<()>,
) -> sys::ctn_status {
    let entry = match (user_data as *const Entry).as_ref() {
        Some(e) => e,
        None => return report(host, sys::CTN_ERR_INTERNAL, "op written in Rust: no user_data"),
    };
    // The host prefixes the op's name ("swish: ...", "swish on backend cpu: ...").
    match catch_unwind(AssertUnwindSafe(|| f(&entry.def))) {
        Ok(Ok(())) => sys::CTN_OK,
        Ok(Err(e)) => {
            let st = match e.status() {
                Status(0) => default,
                s => s,
            };
            report(host, st.0, &format!("{what} (Rust): {}", e.message()))
        }
        Err(p) => report(
            host,
            sys::CTN_ERR_INTERNAL,
            &format!("{what} (Rust) panicked: {}", panic_text(p.as_ref())),
        ),
    }
}

fn attrs_of(a: *const sys::ctn_attrs) -> Attrs {
    // SAFETY: the host passes NULL or valid attributes.
    match unsafe { a.as_ref() } {
        None => Attrs::default(),
        Some(a) => Attrs {
            ints: a.i[..(a.ni as usize).min(sys::CTN_ATTR_INTS)].to_vec(),
            floats: a.f[..(a.nf as usize).min(sys::CTN_ATTR_FLOATS)].to_vec(),
        },
    }
}

fn desc_of(d: &sys::ctn_tensor_desc) -> Result<TensorDesc> {
    let nd = d.ndim as usize;
    if nd > sys::CTN_MAX_DIMS {
        return Err(Error::new(Status::SHAPE, format!("{nd} dimensions")));
    }
    Ok(TensorDesc { dtype: Dtype::from_raw(d.dtype)?, shape: d.shape[..nd].to_vec() })
}

/// # Safety
/// `p` points to `n` descriptors (or n == 0).
unsafe fn descs(p: *const sys::ctn_tensor_desc, n: u32) -> Result<Vec<TensorDesc>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    std::slice::from_raw_parts(p, n as usize).iter().map(desc_of).collect()
}

unsafe extern "C" fn infer_tramp(
    host: *const sys::ctn_host_api,
    _op: *const sys::ctn_op_def,
    user_data: *mut sys::c_void,
    n_inputs: u32,
    inputs: *const sys::ctn_tensor_desc,
    attrs: *const sys::ctn_attrs,
    out: *mut sys::ctn_tensor_desc,
) -> sys::ctn_status {
    guarded(host, user_data, "infer", Status::SHAPE, |def| {
        let ins = descs(inputs, n_inputs)?;
        let d = (def.infer)(&ins, &attrs_of(attrs))?;
        if d.shape.len() > sys::CTN_MAX_DIMS {
            return Err(Error::new(Status::SHAPE, format!("output has {} dims, at most 8", d.shape.len())));
        }
        if d.shape.iter().any(|&v| v < 0) {
            return Err(Error::new(Status::SHAPE, format!("output shape {:?} has a negative dim", d.shape)));
        }
        let o = out.as_mut().ok_or_else(|| Error::new(Status::INTERNAL, "no output descriptor"))?;
        o.dtype = d.dtype.raw();
        o.ndim = d.shape.len() as u32;
        o.shape = [0; sys::CTN_MAX_DIMS];
        o.shape[..d.shape.len()].copy_from_slice(&d.shape);
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn grad_tramp(
    host: *const sys::ctn_host_api,
    _op: *const sys::ctn_op_def,
    user_data: *mut sys::c_void,
    g: *mut sys::ctn_graph,
    n_inputs: u32,
    inputs: *const sys::ctn_node,
    output: sys::ctn_node,
    grad_out: sys::ctn_node,
    attrs: *const sys::ctn_attrs,
    grad_inputs: *mut sys::ctn_node,
) -> sys::ctn_status {
    guarded(host, user_data, "grad", Status::INVALID_ARGUMENT, |def| {
        let h = host.as_ref().ok_or_else(|| missing("its table"))?;
        let grad = def.grad.as_ref().ok_or_else(|| Error::new(Status::INTERNAL, "not differentiable"))?;
        let ins: Vec<OpNode> = if n_inputs == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(inputs, n_inputs as usize).iter().map(|&n| OpNode(n)).collect()
        };
        let mut b = GradBuilder { host: h, g };
        let gs = grad(&mut b, &ins, OpNode(output), OpNode(grad_out), &attrs_of(attrs))?;
        if gs.len() != ins.len() {
            return Err(Error::new(
                Status::INVALID_ARGUMENT,
                format!("returned {} gradients for {} inputs", gs.len(), ins.len()),
            ));
        }
        for (i, gi) in gs.iter().enumerate() {
            *grad_inputs.add(i) = gi.map_or(sys::CTN_NODE_NONE, |n| n.0);
        }
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn kernel_make(
    host: *const sys::ctn_host_api,
    _op: *const sys::ctn_op_def,
    _user_data: *mut sys::c_void,
    _backend: *const sys::c_char,
    _n_inputs: u32,
    _inputs: *const sys::ctn_tensor_desc,
    _output: *const sys::ctn_tensor_desc,
    _attrs: *const sys::ctn_attrs,
    out: *mut sys::ctn_kernel,
) -> sys::ctn_status {
    // fn_ None: the host calls kernel_run with user_data, which finds the Rust kernel; the
    // state is the host table (static), through which kernel_run reports errors.
    match out.as_mut() {
        Some(k) => {
            *k = sys::ctn_kernel {
                fn_: None,
                state: host as *mut sys::c_void,
                release: None,
                workspace_size: 0,
                flags: 0, // never in place: inputs and output are distinct slices
                reserved: 0,
            };
            sys::CTN_OK
        }
        None => report(host, sys::CTN_ERR_INTERNAL, "op written in Rust: no kernel to fill"),
    }
}

/// Host tensor of a kernel argument; CTN_ERR_UNSUPPORTED unless contiguous row-major.
///
/// # Safety
/// `d` describes host memory valid during the kernel call.
unsafe fn host_ptr(d: &sys::ctn_tensor_desc) -> Result<(TensorDesc, *mut u8)> {
    let desc = desc_of(d)?;
    let mut expect = 1i64;
    for i in (0..desc.shape.len()).rev() {
        if desc.shape[i] != 1 && d.strides[i] != expect {
            return Err(Error::new(Status::UNSUPPORTED, "a tensor is not contiguous"));
        }
        expect *= desc.shape[i];
    }
    let p = if d.data.is_null() { ptr::null_mut() } else { (d.data as *mut u8).add(d.offset as usize) };
    if p.is_null() && desc.numel() > 0 {
        return Err(Error::new(Status::INTERNAL, "a tensor has no data"));
    }
    Ok((desc, p))
}

unsafe extern "C" fn kernel_run(
    _op: *const sys::ctn_op_def,
    user_data: *mut sys::c_void,
    state: *mut sys::c_void,
    args: *const sys::ctn_kernel_args,
) -> sys::ctn_status {
    let host = state as *const sys::ctn_host_api;
    guarded(host, user_data, "kernel", Status::INVALID_ARGUMENT, |def| {
        let a = args.as_ref().ok_or_else(|| Error::new(Status::INTERNAL, "no kernel arguments"))?;
        if a.n_outputs < 1 || a.outputs.is_null() {
            return Err(Error::new(Status::INTERNAL, "no output tensor"));
        }
        let mut ins = Vec::with_capacity(a.n_inputs as usize);
        if a.n_inputs > 0 {
            for d in std::slice::from_raw_parts(a.inputs, a.n_inputs as usize) {
                let (desc, p) = host_ptr(d)?;
                ins.push(HostTensor { desc, data: p, _data: PhantomData });
            }
        }
        let (desc, p) = host_ptr(&*a.outputs)?;
        let mut out = HostTensorMut { desc, data: p, _data: PhantomData };
        (def.kernel)(&ins, &mut out, &attrs_of(a.attrs))
    })
}

/// One op the context knows (`ctn_op_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpInfo {
    /// What [`crate::Graph::op`] takes: the plain name when it resolves to this op, else the
    /// qualified one (`"ctn::softsign"` for a built-in a library's `softsign` shadows).
    pub name: String,
    /// Exact number of inputs; -1: variadic (one or more).
    pub n_inputs: i32,
    /// The attribute slots it reads (`"f[0] slope"`); "" when none or unknown.
    pub attributes: String,
    /// One line on what it computes.
    pub doc: String,
    /// "builtin", or the op library defining it.
    pub origin: String,
    /// The library's file, `"<in-process>"` for [`Context::add_ops`], "" for built-in ops.
    pub origin_path: String,
    /// Whether [`crate::Graph::grad`] can differentiate through it.
    pub differentiable: bool,
    /// Output element i depends on input elements i only.
    pub elementwise: bool,
}

/// Whether a backend runs an op for a dtype ([`Context::op_support`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpSupport {
    /// The backend would run it.
    pub supported: bool,
    /// Why not ("" when supported): the op's refusal of the dtype, or the backend's reason.
    pub reason: String,
}

impl Context {
    /// Every op the context knows, built-in ops first, then each library's in loading order.
    pub fn ops(&self) -> Result<Vec<OpInfo>> {
        // SAFETY: valid handle and out-pointer.
        self.list(|n| unsafe { sys::ctn_context_op_count(self.raw(), n) }, |i| {
            let mut oi = sys::ctn_op_info::sized();
            // SAFETY: oi is sized by struct_size.
            check(unsafe { sys::ctn_context_op_info(self.raw(), i, &mut oi) })?;
            // SAFETY: strings owned by the context, which no library can change while &self is
            // held (loading needs &mut self).
            Ok(unsafe {
                OpInfo {
                    name: cstr(oi.name),
                    n_inputs: oi.n_inputs,
                    attributes: cstr(oi.attributes),
                    doc: cstr(oi.doc),
                    origin: cstr(oi.origin),
                    origin_path: cstr(oi.origin_path),
                    differentiable: oi.differentiable != 0,
                    elementwise: oi.flags & sys::CTN_OP_INFO_ELEMENTWISE != 0,
                }
            })
        })
    }

    /// Does `backend` run `op` for `dtype`? The context builds a probe node and asks the
    /// backend for a kernel, as compiling would. An unknown op or backend, or an unavailable
    /// backend, is an `Err`.
    pub fn op_support(&self, backend: &str, op: &str, dtype: Dtype) -> Result<OpSupport> {
        let (b, o) = (cstring(backend, "backend")?, cstring(op, "op")?);
        let mut ok = 0i32;
        let mut reason = ptr::null();
        // SAFETY: valid strings; the reason is valid until the next op_support call on this
        // thread and is copied before returning.
        check(unsafe { sys::ctn_context_op_support(self.raw(), b.as_ptr(), o.as_ptr(), dtype.raw(), &mut ok, &mut reason) })?;
        // SAFETY: as above.
        Ok(OpSupport { supported: ok != 0, reason: unsafe { cstr(reason) } })
    }

    /// Registers ops written in Rust as an op library named `library`, in this process (no
    /// shared object). Admission is that of a loaded plugin: a name that clashes with a
    /// built-in op or another library's rejects the whole library with `Status::PLUGIN`, and
    /// the context is unchanged. [`Context::plugin_report`] lists the library with the path
    /// `"<in-process>"`. The definitions live until the context is dropped. `&mut self`: nothing
    /// else may use the context meanwhile (the op registry changes), so no graph or plan can be
    /// alive:
    ///
    /// ```compile_fail,E0502
    /// # use chutney::{Context, OpDef};
    /// let mut ctx = Context::new().unwrap();
    /// let g = ctx.graph().unwrap();
    /// let op = OpDef::new("rs_id", 1, |i, _| Ok(i[0].clone()), |_, _, _| Ok(()));
    /// ctx.add_ops("lib", vec![op]).unwrap(); // error: ctx is borrowed by g
    /// drop(g);
    /// ```
    pub fn add_ops(&mut self, library: &str, ops: Vec<OpDef>) -> Result<()> {
        let bad = |m: String| Err(Error::new(Status::INVALID_ARGUMENT, m));
        if library.is_empty() {
            return bad("add_ops: empty library name".into());
        }
        if ops.is_empty() {
            return bad(format!("add_ops({library}): no ops"));
        }
        let lib_name = cstring(library, "library name")?;
        let mut entries = Vec::with_capacity(ops.len());
        for (i, def) in ops.into_iter().enumerate() {
            if def.name.is_empty() {
                return bad(format!("add_ops({library}): op {i} has no name"));
            }
            if def.n_inputs < 1 || def.n_inputs > 1 << 16 {
                return bad(format!("add_ops({library}): op {}: {} inputs", def.name, def.n_inputs));
            }
            let name = cstring(&def.name, "op name")?;
            let doc = cstring(&def.doc, "op doc")?;
            entries.push(Box::new(Entry { def, name, doc }));
        }
        let kernels: Vec<sys::ctn_op_kernel> = entries
            .iter()
            .map(|_| sys::ctn_op_kernel {
                struct_size: std::mem::size_of::<sys::ctn_op_kernel>() as u32,
                reserved: 0,
                backend: b"cpu\0".as_ptr() as *const sys::c_char,
                make: Some(kernel_make),
                run: Some(kernel_run),
            })
            .collect();
        let defs: Vec<sys::ctn_op_def> = entries
            .iter()
            .zip(&kernels)
            .map(|(e, k)| sys::ctn_op_def {
                struct_size: std::mem::size_of::<sys::ctn_op_def>() as u32,
                n_inputs: e.def.n_inputs,
                name: e.name.as_ptr(),
                doc: e.doc.as_ptr(),
                infer: None,
                grad: None,
                n_kernels: 0,
                kernels: ptr::null(),
                user_data: &**e as *const Entry as *mut sys::c_void,
                infer_ex: Some(infer_tramp),
                grad_ex: if e.def.grad.is_some() { Some(grad_tramp) } else { None },
                n_kernels_ex: 1,
                reserved: 0,
                kernels_ex: k,
                jvp_ex: None,
            })
            .collect();
        let lib = Box::new(OpLibrary {
            desc: sys::ctn_oplib_desc {
                header: sys::ctn_plugin_header {
                    struct_size: std::mem::size_of::<sys::ctn_oplib_desc>() as u32,
                    abi_major: sys::CTN_ABI_MAJOR as u16,
                    abi_minor: 2, // the user_data callbacks are 1.2
                    kind: sys::CTN_PLUGIN_OPLIB as u32,
                    reserved: 0,
                    name: lib_name.as_ptr(),
                },
                init: None,
                shutdown: None,
                n_ops: defs.len() as u32,
                ops: defs.as_ptr(),
            },
            _name: lib_name,
            _ops: defs,
            _kernels: kernels,
            _entries: entries,
        });
        let st = {
            let _g = crate::context::lifecycle();
            PENDING.store(&lib.desc.header as *const _ as *mut _, Ordering::SeqCst);
            // SAFETY: exclusive access to the context; the descriptor (boxed, its arrays and
            // strings in heap buffers that never move) is kept until the context is released.
            let st = unsafe { sys::ctn_context_add_oplib(self.raw(), Some(query)) };
            PENDING.store(ptr::null_mut(), Ordering::SeqCst);
            st
        };
        // A rejected library is not kept by the host: drop it.
        check(st)?;
        self.keep_oplib(lib);
        Ok(())
    }
}
