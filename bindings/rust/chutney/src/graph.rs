//! Graphs: building ops, autodiff, eager values, compiling into plans.
use crate::context::Context;
use crate::error::{check, cstr, cstring, Error, Result, Status};
use crate::plan::{CompileOptions, Plan};
use crate::tensor::{Dtype, Tensor};
use chutney_sys as sys;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

/// The id of a node, without the graph borrow of [`Node`]: what plans take as feeds and
/// variables (a plan may outlive its graph). It carries its graph: a plan refuses, with
/// CTN_ERR_INVALID_ARGUMENT naming both graphs, an id of another graph with the same number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeId {
    graph: u64,
    index: u32,
}

impl NodeId {
    pub(crate) fn new(graph: u64, index: u32) -> NodeId {
        NodeId { graph, index }
    }
    /// The node's number in its graph (what the C API calls a `ctn_node`).
    pub fn index(self) -> u32 {
        self.index
    }
    /// The serial number of its graph ([`Graph::serial`]).
    pub fn graph(self) -> u64 {
        self.graph
    }
    /// The C id, after checking the node belongs to graph `graph`; `what` names the argument.
    pub(crate) fn of(self, graph: u64, what: &dyn std::fmt::Display) -> Result<u32> {
        if self.graph != graph {
            return Err(Error::new(
                Status::INVALID_ARGUMENT,
                format!("{what}: node {} belongs to graph #{}, not to graph #{graph}", self.index, self.graph),
            ));
        }
        Ok(self.index)
    }
}

impl From<Node<'_>> for NodeId {
    fn from(n: Node<'_>) -> NodeId {
        n.id()
    }
}

/// Serial numbers of graphs (NodeId::graph), never reused in a process.
static NEXT_GRAPH: AtomicU64 = AtomicU64::new(1);

/// The part of a graph that nodes point to.
pub(crate) struct GraphCore {
    pub(crate) ptr: *mut sys::ctn_graph,
    pub(crate) serial: u64,
    // The first error of an operator (`a + b`), which cannot return a Result: reported by the
    // next call that uses the failed node, and by compile / grad / value.
    sticky: RefCell<Option<Error>>,
}

impl GraphCore {
    pub(crate) fn record(&self, e: Error) {
        let mut s = self.sticky.borrow_mut();
        if s.is_none() {
            *s = Some(e);
        }
    }

    fn pending(&self) -> Result<()> {
        match self.sticky.borrow().as_ref() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// The C id of `n`, checking it belongs to this graph and did not fail.
    pub(crate) fn id(&self, n: Node<'_>) -> Result<u32> {
        if n.g.ptr != self.ptr {
            return Err(Error::new(Status::INVALID_ARGUMENT, "the node belongs to another graph"));
        }
        if n.id == sys::CTN_NODE_NONE {
            self.pending()?;
            return Err(Error::new(Status::INVALID_ARGUMENT, "the node of a failed operator"));
        }
        Ok(n.id)
    }

    pub(crate) fn ids(&self, nodes: &[Node<'_>]) -> Result<Vec<u32>> {
        nodes.iter().map(|&n| self.id(n)).collect()
    }

    pub(crate) fn node(&self, st: sys::ctn_status, id: u32) -> Result<Node<'_>> {
        check(st)?;
        Ok(Node { g: self, id })
    }

    fn binary(
        &self,
        f: unsafe extern "C" fn(*mut sys::ctn_graph, u32, u32, *mut u32) -> sys::ctn_status,
        a: Node<'_>,
        b: Node<'_>,
    ) -> Result<Node<'_>> {
        let (a, b) = (self.id(a)?, self.id(b)?);
        let mut out = sys::CTN_NODE_NONE;
        // SAFETY: valid graph (alive while borrowed), valid out-pointer.
        let st = unsafe { f(self.ptr, a, b, &mut out) };
        self.node(st, out)
    }

    fn unary(
        &self,
        f: unsafe extern "C" fn(*mut sys::ctn_graph, u32, *mut u32) -> sys::ctn_status,
        a: Node<'_>,
    ) -> Result<Node<'_>> {
        let a = self.id(a)?;
        let mut out = sys::CTN_NODE_NONE;
        // SAFETY: as binary.
        let st = unsafe { f(self.ptr, a, &mut out) };
        self.node(st, out)
    }

    fn scalar(&self, dtype: Dtype, v: f64) -> Result<Node<'_>> {
        let mut out = sys::CTN_NODE_NONE;
        // SAFETY: as binary.
        let st = unsafe { sys::ctn_scalar(self.ptr, dtype.raw(), v, &mut out) };
        self.node(st, out)
    }

    fn info(&self, n: Node<'_>) -> Result<(Dtype, Vec<i64>)> {
        let id = self.id(n)?;
        let (mut d, mut ndim) = (0, 0u32);
        let mut shape = [0i64; sys::CTN_MAX_DIMS];
        // SAFETY: shape has room for the most dims a node has.
        check(unsafe { sys::ctn_node_info(self.ptr, id, &mut d, &mut ndim, shape.as_mut_ptr()) })?;
        Ok((Dtype::from_raw(d)?, shape[..(ndim as usize).min(sys::CTN_MAX_DIMS)].to_vec()))
    }
}

/// A node of a graph: a value the graph computes. `Copy`; it borrows its graph, so it cannot
/// outlive it. Arithmetic operators build ops: `&a + &b`, `a * b`, `a - 0.5`; an operator that
/// fails (shapes that do not broadcast) gives a node that makes every later call on the graph
/// return that error, including [`Graph::compile`].
#[derive(Clone, Copy)]
pub struct Node<'g> {
    pub(crate) g: &'g GraphCore,
    pub(crate) id: u32,
}

impl std::fmt::Debug for Node<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Node({})", self.id)
    }
}

impl<'g> Node<'g> {
    /// The id, for plan feeds and variables.
    pub fn id(self) -> NodeId {
        NodeId::new(self.g.serial, self.id)
    }
    /// The dtype the node computes.
    pub fn dtype(self) -> Result<Dtype> {
        Ok(self.g.info(self)?.0)
    }
    /// The shape the node computes.
    pub fn shape(self) -> Result<Vec<i64>> {
        Ok(self.g.info(self)?.1)
    }
    fn or_record(self, r: Result<Node<'g>>) -> Node<'g> {
        r.unwrap_or_else(|e| {
            self.g.record(e);
            Node { g: self.g, id: sys::CTN_NODE_NONE }
        })
    }
    fn with_scalar(self, v: f64) -> Result<Node<'g>> {
        let d = self.dtype()?;
        self.g.scalar(d, v)
    }
}

macro_rules! binop {
    ($tr:ident, $m:ident, $f:path) => {
        impl<'g> std::ops::$tr<Node<'g>> for Node<'g> {
            type Output = Node<'g>;
            fn $m(self, rhs: Node<'g>) -> Node<'g> {
                self.or_record(self.g.binary($f, self, rhs))
            }
        }
        impl<'g> std::ops::$tr<f64> for Node<'g> {
            type Output = Node<'g>;
            fn $m(self, rhs: f64) -> Node<'g> {
                let r = self.with_scalar(rhs).and_then(|s| self.g.binary($f, self, s));
                self.or_record(r)
            }
        }
    };
}
binop!(Add, add, sys::ctn_add);
binop!(Sub, sub, sys::ctn_sub);
binop!(Mul, mul, sys::ctn_mul);
binop!(Div, div, sys::ctn_div);

impl<'g> std::ops::Neg for Node<'g> {
    type Output = Node<'g>;
    fn neg(self) -> Node<'g> {
        self.or_record(self.g.unary(sys::ctn_neg, self))
    }
}

/// Attributes of [`Graph::op`]: the integer and floating slots an op reads (see ops.h).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attrs {
    /// Integer slots (at most 16).
    pub ints: Vec<i64>,
    /// Floating slots (at most 4).
    pub floats: Vec<f64>,
}

impl Attrs {
    pub(crate) fn raw(&self) -> Result<sys::ctn_attrs> {
        if self.ints.len() > sys::CTN_ATTR_INTS || self.floats.len() > sys::CTN_ATTR_FLOATS {
            return Err(Error::new(
                Status::INVALID_ARGUMENT,
                format!("attributes: {} ints, {} floats (at most 16, 4)", self.ints.len(), self.floats.len()),
            ));
        }
        let mut a = sys::ctn_attrs::default();
        a.i[..self.ints.len()].copy_from_slice(&self.ints);
        a.f[..self.floats.len()].copy_from_slice(&self.floats);
        a.ni = self.ints.len() as u32;
        a.nf = self.floats.len() as u32;
        Ok(a)
    }
}

/// A graph (`ctn_graph`) of one context, released on drop. Lazy graphs are compiled into
/// [`Plan`]s; eager graphs run each op as it is added.
///
/// `Send` but not `Sync`: a graph must not be used from two threads at once (chutney.h);
/// distinct graphs of one context may be built on different threads.
///
/// ```compile_fail,E0277
/// fn needs_sync<T: Sync>(_: &T) {}
/// let ctx = chutney::Context::new().unwrap();
/// let g = ctx.graph().unwrap();
/// needs_sync(&g); // error: a Graph is not Sync
/// ```
pub struct Graph<'ctx> {
    core: GraphCore,
    _ctx: PhantomData<&'ctx Context>,
}

// SAFETY: a ctn_graph may be used from any thread, one at a time; its context is Sync.
unsafe impl Send for Graph<'_> {}

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the handle; nodes borrowing it are gone.
        unsafe { sys::ctn_graph_release(self.core.ptr) }
    }
}

impl std::fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Graph({:p})", self.core.ptr)
    }
}

macro_rules! unary_methods {
    ($($(#[$m:meta])* $name:ident => $f:path;)*) => {$(
        $(#[$m])*
        pub fn $name(&self, a: Node<'_>) -> Result<Node<'_>> {
            self.core.unary($f, a)
        }
    )*};
}

macro_rules! binary_methods {
    ($($(#[$m:meta])* $name:ident => $f:path;)*) => {$(
        $(#[$m])*
        pub fn $name(&self, a: Node<'_>, b: Node<'_>) -> Result<Node<'_>> {
            self.core.binary($f, a, b)
        }
    )*};
}

impl<'ctx> Graph<'ctx> {
    pub(crate) fn create(ctx: &'ctx Context, flags: u32) -> Result<Graph<'ctx>> {
        let mut out = ptr::null_mut();
        // SAFETY: valid context, out-pointer.
        check(unsafe { sys::ctn_graph_create(ctx.raw(), flags, &mut out) })?;
        Ok(Graph { core: GraphCore { ptr: out, serial: NEXT_GRAPH.fetch_add(1, Ordering::Relaxed), sticky: RefCell::new(None) }, _ctx: PhantomData })
    }

    /// Takes ownership of a graph handle the library made (ctn_graph_load).
    pub(crate) fn adopt(_ctx: &'ctx Context, ptr: *mut sys::ctn_graph) -> Graph<'ctx> {
        Graph { core: GraphCore { ptr, serial: NEXT_GRAPH.fetch_add(1, Ordering::Relaxed), sticky: RefCell::new(None) }, _ctx: PhantomData }
    }

    pub(crate) fn core(&self) -> &GraphCore {
        &self.core
    }

    /// The raw handle, for calls into `chutney-sys`. Still owned by `self`.
    pub fn as_raw(&self) -> *mut sys::ctn_graph {
        self.core.ptr
    }

    /// The graph's serial number, unique in the process: what its [`NodeId`]s carry.
    pub fn serial(&self) -> u64 {
        self.core.serial
    }

    /// Returns and clears the error of a failed operator, if any.
    pub fn take_error(&self) -> Option<Error> {
        self.core.sticky.borrow_mut().take()
    }

    fn out(&self, f: impl FnOnce(*mut u32) -> sys::ctn_status) -> Result<Node<'_>> {
        self.core.pending()?;
        let mut out = sys::CTN_NODE_NONE;
        let st = f(&mut out);
        self.core.node(st, out)
    }

    /// The node of this graph with id `id` (e.g. a variable from
    /// [`crate::nn::Model::variables`]); CTN_ERR_INVALID_ARGUMENT when the graph has no such node.
    pub fn node(&self, id: NodeId) -> Result<Node<'_>> {
        self.core.pending()?;
        let index = id.of(self.core.serial, &"Graph::node")?;
        if index == sys::CTN_NODE_NONE || index >= self.node_count()? {
            return Err(Error::new(Status::INVALID_ARGUMENT, format!("the graph has no node {index}")));
        }
        Ok(Node { g: &self.core, id: index })
    }

    /// A placeholder fed at run time (lazy graphs).
    pub fn input(&self, name: &str, dtype: Dtype, shape: &[i64]) -> Result<Node<'_>> {
        crate::tensor::numel_of(shape)?;
        let n = cstring(name, "input name")?;
        // SAFETY: shape holds shape.len() (<= 8) values; n outlives the call.
        self.out(|o| unsafe {
            sys::ctn_input(self.core.ptr, n.as_ptr(), dtype.raw(), shape.len() as u32, shape.as_ptr(), o)
        })
    }

    /// A constant holding a copy of `value`.
    pub fn constant(&self, value: &Tensor) -> Result<Node<'_>> {
        // SAFETY: value is a live tensor, read during the call.
        self.out(|o| unsafe { sys::ctn_constant(self.core.ptr, value.ptr, o) })
    }

    /// A 0-d constant.
    pub fn scalar(&self, dtype: Dtype, value: f64) -> Result<Node<'_>> {
        self.core.pending()?;
        self.core.scalar(dtype, value)
    }

    /// A variable initialised from a copy of `init`, kept across runs of a plan.
    pub fn variable(&self, name: &str, init: &Tensor) -> Result<Node<'_>> {
        let n = cstring(name, "variable name")?;
        // SAFETY: live tensor, n outlives the call.
        self.out(|o| unsafe { sys::ctn_variable(self.core.ptr, n.as_ptr(), init.ptr, o) })
    }

    /// After each run, writes `value` into variable `var`; returns a node of the new value.
    pub fn assign(&self, var: Node<'_>, value: Node<'_>) -> Result<Node<'_>> {
        let (v, x) = (self.core.id(var)?, self.core.id(value)?);
        // SAFETY: valid graph.
        self.out(|o| unsafe { sys::ctn_assign(self.core.ptr, v, x, o) })
    }

    /// Any op by name (built-in or from an op library) with attributes.
    pub fn op(&self, name: &str, inputs: &[Node<'_>], attrs: Option<&Attrs>) -> Result<Node<'_>> {
        let ids = self.core.ids(inputs)?;
        let n = cstring(name, "op name")?;
        let a = attrs.map(Attrs::raw).transpose()?;
        let ap = a.as_ref().map_or(ptr::null(), |a| a as *const sys::ctn_attrs);
        // SAFETY: ids holds len values; attrs and name outlive the call.
        self.out(|o| unsafe { sys::ctn_op(self.core.ptr, n.as_ptr(), ids.len() as u32, ids.as_ptr(), ap, o) })
    }

    binary_methods! {
        /// a + b (broadcasting).
        add => sys::ctn_add;
        /// a - b (broadcasting).
        sub => sys::ctn_sub;
        /// a * b (broadcasting).
        mul => sys::ctn_mul;
        /// a / b (broadcasting).
        div => sys::ctn_div;
        /// a ^ b (broadcasting).
        pow => sys::ctn_pow;
    }

    unary_methods! {
        /// -a.
        neg => sys::ctn_neg;
        /// e^a.
        exp => sys::ctn_exp;
        /// ln a.
        log => sys::ctn_log;
        /// Square root.
        sqrt => sys::ctn_sqrt;
        /// |a|.
        abs => sys::ctn_abs;
        /// tanh a.
        tanh => sys::ctn_tanh;
        /// 1 / (1 + e^-a).
        sigmoid => sys::ctn_sigmoid;
        /// max(a, 0).
        relu => sys::ctn_relu;
        /// Exact GELU.
        gelu => sys::ctn_gelu;
        /// Swaps the last two axes.
        transpose => sys::ctn_transpose;
    }

    /// Leaky ReLU with negative slope `slope`.
    pub fn leaky_relu(&self, a: Node<'_>, slope: f64) -> Result<Node<'_>> {
        let a = self.core.id(a)?;
        // SAFETY: valid graph.
        self.out(|o| unsafe { sys::ctn_leaky_relu(self.core.ptr, a, slope, o) })
    }

    /// Clamps to [lo, hi].
    pub fn clamp(&self, a: Node<'_>, lo: f64, hi: f64) -> Result<Node<'_>> {
        let a = self.core.id(a)?;
        // SAFETY: valid graph.
        self.out(|o| unsafe { sys::ctn_clamp(self.core.ptr, a, lo, hi, o) })
    }

    /// Batched matrix product over the last two dims, optionally transposing either operand.
    pub fn matmul(&self, a: Node<'_>, b: Node<'_>, trans_a: bool, trans_b: bool) -> Result<Node<'_>> {
        let (a, b) = (self.core.id(a)?, self.core.id(b)?);
        // SAFETY: valid graph.
        self.out(|o| unsafe { sys::ctn_matmul(self.core.ptr, a, b, trans_a as i32, trans_b as i32, o) })
    }

    fn reduce(
        &self,
        f: unsafe extern "C" fn(*mut sys::ctn_graph, u32, u32, *const i32, i32, *mut u32) -> sys::ctn_status,
        a: Node<'_>,
        axes: &[i32],
        keepdims: bool,
    ) -> Result<Node<'_>> {
        let a = self.core.id(a)?;
        // SAFETY: axes holds len values.
        self.out(|o| unsafe { f(self.core.ptr, a, axes.len() as u32, axes.as_ptr(), keepdims as i32, o) })
    }

    /// Sum over `axes` (empty: all axes).
    pub fn sum(&self, a: Node<'_>, axes: &[i32], keepdims: bool) -> Result<Node<'_>> {
        self.reduce(sys::ctn_sum, a, axes, keepdims)
    }
    /// Mean over `axes` (empty: all axes).
    pub fn mean(&self, a: Node<'_>, axes: &[i32], keepdims: bool) -> Result<Node<'_>> {
        self.reduce(sys::ctn_mean, a, axes, keepdims)
    }
    /// Maximum over `axes` (empty: all axes).
    pub fn max(&self, a: Node<'_>, axes: &[i32], keepdims: bool) -> Result<Node<'_>> {
        self.reduce(sys::ctn_max, a, axes, keepdims)
    }

    /// A new shape (one dim may be -1).
    pub fn reshape(&self, a: Node<'_>, shape: &[i64]) -> Result<Node<'_>> {
        let a = self.core.id(a)?;
        if shape.len() > sys::CTN_MAX_DIMS {
            return Err(Error::new(Status::SHAPE, format!("{} dimensions", shape.len())));
        }
        // SAFETY: shape holds len values.
        self.out(|o| unsafe { sys::ctn_reshape(self.core.ptr, a, shape.len() as u32, shape.as_ptr(), o) })
    }

    /// Permutes the axes (`perm` has one entry per axis of `a`).
    pub fn permute(&self, a: Node<'_>, perm: &[i32]) -> Result<Node<'_>> {
        let ndim = a.shape()?.len();
        if perm.len() != ndim {
            return Err(Error::new(
                Status::INVALID_ARGUMENT,
                format!("permute: {} axes given for a {ndim}-d node", perm.len()),
            ));
        }
        let a = self.core.id(a)?;
        // SAFETY: perm holds ndim values, what the C call reads.
        self.out(|o| unsafe { sys::ctn_permute(self.core.ptr, a, perm.as_ptr(), o) })
    }

    /// `start..stop` by `step` along `axis`.
    pub fn slice(&self, a: Node<'_>, axis: i32, start: i64, stop: i64, step: i64) -> Result<Node<'_>> {
        let a = self.core.id(a)?;
        // SAFETY: valid graph.
        self.out(|o| unsafe { sys::ctn_slice(self.core.ptr, a, axis, start, stop, step, o) })
    }

    /// Concatenation along `axis`.
    pub fn concat(&self, inputs: &[Node<'_>], axis: i32) -> Result<Node<'_>> {
        let ids = self.core.ids(inputs)?;
        // SAFETY: ids holds len values.
        self.out(|o| unsafe { sys::ctn_concat(self.core.ptr, ids.len() as u32, ids.as_ptr(), axis, o) })
    }

    /// Broadcasts to `shape`.
    pub fn broadcast_to(&self, a: Node<'_>, shape: &[i64]) -> Result<Node<'_>> {
        let a = self.core.id(a)?;
        crate::tensor::numel_of(shape)?;
        // SAFETY: shape holds len (<= 8) values.
        self.out(|o| unsafe { sys::ctn_broadcast_to(self.core.ptr, a, shape.len() as u32, shape.as_ptr(), o) })
    }

    /// Comparison giving a bool node: `op` is "eq", "ne", "lt", "le", "gt" or "ge".
    pub fn compare(&self, op: &str, a: Node<'_>, b: Node<'_>) -> Result<Node<'_>> {
        let (a, b) = (self.core.id(a)?, self.core.id(b)?);
        let op = cstring(op, "comparison")?;
        // SAFETY: op outlives the call.
        self.out(|o| unsafe { sys::ctn_compare(self.core.ptr, op.as_ptr(), a, b, o) })
    }

    /// `cond ? a : b`, elementwise with broadcasting.
    pub fn where_(&self, cond: Node<'_>, a: Node<'_>, b: Node<'_>) -> Result<Node<'_>> {
        let (c, a, b) = (self.core.id(cond)?, self.core.id(a)?, self.core.id(b)?);
        // SAFETY: valid graph.
        self.out(|o| unsafe { sys::ctn_where(self.core.ptr, c, a, b, o) })
    }

    /// Softmax along `axis`.
    pub fn softmax(&self, a: Node<'_>, axis: i32) -> Result<Node<'_>> {
        let a = self.core.id(a)?;
        // SAFETY: valid graph.
        self.out(|o| unsafe { sys::ctn_softmax(self.core.ptr, a, axis, o) })
    }

    /// Log-softmax along `axis`.
    pub fn log_softmax(&self, a: Node<'_>, axis: i32) -> Result<Node<'_>> {
        let a = self.core.id(a)?;
        // SAFETY: valid graph.
        self.out(|o| unsafe { sys::ctn_log_softmax(self.core.ptr, a, axis, o) })
    }

    /// Mean cross-entropy of logits `[N, C]` against integer labels `[N]`.
    pub fn cross_entropy(&self, logits: Node<'_>, labels: Node<'_>) -> Result<Node<'_>> {
        self.core.binary(sys::ctn_cross_entropy, logits, labels)
    }

    /// Converts to `dtype`.
    pub fn cast(&self, a: Node<'_>, dtype: Dtype) -> Result<Node<'_>> {
        let a = self.core.id(a)?;
        // SAFETY: valid graph.
        self.out(|o| unsafe { sys::ctn_cast(self.core.ptr, a, dtype.raw(), o) })
    }

    /// 2-d convolution of x `[N,C,H,W]` with w `[O,C/groups,KH,KW]`, symmetric stride, padding
    /// and dilation.
    pub fn conv2d(&self, x: Node<'_>, w: Node<'_>, stride: i32, pad: i32, dilation: i32, groups: i32) -> Result<Node<'_>> {
        let (x, w) = (self.core.id(x)?, self.core.id(w)?);
        // SAFETY: valid graph.
        self.out(|o| unsafe {
            sys::ctn_conv2d(self.core.ptr, x, w, stride, stride, pad, pad, dilation, dilation, groups, o)
        })
    }

    /// Max pooling with a square window `k`, stride `s` (0: k), padding `p`.
    pub fn max_pool2d(&self, x: Node<'_>, k: i32, s: i32, p: i32) -> Result<Node<'_>> {
        let x = self.core.id(x)?;
        // SAFETY: valid graph.
        self.out(|o| unsafe { sys::ctn_max_pool2d(self.core.ptr, x, k, k, s, s, p, p, o) })
    }

    /// Average pooling with a square window `k`, stride `s` (0: k), padding `p` (counted).
    pub fn avg_pool2d(&self, x: Node<'_>, k: i32, s: i32, p: i32) -> Result<Node<'_>> {
        let x = self.core.id(x)?;
        // SAFETY: valid graph.
        self.out(|o| unsafe { sys::ctn_avg_pool2d(self.core.ptr, x, k, k, s, s, p, p, 1, o) })
    }

    /// Transposed convolution (the adjoint of conv2d w.r.t. its input), symmetric parameters.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_transpose2d(&self, x: Node<'_>, w: Node<'_>, stride: i32, pad: i32, dilation: i32, groups: i32, out_pad: i32) -> Result<Node<'_>> {
        let (x, w) = (self.core.id(x)?, self.core.id(w)?);
        // SAFETY: valid graph.
        self.out(|o| unsafe {
            sys::ctn_conv_transpose2d(self.core.ptr, x, w, stride, stride, pad, pad, dilation, dilation, groups, out_pad, out_pad, o)
        })
    }

    /// Batch normalisation with batch statistics (training mode).
    pub fn batch_norm(&self, x: Node<'_>, gamma: Node<'_>, beta: Node<'_>, eps: f64) -> Result<Node<'_>> {
        let (x, g, b) = (self.core.id(x)?, self.core.id(gamma)?, self.core.id(beta)?);
        // SAFETY: valid graph.
        self.out(|o| unsafe { sys::ctn_batch_norm(self.core.ptr, x, g, b, eps, o) })
    }

    /// Batch normalisation with given statistics (inference mode).
    pub fn batch_norm_inference(&self, x: Node<'_>, gamma: Node<'_>, beta: Node<'_>, mean: Node<'_>, var: Node<'_>, eps: f64) -> Result<Node<'_>> {
        let (x, g, b) = (self.core.id(x)?, self.core.id(gamma)?, self.core.id(beta)?);
        let (m, v) = (self.core.id(mean)?, self.core.id(var)?);
        // SAFETY: valid graph.
        self.out(|o| unsafe { sys::ctn_batch_norm_inference(self.core.ptr, x, g, b, m, v, eps, o) })
    }

    /// Dropout with probability `p`, mask from (seed, the value of `step`, element index).
    pub fn dropout(&self, x: Node<'_>, step: Node<'_>, p: f64, seed: i64) -> Result<Node<'_>> {
        let (x, s) = (self.core.id(x)?, self.core.id(step)?);
        // SAFETY: valid graph.
        self.out(|o| unsafe { sys::ctn_dropout(self.core.ptr, x, s, p, seed, o) })
    }

    /// Layer normalisation over axes `first_axis..`.
    pub fn layer_norm(&self, x: Node<'_>, gamma: Node<'_>, beta: Node<'_>, first_axis: i32, eps: f64) -> Result<Node<'_>> {
        let (x, g, b) = (self.core.id(x)?, self.core.id(gamma)?, self.core.id(beta)?);
        // SAFETY: valid graph.
        self.out(|o| unsafe { sys::ctn_layer_norm(self.core.ptr, x, g, b, first_axis, eps, o) })
    }

    /// Rows of `table [V,D]` picked by integer `ids`.
    pub fn embedding(&self, table: Node<'_>, ids: Node<'_>) -> Result<Node<'_>> {
        self.core.binary(sys::ctn_embedding, table, ids)
    }

    /// Reverse-mode autodiff: the gradient nodes of `loss` with respect to each of `wrt`.
    pub fn grad(&self, loss: Node<'_>, wrt: &[Node<'_>]) -> Result<Vec<Node<'_>>> {
        self.core.pending()?;
        let l = self.core.id(loss)?;
        let ids = self.core.ids(wrt)?;
        let mut out = vec![sys::CTN_NODE_NONE; ids.len()];
        // SAFETY: ids and out hold len values.
        check(unsafe { sys::ctn_grad(self.core.ptr, l, ids.len() as u32, ids.as_ptr(), out.as_mut_ptr()) })?;
        Ok(out.into_iter().map(|id| Node { g: &self.core, id }).collect())
    }

    /// Eager graphs: a copy of the value of `n`.
    pub fn value(&self, n: Node<'_>) -> Result<Tensor> {
        self.core.pending()?;
        let id = self.core.id(n)?;
        let mut out = ptr::null_mut();
        // SAFETY: valid graph and out-pointer.
        check(unsafe { sys::ctn_graph_value(self.core.ptr, id, &mut out) })?;
        // SAFETY: a new handle we own.
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// Eager graphs: the backend that computed `n` ("" for leaves).
    pub fn node_backend(&self, n: Node<'_>) -> Result<String> {
        let id = self.core.id(n)?;
        let mut s = ptr::null();
        // SAFETY: the string is owned by the context and copied at once.
        check(unsafe { sys::ctn_graph_node_backend(self.core.ptr, id, &mut s) })?;
        // SAFETY: valid string from the library.
        Ok(unsafe { cstr(s) })
    }

    /// Number of nodes.
    pub fn node_count(&self) -> Result<u32> {
        let mut n = 0;
        // SAFETY: valid graph and out-pointer.
        check(unsafe { sys::ctn_graph_node_count(self.core.ptr, &mut n) })?;
        Ok(n)
    }

    /// The graph in Graphviz DOT.
    pub fn to_dot(&self) -> Result<String> {
        let mut s = ptr::null();
        // SAFETY: the buffer is owned by the graph, valid until the next call on it; copied.
        check(unsafe { sys::ctn_graph_to_dot(self.core.ptr, &mut s) })?;
        // SAFETY: valid string.
        Ok(unsafe { cstr(s) })
    }

    /// Compiles the part of the graph needed for `outputs` (and every assign) into a plan.
    /// Reports the error of a failed operator first.
    pub fn compile(&self, outputs: &[Node<'_>]) -> Result<Plan<'ctx>> {
        self.compile_with(outputs, &CompileOptions::default())
    }

    /// [`Graph::compile`] with options.
    pub fn compile_with(&self, outputs: &[Node<'_>], options: &CompileOptions) -> Result<Plan<'ctx>> {
        if let Some(e) = self.take_error() {
            return Err(e);
        }
        let ids = self.core.ids(outputs)?;
        let backends = options.backends.as_deref().map(|b| cstring(b, "backends")).transpose()?;
        let o = sys::ctn_compile_options {
            struct_size: std::mem::size_of::<sys::ctn_compile_options>() as u32,
            disable: options.disable,
            backends: backends.as_ref().map_or(ptr::null(), |b| b.as_ptr()),
            data_parallel: ptr::null_mut(),
            dp_bucket_bytes: 0,
            memory_budget: options.memory_budget,
            precision: sys::CTN_PRECISION_F32,
            dp_flags: 0,
            dp_reserved: 0,
        };
        let mut out = ptr::null_mut();
        // SAFETY: ids holds len values; o and its string outlive the call.
        check(unsafe { sys::ctn_plan_compile(self.core.ptr, ids.len() as u32, ids.as_ptr(), &o, &mut out) })?;
        // SAFETY: a new plan we own, of this graph's context.
        Ok(unsafe { Plan::from_raw(out, ids.len(), self.core.serial) })
    }
}
