/* The layout of every public struct of abi/chutney/, pinned. Included by core/capi/abi_layout.cpp,
 * so that every build of libchutney checks it (with or without tests), and by
 * tests/abi/c11_headers.c, so that a strict C11 compiler sees the same numbers. A change that
 * moves a field, or grows a frozen struct, fails the build: see docs/ABI.md, "Versions".
 *
 * Offsets are written in terms of P (pointer size) so the pins hold on the 64-bit and 32-bit
 * (armhf) targets alike; the LP64 block spells the numbers out for the common case.
 *
 * Structs with a struct_size grow only by appending (pinned: every field's offset; the size
 * where the struct is a table). Structs without one are frozen (pinned: their size), in
 * particular those used as array elements: ctn_tensor_desc, ctn_plan_call, ctn_oplib_kernel,
 * ctn_layer, ctn_onnx_input_spec; ctn_attrs, ctn_kernel, ctn_kernel_args, ctn_lr_schedule.
 * The array-element structs that do carry a struct_size (ctn_op_def, ctn_op_kernel) are
 * strided by it (oplib.h). Include after the public headers. */
#ifndef CHUTNEY_CORE_ABI_LAYOUT_H
#define CHUTNEY_CORE_ABI_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define CTN_PIN_ASSERT(cond, msg) static_assert(cond, msg)
#define CTN_PIN_ALIGNOF(t) alignof(t)
#else
#define CTN_PIN_ASSERT(cond, msg) _Static_assert(cond, msg)
#define CTN_PIN_ALIGNOF(t) _Alignof(t)
#endif

#define P sizeof(void *)
#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))
#define PIN(type, field, off) \
  CTN_PIN_ASSERT(offsetof(type, field) == (off), #type "." #field " moved")
#define PIN_SIZE(type, size) CTN_PIN_ASSERT(sizeof(type) == (size), "sizeof(" #type ") changed")

/* ---- version.h ----------------------------------------------------------------------------- */
CTN_PIN_ASSERT(CTN_ABI_MAJOR == 1, "this file pins ABI v1");
CTN_PIN_ASSERT(CTN_ABI_VERSION == ((CTN_ABI_MAJOR << 16) | CTN_ABI_MINOR), "CTN_ABI_VERSION");
CTN_PIN_ASSERT(CTN_ABI_VERSION_MAJOR(CTN_ABI_VERSION) == CTN_ABI_MAJOR, "major of version");
CTN_PIN_ASSERT(CTN_ABI_VERSION_MINOR(CTN_ABI_VERSION) == CTN_ABI_MINOR, "minor of version");

/* ---- types.h: enum values are ABI too ------------------------------------------------------ */
CTN_PIN_ASSERT(CTN_OK == 0 && CTN_ERR_INVALID_ARGUMENT == 1 && CTN_ERR_SHAPE == 2 &&
                   CTN_ERR_DTYPE == 3 && CTN_ERR_OUT_OF_MEMORY == 4 && CTN_ERR_UNAVAILABLE == 5 &&
                   CTN_ERR_UNSUPPORTED == 6 && CTN_ERR_PLUGIN == 7 && CTN_ERR_IO == 8 &&
                   CTN_ERR_CORRUPT == 9 && CTN_ERR_STATE == 10 && CTN_ERR_INTERNAL == 11,
               "status codes");
CTN_PIN_ASSERT(CTN_F32 == 0 && CTN_F64 == 1 && CTN_I32 == 2 && CTN_I64 == 3 && CTN_U8 == 4 &&
                   CTN_BOOL == 5 && CTN_DTYPE_COUNT_V1 == 6,
               "dtype codes");
CTN_PIN_ASSERT(CTN_MAX_DIMS == 8 && CTN_ATTR_INTS == 16 && CTN_ATTR_FLOATS == 4, "limits");
CTN_PIN_ASSERT(CTN_NODE_NONE == 0xffffffffu && sizeof(ctn_node) == 4, "ctn_node");
CTN_PIN_ASSERT(sizeof(ctn_status) == 4, "ctn_status");
CTN_PIN_ASSERT(CTN_PLUGIN_BACKEND == 1 && CTN_PLUGIN_OPLIB == 2, "plugin kinds");
CTN_PIN_ASSERT(CTN_KERNEL_INPLACE_OK == 1u && CTN_BACKEND_HOST_MEMORY == 1u, "flags");
CTN_PIN_ASSERT(CTN_CONTEXT_NO_AUTOLOAD == 1u && CTN_GRAPH_EAGER == 1u, "flags");
CTN_PIN_ASSERT(CTN_PASS_DCE == 1u && CTN_PASS_CONSTANT_FOLDING == 2u && CTN_PASS_SIMPLIFY == 4u &&
                   CTN_PASS_FUSION == 8u && CTN_PASS_MEMORY_REUSE == 16u,
               "pass bits");

PIN(ctn_attrs, i, 0);
PIN(ctn_attrs, f, 8 * CTN_ATTR_INTS);
PIN(ctn_attrs, ni, 8 * CTN_ATTR_INTS + 8 * CTN_ATTR_FLOATS);
PIN(ctn_attrs, nf, 8 * CTN_ATTR_INTS + 8 * CTN_ATTR_FLOATS + 4);
PIN_SIZE(ctn_attrs, 8 * CTN_ATTR_INTS + 8 * CTN_ATTR_FLOATS + 8);

#define TD_OFFSET ALIGN_UP(P, CTN_PIN_ALIGNOF(uint64_t))
PIN(ctn_tensor_desc, data, 0);
PIN(ctn_tensor_desc, offset, TD_OFFSET);
PIN(ctn_tensor_desc, dtype, TD_OFFSET + 8);
PIN(ctn_tensor_desc, ndim, TD_OFFSET + 12);
PIN(ctn_tensor_desc, shape, TD_OFFSET + 16);
PIN(ctn_tensor_desc, strides, TD_OFFSET + 16 + 8 * CTN_MAX_DIMS);
PIN_SIZE(ctn_tensor_desc, TD_OFFSET + 16 + 16 * CTN_MAX_DIMS);

PIN(ctn_kernel_args, n_inputs, 0);
PIN(ctn_kernel_args, n_outputs, 4);
PIN(ctn_kernel_args, inputs, 8);
PIN(ctn_kernel_args, outputs, 8 + P);
PIN(ctn_kernel_args, attrs, 8 + 2 * P);
PIN(ctn_kernel_args, workspace, 8 + 3 * P);
PIN(ctn_kernel_args, workspace_size, ALIGN_UP(8 + 4 * P, CTN_PIN_ALIGNOF(uint64_t)));

#define K_WS ALIGN_UP(3 * P, CTN_PIN_ALIGNOF(uint64_t))
PIN(ctn_kernel, fn, 0);
PIN(ctn_kernel, state, P);
PIN(ctn_kernel, release, 2 * P);
PIN(ctn_kernel, workspace_size, K_WS);
PIN(ctn_kernel, flags, K_WS + 8);
PIN(ctn_kernel, reserved, K_WS + 12);

/* ---- plugin.h: the frozen prefix and the host table --------------------------------------- */
PIN(ctn_plugin_header, struct_size, 0);
PIN(ctn_plugin_header, abi_major, 4);
PIN(ctn_plugin_header, abi_minor, 6);
PIN(ctn_plugin_header, kind, 8);
PIN(ctn_plugin_header, reserved, 12);
PIN(ctn_plugin_header, name, 16);
#define H ALIGN_UP(16 + P, P)
PIN_SIZE(ctn_plugin_header, H);

PIN(ctn_host_api, struct_size, 0);
PIN(ctn_host_api, abi_major, 4);
PIN(ctn_host_api, abi_minor, 6);
PIN(ctn_host_api, set_error, 8);        /* since 1.0 */
PIN(ctn_host_api, log, 8 + P);          /* since 1.0 */
PIN(ctn_host_api, graph_op, 8 + 2 * P); /* since 1.0 */
PIN(ctn_host_api, graph_scalar, 8 + 3 * P);
PIN(ctn_host_api, graph_node_info, 8 + 4 * P);
PIN(ctn_host_api, set_error_message, 8 + 5 * P); /* since 1.2 */
PIN(ctn_host_api, backend_proc, 8 + 6 * P);      /* since 1.2 */
PIN_SIZE(ctn_host_api, ALIGN_UP(8 + 7 * P, P)); /* grows only by appending */

/* ---- backend.h ----------------------------------------------------------------------------- */
PIN(ctn_backend_config, struct_size, 0);
PIN(ctn_backend_config, num_threads, 4);

/* ---- device interop (since 1.2): opencl.h ------------------------------------------------- */
PIN(ctn_opencl_interop, struct_size, 0);
PIN(ctn_opencl_interop, version, 4);
PIN(ctn_opencl_interop, platform, 8);
PIN(ctn_opencl_interop, device, 8 + P);
PIN(ctn_opencl_interop, context, 8 + 2 * P);
PIN(ctn_opencl_interop, queue, 8 + 3 * P);
PIN(ctn_opencl_interop, get_function, 8 + 4 * P);
PIN(ctn_opencl_interop, fp64, 8 + 5 * P);
PIN(ctn_opencl_interop, reserved, 12 + 5 * P);
PIN_SIZE(ctn_opencl_interop, ALIGN_UP(16 + 5 * P, P));

/* ---- device interop (since 1.2): vulkan.h -------------------------------------------------- */
PIN(ctn_vulkan_commands, struct_size, 0);
PIN(ctn_vulkan_commands, reserved, 4);
PIN(ctn_vulkan_commands, command_buffer, 8);
PIN(ctn_vulkan_commands, descriptor_pool, ALIGN_UP(8 + P, 8));
PIN(ctn_vulkan_commands, token, ALIGN_UP(8 + P, 8) + 8);
PIN_SIZE(ctn_vulkan_commands, ALIGN_UP(ALIGN_UP(8 + P, 8) + 8 + P, 8));
PIN(ctn_vulkan_interop, struct_size, 0);
PIN(ctn_vulkan_interop, version, 4);
PIN(ctn_vulkan_interop, instance, 8);
PIN(ctn_vulkan_interop, physical_device, 8 + P);
PIN(ctn_vulkan_interop, device, 8 + 2 * P);
PIN(ctn_vulkan_interop, queue, 8 + 3 * P);
PIN(ctn_vulkan_interop, queue_family, 8 + 4 * P);
PIN(ctn_vulkan_interop, api_version, 12 + 4 * P);
PIN(ctn_vulkan_interop, get_instance_proc_addr, 16 + 4 * P);
PIN(ctn_vulkan_interop, shader_float64, 16 + 5 * P);
PIN(ctn_vulkan_interop, reserved, 20 + 5 * P);
PIN(ctn_vulkan_interop, storage_offset_alignment, ALIGN_UP(24 + 5 * P, 8));
PIN(ctn_vulkan_interop, max_storage_range, ALIGN_UP(24 + 5 * P, 8) + 8);
PIN(ctn_vulkan_interop, buffer_info, ALIGN_UP(24 + 5 * P, 8) + 16);
PIN(ctn_vulkan_interop, begin_commands, ALIGN_UP(24 + 5 * P, 8) + 16 + P);
PIN(ctn_vulkan_interop, end_commands, ALIGN_UP(24 + 5 * P, 8) + 16 + 2 * P);
PIN_SIZE(ctn_vulkan_interop, ALIGN_UP(ALIGN_UP(24 + 5 * P, 8) + 16 + 3 * P, 8));

/* ---- device interop (since 1.2): cuda.h ----------------------------------------------------- */
PIN(ctn_cuda_interop, struct_size, 0);
PIN(ctn_cuda_interop, version, 4);
PIN(ctn_cuda_interop, device, 8);
PIN(ctn_cuda_interop, compute_capability, 12);
PIN(ctn_cuda_interop, context, 16);
PIN(ctn_cuda_interop, stream, 16 + P);
PIN(ctn_cuda_interop, get_driver_function, 16 + 2 * P);
PIN_SIZE(ctn_cuda_interop, 16 + 3 * P);

PIN(ctn_op_signature, struct_size, 0);
PIN(ctn_op_signature, n_inputs, 4);
PIN(ctn_op_signature, op, 8);
PIN(ctn_op_signature, inputs, 8 + P);
PIN(ctn_op_signature, output, 8 + 2 * P);
PIN(ctn_op_signature, attrs, 8 + 3 * P);

PIN(ctn_backend_desc, header, 0);
PIN(ctn_backend_desc, flags, H); /* since 1.0 */
PIN(ctn_backend_desc, reserved, H + 4);
PIN(ctn_backend_desc, init, H + 8);
PIN(ctn_backend_desc, shutdown, H + 8 + P);
PIN(ctn_backend_desc, describe, H + 8 + 2 * P);
PIN(ctn_backend_desc, buffer_alloc, H + 8 + 3 * P);
PIN(ctn_backend_desc, buffer_free, H + 8 + 4 * P);
PIN(ctn_backend_desc, upload, H + 8 + 5 * P);
PIN(ctn_backend_desc, download, H + 8 + 6 * P);
PIN(ctn_backend_desc, get_kernel, H + 8 + 7 * P);
PIN(ctn_backend_desc, synchronize, H + 8 + 8 * P);
PIN(ctn_backend_desc, set_option, H + 8 + 9 * P);
PIN(ctn_backend_desc, get_proc_address, H + 8 + 10 * P);
PIN(ctn_backend_desc, plan_prepare, H + 8 + 11 * P); /* since 1.1 */
PIN(ctn_backend_desc, plan_run, H + 8 + 12 * P);
PIN(ctn_backend_desc, plan_release, H + 8 + 13 * P);
PIN_SIZE(ctn_backend_desc, H + 8 + 14 * P); /* grows only by appending */
PIN(ctn_plan_call, kernel, 0);
PIN(ctn_plan_call, args, P);

/* ---- oplib.h ------------------------------------------------------------------------------- */
PIN(ctn_oplib_kernel, backend, 0);
PIN(ctn_oplib_kernel, get_kernel, P);

PIN(ctn_op_def, struct_size, 0);
PIN(ctn_op_def, n_inputs, 4);
PIN(ctn_op_def, name, 8);
PIN(ctn_op_def, doc, 8 + P);
PIN(ctn_op_def, infer, 8 + 2 * P);
PIN(ctn_op_def, grad, 8 + 3 * P);
PIN(ctn_op_def, n_kernels, 8 + 4 * P);
PIN(ctn_op_def, kernels, ALIGN_UP(8 + 4 * P + 4, P));
#define OPDEF11 (ALIGN_UP(8 + 4 * P + 4, P) + P) /* the 1.0/1.1 element size */
PIN(ctn_op_def, user_data, OPDEF11); /* since 1.2 */
PIN(ctn_op_def, infer_ex, OPDEF11 + P);
PIN(ctn_op_def, grad_ex, OPDEF11 + 2 * P);
PIN(ctn_op_def, n_kernels_ex, OPDEF11 + 3 * P);
PIN(ctn_op_def, reserved, OPDEF11 + 3 * P + 4);
PIN(ctn_op_def, kernels_ex, OPDEF11 + 3 * P + 8);
PIN(ctn_op_def, jvp_ex, OPDEF11 + 4 * P + 8);
PIN_SIZE(ctn_op_def, OPDEF11 + 5 * P + 8);

PIN(ctn_op_kernel, struct_size, 0); /* since 1.2 */
PIN(ctn_op_kernel, reserved, 4);
PIN(ctn_op_kernel, backend, 8);
PIN(ctn_op_kernel, make, 8 + P);
PIN(ctn_op_kernel, run, 8 + 2 * P);
PIN_SIZE(ctn_op_kernel, 8 + 3 * P);

PIN(ctn_oplib_desc, header, 0);
PIN(ctn_oplib_desc, init, H); /* since 1.0 */
PIN(ctn_oplib_desc, shutdown, H + P);
PIN(ctn_oplib_desc, n_ops, H + 2 * P);
PIN(ctn_oplib_desc, ops, ALIGN_UP(H + 2 * P + 4, P));
PIN_SIZE(ctn_oplib_desc, ALIGN_UP(H + 2 * P + 4, P) + P);

/* ---- chutney.h: option and info structs that callers fill ---------------------------------- */
PIN(ctn_context_options, struct_size, 0);
PIN(ctn_context_options, flags, 4);
PIN(ctn_context_options, plugin_path, 8);
PIN(ctn_context_options, backends, 8 + P);
PIN(ctn_context_options, num_threads, 8 + 2 * P);
PIN(ctn_context_options, reserved, 12 + 2 * P);

PIN(ctn_backend_info, struct_size, 0);
PIN(ctn_backend_info, available, 4);
PIN(ctn_backend_info, name, 8);
PIN(ctn_backend_info, description, 8 + P);
PIN(ctn_backend_info, path, 8 + 2 * P);
PIN(ctn_backend_info, abi_major, 8 + 3 * P);
PIN(ctn_backend_info, abi_minor, 12 + 3 * P);

PIN(ctn_compile_options, struct_size, 0);
PIN(ctn_compile_options, disable, 4);
PIN(ctn_compile_options, backends, 8);
/* since 1.2: data-parallel (collective.h) */
PIN(ctn_compile_options, data_parallel, ALIGN_UP(8 + P, P));
PIN(ctn_compile_options, dp_bucket_bytes, ALIGN_UP(ALIGN_UP(8 + P, P) + P, 8));
PIN(ctn_collective_desc, header, 0);
PIN(ctn_collective_desc, flags, sizeof(ctn_plugin_header));
PIN(ctn_collective_config, rendezvous, 16);
CTN_PIN_ASSERT(CTN_PLUGIN_COLLECTIVE == CTN_PLUGIN_COLLECTIVE_KIND, "collective kind");
/* since 1.2: memory budget */
PIN(ctn_compile_options, memory_budget, ALIGN_UP(ALIGN_UP(8 + P, P) + P, 8) + 8);
PIN(ctn_plan_memory_report, struct_size, 0);
PIN(ctn_plan_memory_report, n_recomputed, 4);
PIN(ctn_plan_memory_report, budget, 8);
PIN(ctn_plan_memory_report, peak_without_budget, 16);
PIN(ctn_plan_memory_report, peak_bytes, 24);
PIN(ctn_plan_memory_report, minimum_bytes, 32);
PIN(ctn_plan_memory_report, flops, 40);
PIN(ctn_plan_memory_report, extra_flops, 48);
PIN(ctn_plan_memory_report, recomputed, 56);

PIN(ctn_plan_stats, struct_size, 0);
PIN(ctn_plan_stats, n_nodes, 4);
PIN(ctn_plan_stats, n_steps, 8);
PIN(ctn_plan_stats, n_fused, 12);
PIN(ctn_plan_stats, n_folded, 16);
PIN(ctn_plan_stats, n_inplace, 20);
PIN(ctn_plan_stats, planned_peak_bytes, 24);
PIN(ctn_plan_stats, naive_bytes, 32);
PIN(ctn_plan_stats, persistent_bytes, 40);
PIN(ctn_plan_stats, n_assign_elided, 48); /* since 1.1 */
PIN(ctn_plan_stats, reserved, 52);
PIN_SIZE(ctn_plan_stats, 56);

/* ---- onnx.h (since 1.2) ------------------------------------------------------------------- */
PIN(ctn_onnx_input_spec, value, P);
PIN(ctn_onnx_input_spec, as_constant, 2 * P);
PIN(ctn_onnx_options, n_inputs, 8);
PIN(ctn_onnx_options, inputs, 16);
PIN(ctn_onnx_options, external_data_dir, 16 + P);

/* ---- The same layout with the numbers written out, for the common LP64 targets -------------- */
#if UINTPTR_MAX == 0xffffffffffffffffu
PIN_SIZE(ctn_plugin_header, 24);
PIN(ctn_backend_desc, init, 32);
PIN(ctn_backend_desc, get_kernel, 88);
PIN(ctn_backend_desc, get_proc_address, 112);
PIN_SIZE(ctn_backend_desc, 144);
PIN(ctn_oplib_desc, ops, 48);
PIN_SIZE(ctn_oplib_desc, 56);
PIN_SIZE(ctn_host_api, 64);
PIN_SIZE(ctn_opencl_interop, 56);
PIN_SIZE(ctn_vulkan_commands, 32);
PIN_SIZE(ctn_vulkan_interop, 104);
PIN_SIZE(ctn_cuda_interop, 40);
PIN_SIZE(ctn_tensor_desc, 152);
PIN_SIZE(ctn_attrs, 168);
PIN(ctn_op_def, kernels, 48);
PIN(ctn_op_def, user_data, 56);
PIN_SIZE(ctn_op_def, 104);
PIN_SIZE(ctn_op_kernel, 32);


/* ---- dlpack.h: DLPack 1.1's layout (LP64; 32-bit targets follow from the declarations) ---- */
CTN_PIN_ASSERT(sizeof(DLDevice) == 8 && sizeof(DLDataType) == 4, "DLDevice/DLDataType");
CTN_PIN_ASSERT(sizeof(void *) != 8 || offsetof(DLTensor, shape) == 24, "DLTensor.shape");
CTN_PIN_ASSERT(sizeof(void *) != 8 || offsetof(DLTensor, byte_offset) == 40, "DLTensor.byte_offset");
CTN_PIN_ASSERT(sizeof(void *) != 8 || sizeof(DLTensor) == 48, "sizeof(DLTensor)");
CTN_PIN_ASSERT(sizeof(void *) != 8 || offsetof(DLManagedTensorVersioned, flags) == 24, "flags");
CTN_PIN_ASSERT(sizeof(void *) != 8 || offsetof(DLManagedTensorVersioned, dl_tensor) == 32, "dl_tensor");
CTN_PIN_ASSERT(sizeof(void *) != 8 || sizeof(DLManagedTensorVersioned) == 80, "sizeof(DLManagedTensorVersioned)");
CTN_PIN_ASSERT(DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION == 1, "DLPack 1.1");
#endif


/* ---- frozen structs without struct_size (since 1.2 pinned in every build) ------------------ */
PIN_SIZE(ctn_oplib_kernel, 2 * P);             /* array element of ctn_op_def.kernels */
PIN_SIZE(ctn_plan_call, 2 * P);                /* array element of plan_prepare's calls */
PIN_SIZE(ctn_kernel, ALIGN_UP(3 * P, 8) + 16);
PIN_SIZE(ctn_kernel_args, ALIGN_UP(8 + 4 * P, 8) + 8);
PIN(ctn_layer, kind, 0);                       /* array element of ctn_nn_sequential */
PIN(ctn_layer, flags, 20);
PIN(ctn_layer, p, 24);
PIN(ctn_layer, eps, 32);
PIN(ctn_layer, name, 40);
PIN_SIZE(ctn_layer, ALIGN_UP(40 + P, 8));
PIN(ctn_onnx_input_spec, name, 0);             /* array element of ctn_onnx_options.inputs */
PIN(ctn_onnx_input_spec, reserved, 2 * P + 4);
PIN_SIZE(ctn_onnx_input_spec, 2 * P + 8);
PIN(ctn_lr_schedule, base_lr, 8);
PIN(ctn_lr_schedule, min_lr, 48);
PIN_SIZE(ctn_lr_schedule, 56);

/* ---- structs with struct_size not pinned above ----------------------------------------------- */
PIN(ctn_backend_info, abi_minor, 12 + 3 * P);
PIN_SIZE(ctn_backend_info, ALIGN_UP(16 + 3 * P, P));
PIN(ctn_op_info, struct_size, 0);              /* since 1.2 */
PIN(ctn_op_info, n_inputs, 4);
PIN(ctn_op_info, name, 8);
PIN(ctn_op_info, attributes, 8 + P);
PIN(ctn_op_info, doc, 8 + 2 * P);
PIN(ctn_op_info, origin, 8 + 3 * P);
PIN(ctn_op_info, origin_path, 8 + 4 * P);
PIN(ctn_op_info, differentiable, 8 + 5 * P);
PIN(ctn_op_info, flags, 12 + 5 * P);
PIN_SIZE(ctn_op_info, ALIGN_UP(16 + 5 * P, P));
PIN(ctn_dataset_info, count, 8);
PIN(ctn_dataset_info, cols, 20);
PIN(ctn_loader_options, seed, 16);
PIN(ctn_loader_options, prefetch, 44);
PIN(ctn_loader_stats, batches, 8);
PIN(ctn_loader_stats, worker_seconds, 48);
PIN(ctn_optimizer, lr, 8);
PIN(ctn_optimizer, clip_norm, 64);
PIN(ctn_onnx_options, struct_size, 0);
PIN(ctn_onnx_options, flags, 4);
PIN(ctn_backend_config, num_threads, 4);

#endif /* CHUTNEY_CORE_ABI_LAYOUT_H */
