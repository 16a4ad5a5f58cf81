//! ONNX import (onnx.h, since 1.2): [`load`] reads an ONNX model into a new lazy graph,
//! [`OnnxModel`] names its inputs, outputs and initializers as nodes of that graph, and
//! [`load_tensor`] reads a serialized `TensorProto`. Export is [`crate::model_file::export_onnx`].
//! docs/ONNX.md lists the supported ops, opsets and dtypes.
use crate::checkpoint::path_cstring;
use crate::error::{check, cstr, cstring, Result};
use crate::{Context, Graph, NodeId, Tensor};
use chutney_sys as sys;
use std::ffi::CString;
use std::path::Path;
use std::ptr;

/// A value for one graph input of the model, by name: its dtype and shape replace the model's
/// (how a symbolic dimension gets its size); with `as_constant` the value is baked into the
/// graph as a constant (no input node), for inputs ops need as constants (a Reshape's shape...).
#[derive(Debug, Clone, Copy)]
pub struct OnnxInput<'a> {
    /// The ONNX graph input's name.
    pub name: &'a str,
    /// Its value.
    pub value: &'a Tensor,
    /// Bake the value in as a constant.
    pub as_constant: bool,
}

/// Options of [`load`] / [`inspect`]; `OnnxOptions::default()` is the default.
#[derive(Debug, Clone, Default)]
pub struct OnnxOptions<'a> {
    /// Values or shapes for graph inputs.
    pub inputs: Vec<OnnxInput<'a>>,
    /// Floating initializers become constants instead of variables.
    pub initializers_as_constants: bool,
    /// Where external data files are; None: the model's directory.
    pub external_data_dir: Option<&'a Path>,
}

/// One op type a model uses: how many nodes use it, whether the importer supports it and, when
/// imported, the chutney ops it was lowered to (empty when folded or for [`inspect`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnnxOpType {
    /// The ONNX op type ("MatMul").
    pub name: String,
    /// Nodes using it.
    pub uses: u32,
    /// Whether the importer supports it with the model's opset.
    pub supported: bool,
    /// The chutney ops it became.
    pub lowered_to: Vec<String>,
}

/// What an imported model lists (`ctn_onnx_model`), immutable; released on drop (not the graph).
pub struct OnnxModel {
    ptr: *mut sys::ctn_onnx_model,
    graph: Option<u64>, // serial of the graph loaded with it; None for inspect
}

// SAFETY: the handle is immutable after loading; its getters only read it.
unsafe impl Send for OnnxModel {}
unsafe impl Sync for OnnxModel {}

release_on_drop!(OnnxModel => sys::ctn_onnx_model_release);

impl OnnxModel {
    fn count(&self, kind: i32) -> Result<u32> {
        let mut n = 0u32;
        // SAFETY: valid handle and out-pointer.
        check(unsafe { sys::ctn_onnx_model_count(self.ptr, kind, &mut n) })?;
        Ok(n)
    }

    fn list(&self, kind: i32) -> Result<Vec<(String, Option<NodeId>)>> {
        let n = self.count(kind)?;
        let mut out = Vec::with_capacity(n as usize);
        for i in 0..n {
            let mut name = ptr::null();
            let mut node = sys::CTN_NODE_NONE;
            // SAFETY: i < n; the name is owned by the handle and copied at once.
            check(unsafe { sys::ctn_onnx_model_entry(self.ptr, kind, i, &mut name, &mut node) })?;
            let id = match self.graph {
                Some(g) if node != sys::CTN_NODE_NONE => Some(NodeId::new(g, node)),
                _ => None,
            };
            out.push((unsafe { cstr(name) }, id));
        }
        Ok(out)
    }

    /// The graph inputs (not initializers) in model order with their input nodes; None for an
    /// input bound as a constant and for [`inspect`].
    pub fn inputs(&self) -> Result<Vec<(String, Option<NodeId>)>> {
        self.list(sys::CTN_ONNX_INPUTS)
    }

    /// The graph outputs in model order with the nodes computing them (None for [`inspect`]).
    pub fn outputs(&self) -> Result<Vec<(String, Option<NodeId>)>> {
        self.list(sys::CTN_ONNX_OUTPUTS)
    }

    /// The initializers in model order with their variable or constant nodes.
    pub fn initializers(&self) -> Result<Vec<(String, Option<NodeId>)>> {
        self.list(sys::CTN_ONNX_INITIALIZERS)
    }

    /// The distinct op types, in first-use order.
    pub fn op_types(&self) -> Result<Vec<OnnxOpType>> {
        let n = self.count(sys::CTN_ONNX_OP_TYPES)?;
        let mut out = Vec::with_capacity(n as usize);
        for i in 0..n {
            let (mut name, mut lowered) = (ptr::null(), ptr::null());
            let (mut uses, mut supported) = (0u32, 0i32);
            // SAFETY: i < n; valid out-pointers; the strings are owned by the handle and copied.
            check(unsafe {
                sys::ctn_onnx_model_entry(self.ptr, sys::CTN_ONNX_OP_TYPES, i, &mut name, ptr::null_mut())
            })?;
            check(unsafe { sys::ctn_onnx_model_op_type(self.ptr, i, &mut uses, &mut supported, &mut lowered) })?;
            let lowered = unsafe { cstr(lowered) };
            out.push(OnnxOpType {
                name: unsafe { cstr(name) },
                uses,
                supported: supported != 0,
                lowered_to: lowered.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect(),
            });
        }
        Ok(out)
    }

    /// The default-domain opset the model imports and its IR version.
    pub fn version(&self) -> Result<(i64, i64)> {
        let (mut opset, mut ir) = (0i64, 0i64);
        // SAFETY: valid handle and out-pointers.
        check(unsafe { sys::ctn_onnx_model_version(self.ptr, &mut opset, &mut ir) })?;
        Ok((opset, ir))
    }
}

fn call(
    ctx: &Context,
    path: &Path,
    opts: &OnnxOptions<'_>,
    flags: u32,
) -> Result<(*mut sys::ctn_graph, *mut sys::ctn_onnx_model)> {
    let p = path_cstring(path)?;
    let names = opts.inputs.iter().map(|i| cstring(i.name, "input name")).collect::<Result<Vec<CString>>>()?;
    let specs: Vec<sys::ctn_onnx_input_spec> = opts
        .inputs
        .iter()
        .zip(&names)
        .map(|(i, n)| sys::ctn_onnx_input_spec {
            name: n.as_ptr(),
            value: i.value.as_raw(),
            as_constant: u32::from(i.as_constant),
            reserved: 0,
        })
        .collect();
    let dir = opts.external_data_dir.map(path_cstring).transpose()?;
    let o = sys::ctn_onnx_options {
        struct_size: std::mem::size_of::<sys::ctn_onnx_options>() as u32,
        flags: flags | if opts.initializers_as_constants { sys::CTN_ONNX_INITIALIZERS_AS_CONSTANTS } else { 0 },
        n_inputs: specs.len() as u32,
        reserved: 0,
        inputs: if specs.is_empty() { ptr::null() } else { specs.as_ptr() },
        external_data_dir: dir.as_ref().map_or(ptr::null(), |d| d.as_ptr()),
    };
    let (mut g, mut m) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: the options, specs, strings and tensors outlive the call (the library copies what
    // it keeps); both handles are owned on success.
    check(unsafe { sys::ctn_onnx_load(ctx.raw(), p.as_ptr(), &o, &mut g, &mut m) })?;
    Ok((g, m))
}

/// Loads the ONNX model at `path` into a new lazy graph of `ctx`: one input node per graph
/// input, initializers as variables (or constants), each ONNX node lowered to chutney ops.
/// Errors: `Status::INVALID_ARGUMENT` (an input name the model lacks, a symbolic input dimension
/// not given), `IO`, `CORRUPT` (a malformed file), `UNSUPPORTED` (names the node and what is
/// missing), `SHAPE` / `DTYPE`.
pub fn load<'ctx>(ctx: &'ctx Context, path: &Path, opts: &OnnxOptions<'_>) -> Result<(Graph<'ctx>, OnnxModel)> {
    let (g, m) = call(ctx, path, opts, 0)?;
    let graph = Graph::adopt(ctx, g);
    let serial = graph.serial();
    Ok((graph, OnnxModel { ptr: m, graph: Some(serial) }))
}

/// Parses and checks the model only (`CTN_ONNX_INSPECT_ONLY`): no graph; the listing has no
/// nodes and says for each op type whether the importer supports it.
pub fn inspect(ctx: &Context, path: &Path, opts: &OnnxOptions<'_>) -> Result<OnnxModel> {
    let (_, m) = call(ctx, path, opts, sys::CTN_ONNX_INSPECT_ONLY)?;
    Ok(OnnxModel { ptr: m, graph: None })
}

/// Reads a serialized `TensorProto` file (the input_N.pb / output_N.pb files of ONNX's backend
/// test cases) into a new tensor; returns it with the tensor's name. Errors: `IO`, `CORRUPT`,
/// `UNSUPPORTED` (a dtype chutney lacks).
pub fn load_tensor(path: &Path) -> Result<(Tensor, String)> {
    let p = path_cstring(path)?;
    let mut t = ptr::null_mut();
    let mut name = ptr::null();
    // SAFETY: valid string and out-pointers; the name is in a thread-local buffer, copied before
    // any other call on this thread.
    check(unsafe { sys::ctn_onnx_tensor_load(p.as_ptr(), &mut t, &mut name) })?;
    let name = unsafe { cstr(name) };
    // SAFETY: a new handle we own.
    Ok((unsafe { Tensor::from_raw(t) }, name))
}
