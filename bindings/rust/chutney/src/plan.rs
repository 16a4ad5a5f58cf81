//! Plans: compiled graphs, run many times.
use crate::context::Context;
use crate::error::{check, cstr, cstring, Error, Result, Status};
use crate::graph::NodeId;
use crate::tensor::Tensor;
use chutney_sys as sys;
use std::marker::PhantomData;
use std::path::Path;
use std::ptr;

/// Options of [`crate::Graph::compile_with`].
#[derive(Debug, Clone, Default)]
pub struct CompileOptions {
    /// `CTN_PASS_*` bits (from `chutney_sys`) of passes to skip.
    pub disable: u32,
    /// Backends for this plan ("cpu"); None: the context's preference.
    pub backends: Option<String>,
    /// Caps the planned peak in bytes: over it the compiler recomputes activations instead of
    /// keeping them (results stay bit-identical); `chutney_sys::CTN_MEMORY_BUDGET_AUTO`: as low
    /// as recomputation gets; 0: none. A budget below the reachable minimum is an error naming it.
    pub memory_budget: u64,
}

/// A cancel token (`ctn_cancel`): [`CancelToken::cancel`] from any thread stops every run using
/// it at its next check, with [`Status::CANCELLED`] and the variables unchanged, until
/// [`CancelToken::reset`]. `Send + Sync`: share it with an `Arc`.
pub struct CancelToken {
    ptr: *mut sys::ctn_cancel,
}

// SAFETY: the token is an atomic flag; every function on it is thread-safe (chutney.h).
unsafe impl Send for CancelToken {}
unsafe impl Sync for CancelToken {}

impl CancelToken {
    /// A new token, not cancelled.
    pub fn new() -> Result<CancelToken> {
        let mut ptr = ptr::null_mut();
        // SAFETY: valid out-pointer.
        check(unsafe { sys::ctn_cancel_create(&mut ptr) })?;
        Ok(CancelToken { ptr })
    }
    /// Requests cancellation.
    pub fn cancel(&self) {
        // SAFETY: valid token; cannot fail for a valid token.
        unsafe { sys::ctn_cancel_request(self.ptr) };
    }
    /// Clears a request, for reuse.
    pub fn reset(&self) {
        // SAFETY: valid token.
        unsafe { sys::ctn_cancel_reset(self.ptr) };
    }
    /// Whether cancellation was requested.
    pub fn is_cancelled(&self) -> bool {
        let mut v = 0i32;
        // SAFETY: valid token and out-pointer.
        unsafe { sys::ctn_cancel_requested(self.ptr, &mut v) };
        v != 0
    }
}

release_on_drop!(CancelToken => sys::ctn_cancel_release); // we own the token; runs borrowing it have ended (they borrow &self).

/// Options of [`Plan::run_with_options`] (`ctn_run_options`).
#[derive(Default)]
pub struct RunOptions<'a> {
    /// Stops the run when cancelled (checked between steps up to the first variable write).
    pub cancel: Option<&'a CancelToken>,
    /// Cancels a run that takes longer.
    pub timeout: Option<std::time::Duration>,
    /// Checks every step's output for NaN/inf and stops at the first op that makes one
    /// ([`Status::NUMERICS`], naming it). Slow.
    pub check_numerics: bool,
}

/// Statistics of a plan (`ctn_plan_stats`).
pub type PlanStats = sys::ctn_plan_stats;

/// A compiled graph (`ctn_plan`), released on drop. It borrows the context (not the graph,
/// which may be dropped after compiling).
///
/// `Send` but not `Sync`: a plan must not run on two threads at once; distinct plans of one
/// context may run concurrently.
///
/// ```compile_fail,E0277
/// fn needs_sync<T: Sync>(_: &T) {}
/// let ctx = chutney::Context::new().unwrap();
/// let g = ctx.graph().unwrap();
/// let x = g.input("x", chutney::Dtype::F32, &[2]).unwrap();
/// let p = g.compile(&[x]).unwrap();
/// needs_sync(&p); // error: a Plan is not Sync
/// ```
pub struct Plan<'ctx> {
    ptr: *mut sys::ctn_plan,
    n_outputs: usize,
    graph: u64, // serial of the graph compiled: node ids are checked against it
    _ctx: PhantomData<&'ctx Context>,
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

// SAFETY: a ctn_plan may be used from any thread, one at a time (chutney.h).
unsafe impl Send for Plan<'_> {}

release_on_drop!(Plan<'_> => sys::ctn_plan_release);

impl std::fmt::Debug for Plan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Plan({:p}, {} outputs)", self.ptr, self.n_outputs)
    }
}

/// The argument arrays of a C call, on the stack for up to 16 entries (no allocation per run).
pub(crate) struct Small<T: Copy> {
    small: [T; 16],
    big: Vec<T>,
    pub(crate) n: usize,
}

impl<T: Copy> Small<T> {
    pub(crate) fn new(fill: T, it: impl ExactSizeIterator<Item = T>) -> Small<T> {
        let n = it.len();
        let mut p = Small { small: [fill; 16], big: Vec::new(), n };
        if n <= 16 {
            for (slot, v) in p.small.iter_mut().zip(it) {
                *slot = v;
            }
        } else {
            p.big = it.collect();
        }
        p
    }
    pub(crate) fn as_ptr(&self) -> *const T {
        if self.n <= 16 {
            self.small.as_ptr()
        } else {
            self.big.as_ptr()
        }
    }
}

/// Feed nodes and values split into the arrays the C API takes.
pub(crate) type Feeds = (Small<u32>, Small<*const sys::ctn_tensor>);

/// Splits `feeds`, checking that every node belongs to graph `graph` (the plan's).
fn split_feeds(feeds: &[(NodeId, &Tensor)], graph: u64) -> Result<Feeds> {
    for (i, (n, _)) in feeds.iter().enumerate() {
        n.of(graph, &format_args!("feed {i}"))?;
    }
    Ok((
        Small::new(0, feeds.iter().map(|(n, _)| n.index())),
        Small::new(ptr::null(), feeds.iter().map(|(_, t)| t.ptr as *const sys::ctn_tensor)),
    ))
}


impl<'ctx> Plan<'ctx> {
    /// # Safety
    /// `ptr` is a new plan handle, owned by nobody else, of a context that lives for 'ctx,
    /// compiled from the graph of serial `graph`.
    pub(crate) unsafe fn from_raw(ptr: *mut sys::ctn_plan, n_outputs: usize, graph: u64) -> Plan<'ctx> {
        Plan { ptr, n_outputs, graph, _ctx: PhantomData, _not_sync: PhantomData }
    }

    /// The serial of the graph this plan was compiled from ([`crate::Graph::serial`]).
    pub fn graph(&self) -> u64 {
        self.graph
    }

    /// The C arrays of a run, after checking the feeds' graph and the number of outputs.
    pub(crate) fn run_args(
        &self,
        feeds: &[(NodeId, &Tensor)],
        outputs: &[&mut Tensor],
    ) -> Result<(Feeds, Small<*mut sys::ctn_tensor>)> {
        if outputs.len() > self.n_outputs {
            return Err(Error::new(
                Status::INVALID_ARGUMENT,
                format!("{} output tensors for a plan of {} outputs", outputs.len(), self.n_outputs),
            ));
        }
        Ok((split_feeds(feeds, self.graph)?, Small::new(ptr::null_mut(), outputs.iter().map(|t| t.ptr))))
    }

    /// The C ids of `vars`, each checked to belong to this plan's graph.
    fn var_ids(&self, vars: &[(&str, NodeId)], what: &str) -> Result<Vec<u32>> {
        vars.iter().map(|(name, v)| v.of(self.graph, &format_args!("{what} {name:?}"))).collect()
    }

    pub(crate) fn raw(&self) -> *mut sys::ctn_plan {
        self.ptr
    }

    /// The raw handle, for calls into `chutney-sys`. Still owned by `self`.
    pub fn as_raw(&self) -> *mut sys::ctn_plan {
        self.ptr
    }

    /// Number of outputs given to compile.
    pub fn num_outputs(&self) -> usize {
        self.n_outputs
    }

    /// Runs once: `feeds` gives a value for every input the outputs need; `outputs[i]`
    /// receives output i (make them with [`Plan::output`]; fewer than [`Plan::num_outputs`]
    /// skips the rest). Every argument is checked before anything runs.
    pub fn run(&mut self, feeds: &[(NodeId, &Tensor)], outputs: &mut [&mut Tensor]) -> Result<()> {
        let ((nodes, values), outs) = self.run_args(feeds, outputs)?;
        // SAFETY: arrays of the given lengths; tensors live (borrowed) during the call; feeds are
        // only read, outputs (exclusively borrowed) written.
        check(unsafe {
            sys::ctn_plan_run(self.ptr, nodes.n as u32, nodes.as_ptr(), values.as_ptr(), outs.n as u32, outs.as_ptr())
        })
    }

    /// [`Plan::run`] with options: a cancel token, a timeout, numerics checks.
    pub fn run_with_options(
        &mut self,
        options: &RunOptions<'_>,
        feeds: &[(NodeId, &Tensor)],
        outputs: &mut [&mut Tensor],
    ) -> Result<()> {
        let o = sys::ctn_run_options {
            struct_size: std::mem::size_of::<sys::ctn_run_options>() as u32,
            flags: if options.check_numerics { sys::CTN_RUN_CHECK_NUMERICS } else { 0 },
            cancel: options.cancel.map_or(ptr::null_mut(), |c| c.ptr),
            timeout_us: options.timeout.map_or(0, |t| t.as_micros().clamp(1, u64::MAX as u128) as u64),
        };
        let ((nodes, values), outs) = self.run_args(feeds, outputs)?;
        // SAFETY: as in run; the options and the token outlive the call.
        check(unsafe {
            sys::ctn_plan_run_with_options(self.ptr, &o, nodes.n as u32, nodes.as_ptr(), values.as_ptr(), outs.n as u32, outs.as_ptr())
        })
    }

    /// Runs once and returns every output in new tensors.
    pub fn run_outputs(&mut self, feeds: &[(NodeId, &Tensor)]) -> Result<Vec<Tensor>> {
        let mut outs = (0..self.n_outputs).map(|i| self.output(i)).collect::<Result<Vec<_>>>()?;
        let mut refs: Vec<&mut Tensor> = outs.iter_mut().collect();
        self.run(feeds, &mut refs)?;
        Ok(outs)
    }

    /// A tensor of the dtype and shape of output `index`.
    pub fn output(&self, index: usize) -> Result<Tensor> {
        let mut out = ptr::null_mut();
        // SAFETY: valid plan; the library checks the index.
        check(unsafe { sys::ctn_plan_output_create(self.ptr, index as u32, &mut out) })?;
        // SAFETY: a new handle we own.
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// The current value of variable `var`.
    pub fn variable(&self, var: NodeId) -> Result<Tensor> {
        let var = var.of(self.graph, &"Plan::variable")?;
        let mut out = ptr::null_mut();
        // SAFETY: valid plan and out-pointer.
        check(unsafe { sys::ctn_plan_variable_read(self.ptr, var, &mut out) })?;
        // SAFETY: a new handle we own.
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// Overwrites variable `var` (same dtype and shape).
    pub fn set_variable(&mut self, var: NodeId, value: &Tensor) -> Result<()> {
        let var = var.of(self.graph, &"Plan::set_variable")?;
        // SAFETY: valid plan and tensor.
        check(unsafe { sys::ctn_plan_variable_write(self.ptr, var, value.ptr) })
    }

    /// Statistics: steps, fused nodes, planned memory.
    pub fn stats(&self) -> Result<PlanStats> {
        let mut s = PlanStats { struct_size: std::mem::size_of::<PlanStats>() as u32, ..Default::default() };
        // SAFETY: s is sized by struct_size.
        check(unsafe { sys::ctn_plan_stats_get(self.ptr, &mut s) })?;
        Ok(s)
    }

    /// The schedule as text.
    pub fn describe(&self) -> Result<String> {
        let mut s = ptr::null();
        // SAFETY: owned by the plan until the next call on it; copied at once (&self, !Sync).
        check(unsafe { sys::ctn_plan_describe(self.ptr, &mut s) })?;
        // SAFETY: valid string.
        Ok(unsafe { cstr(s) })
    }

    /// How many steps run on `backend` (of op `op`, or all ops).
    pub fn backend_steps(&self, backend: &str, op: Option<&str>) -> Result<u32> {
        let b = cstring(backend, "backend")?;
        let o = op.map(|o| cstring(o, "op")).transpose()?;
        let mut n = 0;
        // SAFETY: strings outlive the call.
        check(unsafe {
            sys::ctn_plan_backend_steps(self.ptr, b.as_ptr(), o.as_ref().map_or(ptr::null(), |o| o.as_ptr()), &mut n)
        })?;
        Ok(n)
    }

    /// Saves variables `(name, node)` to a safetensors file, atomically.
    pub fn save_variables(&self, vars: &[(&str, NodeId)], path: &Path, metadata_json: Option<&str>) -> Result<()> {
        let names = vars.iter().map(|(n, _)| cstring(n, "variable name")).collect::<Result<Vec<_>>>()?;
        let name_ptrs: Vec<*const sys::c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let nodes = self.var_ids(vars, "save_variables: variable")?;
        let p = crate::checkpoint::path_cstring(path)?;
        let m = metadata_json.map(|m| cstring(m, "metadata")).transpose()?;
        // SAFETY: arrays of len values; strings outlive the call.
        check(unsafe {
            sys::ctn_plan_save_variables(
                self.ptr,
                nodes.len() as u32,
                name_ptrs.as_ptr(),
                nodes.as_ptr(),
                p.as_ptr(),
                m.as_ref().map_or(ptr::null(), |m| m.as_ptr()),
            )
        })
    }

    /// Loads variables `(name, node)` from a safetensors file; on failure nothing changed.
    pub fn load_variables(&mut self, vars: &[(&str, NodeId)], path: &Path) -> Result<()> {
        let names = vars.iter().map(|(n, _)| cstring(n, "variable name")).collect::<Result<Vec<_>>>()?;
        let name_ptrs: Vec<*const sys::c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let nodes = self.var_ids(vars, "load_variables: variable")?;
        let p = crate::checkpoint::path_cstring(path)?;
        // SAFETY: arrays of len values; strings outlive the call.
        check(unsafe {
            sys::ctn_plan_load_variables(self.ptr, nodes.len() as u32, name_ptrs.as_ptr(), nodes.as_ptr(), p.as_ptr())
        })
    }
}
