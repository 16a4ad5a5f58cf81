//! Compares the Rust declarations with the C probe (build.rs): size, alignment and every field
//! offset of every struct, the value of every constant; and checks that the probe lists every
//! struct, field and constant of the covered headers, so a header change cannot slip past.
mod common;

use chutney_sys::*;
use std::collections::{BTreeMap, BTreeSet};
use std::mem::{align_of, size_of, MaybeUninit};

/// offset_of! for Rust 1.63 (std's macro is 1.77+): the address of a field of an
/// uninitialised value, no reference to uninitialised memory taken.
macro_rules! offset {
    ($t:ty, $f:ident) => {{
        let u = MaybeUninit::<$t>::uninit();
        let base = u.as_ptr();
        // SAFETY: addr_of! computes the address without reading or referencing the field.
        let field = unsafe { std::ptr::addr_of!((*base).$f) };
        field as usize - base as usize
    }};
}

/// Lines "size T n", "align T n", "offset T.f n" as the probe prints them.
macro_rules! layout {
    ($out:ident; $($t:ident { $($f:ident $(= $cname:ident)?),* })*) => {$(
        $out.push(format!("size {} {}", stringify!($t), size_of::<$t>()));
        $out.push(format!("align {} {}", stringify!($t), align_of::<$t>()));
        $(
            #[allow(unused_variables)]
            let cname = stringify!($f);
            $(let cname = stringify!($cname);)?
            $out.push(format!("offset {}.{} {}", stringify!($t), cname, offset!($t, $f)));
        )*
    )*};
}

macro_rules! consts {
    ($out:ident; $($c:ident)*) => {$( $out.push(format!("const {} {}", stringify!($c), $c as i64)); )*};
}

fn rust_lines() -> Vec<String> {
    let mut v = Vec::new();
    layout! { v;
        ctn_attrs { i, f, ni, nf }
        ctn_tensor_desc { data, offset, dtype, ndim, shape, strides }
        ctn_kernel_args { n_inputs, n_outputs, inputs, outputs, attrs, workspace, workspace_size }
        ctn_kernel { fn_ = fn, state, release, workspace_size, flags, reserved }
        ctn_context_options { struct_size, flags, plugin_path, backends, num_threads, reserved }
        ctn_backend_info { struct_size, available, name, description, path, abi_major, abi_minor }
        ctn_run_options { struct_size, flags, cancel, timeout_us }
        ctn_onnx_input_spec { name, value, as_constant, reserved }
        ctn_onnx_options { struct_size, flags, n_inputs, reserved, inputs, external_data_dir }
        ctn_compile_options { struct_size, disable, backends, data_parallel, dp_bucket_bytes,
            memory_budget }
        ctn_plan_memory_report { struct_size, n_recomputed, budget, peak_without_budget,
            peak_bytes, minimum_bytes, flops, extra_flops, recomputed }
        ctn_op_info { struct_size, n_inputs, name, attributes, doc, origin, origin_path,
            differentiable, flags }
        ctn_collective_config { struct_size, rank, world_size, reserved, rendezvous, timeout_s }
        ctn_collective_desc { header, flags, reserved, probe, init, shutdown, describe, rank,
            world_size, allreduce, broadcast, barrier, abort, last_error }
        ctn_plan_stats { struct_size, n_nodes, n_steps, n_fused, n_folded, n_inplace,
            planned_peak_bytes, naive_bytes, persistent_bytes, n_assign_elided, reserved }
        ctn_layer { kind, units, kernel, stride, pad, flags, p, eps, name }
        ctn_optimizer { struct_size, kind, lr, momentum, nesterov, reserved, weight_decay, beta1,
            beta2, eps, clip_norm }
        ctn_lr_schedule { kind, reserved, base_lr, warmup_steps, step_size, gamma, total_steps,
            min_lr }
        ctn_dataset_info { struct_size, num_classes, count, rows, cols }
        ctn_loader_options { struct_size, flags, batch_size, crop_padding, seed, mean, std,
            num_workers, prefetch, shard_index, shard_count }
        ctn_loader_stats { struct_size, num_workers, batches, samples, waits, wait_seconds,
            copy_seconds, worker_seconds }
        ctn_plugin_header { struct_size, abi_major, abi_minor, kind, reserved, name }
        ctn_host_api { struct_size, abi_major, abi_minor, set_error, log, graph_op, graph_scalar,
            graph_node_info, set_error_message, backend_proc }
        ctn_opencl_interop { struct_size, version, platform, device, context, queue,
            get_function, fp64, reserved }
        ctn_vulkan_commands { struct_size, reserved, command_buffer, descriptor_pool, token }
        ctn_vulkan_interop { struct_size, version, instance, physical_device, device, queue,
            queue_family, api_version, get_instance_proc_addr, shader_float64, reserved,
            storage_offset_alignment, max_storage_range, buffer_info, begin_commands,
            end_commands }
        ctn_cuda_interop { struct_size, version, device, compute_capability, context, stream,
            get_driver_function }
        ctn_op_kernel { struct_size, reserved, backend, make, run }
        ctn_oplib_kernel { backend, get_kernel }
        ctn_op_def { struct_size, n_inputs, name, doc, infer, grad, n_kernels, kernels, user_data,
            infer_ex, grad_ex, n_kernels_ex, reserved, kernels_ex, jvp_ex }
        ctn_oplib_desc { header, init, shutdown, n_ops, ops }
        ctn_dtype {} ctn_init {} ctn_layer_kind {} ctn_status {} ctn_node {}
    }
    consts! { v;
        CTN_ABI_MAJOR CTN_ABI_MINOR CTN_ABI_VERSION CTN_OPENCL_INTEROP_VERSION CTN_VULKAN_INTEROP_VERSION CTN_CUDA_INTEROP_VERSION CTN_VERSION_MAJOR CTN_VERSION_MINOR
        CTN_VERSION_PATCH
        CTN_OK CTN_ERR_INVALID_ARGUMENT CTN_ERR_SHAPE CTN_ERR_DTYPE CTN_ERR_OUT_OF_MEMORY
        CTN_ERR_UNAVAILABLE CTN_ERR_UNSUPPORTED CTN_ERR_PLUGIN CTN_ERR_IO CTN_ERR_CORRUPT
        CTN_ERR_STATE CTN_ERR_INTERNAL CTN_ERR_CANCELLED CTN_ERR_NUMERICS CTN_RUN_CHECK_NUMERICS
        CTN_F32 CTN_F64 CTN_I32 CTN_I64 CTN_U8 CTN_BOOL CTN_DTYPE_COUNT_V1
        CTN_MAX_DIMS CTN_NODE_NONE CTN_ATTR_INTS CTN_ATTR_FLOATS
        CTN_KERNEL_INPLACE_OK CTN_CONTEXT_NO_AUTOLOAD CTN_GRAPH_EAGER
        CTN_PASS_DCE CTN_PASS_CONSTANT_FOLDING CTN_PASS_SIMPLIFY CTN_PASS_FUSION
        CTN_PASS_MEMORY_REUSE
        CTN_INIT_ZEROS CTN_INIT_ONES CTN_INIT_KAIMING_UNIFORM CTN_INIT_KAIMING_NORMAL
        CTN_INIT_XAVIER_UNIFORM CTN_INIT_XAVIER_NORMAL CTN_INIT_UNIFORM CTN_INIT_NORMAL
        CTN_VAR_PARAMETER CTN_VAR_BUFFER CTN_VAR_OPTIMIZER
        CTN_SAVED_INPUTS CTN_SAVED_OUTPUTS CTN_SAVED_VARIABLES
        CTN_ONNX_INITIALIZERS_AS_CONSTANTS CTN_ONNX_INSPECT_ONLY CTN_ONNX_INPUTS CTN_ONNX_OUTPUTS
        CTN_ONNX_INITIALIZERS CTN_ONNX_OP_TYPES
        CTN_LAYER_LINEAR CTN_LAYER_CONV2D CTN_LAYER_BATCH_NORM CTN_LAYER_DROPOUT
        CTN_LAYER_RELU CTN_LAYER_TANH CTN_LAYER_SIGMOID CTN_LAYER_MAX_POOL2D
        CTN_LAYER_AVG_POOL2D CTN_LAYER_FLATTEN CTN_LAYER_LAYER_NORM CTN_LAYER_NO_BIAS
        CTN_OPTIM_SGD CTN_OPTIM_ADAM CTN_OPTIM_ADAMW
        CTN_LR_CONSTANT CTN_LR_STEP CTN_LR_COSINE CTN_LR_LINEAR
        CTN_LOADER_SHUFFLE CTN_LOADER_DROP_LAST CTN_LOADER_FLAT CTN_LOADER_HFLIP
        CTN_LOADER_SYNCHRONOUS
        CTN_PLUGIN_BACKEND CTN_PLUGIN_OPLIB CTN_PLUGIN_COLLECTIVE_KIND CTN_OP_INFO_ELEMENTWISE
        CTN_PLUGIN_COLLECTIVE CTN_COLLECTIVE_HOST_MEMORY CTN_REDUCE_SUM CTN_REDUCE_MEAN
        CTN_DP_DEFAULT_BUCKET_BYTES CTN_MEMORY_BUDGET_AUTO CTN_LOG_DEBUG CTN_LOG_INFO CTN_LOG_WARN CTN_LOG_ERROR
    }
    let dir = std::str::from_utf8(&CTN_FASHION_MNIST_DIR[..CTN_FASHION_MNIST_DIR.len() - 1]);
    v.push(format!("string CTN_FASHION_MNIST_DIR {}", dir.unwrap()));
    let sym = std::str::from_utf8(&CTN_PLUGIN_ENTRY_SYMBOL[..CTN_PLUGIN_ENTRY_SYMBOL.len() - 1]);
    v.push(format!("string CTN_PLUGIN_ENTRY_SYMBOL {}", sym.unwrap()));
    v
}

fn probe_lines() -> Vec<String> {
    let lines: Vec<String> = common::PROBE
        .lines()
        .filter(|l| !l.starts_with("include "))
        .map(str::to_string)
        .collect();
    if let Some(err) = lines.iter().find(|l| l.starts_with("error ")) {
        panic!("the C layout probe did not run (build.rs): {err}");
    }
    lines
}

#[test]
fn rust_layout_and_constants_match_the_c_probe() {
    let c: BTreeSet<String> = probe_lines().into_iter().collect();
    let r: BTreeSet<String> = rust_lines().into_iter().collect();
    assert!(c.len() > 200, "the probe printed only {} lines", c.len());
    let only_c: Vec<_> = c.difference(&r).collect();
    let only_r: Vec<_> = r.difference(&c).collect();
    assert!(
        only_c.is_empty() && only_r.is_empty(),
        "C probe and Rust differ.\n  C says: {only_c:#?}\n  Rust says: {only_r:#?}"
    );
}

/// struct name -> field names, from "typedef struct X { ... } X;" in the covered headers.
fn header_structs() -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for h in common::COVERED {
        let text = common::header(h);
        for (i, _) in text.match_indices("typedef struct ") {
            let rest = &text[i + 15..];
            let brace = match rest.find(['{', ';'].as_ref()) {
                Some(b) if rest.as_bytes()[b] == b'{' => b,
                _ => continue, // an opaque handle
            };
            let name = rest[..brace].trim().to_string();
            let body = &rest[brace + 1..rest.find('}').unwrap()];
            let mut fields = Vec::new();
            for decl in body.split(';').map(str::trim).filter(|d| !d.is_empty()) {
                if let Some(p) = decl.find("(*") {
                    let n = &decl[p + 2..];
                    fields.push(n[..n.find(')').unwrap()].to_string());
                    continue;
                }
                let decl = decl.split('[').next().unwrap();
                // "double beta1, beta2, eps": the first name follows the type.
                for part in decl.split(',') {
                    let word = part.trim().rsplit([' ', '*']).next().unwrap();
                    fields.push(word.to_string());
                }
            }
            out.insert(name, fields);
        }
    }
    out
}

#[test]
fn the_probe_covers_every_struct_and_field_of_the_headers() {
    let structs = header_structs();
    assert!(structs.len() >= 14, "found only {:?}", structs.keys());
    let probe: BTreeSet<String> = probe_lines().into_iter().collect();
    for (s, fields) in &structs {
        assert!(probe.iter().any(|l| l.starts_with(&format!("size {s} "))), "probe lacks struct {s}");
        for f in fields {
            let p = format!("offset {s}.{f} ");
            assert!(probe.iter().any(|l| l.starts_with(&p)), "probe lacks field {s}.{f}");
        }
        let n = probe.iter().filter(|l| l.starts_with(&format!("offset {s}."))).count();
        assert_eq!(n, fields.len(), "{s}: the probe lists {n} fields, the header {fields:?}");
    }
}

#[test]
fn the_probe_covers_every_constant_of_the_headers() {
    // Macros that are not constants of the application API.
    let skip = ["CTN_EXPORT", "CTN_API", "CTN_PLUGIN_EXPORT"];
    let probe: BTreeSet<String> = probe_lines().into_iter().collect();
    let mut seen = 0;
    for h in common::COVERED {
        let text = common::header(h);
        let mut names = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("#define CTN_") {
                let name: String =
                    rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                let after = &rest[name.len()..];
                // function-like macros and empty defines are not constants
                if after.starts_with('(') || after.trim().is_empty() {
                    continue;
                }
                names.push(format!("CTN_{name}"));
            } else if line.starts_with("CTN_") && line.contains('=') {
                names.push(line.split([' ', '=']).next().unwrap().to_string());
            }
        }
        for n in names {
            if skip.contains(&n.as_str()) {
                continue;
            }
            seen += 1;
            let k = format!("const {n} ");
            let s = format!("string {n} ");
            assert!(
                probe.iter().any(|l| l.starts_with(&k) || l.starts_with(&s)),
                "{h}: the probe lacks constant {n}"
            );
        }
    }
    assert!(seen > 60, "found only {seen} constants in the headers");
}
