//! Whole graphs in one file and ONNX export (docs/MODELS.md; checkpoint.h and onnx.h, since 1.3).
use crate::checkpoint::path_cstring;
use crate::error::{check, cstr, cstring, Result};
use crate::{Context, Graph, NodeId, Plan};
use chutney_sys as sys;
use std::ffi::CString;
use std::path::Path;
use std::ptr;

/// Output names as C strings and ids (checked to be nodes of `graph`), for `ctn_graph_save` /
/// `ctn_onnx_export`.
fn outputs_c(graph: &Graph<'_>, outputs: &[(&str, NodeId)]) -> Result<(Vec<CString>, Vec<*const sys::c_char>, Vec<u32>)> {
    let names = outputs.iter().map(|(n, _)| cstring(n, "output name")).collect::<Result<Vec<_>>>()?;
    let ptrs = names.iter().map(|n| n.as_ptr()).collect();
    let ids = outputs
        .iter()
        .enumerate()
        .map(|(i, (_, id))| id.of(graph.serial(), &format_args!("output {i}")))
        .collect::<Result<Vec<_>>>()?;
    Ok((names, ptrs, ids))
}

fn plan_ptr(plan: Option<&Plan<'_>>) -> *mut sys::ctn_plan {
    plan.map_or(ptr::null_mut(), |p| p.as_raw())
}

/// Saves every node of lazy `graph`, its weights (the current values in `plan` of the variables
/// it uses, else their initial values) and the named `outputs` to `path`, atomically.
/// `metadata_json` is None or a JSON object of strings (keys not starting with "chutney.").
pub fn save(
    graph: &Graph<'_>,
    plan: Option<&Plan<'_>>,
    outputs: &[(&str, NodeId)],
    metadata_json: Option<&str>,
    path: &Path,
) -> Result<()> {
    let (_names, ptrs, ids) = outputs_c(graph, outputs)?;
    let p = path_cstring(path)?;
    let m = metadata_json.map(|m| cstring(m, "metadata")).transpose()?;
    // SAFETY: arrays of outputs.len() values; the strings outlive the call; the plan (when given)
    // and the graph are borrowed for it.
    check(unsafe {
        sys::ctn_graph_save(
            graph.as_raw(),
            plan_ptr(plan),
            ids.len() as u32,
            ids.as_ptr(),
            ptrs.as_ptr(),
            m.as_ref().map_or(ptr::null(), |m| m.as_ptr()),
            p.as_ptr(),
        )
    })
}

/// Writes the part of lazy `graph` that `outputs` depend on as an ONNX model (opset 13) to
/// `path`, atomically; variables take their values in `plan` when given. An op without an ONNX
/// form fails with `Status::UNSUPPORTED` naming it.
pub fn export_onnx(graph: &Graph<'_>, plan: Option<&Plan<'_>>, outputs: &[(&str, NodeId)], path: &Path) -> Result<()> {
    let (_names, ptrs, ids) = outputs_c(graph, outputs)?;
    let p = path_cstring(path)?;
    // SAFETY: as in save.
    check(unsafe {
        sys::ctn_onnx_export(graph.as_raw(), plan_ptr(plan), ids.len() as u32, ids.as_ptr(), ptrs.as_ptr(), p.as_ptr())
    })
}

/// What a loaded graph file lists (`ctn_saved_graph`), immutable; released on drop.
pub struct SavedGraph {
    ptr: *mut sys::ctn_saved_graph,
    graph: u64, // serial of the graph loaded with it: the ids it lists are that graph's
}

// SAFETY: the handle is immutable after loading; its getters are thread-safe (checkpoint.h).
unsafe impl Send for SavedGraph {}
unsafe impl Sync for SavedGraph {}

release_on_drop!(SavedGraph => sys::ctn_saved_graph_release);

impl SavedGraph {
    fn list(&self, kind: i32) -> Result<Vec<(String, NodeId)>> {
        let mut n = 0u32;
        // SAFETY: valid handle and out-pointer.
        check(unsafe { sys::ctn_saved_graph_count(self.ptr, kind, &mut n) })?;
        let mut out = Vec::with_capacity(n as usize);
        for i in 0..n {
            let mut name = ptr::null();
            let mut node = sys::CTN_NODE_NONE;
            // SAFETY: i < n; the name is owned by the handle and copied at once.
            check(unsafe { sys::ctn_saved_graph_entry(self.ptr, kind, i, &mut name, &mut node) })?;
            out.push((unsafe { cstr(name) }, NodeId::new(self.graph, node)));
        }
        Ok(out)
    }

    /// The graph's inputs (`ctn_input` nodes), in id order.
    pub fn inputs(&self) -> Result<Vec<(String, NodeId)>> {
        self.list(sys::CTN_SAVED_INPUTS)
    }

    /// The outputs named when the graph was saved, in that order.
    pub fn outputs(&self) -> Result<Vec<(String, NodeId)>> {
        self.list(sys::CTN_SAVED_OUTPUTS)
    }

    /// The variables, in id order.
    pub fn variables(&self) -> Result<Vec<(String, NodeId)>> {
        self.list(sys::CTN_SAVED_VARIABLES)
    }

    /// The value of the caller's metadata key `key`, or None.
    pub fn metadata(&self, key: &str) -> Result<Option<String>> {
        let k = cstring(key, "key")?;
        let mut v = ptr::null();
        // SAFETY: valid handle, string and out-pointer; the value is copied at once.
        check(unsafe { sys::ctn_saved_graph_metadata_get(self.ptr, k.as_ptr(), &mut v) })?;
        Ok(if v.is_null() { None } else { Some(unsafe { cstr(v) }) })
    }
}

/// Loads a graph file written by [`save`] (or `ctn_graph_save`) into a new lazy graph of `ctx`.
/// A damaged file fails with `Status::CORRUPT` naming the file and the node; an op `ctx` does not
/// know (an op library not loaded) with `Status::UNSUPPORTED` naming it.
pub fn load<'ctx>(ctx: &'ctx Context, path: &Path) -> Result<(Graph<'ctx>, SavedGraph)> {
    let p = path_cstring(path)?;
    let mut g = ptr::null_mut();
    let mut s = ptr::null_mut();
    // SAFETY: valid context, string and out-pointers; both handles are owned on success.
    check(unsafe { sys::ctn_graph_load(ctx.raw(), p.as_ptr(), &mut g, &mut s) })?;
    let graph = Graph::adopt(ctx, g);
    let serial = graph.serial();
    Ok((graph, SavedGraph { ptr: s, graph: serial }))
}
