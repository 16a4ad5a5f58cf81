/* Layout probe, compiled and run by build.rs against abi/: prints the size, alignment and every
 * field offset of each public struct of the headers chutney-sys declares, and the value of every
 * constant. tests/layout.rs compares each line with the Rust declarations, and checks that the
 * structs and constants listed here are all those of the headers. */
#include <chutney/checkpoint.h>
#include <chutney/collective.h>
#include <chutney/data.h>
#include <chutney/nn.h>
#include <chutney/onnx.h>
#include <chutney/oplib.h>
#include <chutney/cuda.h>
#include <chutney/opencl.h>
#include <chutney/vulkan.h>
#include <stdalign.h>
#include <stdio.h>

#define S(t) printf("size %s %zu\nalign %s %zu\n", #t, sizeof(t), #t, (size_t)alignof(t))
#define F(t, f) printf("offset %s.%s %zu\n", #t, #f, offsetof(t, f))
#define K(c) printf("const %s %lld\n", #c, (long long)(c))

int main(void) {
  S(ctn_attrs); F(ctn_attrs, i); F(ctn_attrs, f); F(ctn_attrs, ni); F(ctn_attrs, nf);
  S(ctn_tensor_desc); F(ctn_tensor_desc, data); F(ctn_tensor_desc, offset);
  F(ctn_tensor_desc, dtype); F(ctn_tensor_desc, ndim); F(ctn_tensor_desc, shape);
  F(ctn_tensor_desc, strides);
  S(ctn_kernel_args); F(ctn_kernel_args, n_inputs); F(ctn_kernel_args, n_outputs);
  F(ctn_kernel_args, inputs); F(ctn_kernel_args, outputs); F(ctn_kernel_args, attrs);
  F(ctn_kernel_args, workspace); F(ctn_kernel_args, workspace_size);
  S(ctn_kernel); F(ctn_kernel, fn); F(ctn_kernel, state); F(ctn_kernel, release);
  F(ctn_kernel, workspace_size); F(ctn_kernel, flags); F(ctn_kernel, reserved);
  S(ctn_context_options); F(ctn_context_options, struct_size); F(ctn_context_options, flags);
  F(ctn_context_options, plugin_path); F(ctn_context_options, backends);
  F(ctn_context_options, num_threads); F(ctn_context_options, reserved);
  S(ctn_backend_info); F(ctn_backend_info, struct_size); F(ctn_backend_info, available);
  F(ctn_backend_info, name); F(ctn_backend_info, description); F(ctn_backend_info, path);
  F(ctn_backend_info, abi_major); F(ctn_backend_info, abi_minor);
  S(ctn_compile_options); F(ctn_compile_options, struct_size); F(ctn_compile_options, disable);
  F(ctn_compile_options, backends); F(ctn_compile_options, data_parallel);
  F(ctn_compile_options, dp_bucket_bytes); F(ctn_compile_options, memory_budget);
  S(ctn_run_options); F(ctn_run_options, struct_size); F(ctn_run_options, flags);
  F(ctn_run_options, cancel); F(ctn_run_options, timeout_us);
  S(ctn_plan_memory_report); F(ctn_plan_memory_report, struct_size);
  F(ctn_plan_memory_report, n_recomputed); F(ctn_plan_memory_report, budget);
  F(ctn_plan_memory_report, peak_without_budget); F(ctn_plan_memory_report, peak_bytes);
  F(ctn_plan_memory_report, minimum_bytes); F(ctn_plan_memory_report, flops);
  F(ctn_plan_memory_report, extra_flops); F(ctn_plan_memory_report, recomputed);
  S(ctn_op_info); F(ctn_op_info, struct_size); F(ctn_op_info, n_inputs); F(ctn_op_info, name);
  F(ctn_op_info, attributes); F(ctn_op_info, doc); F(ctn_op_info, origin);
  F(ctn_op_info, origin_path); F(ctn_op_info, differentiable); F(ctn_op_info, flags);
  S(ctn_collective_config); F(ctn_collective_config, struct_size); F(ctn_collective_config, rank);
  F(ctn_collective_config, world_size); F(ctn_collective_config, reserved);
  F(ctn_collective_config, rendezvous); F(ctn_collective_config, timeout_s);
  S(ctn_collective_desc); F(ctn_collective_desc, header); F(ctn_collective_desc, flags);
  F(ctn_collective_desc, reserved); F(ctn_collective_desc, probe); F(ctn_collective_desc, init);
  F(ctn_collective_desc, shutdown); F(ctn_collective_desc, describe); F(ctn_collective_desc, rank);
  F(ctn_collective_desc, world_size); F(ctn_collective_desc, allreduce);
  F(ctn_collective_desc, broadcast); F(ctn_collective_desc, barrier); F(ctn_collective_desc, abort);
  F(ctn_collective_desc, last_error);
  S(ctn_plan_stats); F(ctn_plan_stats, struct_size); F(ctn_plan_stats, n_nodes);
  F(ctn_plan_stats, n_steps); F(ctn_plan_stats, n_fused); F(ctn_plan_stats, n_folded);
  F(ctn_plan_stats, n_inplace); F(ctn_plan_stats, planned_peak_bytes);
  F(ctn_plan_stats, naive_bytes); F(ctn_plan_stats, persistent_bytes);
  F(ctn_plan_stats, n_assign_elided); F(ctn_plan_stats, reserved);
  S(ctn_layer); F(ctn_layer, kind); F(ctn_layer, units); F(ctn_layer, kernel);
  F(ctn_layer, stride); F(ctn_layer, pad); F(ctn_layer, flags); F(ctn_layer, p);
  F(ctn_layer, eps); F(ctn_layer, name);
  S(ctn_optimizer); F(ctn_optimizer, struct_size); F(ctn_optimizer, kind); F(ctn_optimizer, lr);
  F(ctn_optimizer, momentum); F(ctn_optimizer, nesterov); F(ctn_optimizer, reserved);
  F(ctn_optimizer, weight_decay); F(ctn_optimizer, beta1); F(ctn_optimizer, beta2);
  F(ctn_optimizer, eps); F(ctn_optimizer, clip_norm);
  S(ctn_lr_schedule); F(ctn_lr_schedule, kind); F(ctn_lr_schedule, reserved);
  F(ctn_lr_schedule, base_lr); F(ctn_lr_schedule, warmup_steps); F(ctn_lr_schedule, step_size);
  F(ctn_lr_schedule, gamma); F(ctn_lr_schedule, total_steps); F(ctn_lr_schedule, min_lr);
  S(ctn_dataset_info); F(ctn_dataset_info, struct_size); F(ctn_dataset_info, num_classes);
  F(ctn_dataset_info, count); F(ctn_dataset_info, rows); F(ctn_dataset_info, cols);
  S(ctn_loader_options); F(ctn_loader_options, struct_size); F(ctn_loader_options, flags);
  F(ctn_loader_options, batch_size); F(ctn_loader_options, crop_padding);
  F(ctn_loader_options, seed); F(ctn_loader_options, mean); F(ctn_loader_options, std);
  F(ctn_loader_options, num_workers); F(ctn_loader_options, prefetch);
  F(ctn_loader_options, shard_index); F(ctn_loader_options, shard_count);
  S(ctn_loader_stats); F(ctn_loader_stats, struct_size); F(ctn_loader_stats, num_workers);
  F(ctn_loader_stats, batches); F(ctn_loader_stats, samples); F(ctn_loader_stats, waits);
  F(ctn_loader_stats, wait_seconds); F(ctn_loader_stats, copy_seconds);
  F(ctn_loader_stats, worker_seconds);
  S(ctn_plugin_header); F(ctn_plugin_header, struct_size); F(ctn_plugin_header, abi_major);
  F(ctn_plugin_header, abi_minor); F(ctn_plugin_header, kind); F(ctn_plugin_header, reserved);
  F(ctn_plugin_header, name);
  S(ctn_host_api); F(ctn_host_api, struct_size); F(ctn_host_api, abi_major);
  F(ctn_host_api, abi_minor); F(ctn_host_api, set_error); F(ctn_host_api, log);
  F(ctn_host_api, graph_op); F(ctn_host_api, graph_scalar); F(ctn_host_api, graph_node_info);
  F(ctn_host_api, set_error_message); F(ctn_host_api, backend_proc);
  S(ctn_opencl_interop); F(ctn_opencl_interop, struct_size); F(ctn_opencl_interop, version);
  F(ctn_opencl_interop, platform); F(ctn_opencl_interop, device);
  F(ctn_opencl_interop, context); F(ctn_opencl_interop, queue);
  F(ctn_opencl_interop, get_function); F(ctn_opencl_interop, fp64);
  F(ctn_opencl_interop, reserved);
  S(ctn_vulkan_commands); F(ctn_vulkan_commands, struct_size); F(ctn_vulkan_commands, reserved);
  F(ctn_vulkan_commands, command_buffer); F(ctn_vulkan_commands, descriptor_pool);
  F(ctn_vulkan_commands, token);
  S(ctn_vulkan_interop); F(ctn_vulkan_interop, struct_size); F(ctn_vulkan_interop, version);
  F(ctn_vulkan_interop, instance); F(ctn_vulkan_interop, physical_device);
  F(ctn_vulkan_interop, device); F(ctn_vulkan_interop, queue);
  F(ctn_vulkan_interop, queue_family); F(ctn_vulkan_interop, api_version);
  F(ctn_vulkan_interop, get_instance_proc_addr); F(ctn_vulkan_interop, shader_float64);
  F(ctn_vulkan_interop, reserved); F(ctn_vulkan_interop, storage_offset_alignment);
  F(ctn_vulkan_interop, max_storage_range); F(ctn_vulkan_interop, buffer_info);
  F(ctn_vulkan_interop, begin_commands); F(ctn_vulkan_interop, end_commands);
  S(ctn_cuda_interop); F(ctn_cuda_interop, struct_size); F(ctn_cuda_interop, version);
  F(ctn_cuda_interop, device); F(ctn_cuda_interop, compute_capability);
  F(ctn_cuda_interop, context); F(ctn_cuda_interop, stream);
  F(ctn_cuda_interop, get_driver_function);
  S(ctn_op_kernel); F(ctn_op_kernel, struct_size); F(ctn_op_kernel, reserved);
  F(ctn_op_kernel, backend); F(ctn_op_kernel, make); F(ctn_op_kernel, run);
  S(ctn_oplib_kernel); F(ctn_oplib_kernel, backend); F(ctn_oplib_kernel, get_kernel);
  S(ctn_op_def); F(ctn_op_def, struct_size); F(ctn_op_def, n_inputs); F(ctn_op_def, name);
  F(ctn_op_def, doc); F(ctn_op_def, infer); F(ctn_op_def, grad); F(ctn_op_def, n_kernels);
  F(ctn_op_def, kernels); F(ctn_op_def, user_data); F(ctn_op_def, infer_ex);
  F(ctn_op_def, grad_ex); F(ctn_op_def, n_kernels_ex); F(ctn_op_def, reserved);
  F(ctn_op_def, kernels_ex); F(ctn_op_def, jvp_ex);
  S(ctn_oplib_desc); F(ctn_oplib_desc, header); F(ctn_oplib_desc, init);
  F(ctn_oplib_desc, shutdown); F(ctn_oplib_desc, n_ops); F(ctn_oplib_desc, ops);
  /* enums passed by value must have the size of the Rust alias (i32) */
  S(ctn_dtype); S(ctn_init); S(ctn_layer_kind); S(ctn_status); S(ctn_node);

  K(CTN_ABI_MAJOR); K(CTN_ABI_MINOR); K(CTN_ABI_VERSION); K(CTN_OPENCL_INTEROP_VERSION); K(CTN_VULKAN_INTEROP_VERSION); K(CTN_CUDA_INTEROP_VERSION);
  K(CTN_VERSION_MAJOR); K(CTN_VERSION_MINOR); K(CTN_VERSION_PATCH);
  K(CTN_OK); K(CTN_ERR_INVALID_ARGUMENT); K(CTN_ERR_SHAPE); K(CTN_ERR_DTYPE);
  K(CTN_ERR_OUT_OF_MEMORY); K(CTN_ERR_UNAVAILABLE); K(CTN_ERR_UNSUPPORTED); K(CTN_ERR_PLUGIN);
  K(CTN_ERR_IO); K(CTN_ERR_CORRUPT); K(CTN_ERR_STATE); K(CTN_ERR_INTERNAL);
  K(CTN_ERR_CANCELLED); K(CTN_ERR_NUMERICS); K(CTN_RUN_CHECK_NUMERICS);
  K(CTN_F32); K(CTN_F64); K(CTN_I32); K(CTN_I64); K(CTN_U8); K(CTN_BOOL); K(CTN_DTYPE_COUNT_V1);
  K(CTN_MAX_DIMS); K(CTN_NODE_NONE); K(CTN_ATTR_INTS); K(CTN_ATTR_FLOATS);
  K(CTN_KERNEL_INPLACE_OK); K(CTN_CONTEXT_NO_AUTOLOAD); K(CTN_GRAPH_EAGER);
  K(CTN_PASS_DCE); K(CTN_PASS_CONSTANT_FOLDING); K(CTN_PASS_SIMPLIFY); K(CTN_PASS_FUSION);
  K(CTN_PASS_MEMORY_REUSE);
  K(CTN_INIT_ZEROS); K(CTN_INIT_ONES); K(CTN_INIT_KAIMING_UNIFORM); K(CTN_INIT_KAIMING_NORMAL);
  K(CTN_INIT_XAVIER_UNIFORM); K(CTN_INIT_XAVIER_NORMAL); K(CTN_INIT_UNIFORM); K(CTN_INIT_NORMAL);
  K(CTN_VAR_PARAMETER); K(CTN_VAR_BUFFER); K(CTN_VAR_OPTIMIZER);
  K(CTN_SAVED_INPUTS); K(CTN_SAVED_OUTPUTS); K(CTN_SAVED_VARIABLES);
  S(ctn_onnx_input_spec); F(ctn_onnx_input_spec, name); F(ctn_onnx_input_spec, value);
  F(ctn_onnx_input_spec, as_constant); F(ctn_onnx_input_spec, reserved);
  S(ctn_onnx_options); F(ctn_onnx_options, struct_size); F(ctn_onnx_options, flags);
  F(ctn_onnx_options, n_inputs); F(ctn_onnx_options, reserved); F(ctn_onnx_options, inputs);
  F(ctn_onnx_options, external_data_dir);
  K(CTN_ONNX_INITIALIZERS_AS_CONSTANTS); K(CTN_ONNX_INSPECT_ONLY); K(CTN_ONNX_INPUTS);
  K(CTN_ONNX_OUTPUTS); K(CTN_ONNX_INITIALIZERS); K(CTN_ONNX_OP_TYPES);
  K(CTN_LAYER_LINEAR); K(CTN_LAYER_CONV2D); K(CTN_LAYER_BATCH_NORM); K(CTN_LAYER_DROPOUT);
  K(CTN_LAYER_RELU); K(CTN_LAYER_TANH); K(CTN_LAYER_SIGMOID); K(CTN_LAYER_MAX_POOL2D);
  K(CTN_LAYER_AVG_POOL2D); K(CTN_LAYER_FLATTEN); K(CTN_LAYER_LAYER_NORM); K(CTN_LAYER_NO_BIAS);
  K(CTN_OPTIM_SGD); K(CTN_OPTIM_ADAM); K(CTN_OPTIM_ADAMW);
  K(CTN_LR_CONSTANT); K(CTN_LR_STEP); K(CTN_LR_COSINE); K(CTN_LR_LINEAR);
  K(CTN_LOADER_SHUFFLE); K(CTN_LOADER_DROP_LAST); K(CTN_LOADER_FLAT); K(CTN_LOADER_HFLIP);
  K(CTN_LOADER_SYNCHRONOUS);
  K(CTN_PLUGIN_BACKEND); K(CTN_PLUGIN_OPLIB); K(CTN_PLUGIN_COLLECTIVE_KIND);
  K(CTN_OP_INFO_ELEMENTWISE); K(CTN_PLUGIN_COLLECTIVE); K(CTN_COLLECTIVE_HOST_MEMORY);
  K(CTN_REDUCE_SUM); K(CTN_REDUCE_MEAN); K(CTN_DP_DEFAULT_BUCKET_BYTES); K(CTN_MEMORY_BUDGET_AUTO);
  K(CTN_LOG_DEBUG); K(CTN_LOG_INFO); K(CTN_LOG_WARN); K(CTN_LOG_ERROR);
  printf("string CTN_PLUGIN_ENTRY_SYMBOL %s\n", CTN_PLUGIN_ENTRY_SYMBOL);
  printf("string CTN_FASHION_MNIST_DIR %s\n", CTN_FASHION_MNIST_DIR);
  return 0;
}
