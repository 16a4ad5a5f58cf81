//! Raw declarations of the chutney C ABI 1.2: `abi/chutney/chutney.h`, `nn.h`, `data.h`,
//! `checkpoint.h`, `collective.h`, the plugin and op-library types of `plugin.h` and `oplib.h`,
//! and the types of `types.h` and `version.h` they use.
//!
//! Written by hand (no bindgen, so no libclang at build time) and checked against the real
//! headers by two tests of this crate:
//! - `tests/completeness.rs` reads every `CTN_API` declaration of `abi/chutney/*.h` and fails
//!   when one is neither declared here nor listed in [`LEFT_OUT`] with a reason;
//! - `tests/layout.rs` compares `size_of`, `align_of` and every field offset of every struct
//!   below, and the value of every constant, with what a C probe compiled by `build.rs` against
//!   the headers prints.
//!
//! Everything here is `unsafe` to call and follows the C contract of the headers (status
//! returns, `ctn_last_error()` on the calling thread, out-parameters untouched on failure,
//! `*_release` accepting NULL). The safe API is the `chutney` crate.
#![allow(non_camel_case_types)]

use std::marker::{PhantomData, PhantomPinned};
/// C `char` and `void` (from `std::os::raw`: Rust 1.63, Debian 12's, lacks `core::ffi::c_char`).
pub use std::os::raw::{c_char, c_void};

// ---- version.h ---------------------------------------------------------------------------

/// ABI major version these declarations describe.
pub const CTN_ABI_MAJOR: u32 = 1;
/// ABI minor version these declarations describe (the newest slot declared here is "since" it).
pub const CTN_ABI_MINOR: u32 = 3;
/// `(major << 16) | minor`, as `ctn_abi_version()` returns it.
pub const CTN_ABI_VERSION: u32 = (CTN_ABI_MAJOR << 16) | CTN_ABI_MINOR;
/// Library release major.
pub const CTN_VERSION_MAJOR: u32 = 0;
/// Library release minor.
pub const CTN_VERSION_MINOR: u32 = 1;
/// Library release patch.
pub const CTN_VERSION_PATCH: u32 = 0;

// ---- types.h -----------------------------------------------------------------------------

/// Status code: 0 is success.
pub type ctn_status = i32;
/// Success.
pub const CTN_OK: ctn_status = 0;
/// A bad value: null handle, unknown name, out-of-range index.
pub const CTN_ERR_INVALID_ARGUMENT: ctn_status = 1;
/// Shapes do not agree.
pub const CTN_ERR_SHAPE: ctn_status = 2;
/// Dtypes do not agree or are not supported by the op.
pub const CTN_ERR_DTYPE: ctn_status = 3;
/// Host or device allocation failed.
pub const CTN_ERR_OUT_OF_MEMORY: ctn_status = 4;
/// A backend, device or driver is not present.
pub const CTN_ERR_UNAVAILABLE: ctn_status = 5;
/// A backend does not implement the op/dtype combination.
pub const CTN_ERR_UNSUPPORTED: ctn_status = 6;
/// A plugin was rejected.
pub const CTN_ERR_PLUGIN: ctn_status = 7;
/// A file could not be read or written.
pub const CTN_ERR_IO: ctn_status = 8;
/// A file or buffer is malformed.
pub const CTN_ERR_CORRUPT: ctn_status = 9;
/// The call is not valid in the object's current state.
pub const CTN_ERR_STATE: ctn_status = 10;
/// A bug or an unexpected exception.
pub const CTN_ERR_INTERNAL: ctn_status = 11;
/// A run was cancelled or passed its deadline; the variables are unchanged (since 1.3).
pub const CTN_ERR_CANCELLED: ctn_status = 12;
/// A run with [`CTN_RUN_CHECK_NUMERICS`] met a NaN or infinity (since 1.3).
pub const CTN_ERR_NUMERICS: ctn_status = 13;

/// Element type (C `enum ctn_dtype`, an `int`).
pub type ctn_dtype = i32;
/// 32-bit float.
pub const CTN_F32: ctn_dtype = 0;
/// 64-bit float.
pub const CTN_F64: ctn_dtype = 1;
/// 32-bit signed integer.
pub const CTN_I32: ctn_dtype = 2;
/// 64-bit signed integer.
pub const CTN_I64: ctn_dtype = 3;
/// 8-bit unsigned integer.
pub const CTN_U8: ctn_dtype = 4;
/// Boolean, one byte per element (0 or 1).
pub const CTN_BOOL: ctn_dtype = 5;
/// Number of dtypes of ABI v1.
pub const CTN_DTYPE_COUNT_V1: ctn_dtype = 6;

/// Maximum number of dimensions of a tensor.
pub const CTN_MAX_DIMS: usize = 8;

/// A node of a graph.
pub type ctn_node = u32;
/// No node.
pub const CTN_NODE_NONE: ctn_node = 0xffff_ffff;

/// Integer attribute slots of [`ctn_attrs`].
pub const CTN_ATTR_INTS: usize = 16;
/// Floating attribute slots of [`ctn_attrs`].
pub const CTN_ATTR_FLOATS: usize = 4;

/// Op attributes: a fixed-size bag (see ops.h for what each op reads). Unused slots zero.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ctn_attrs {
    /// Integer slots.
    pub i: [i64; CTN_ATTR_INTS],
    /// Floating slots.
    pub f: [f64; CTN_ATTR_FLOATS],
    /// How many of `i` are meaningful.
    pub ni: u32,
    /// How many of `f` are meaningful.
    pub nf: u32,
}

/// Tensor descriptor handed to kernels.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_tensor_desc {
    /// Host pointer or device handle.
    pub data: *mut c_void,
    /// Byte offset of the first element from `data`.
    pub offset: u64,
    /// A `ctn_dtype`.
    pub dtype: i32,
    /// Number of dimensions.
    pub ndim: u32,
    /// Shape (ndim values used).
    pub shape: [i64; CTN_MAX_DIMS],
    /// Strides in elements (ndim values used).
    pub strides: [i64; CTN_MAX_DIMS],
}

/// Arguments of one kernel call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_kernel_args {
    /// Number of inputs.
    pub n_inputs: u32,
    /// Number of outputs.
    pub n_outputs: u32,
    /// `n_inputs` descriptors.
    pub inputs: *const ctn_tensor_desc,
    /// `n_outputs` descriptors.
    pub outputs: *const ctn_tensor_desc,
    /// The node's attributes.
    pub attrs: *const ctn_attrs,
    /// Scratch memory requested by the kernel.
    pub workspace: *mut c_void,
    /// Bytes of `workspace`.
    pub workspace_size: u64,
}

/// A kernel function.
pub type ctn_kernel_fn =
    Option<unsafe extern "C" fn(state: *mut c_void, args: *const ctn_kernel_args) -> ctn_status>;

/// A kernel: function, state and its release.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_kernel {
    /// The function.
    pub fn_: ctn_kernel_fn,
    /// Passed back to `fn_`.
    pub state: *mut c_void,
    /// Frees `state` (optional).
    pub release: Option<unsafe extern "C" fn(state: *mut c_void)>,
    /// Scratch bytes the host provides.
    pub workspace_size: u64,
    /// `CTN_KERNEL_*`.
    pub flags: u32,
    /// Zero.
    pub reserved: u32,
}

/// The kernel may write its output over its first input.
pub const CTN_KERNEL_INPLACE_OK: u32 = 1;

macro_rules! opaque {
    ($($(#[$m:meta])* $name:ident;)*) => {$(
        $(#[$m])*
        #[repr(C)]
        pub struct $name {
            _data: [u8; 0],
            // Neither Send, Sync nor Unpin: the safe layer decides.
            _marker: PhantomData<(*mut u8, PhantomPinned)>,
        }
    )*};
}

opaque! {
    /// A context (chutney.h).
    ctn_context;
    /// A host tensor (chutney.h).
    ctn_tensor;
    /// A compiled plan (chutney.h).
    ctn_plan;
    /// A graph (types.h).
    ctn_graph;
    /// A layer-library model (nn.h).
    ctn_model;
    /// An IDX dataset (data.h).
    ctn_dataset;
    /// A batching loader (data.h).
    ctn_loader;
    /// A loaded safetensors checkpoint (checkpoint.h).
    ctn_checkpoint;
    /// What a loaded graph file lists: inputs, outputs, variables (checkpoint.h, since 1.3).
    ctn_saved_graph;
    /// What an imported ONNX model lists: inputs, outputs, initializers, op types (onnx.h, since 1.2).
    ctn_onnx_model;
    /// A communicator over a collective plugin (collective.h, since 1.2).
    ctn_collective;
    /// A cancel token for runs (chutney.h, since 1.3).
    ctn_cancel;
}

// ---- chutney.h: structs and flags --------------------------------------------------------

/// Options of `ctn_context_create`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_context_options {
    /// `size_of::<ctn_context_options>()`.
    pub struct_size: u32,
    /// `CTN_CONTEXT_*`.
    pub flags: u32,
    /// Extra plugin directories, ':'-separated, or NULL.
    pub plugin_path: *const c_char,
    /// Preferred backends, ','-separated, or NULL.
    pub backends: *const c_char,
    /// Worker threads of host backends; 0 for the default.
    pub num_threads: i32,
    /// Zero.
    pub reserved: i32,
}

/// Do not search the default plugin locations.
pub const CTN_CONTEXT_NO_AUTOLOAD: u32 = 1;

/// What `ctn_context_backend_info` reports.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_backend_info {
    /// `size_of::<ctn_backend_info>()`, set by the caller.
    pub struct_size: u32,
    /// 1 when usable.
    pub available: u32,
    /// Name, owned by the context.
    pub name: *const c_char,
    /// Device name or the reason it is unavailable.
    pub description: *const c_char,
    /// The plugin file.
    pub path: *const c_char,
    /// ABI major the plugin was built against.
    pub abi_major: u32,
    /// ABI minor the plugin was built against.
    pub abi_minor: u32,
}

/// What `ctn_context_op_info` reports about one op (since 1.2).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_op_info {
    /// `size_of::<ctn_op_info>()`, set by the caller.
    pub struct_size: u32,
    /// Exact number of inputs; -1: variadic.
    pub n_inputs: i32,
    /// What `ctn_op` takes.
    pub name: *const c_char,
    /// The attribute slots it reads (`"f[0] slope"`), "" when none or unknown.
    pub attributes: *const c_char,
    /// One line on what it computes; "" when none.
    pub doc: *const c_char,
    /// "builtin", or the name of the op library defining it.
    pub origin: *const c_char,
    /// The library's file, `"<in-process>"` for `ctn_context_add_oplib`, "" for built-in ops.
    pub origin_path: *const c_char,
    /// 1 when `ctn_grad` can differentiate through it.
    pub differentiable: u32,
    /// `CTN_OP_INFO_*`.
    pub flags: u32,
}

/// Output element i depends on input elements i only.
pub const CTN_OP_INFO_ELEMENTWISE: u32 = 1;

/// Eager graph flag of `ctn_graph_create`.
pub const CTN_GRAPH_EAGER: u32 = 1;

/// `ctn_run_options.flags`: check every step's output for NaN/inf (since 1.3).
pub const CTN_RUN_CHECK_NUMERICS: u32 = 1;

/// Options of one run, `ctn_plan_run_with_options` (since 1.3).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_run_options {
    /// `size_of::<ctn_run_options>()`.
    pub struct_size: u32,
    /// `CTN_RUN_*` bits.
    pub flags: u32,
    /// NULL: not cancellable.
    pub cancel: *mut ctn_cancel,
    /// 0: none; else the run is cancelled this long after it started.
    pub timeout_us: u64,
}

/// Options of `ctn_plan_compile`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_compile_options {
    /// `size_of::<ctn_compile_options>()`.
    pub struct_size: u32,
    /// `CTN_PASS_*` bits of passes to skip.
    pub disable: u32,
    /// Backends for this plan, or NULL for the context's preference.
    pub backends: *const c_char,
    /// Non-NULL: a data-parallel plan averaging gradients over the communicator's ranks
    /// (since 1.2).
    pub data_parallel: *mut ctn_collective,
    /// Fusion-bucket size of data-parallel plans; 0: [`CTN_DP_DEFAULT_BUCKET_BYTES`] (since 1.2).
    pub dp_bucket_bytes: u64,
    /// 0: none; bytes for the planned peak, or [`CTN_MEMORY_BUDGET_AUTO`]: over it the compiler
    /// recomputes activations (since 1.2).
    pub memory_budget: u64,
}

/// `memory_budget`: as low as recomputation gets the planned peak (since 1.2).
pub const CTN_MEMORY_BUDGET_AUTO: u64 = u64::MAX;

/// Dead-code elimination.
pub const CTN_PASS_DCE: u32 = 1;
/// Constant folding.
pub const CTN_PASS_CONSTANT_FOLDING: u32 = 2;
/// Algebraic simplification.
pub const CTN_PASS_SIMPLIFY: u32 = 4;
/// Fusion.
pub const CTN_PASS_FUSION: u32 = 8;
/// Buffer reuse in the memory planner.
pub const CTN_PASS_MEMORY_REUSE: u32 = 16;

/// Statistics of a plan.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ctn_plan_stats {
    /// `size_of::<ctn_plan_stats>()`, set by the caller.
    pub struct_size: u32,
    /// Nodes before passes.
    pub n_nodes: u32,
    /// Kernel calls per run.
    pub n_steps: u32,
    /// Nodes removed by fusion.
    pub n_fused: u32,
    /// Nodes removed by folding / simplification.
    pub n_folded: u32,
    /// Steps writing over their input.
    pub n_inplace: u32,
    /// Arena bytes for intermediates.
    pub planned_peak_bytes: u64,
    /// Sum of intermediate sizes.
    pub naive_bytes: u64,
    /// Variables and constants.
    pub persistent_bytes: u64,
    /// Assign copies removed (since 1.1).
    pub n_assign_elided: u32,
    /// Zero.
    pub reserved: u32,
}

/// What a memory budget did to a plan (since 1.2).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_plan_memory_report {
    /// `size_of::<ctn_plan_memory_report>()`, set by the caller.
    pub struct_size: u32,
    /// Steps added that recompute a dropped value.
    pub n_recomputed: u32,
    /// Bytes asked (auto: the minimum reached); 0: none.
    pub budget: u64,
    /// Planned peak of the same plan without recomputation.
    pub peak_without_budget: u64,
    /// Planned peak achieved.
    pub peak_bytes: u64,
    /// Lowest peak recomputation reaches (0 without a budget).
    pub minimum_bytes: u64,
    /// Estimated floating-point operations per run, recomputation included.
    pub flops: u64,
    /// Of which recomputation.
    pub extra_flops: u64,
    /// One line per recomputed step; owned by the plan.
    pub recomputed: *const c_char,
}

// ---- nn.h --------------------------------------------------------------------------------

/// Initialiser kind (C `enum ctn_init`).
pub type ctn_init = i32;
/// Zeros.
pub const CTN_INIT_ZEROS: ctn_init = 0;
/// Ones.
pub const CTN_INIT_ONES: ctn_init = 1;
/// Kaiming uniform.
pub const CTN_INIT_KAIMING_UNIFORM: ctn_init = 2;
/// Kaiming normal.
pub const CTN_INIT_KAIMING_NORMAL: ctn_init = 3;
/// Xavier uniform.
pub const CTN_INIT_XAVIER_UNIFORM: ctn_init = 4;
/// Xavier normal.
pub const CTN_INIT_XAVIER_NORMAL: ctn_init = 5;
/// U(-gain, gain).
pub const CTN_INIT_UNIFORM: ctn_init = 6;
/// N(0, gain^2).
pub const CTN_INIT_NORMAL: ctn_init = 7;

/// Trainable variable.
pub const CTN_VAR_PARAMETER: u32 = 1;
/// Non-trained layer state.
pub const CTN_VAR_BUFFER: u32 = 2;
/// Optimizer state.
pub const CTN_VAR_OPTIMIZER: u32 = 4;

/// `ctn_saved_graph_count` / `_entry` kinds (checkpoint.h, since 1.3): the `ctn_input` nodes.
pub const CTN_SAVED_INPUTS: i32 = 0;
/// The outputs given to `ctn_graph_save`.
pub const CTN_SAVED_OUTPUTS: i32 = 1;
/// The variables.
pub const CTN_SAVED_VARIABLES: i32 = 2;

/// `ctn_onnx_options.flags` (onnx.h): floating initializers become constants, not variables.
pub const CTN_ONNX_INITIALIZERS_AS_CONSTANTS: u32 = 1;
/// `ctn_onnx_options.flags`: parse and check only, no graph is built.
pub const CTN_ONNX_INSPECT_ONLY: u32 = 2;
/// `ctn_onnx_model_count` / `_entry` kinds (onnx.h): graph inputs that are not initializers.
pub const CTN_ONNX_INPUTS: i32 = 0;
/// The graph outputs.
pub const CTN_ONNX_OUTPUTS: i32 = 1;
/// The initializers.
pub const CTN_ONNX_INITIALIZERS: i32 = 2;
/// The distinct op types, in first-use order.
pub const CTN_ONNX_OP_TYPES: i32 = 3;

/// A value for (or the shape of) one graph input of an ONNX model, by name (onnx.h; frozen).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_onnx_input_spec {
    /// The ONNX graph input's name.
    pub name: *const c_char,
    /// Its dtype and shape replace the model's.
    pub value: *const ctn_tensor,
    /// 1: the value is baked into the graph as a constant (no `ctn_input`).
    pub as_constant: u32,
    /// Zero.
    pub reserved: u32,
}

/// Options of `ctn_onnx_load` (onnx.h).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_onnx_options {
    /// `size_of::<ctn_onnx_options>()`.
    pub struct_size: u32,
    /// `CTN_ONNX_*` bits.
    pub flags: u32,
    /// Entries of `inputs`.
    pub n_inputs: u32,
    /// Zero.
    pub reserved: u32,
    /// May be NULL when `n_inputs` is 0.
    pub inputs: *const ctn_onnx_input_spec,
    /// Where external data files are; NULL: the model's directory.
    pub external_data_dir: *const c_char,
}

/// Layer kind of [`ctn_layer`] (C `enum ctn_layer_kind`).
pub type ctn_layer_kind = i32;
/// Linear.
pub const CTN_LAYER_LINEAR: ctn_layer_kind = 1;
/// 2-d convolution.
pub const CTN_LAYER_CONV2D: ctn_layer_kind = 2;
/// Batch normalisation.
pub const CTN_LAYER_BATCH_NORM: ctn_layer_kind = 3;
/// Dropout.
pub const CTN_LAYER_DROPOUT: ctn_layer_kind = 4;
/// ReLU.
pub const CTN_LAYER_RELU: ctn_layer_kind = 5;
/// Tanh.
pub const CTN_LAYER_TANH: ctn_layer_kind = 6;
/// Sigmoid.
pub const CTN_LAYER_SIGMOID: ctn_layer_kind = 7;
/// Max pooling.
pub const CTN_LAYER_MAX_POOL2D: ctn_layer_kind = 8;
/// Average pooling.
pub const CTN_LAYER_AVG_POOL2D: ctn_layer_kind = 9;
/// Flatten.
pub const CTN_LAYER_FLATTEN: ctn_layer_kind = 10;
/// Layer normalisation.
pub const CTN_LAYER_LAYER_NORM: ctn_layer_kind = 11;
/// Layer flag: no bias.
pub const CTN_LAYER_NO_BIAS: i32 = 1;

/// One layer of `ctn_nn_sequential`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_layer {
    /// A `ctn_layer_kind`.
    pub kind: i32,
    /// Out features / channels.
    pub units: i32,
    /// Square window.
    pub kernel: i32,
    /// Stride.
    pub stride: i32,
    /// Padding.
    pub pad: i32,
    /// `CTN_LAYER_*` flags.
    pub flags: i32,
    /// Dropout probability or batch-norm momentum.
    pub p: f64,
    /// Epsilon of the norms.
    pub eps: f64,
    /// Layer name or NULL.
    pub name: *const c_char,
}

/// SGD.
pub const CTN_OPTIM_SGD: i32 = 0;
/// Adam.
pub const CTN_OPTIM_ADAM: i32 = 1;
/// AdamW.
pub const CTN_OPTIM_ADAMW: i32 = 2;

/// Optimizer of `ctn_nn_minimize`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ctn_optimizer {
    /// `size_of::<ctn_optimizer>()`.
    pub struct_size: u32,
    /// `CTN_OPTIM_*`.
    pub kind: i32,
    /// Initial learning rate (0: 0.01).
    pub lr: f64,
    /// SGD momentum.
    pub momentum: f64,
    /// SGD Nesterov.
    pub nesterov: i32,
    /// Zero.
    pub reserved: i32,
    /// Weight decay.
    pub weight_decay: f64,
    /// Adam beta1.
    pub beta1: f64,
    /// Adam beta2.
    pub beta2: f64,
    /// Adam epsilon.
    pub eps: f64,
    /// Global-norm clipping when > 0.
    pub clip_norm: f64,
}

/// Constant learning rate.
pub const CTN_LR_CONSTANT: i32 = 0;
/// Step decay.
pub const CTN_LR_STEP: i32 = 1;
/// Cosine decay.
pub const CTN_LR_COSINE: i32 = 2;
/// Linear decay.
pub const CTN_LR_LINEAR: i32 = 3;

/// A learning-rate schedule.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ctn_lr_schedule {
    /// `CTN_LR_*`.
    pub kind: i32,
    /// Zero.
    pub reserved: i32,
    /// Base rate.
    pub base_lr: f64,
    /// Warm-up steps.
    pub warmup_steps: i64,
    /// STEP: steps per decay.
    pub step_size: i64,
    /// STEP: factor.
    pub gamma: f64,
    /// COSINE, LINEAR: total steps.
    pub total_steps: i64,
    /// COSINE, LINEAR: final value.
    pub min_lr: f64,
}

// ---- data.h ------------------------------------------------------------------------------

/// Dataset description.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ctn_dataset_info {
    /// `size_of::<ctn_dataset_info>()`, set by the caller.
    pub struct_size: u32,
    /// Largest label + 1.
    pub num_classes: u32,
    /// Number of samples.
    pub count: i64,
    /// Image height.
    pub rows: i32,
    /// Image width.
    pub cols: i32,
}

/// Shuffle each epoch.
pub const CTN_LOADER_SHUFFLE: u32 = 1;
/// Skip a final partial batch.
pub const CTN_LOADER_DROP_LAST: u32 = 2;
/// Images as `[B, rows*cols]`.
pub const CTN_LOADER_FLAT: u32 = 4;
/// Random horizontal flips.
pub const CTN_LOADER_HFLIP: u32 = 8;
/// No worker threads.
pub const CTN_LOADER_SYNCHRONOUS: u32 = 16;

/// Options of `ctn_loader_create`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ctn_loader_options {
    /// `size_of::<ctn_loader_options>()`.
    pub struct_size: u32,
    /// `CTN_LOADER_*`.
    pub flags: u32,
    /// Batch size (>= 1).
    pub batch_size: i32,
    /// Random-crop padding.
    pub crop_padding: i32,
    /// Shuffling and augmentation seed.
    pub seed: u64,
    /// Normalisation mean.
    pub mean: f64,
    /// Normalisation std (0 means 1).
    pub std: f64,
    /// Worker threads (0: 1).
    pub num_workers: i32,
    /// Prefetched batches (0: default).
    pub prefetch: i32,
    /// This rank's shard, `0 <= shard_index < shard_count` (since 1.2).
    pub shard_index: i32,
    /// Number of shards; 0 or 1: no sharding (since 1.2).
    pub shard_count: i32,
}

/// Loader statistics.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ctn_loader_stats {
    /// `size_of::<ctn_loader_stats>()`, set by the caller.
    pub struct_size: u32,
    /// Worker threads.
    pub num_workers: u32,
    /// Batches delivered.
    pub batches: u64,
    /// Samples delivered.
    pub samples: u64,
    /// Calls that waited.
    pub waits: u64,
    /// Seconds blocked.
    pub wait_seconds: f64,
    /// Seconds copying.
    pub copy_seconds: f64,
    /// Seconds assembling (all workers).
    pub worker_seconds: f64,
}

/// Default Fashion-MNIST folder (Debian's dataset-fashion-mnist), NUL-terminated.
pub const CTN_FASHION_MNIST_DIR: &[u8] = b"/usr/share/datasets/fashion-mnist\0";

// ---- plugin.h and oplib.h: op libraries written in Rust ----------------------------------

/// The symbol every plugin exports.
pub const CTN_PLUGIN_ENTRY_SYMBOL: &[u8] = b"ctn_plugin_query\0";
/// Plugin kind: a device backend.
pub const CTN_PLUGIN_BACKEND: u32 = 1;
/// Plugin kind: an op library.
pub const CTN_PLUGIN_OPLIB: u32 = 2;
/// Plugin kind: a collective (plugin.h's enum name; collective.h's macro is
/// [`CTN_PLUGIN_COLLECTIVE`]). Since 1.2.
pub const CTN_PLUGIN_COLLECTIVE_KIND: u32 = 3;
/// Log level.
pub const CTN_LOG_DEBUG: i32 = 0;
/// Log level.
pub const CTN_LOG_INFO: i32 = 1;
/// Log level.
pub const CTN_LOG_WARN: i32 = 2;
/// Log level.
pub const CTN_LOG_ERROR: i32 = 3;

/// The frozen prefix of every plugin descriptor.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_plugin_header {
    /// Size of the whole descriptor.
    pub struct_size: u32,
    /// ABI major the plugin was built against.
    pub abi_major: u16,
    /// ABI minor the plugin was built against.
    pub abi_minor: u16,
    /// `CTN_PLUGIN_*`.
    pub kind: u32,
    /// Zero.
    pub reserved: u32,
    /// Short unique name.
    pub name: *const c_char,
}

/// What the host gives plugins (plugins never link libchutney).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_host_api {
    /// Size of this table as the host knows it.
    pub struct_size: u32,
    /// Host ABI major.
    pub abi_major: u16,
    /// Host ABI minor.
    pub abi_minor: u16,
    /// Records a printf-style message as the error of the current call; returns `code`.
    pub set_error: Option<unsafe extern "C" fn(code: ctn_status, fmt: *const c_char, ...) -> ctn_status>,
    /// Writes a line to the host's log.
    pub log: Option<unsafe extern "C" fn(level: i32, plugin: *const c_char, message: *const c_char)>,
    /// `ctn_op` for gradient rules.
    pub graph_op: Option<
        unsafe extern "C" fn(
            g: *mut ctn_graph,
            op: *const c_char,
            n_inputs: u32,
            inputs: *const ctn_node,
            attrs: *const ctn_attrs,
            out: *mut ctn_node,
        ) -> ctn_status,
    >,
    /// `ctn_scalar` for gradient rules.
    pub graph_scalar:
        Option<unsafe extern "C" fn(g: *mut ctn_graph, dtype: ctn_dtype, value: f64, out: *mut ctn_node) -> ctn_status>,
    /// `ctn_node_info` for gradient rules.
    pub graph_node_info: Option<
        unsafe extern "C" fn(
            g: *mut ctn_graph,
            n: ctn_node,
            out_dtype: *mut ctn_dtype,
            out_ndim: *mut u32,
            out_shape: *mut i64,
        ) -> ctn_status,
    >,
    /// `set_error` without the format: records `message` verbatim (copied) and returns `code`
    /// (since 1.2; check `struct_size` before use).
    pub set_error_message: Option<unsafe extern "C" fn(code: ctn_status, message: *const c_char) -> ctn_status>,
    /// From inside a kernel maker only: extra `name` of the backend the kernel is made for
    /// (`backend` names it, or NULL), e.g. `"ctn_opencl_interop"` ([`ctn_opencl_interop`]); the
    /// extra and the backend state it takes (since 1.2; check `struct_size` before use).
    pub backend_proc: Option<
        unsafe extern "C" fn(
            backend: *const c_char,
            name: *const c_char,
            out_proc: *mut *mut c_void,
            out_state: *mut *mut c_void,
        ) -> ctn_status,
    >,
}

/// The name of the OpenCL backend's interop extra (opencl.h; since 1.2).
pub const CTN_OPENCL_INTEROP_PROC: &str = "ctn_opencl_interop";
/// The version of [`ctn_opencl_interop`] this crate describes (opencl.h; since 1.2).
pub const CTN_OPENCL_INTEROP_VERSION: u32 = 1;
/// Any OpenCL entry point, as `ctn_opencl_interop::get_function` returns it.
pub type ctn_opencl_fn = Option<unsafe extern "C" fn()>;

/// The OpenCL backend's native handles for op-library kernels (opencl.h; since 1.2). Set
/// `struct_size`, then call the extra (type [`ctn_opencl_interop_fn`]).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_opencl_interop {
    /// In: `size_of::<ctn_opencl_interop>()`.
    pub struct_size: u32,
    /// Out: [`CTN_OPENCL_INTEROP_VERSION`] of the backend.
    pub version: u32,
    /// `cl_platform_id`.
    pub platform: *mut c_void,
    /// `cl_device_id`.
    pub device: *mut c_void,
    /// `cl_context`.
    pub context: *mut c_void,
    /// `cl_command_queue` (in order, the backend's own): enqueue kernels only here.
    pub queue: *mut c_void,
    /// The OpenCL entry point of that name from the backend's ICD loader, or NULL.
    pub get_function: Option<unsafe extern "C" fn(name: *const c_char) -> ctn_opencl_fn>,
    /// 1 when the device has `cl_khr_fp64`.
    pub fp64: u32,
    /// Zero.
    pub reserved: u32,
}

/// The type of the `"ctn_opencl_interop"` extra (opencl.h; since 1.2).
pub type ctn_opencl_interop_fn =
    Option<unsafe extern "C" fn(backend_state: *mut c_void, out: *mut ctn_opencl_interop) -> ctn_status>;

/// The name of the Vulkan backend's interop extra (vulkan.h; since 1.2).
pub const CTN_VULKAN_INTEROP_PROC: &str = "ctn_vulkan_interop";
/// The version of [`ctn_vulkan_interop`] this crate describes (vulkan.h; since 1.2).
pub const CTN_VULKAN_INTEROP_VERSION: u32 = 1;
/// Any Vulkan entry point (`PFN_vkVoidFunction`).
pub type ctn_vulkan_fn = Option<unsafe extern "C" fn()>;

/// What `begin_commands` hands out (vulkan.h; since 1.2).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_vulkan_commands {
    /// In: `size_of::<ctn_vulkan_commands>()`.
    pub struct_size: u32,
    /// Zero.
    pub reserved: u32,
    /// `VkCommandBuffer`, recording.
    pub command_buffer: *mut c_void,
    /// `VkDescriptorPool` for this recording's descriptor sets.
    pub descriptor_pool: u64,
    /// The backend's; hand the struct back to `end_commands`.
    pub token: *mut c_void,
}

/// The Vulkan backend's native handles and its command-buffer hook (vulkan.h; since 1.2).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_vulkan_interop {
    /// In: `size_of::<ctn_vulkan_interop>()`.
    pub struct_size: u32,
    /// Out: [`CTN_VULKAN_INTEROP_VERSION`] of the backend.
    pub version: u32,
    /// `VkInstance`.
    pub instance: *mut c_void,
    /// `VkPhysicalDevice`.
    pub physical_device: *mut c_void,
    /// `VkDevice`.
    pub device: *mut c_void,
    /// `VkQueue` (the backend's; never submit to it).
    pub queue: *mut c_void,
    /// The queue's family index.
    pub queue_family: u32,
    /// The Vulkan version the device was created for.
    pub api_version: u32,
    /// `PFN_vkGetInstanceProcAddr` of the backend's loader.
    pub get_instance_proc_addr: Option<unsafe extern "C" fn(instance: *mut c_void, name: *const c_char) -> ctn_vulkan_fn>,
    /// 1 when `shaderFloat64` is enabled.
    pub shader_float64: u32,
    /// Zero.
    pub reserved: u32,
    /// `minStorageBufferOffsetAlignment`.
    pub storage_offset_alignment: u64,
    /// `maxStorageBufferRange`.
    pub max_storage_range: u64,
    /// The `VkBuffer` and its size behind a descriptor's `data`.
    pub buffer_info: Option<
        unsafe extern "C" fn(backend_state: *mut c_void, data: *mut c_void, out_buffer: *mut u64, out_size: *mut u64)
            -> ctn_status,
    >,
    /// The command buffer being recorded now, with a descriptor pool (see vulkan.h).
    pub begin_commands: Option<
        unsafe extern "C" fn(
            backend_state: *mut c_void,
            n_sets: u32,
            n_descriptors: u32,
            out: *mut ctn_vulkan_commands,
        ) -> ctn_status,
    >,
    /// Ends what `begin_commands` began (submits a lone call's command buffer).
    pub end_commands: Option<unsafe extern "C" fn(backend_state: *mut c_void, commands: *mut ctn_vulkan_commands) -> ctn_status>,
}

/// The type of the `"ctn_vulkan_interop"` extra (vulkan.h; since 1.2).
pub type ctn_vulkan_interop_fn =
    Option<unsafe extern "C" fn(backend_state: *mut c_void, out: *mut ctn_vulkan_interop) -> ctn_status>;

/// The name of the CUDA backend's interop extra (cuda.h; since 1.2).
pub const CTN_CUDA_INTEROP_PROC: &str = "ctn_cuda_interop";
/// The version of [`ctn_cuda_interop`] this crate describes (cuda.h; since 1.2).
pub const CTN_CUDA_INTEROP_VERSION: u32 = 1;
/// Any CUDA driver entry point.
pub type ctn_cuda_fn = Option<unsafe extern "C" fn()>;

/// The CUDA backend's native handles (cuda.h; since 1.2): launch only on `stream`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_cuda_interop {
    /// In: `size_of::<ctn_cuda_interop>()`.
    pub struct_size: u32,
    /// Out: [`CTN_CUDA_INTEROP_VERSION`] of the backend.
    pub version: u32,
    /// Device ordinal.
    pub device: i32,
    /// major * 10 + minor.
    pub compute_capability: i32,
    /// `CUcontext` (the primary context).
    pub context: *mut c_void,
    /// `CUstream` / `cudaStream_t`.
    pub stream: *mut c_void,
    /// A driver API function of the backend's libcuda, or NULL.
    pub get_driver_function: Option<unsafe extern "C" fn(backend_state: *mut c_void, name: *const c_char) -> ctn_cuda_fn>,
}

/// The type of the `"ctn_cuda_interop"` extra (cuda.h; since 1.2).
pub type ctn_cuda_interop_fn =
    Option<unsafe extern "C" fn(backend_state: *mut c_void, out: *mut ctn_cuda_interop) -> ctn_status>;

/// The entry point of a plugin.
pub type ctn_plugin_query_fn =
    Option<unsafe extern "C" fn(host_abi_version: u32, host: *const ctn_host_api) -> *const ctn_plugin_header>;

/// Shape inference of an op-library op.
pub type ctn_infer_fn = Option<
    unsafe extern "C" fn(
        host: *const ctn_host_api,
        n_inputs: u32,
        inputs: *const ctn_tensor_desc,
        attrs: *const ctn_attrs,
        out: *mut ctn_tensor_desc,
    ) -> ctn_status,
>;

/// Gradient rule of an op-library op.
pub type ctn_grad_fn = Option<
    unsafe extern "C" fn(
        host: *const ctn_host_api,
        g: *mut ctn_graph,
        n_inputs: u32,
        inputs: *const ctn_node,
        output: ctn_node,
        grad_out: ctn_node,
        attrs: *const ctn_attrs,
        grad_inputs: *mut ctn_node,
    ) -> ctn_status,
>;

/// A kernel maker for one backend.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_oplib_kernel {
    /// Backend name ("cpu").
    pub backend: *const c_char,
    /// Makes the kernel for these input and output descriptors.
    pub get_kernel: Option<
        unsafe extern "C" fn(
            host: *const ctn_host_api,
            n_inputs: u32,
            inputs: *const ctn_tensor_desc,
            output: *const ctn_tensor_desc,
            attrs: *const ctn_attrs,
            out: *mut ctn_kernel,
        ) -> ctn_status,
    >,
}

/// Shape inference receiving the op and its `user_data` (since 1.2).
pub type ctn_op_infer_fn = Option<
    unsafe extern "C" fn(
        host: *const ctn_host_api,
        op: *const ctn_op_def,
        user_data: *mut c_void,
        n_inputs: u32,
        inputs: *const ctn_tensor_desc,
        attrs: *const ctn_attrs,
        out: *mut ctn_tensor_desc,
    ) -> ctn_status,
>;

/// Gradient rule receiving the op and its `user_data` (since 1.2).
pub type ctn_op_grad_fn = Option<
    unsafe extern "C" fn(
        host: *const ctn_host_api,
        op: *const ctn_op_def,
        user_data: *mut c_void,
        g: *mut ctn_graph,
        n_inputs: u32,
        inputs: *const ctn_node,
        output: ctn_node,
        grad_out: ctn_node,
        attrs: *const ctn_attrs,
        grad_inputs: *mut ctn_node,
    ) -> ctn_status,
>;

/// Forward-mode tangent rule receiving the op and its `user_data` (since 1.2).
pub type ctn_op_jvp_fn = Option<
    unsafe extern "C" fn(
        host: *const ctn_host_api,
        op: *const ctn_op_def,
        user_data: *mut c_void,
        g: *mut ctn_graph,
        n_inputs: u32,
        inputs: *const ctn_node,
        output: ctn_node,
        tangents: *const ctn_node,
        attrs: *const ctn_attrs,
        tangent_out: *mut ctn_node,
    ) -> ctn_status,
>;

/// Kernel maker receiving the op, its `user_data` and the backend's name (since 1.2).
pub type ctn_op_kernel_make_fn = Option<
    unsafe extern "C" fn(
        host: *const ctn_host_api,
        op: *const ctn_op_def,
        user_data: *mut c_void,
        backend: *const c_char,
        n_inputs: u32,
        inputs: *const ctn_tensor_desc,
        output: *const ctn_tensor_desc,
        attrs: *const ctn_attrs,
        out: *mut ctn_kernel,
    ) -> ctn_status,
>;

/// Runs a kernel whose make left `out.fn_` NULL: `state` is `out.state` (since 1.2).
pub type ctn_op_kernel_run_fn = Option<
    unsafe extern "C" fn(
        op: *const ctn_op_def,
        user_data: *mut c_void,
        state: *mut c_void,
        args: *const ctn_kernel_args,
    ) -> ctn_status,
>;

/// A 1.2 kernel maker for one backend (array element strided by `struct_size`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_op_kernel {
    /// `size_of::<ctn_op_kernel>()`.
    pub struct_size: u32,
    /// Zero.
    pub reserved: u32,
    /// Backend name ("cpu").
    pub backend: *const c_char,
    /// Makes the kernel (required).
    pub make: ctn_op_kernel_make_fn,
    /// Runs kernels whose `make` left `fn_` NULL (optional).
    pub run: ctn_op_kernel_run_fn,
}

/// One op of an op library.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_op_def {
    /// `size_of::<ctn_op_def>()`.
    pub struct_size: u32,
    /// Exact number of inputs.
    pub n_inputs: u32,
    /// Op name.
    pub name: *const c_char,
    /// One line of documentation.
    pub doc: *const c_char,
    /// Shape inference (required).
    pub infer: ctn_infer_fn,
    /// Gradient rule (optional).
    pub grad: ctn_grad_fn,
    /// Number of kernels.
    pub n_kernels: u32,
    /// The kernels.
    pub kernels: *const ctn_oplib_kernel,
    /// Handed to the 1.2 callbacks; owned by the library (since 1.2).
    pub user_data: *mut c_void,
    /// When set, called instead of `infer` (since 1.2).
    pub infer_ex: ctn_op_infer_fn,
    /// When set, called instead of `grad` (since 1.2).
    pub grad_ex: ctn_op_grad_fn,
    /// Number of `kernels_ex`.
    pub n_kernels_ex: u32,
    /// Zero.
    pub reserved: u32,
    /// Kernel makers searched before `kernels` (since 1.2).
    pub kernels_ex: *const ctn_op_kernel,
    /// Forward-mode tangent rule for `ctn_jvp` (optional; since 1.2).
    pub jvp_ex: ctn_op_jvp_fn,
}

/// The descriptor an op library's `ctn_plugin_query` returns.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_oplib_desc {
    /// Frozen prefix; `header.kind == CTN_PLUGIN_OPLIB`.
    pub header: ctn_plugin_header,
    /// Called once after the header is accepted (optional).
    pub init: Option<unsafe extern "C" fn(host: *const ctn_host_api) -> ctn_status>,
    /// Called before unloading (optional).
    pub shutdown: Option<unsafe extern "C" fn()>,
    /// Number of ops.
    pub n_ops: u32,
    /// The ops (static storage).
    pub ops: *const ctn_op_def,
}

// SAFETY: descriptors are static, immutable tables of pointers to static data and functions.
unsafe impl Sync for ctn_oplib_desc {}
// SAFETY: as above.
unsafe impl Sync for ctn_op_def {}
// SAFETY: as above.
unsafe impl Sync for ctn_oplib_kernel {}
// SAFETY: as above.
unsafe impl Sync for ctn_op_kernel {}

// ---- collective.h (since 1.2) ------------------------------------------------------------

/// `header.kind` of a collective plugin.
pub const CTN_PLUGIN_COLLECTIVE: u32 = 3;
/// `ctn_collective_desc.flags`: buffers handed to the slots are host pointers.
pub const CTN_COLLECTIVE_HOST_MEMORY: u32 = 1;
/// Reduction: sum.
pub const CTN_REDUCE_SUM: u32 = 0;
/// Reduction: the sum divided by the world size.
pub const CTN_REDUCE_MEAN: u32 = 1;
/// Default fusion-bucket size of data-parallel plans (64 MiB).
pub const CTN_DP_DEFAULT_BUCKET_BYTES: u64 = 64 << 20;

/// How to start a communicator (`ctn_collective_open`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_collective_config {
    /// `size_of::<ctn_collective_config>()`.
    pub struct_size: u32,
    /// < 0: from the launcher.
    pub rank: i32,
    /// < 1: from the launcher.
    pub world_size: i32,
    /// Zero.
    pub reserved: i32,
    /// How ranks find each other; NULL: the plugin's default.
    pub rendezvous: *const c_char,
    /// Seconds before a collective fails and aborts the job; <= 0: 60.
    pub timeout_s: f64,
}

/// The descriptor a collective plugin's `ctn_plugin_query` returns.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ctn_collective_desc {
    /// Frozen prefix; `header.kind == CTN_PLUGIN_COLLECTIVE`.
    pub header: ctn_plugin_header,
    /// `CTN_COLLECTIVE_*`.
    pub flags: u32,
    /// Zero.
    pub reserved: u32,
    /// Cheap availability check while loading.
    pub probe: Option<unsafe extern "C" fn(host: *const ctn_host_api) -> ctn_status>,
    /// Joins the job.
    pub init: Option<
        unsafe extern "C" fn(
            host: *const ctn_host_api,
            config: *const ctn_collective_config,
            out_state: *mut *mut c_void,
        ) -> ctn_status,
    >,
    /// Leaves the job.
    pub shutdown: Option<unsafe extern "C" fn(state: *mut c_void)>,
    /// A description of the communicator.
    pub describe: Option<unsafe extern "C" fn(state: *mut c_void) -> *const c_char>,
    /// This rank.
    pub rank: Option<unsafe extern "C" fn(state: *mut c_void) -> i32>,
    /// Number of ranks.
    pub world_size: Option<unsafe extern "C" fn(state: *mut c_void) -> i32>,
    /// In-place all-reduce.
    pub allreduce: Option<
        unsafe extern "C" fn(state: *mut c_void, buf: *mut c_void, count: u64, dtype: ctn_dtype, op: u32) -> ctn_status,
    >,
    /// Broadcast from `root`.
    pub broadcast:
        Option<unsafe extern "C" fn(state: *mut c_void, buf: *mut c_void, bytes: u64, root: i32) -> ctn_status>,
    /// Waits for every rank.
    pub barrier: Option<unsafe extern "C" fn(state: *mut c_void) -> ctn_status>,
    /// Ends the whole job.
    pub abort: Option<unsafe extern "C" fn(state: *mut c_void, code: i32, why: *const c_char)>,
    /// The last failure's message.
    pub last_error: Option<unsafe extern "C" fn(state: *mut c_void) -> *const c_char>,
}

// ---- functions ---------------------------------------------------------------------------

extern "C" {
    // chutney.h: versions and errors
    pub fn ctn_abi_version() -> u32;
    pub fn ctn_version_string() -> *const c_char;
    pub fn ctn_last_error() -> *const c_char;
    pub fn ctn_status_name(status: ctn_status) -> *const c_char;
    pub fn ctn_dtype_size(dtype: ctn_dtype) -> usize;
    pub fn ctn_dtype_name(dtype: ctn_dtype) -> *const c_char;

    // chutney.h: contexts
    pub fn ctn_context_create(
        options: *const ctn_context_options,
        out: *mut *mut ctn_context,
    ) -> ctn_status;
    pub fn ctn_context_release(ctx: *mut ctn_context);
    pub fn ctn_context_load_plugin(ctx: *mut ctn_context, path: *const c_char) -> ctn_status;
    pub fn ctn_context_plugin_report(
        ctx: *mut ctn_context,
        out_text: *mut *const c_char,
    ) -> ctn_status;
    pub fn ctn_context_backend_count(ctx: *mut ctn_context, out_count: *mut u32) -> ctn_status;
    pub fn ctn_context_backend_info(
        ctx: *mut ctn_context,
        index: u32,
        out: *mut ctn_backend_info,
    ) -> ctn_status;
    pub fn ctn_context_set_backends(ctx: *mut ctn_context, backends: *const c_char)
        -> ctn_status;
    pub fn ctn_context_set_num_threads(ctx: *mut ctn_context, num_threads: i32) -> ctn_status;
    pub fn ctn_context_add_oplib(ctx: *mut ctn_context, query: ctn_plugin_query_fn) -> ctn_status;
    pub fn ctn_context_backend_proc(
        ctx: *mut ctn_context,
        backend: *const c_char,
        name: *const c_char,
        out_proc: *mut *mut c_void,
        out_state: *mut *mut c_void,
    ) -> ctn_status;
    pub fn ctn_context_op_count(ctx: *mut ctn_context, out_count: *mut u32) -> ctn_status;
    pub fn ctn_context_op_info(ctx: *mut ctn_context, index: u32, out: *mut ctn_op_info) -> ctn_status;
    pub fn ctn_context_op_support(
        ctx: *mut ctn_context,
        backend: *const c_char,
        op: *const c_char,
        dtype: ctn_dtype,
        out_supported: *mut i32,
        out_reason: *mut *const c_char,
    ) -> ctn_status;

    // collective.h (since 1.2)
    pub fn ctn_collective_open(
        ctx: *mut ctn_context,
        name: *const c_char,
        config: *const ctn_collective_config,
        out: *mut *mut ctn_collective,
    ) -> ctn_status;
    pub fn ctn_collective_release(c: *mut ctn_collective);
    pub fn ctn_collective_rank(c: *const ctn_collective, out_rank: *mut i32, out_world_size: *mut i32) -> ctn_status;
    pub fn ctn_collective_describe(c: *const ctn_collective, out_text: *mut *const c_char) -> ctn_status;
    pub fn ctn_collective_allreduce(c: *mut ctn_collective, t: *mut ctn_tensor, op: u32) -> ctn_status;
    pub fn ctn_collective_broadcast(c: *mut ctn_collective, t: *mut ctn_tensor, root: i32) -> ctn_status;
    pub fn ctn_collective_barrier(c: *mut ctn_collective) -> ctn_status;
    pub fn ctn_collective_abort(c: *mut ctn_collective, code: i32, why: *const c_char);
    pub fn ctn_collective_last_error(c: *const ctn_collective) -> *const c_char;

    pub fn ctn_context_set_option(
        ctx: *mut ctn_context,
        backend: *const c_char,
        key: *const c_char,
        value: *const c_char,
    ) -> ctn_status;

    // chutney.h: tensors
    pub fn ctn_tensor_create(
        dtype: ctn_dtype,
        ndim: u32,
        shape: *const i64,
        data: *const c_void,
        out: *mut *mut ctn_tensor,
    ) -> ctn_status;
    pub fn ctn_tensor_release(t: *mut ctn_tensor);
    pub fn ctn_tensor_dtype(t: *const ctn_tensor, out: *mut ctn_dtype) -> ctn_status;
    pub fn ctn_tensor_shape(t: *const ctn_tensor, out_ndim: *mut u32, out_shape: *mut i64)
        -> ctn_status;
    pub fn ctn_tensor_strides(t: *const ctn_tensor, out_strides: *mut i64) -> ctn_status;
    pub fn ctn_tensor_numel(t: *const ctn_tensor, out_numel: *mut i64) -> ctn_status;
    pub fn ctn_tensor_is_contiguous(t: *const ctn_tensor, out: *mut i32) -> ctn_status;
    pub fn ctn_tensor_read(t: *const ctn_tensor, dst: *mut c_void, bytes: usize) -> ctn_status;
    pub fn ctn_tensor_write(t: *mut ctn_tensor, src: *const c_void, bytes: usize) -> ctn_status;
    pub fn ctn_tensor_data(t: *mut ctn_tensor, out: *mut *mut c_void) -> ctn_status;
    pub fn ctn_tensor_slice(
        t: *const ctn_tensor,
        axis: i32,
        start: i64,
        stop: i64,
        step: i64,
        out: *mut *mut ctn_tensor,
    ) -> ctn_status;
    pub fn ctn_tensor_permute(
        t: *const ctn_tensor,
        perm: *const i32,
        out: *mut *mut ctn_tensor,
    ) -> ctn_status;
    pub fn ctn_tensor_reshape(
        t: *const ctn_tensor,
        ndim: u32,
        shape: *const i64,
        out: *mut *mut ctn_tensor,
        out_copied: *mut i32,
    ) -> ctn_status;
    pub fn ctn_tensor_contiguous(t: *const ctn_tensor, out: *mut *mut ctn_tensor) -> ctn_status;

    // chutney.h: graphs
    pub fn ctn_graph_create(ctx: *mut ctn_context, flags: u32, out: *mut *mut ctn_graph)
        -> ctn_status;
    pub fn ctn_graph_release(g: *mut ctn_graph);
    pub fn ctn_input(
        g: *mut ctn_graph,
        name: *const c_char,
        dtype: ctn_dtype,
        ndim: u32,
        shape: *const i64,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_constant(g: *mut ctn_graph, value: *const ctn_tensor, out: *mut ctn_node)
        -> ctn_status;
    pub fn ctn_scalar(g: *mut ctn_graph, dtype: ctn_dtype, value: f64, out: *mut ctn_node)
        -> ctn_status;
    pub fn ctn_variable(
        g: *mut ctn_graph,
        name: *const c_char,
        init: *const ctn_tensor,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_assign(g: *mut ctn_graph, var: ctn_node, value: ctn_node, out: *mut ctn_node)
        -> ctn_status;
    pub fn ctn_op(
        g: *mut ctn_graph,
        op: *const c_char,
        n_inputs: u32,
        inputs: *const ctn_node,
        attrs: *const ctn_attrs,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_add(g: *mut ctn_graph, a: ctn_node, b: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_sub(g: *mut ctn_graph, a: ctn_node, b: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_mul(g: *mut ctn_graph, a: ctn_node, b: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_div(g: *mut ctn_graph, a: ctn_node, b: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_pow(g: *mut ctn_graph, a: ctn_node, b: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_neg(g: *mut ctn_graph, a: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_exp(g: *mut ctn_graph, a: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_log(g: *mut ctn_graph, a: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_sqrt(g: *mut ctn_graph, a: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_abs(g: *mut ctn_graph, a: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_tanh(g: *mut ctn_graph, a: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_sigmoid(g: *mut ctn_graph, a: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_relu(g: *mut ctn_graph, a: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_leaky_relu(g: *mut ctn_graph, a: ctn_node, slope: f64, out: *mut ctn_node)
        -> ctn_status;
    pub fn ctn_gelu(g: *mut ctn_graph, a: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_clamp(g: *mut ctn_graph, a: ctn_node, lo: f64, hi: f64, out: *mut ctn_node)
        -> ctn_status;
    pub fn ctn_matmul(
        g: *mut ctn_graph,
        a: ctn_node,
        b: ctn_node,
        trans_a: i32,
        trans_b: i32,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_sum(
        g: *mut ctn_graph,
        a: ctn_node,
        n_axes: u32,
        axes: *const i32,
        keepdims: i32,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_mean(
        g: *mut ctn_graph,
        a: ctn_node,
        n_axes: u32,
        axes: *const i32,
        keepdims: i32,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_max(
        g: *mut ctn_graph,
        a: ctn_node,
        n_axes: u32,
        axes: *const i32,
        keepdims: i32,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_reshape(
        g: *mut ctn_graph,
        a: ctn_node,
        ndim: u32,
        shape: *const i64,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_permute(g: *mut ctn_graph, a: ctn_node, perm: *const i32, out: *mut ctn_node)
        -> ctn_status;
    pub fn ctn_transpose(g: *mut ctn_graph, a: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_slice(
        g: *mut ctn_graph,
        a: ctn_node,
        axis: i32,
        start: i64,
        stop: i64,
        step: i64,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_concat(
        g: *mut ctn_graph,
        n: u32,
        inputs: *const ctn_node,
        axis: i32,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_broadcast_to(
        g: *mut ctn_graph,
        a: ctn_node,
        ndim: u32,
        shape: *const i64,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_compare(
        g: *mut ctn_graph,
        op: *const c_char,
        a: ctn_node,
        b: ctn_node,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_where(
        g: *mut ctn_graph,
        cond: ctn_node,
        a: ctn_node,
        b: ctn_node,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_softmax(g: *mut ctn_graph, a: ctn_node, axis: i32, out: *mut ctn_node)
        -> ctn_status;
    pub fn ctn_log_softmax(g: *mut ctn_graph, a: ctn_node, axis: i32, out: *mut ctn_node)
        -> ctn_status;
    pub fn ctn_cross_entropy(
        g: *mut ctn_graph,
        logits: ctn_node,
        labels: ctn_node,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_cast(g: *mut ctn_graph, a: ctn_node, dtype: ctn_dtype, out: *mut ctn_node)
        -> ctn_status;
    pub fn ctn_node_info(
        g: *mut ctn_graph,
        n: ctn_node,
        out_dtype: *mut ctn_dtype,
        out_ndim: *mut u32,
        out_shape: *mut i64,
    ) -> ctn_status;
    pub fn ctn_graph_node_count(g: *mut ctn_graph, out_count: *mut u32) -> ctn_status;
    pub fn ctn_grad(
        g: *mut ctn_graph,
        loss: ctn_node,
        n_wrt: u32,
        wrt: *const ctn_node,
        out_grads: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_jvp(
        g: *mut ctn_graph,
        n_outputs: u32,
        outputs: *const ctn_node,
        n_inputs: u32,
        inputs: *const ctn_node,
        tangents: *const ctn_node,
        out_tangents: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_graph_value(g: *mut ctn_graph, n: ctn_node, out: *mut *mut ctn_tensor)
        -> ctn_status;
    pub fn ctn_graph_node_backend(
        g: *mut ctn_graph,
        n: ctn_node,
        out_name: *mut *const c_char,
    ) -> ctn_status;
    pub fn ctn_graph_to_dot(g: *mut ctn_graph, out_text: *mut *const c_char) -> ctn_status;

    // chutney.h: plans
    pub fn ctn_plan_compile(
        g: *mut ctn_graph,
        n_outputs: u32,
        outputs: *const ctn_node,
        options: *const ctn_compile_options,
        out: *mut *mut ctn_plan,
    ) -> ctn_status;
    pub fn ctn_plan_release(p: *mut ctn_plan);
    pub fn ctn_plan_stats_get(p: *mut ctn_plan, out: *mut ctn_plan_stats) -> ctn_status;
    pub fn ctn_plan_memory_report_get(
        p: *mut ctn_plan,
        out: *mut ctn_plan_memory_report,
    ) -> ctn_status;
    pub fn ctn_plan_describe(p: *mut ctn_plan, out_text: *mut *const c_char) -> ctn_status;
    pub fn ctn_plan_backend_steps(
        p: *mut ctn_plan,
        backend: *const c_char,
        op: *const c_char,
        out_count: *mut u32,
    ) -> ctn_status;
    pub fn ctn_plan_run(
        p: *mut ctn_plan,
        n_feeds: u32,
        feed_nodes: *const ctn_node,
        feed_values: *const *const ctn_tensor,
        n_outputs: u32,
        outputs: *const *mut ctn_tensor,
    ) -> ctn_status;
    pub fn ctn_plan_output_create(p: *mut ctn_plan, index: u32, out: *mut *mut ctn_tensor)
        -> ctn_status;
    pub fn ctn_plan_variable_read(p: *mut ctn_plan, var: ctn_node, out: *mut *mut ctn_tensor)
        -> ctn_status;
    pub fn ctn_plan_variable_write(p: *mut ctn_plan, var: ctn_node, value: *const ctn_tensor)
        -> ctn_status;

    // chutney.h: neural-network ops (since 1.1)
    pub fn ctn_conv2d(
        g: *mut ctn_graph,
        x: ctn_node,
        w: ctn_node,
        stride_h: i32,
        stride_w: i32,
        pad_h: i32,
        pad_w: i32,
        dil_h: i32,
        dil_w: i32,
        groups: i32,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_conv_transpose2d(
        g: *mut ctn_graph,
        x: ctn_node,
        w: ctn_node,
        stride_h: i32,
        stride_w: i32,
        pad_h: i32,
        pad_w: i32,
        dil_h: i32,
        dil_w: i32,
        groups: i32,
        out_pad_h: i32,
        out_pad_w: i32,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_max_pool2d(
        g: *mut ctn_graph,
        x: ctn_node,
        kh: i32,
        kw: i32,
        sh: i32,
        sw: i32,
        ph: i32,
        pw: i32,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_avg_pool2d(
        g: *mut ctn_graph,
        x: ctn_node,
        kh: i32,
        kw: i32,
        sh: i32,
        sw: i32,
        ph: i32,
        pw: i32,
        count_include_pad: i32,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_batch_norm(
        g: *mut ctn_graph,
        x: ctn_node,
        gamma: ctn_node,
        beta: ctn_node,
        eps: f64,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_batch_norm_inference(
        g: *mut ctn_graph,
        x: ctn_node,
        gamma: ctn_node,
        beta: ctn_node,
        mean: ctn_node,
        var: ctn_node,
        eps: f64,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_layer_norm(
        g: *mut ctn_graph,
        x: ctn_node,
        gamma: ctn_node,
        beta: ctn_node,
        first_axis: i32,
        eps: f64,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_dropout(
        g: *mut ctn_graph,
        x: ctn_node,
        step: ctn_node,
        p: f64,
        seed: i64,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_embedding(g: *mut ctn_graph, table: ctn_node, ids: ctn_node, out: *mut ctn_node)
        -> ctn_status;

    // nn.h: models
    pub fn ctn_model_create(
        g: *mut ctn_graph,
        dtype: ctn_dtype,
        seed: u64,
        out: *mut *mut ctn_model,
    ) -> ctn_status;
    pub fn ctn_model_release(m: *mut ctn_model);
    pub fn ctn_model_graph(m: *const ctn_model, out: *mut *mut ctn_graph) -> ctn_status;
    pub fn ctn_model_set_training(m: *mut ctn_model, training: i32) -> ctn_status;
    pub fn ctn_model_name_next(m: *mut ctn_model, name: *const c_char) -> ctn_status;
    pub fn ctn_model_reset_names(m: *mut ctn_model) -> ctn_status;
    pub fn ctn_nn_init_fill(
        t: *mut ctn_tensor,
        kind: ctn_init,
        fan_in: i64,
        fan_out: i64,
        gain: f64,
        seed: u64,
    ) -> ctn_status;
    pub fn ctn_model_set_init(m: *mut ctn_model, weight_init: ctn_init, gain: f64) -> ctn_status;
    pub fn ctn_model_variable(
        m: *mut ctn_model,
        name: *const c_char,
        kind: u32,
        ndim: u32,
        shape: *const i64,
        init: ctn_init,
        fan_in: i64,
        fan_out: i64,
        gain: f64,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_model_variables(
        m: *mut ctn_model,
        kinds: u32,
        out_count: *mut u32,
        out_names: *mut *const *const c_char,
        out_nodes: *mut *const ctn_node,
    ) -> ctn_status;
    pub fn ctn_model_copy_state(
        src_model: *const ctn_model,
        src: *mut ctn_plan,
        dst_model: *const ctn_model,
        dst: *mut ctn_plan,
        out_copied: *mut u32,
    ) -> ctn_status;
    pub fn ctn_model_step(m: *mut ctn_model, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_model_lr(m: *mut ctn_model, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_model_set_step(m: *mut ctn_model, step: i64) -> ctn_status;
    pub fn ctn_model_set_lr(m: *mut ctn_model, lr: f64) -> ctn_status;
    pub fn ctn_model_run(
        m: *mut ctn_model,
        p: *mut ctn_plan,
        n_feeds: u32,
        feed_nodes: *const ctn_node,
        feed_values: *const *const ctn_tensor,
        n_outputs: u32,
        outputs: *const *mut ctn_tensor,
    ) -> ctn_status;

    // nn.h: layers
    pub fn ctn_nn_linear(
        m: *mut ctn_model,
        x: ctn_node,
        in_features: i64,
        out_features: i64,
        bias: i32,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_nn_conv2d(
        m: *mut ctn_model,
        x: ctn_node,
        in_channels: i64,
        out_channels: i64,
        kernel: i32,
        stride: i32,
        pad: i32,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_nn_batch_norm(
        m: *mut ctn_model,
        x: ctn_node,
        channels: i64,
        momentum: f64,
        eps: f64,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_nn_layer_norm(
        m: *mut ctn_model,
        x: ctn_node,
        features: i64,
        eps: f64,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_nn_dropout(m: *mut ctn_model, x: ctn_node, p: f64, out: *mut ctn_node)
        -> ctn_status;
    pub fn ctn_nn_embedding(
        m: *mut ctn_model,
        ids: ctn_node,
        num: i64,
        dim: i64,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_nn_lstm(
        m: *mut ctn_model,
        x_seq: ctn_node,
        hidden: i64,
        h_seq: *mut ctn_node,
        h_last: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_nn_relu(m: *mut ctn_model, x: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_nn_max_pool2d(
        m: *mut ctn_model,
        x: ctn_node,
        kernel: i32,
        stride: i32,
        out: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_nn_flatten(m: *mut ctn_model, x: ctn_node, out: *mut ctn_node) -> ctn_status;
    pub fn ctn_nn_sequential(
        m: *mut ctn_model,
        x: ctn_node,
        n: u32,
        layers: *const ctn_layer,
        out: *mut ctn_node,
    ) -> ctn_status;

    // nn.h: optimizers and schedules
    pub fn ctn_nn_sgd(
        m: *mut ctn_model,
        grads: *const ctn_node,
        momentum: f64,
        nesterov: i32,
        weight_decay: f64,
    ) -> ctn_status;
    pub fn ctn_nn_adam(
        m: *mut ctn_model,
        grads: *const ctn_node,
        beta1: f64,
        beta2: f64,
        eps: f64,
        weight_decay: f64,
    ) -> ctn_status;
    pub fn ctn_nn_adamw(
        m: *mut ctn_model,
        grads: *const ctn_node,
        beta1: f64,
        beta2: f64,
        eps: f64,
        weight_decay: f64,
    ) -> ctn_status;
    pub fn ctn_nn_clip_grad_norm(
        m: *mut ctn_model,
        n: u32,
        grads: *const ctn_node,
        max_norm: f64,
        out_clipped: *mut ctn_node,
        out_norm: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_nn_minimize(
        m: *mut ctn_model,
        loss: ctn_node,
        opt: *const ctn_optimizer,
        out_grad_norm: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_nn_lr_at(s: *const ctn_lr_schedule, step: i64, out_lr: *mut f64) -> ctn_status;

    // data.h
    pub fn ctn_dataset_open_idx(
        images_path: *const c_char,
        labels_path: *const c_char,
        out: *mut *mut ctn_dataset,
    ) -> ctn_status;
    pub fn ctn_dataset_open_fashion_mnist(
        data_dir: *const c_char,
        split: *const c_char,
        out: *mut *mut ctn_dataset,
    ) -> ctn_status;
    pub fn ctn_dataset_release(ds: *mut ctn_dataset);
    pub fn ctn_dataset_info_get(ds: *const ctn_dataset, out: *mut ctn_dataset_info)
        -> ctn_status;
    pub fn ctn_dataset_get(
        ds: *const ctn_dataset,
        index: i64,
        pixels: *mut u8,
        out_label: *mut i32,
    ) -> ctn_status;
    pub fn ctn_loader_create(
        ds: *mut ctn_dataset,
        options: *const ctn_loader_options,
        out: *mut *mut ctn_loader,
    ) -> ctn_status;
    pub fn ctn_loader_release(loader: *mut ctn_loader);
    pub fn ctn_loader_batch_create(
        loader: *mut ctn_loader,
        out_images: *mut *mut ctn_tensor,
        out_labels: *mut *mut ctn_tensor,
    ) -> ctn_status;
    pub fn ctn_loader_next(
        loader: *mut ctn_loader,
        images_out: *mut ctn_tensor,
        labels_out: *mut ctn_tensor,
        out_batch_size: *mut i32,
    ) -> ctn_status;
    pub fn ctn_loader_reset(loader: *mut ctn_loader, epoch: i64) -> ctn_status;
    pub fn ctn_loader_num_batches(loader: *const ctn_loader, out: *mut i64) -> ctn_status;
    pub fn ctn_loader_stats_get(loader: *mut ctn_loader, out: *mut ctn_loader_stats)
        -> ctn_status;

    // checkpoint.h
    pub fn ctn_checkpoint_save(
        path: *const c_char,
        n: u32,
        names: *const *const c_char,
        tensors: *const *const ctn_tensor,
        metadata_json: *const c_char,
    ) -> ctn_status;
    pub fn ctn_checkpoint_load(path: *const c_char, out: *mut *mut ctn_checkpoint) -> ctn_status;
    pub fn ctn_checkpoint_release(ckpt: *mut ctn_checkpoint);
    pub fn ctn_checkpoint_count(ckpt: *const ctn_checkpoint, out_count: *mut u32) -> ctn_status;
    pub fn ctn_checkpoint_name(
        ckpt: *const ctn_checkpoint,
        index: u32,
        out_name: *mut *const c_char,
    ) -> ctn_status;
    pub fn ctn_checkpoint_info(
        ckpt: *const ctn_checkpoint,
        name: *const c_char,
        out_dtype: *mut ctn_dtype,
        out_ndim: *mut u32,
        out_shape: *mut i64,
    ) -> ctn_status;
    pub fn ctn_checkpoint_get(
        ckpt: *const ctn_checkpoint,
        name: *const c_char,
        out: *mut *mut ctn_tensor,
    ) -> ctn_status;
    pub fn ctn_checkpoint_metadata(
        ckpt: *const ctn_checkpoint,
        out_json: *mut *const c_char,
    ) -> ctn_status;
    pub fn ctn_checkpoint_metadata_get(
        ckpt: *const ctn_checkpoint,
        key: *const c_char,
        out_value: *mut *const c_char,
    ) -> ctn_status;
    pub fn ctn_plan_save_variables(
        plan: *mut ctn_plan,
        n: u32,
        names: *const *const c_char,
        nodes: *const ctn_node,
        path: *const c_char,
        metadata_json: *const c_char,
    ) -> ctn_status;
    pub fn ctn_plan_load_variables(
        plan: *mut ctn_plan,
        n: u32,
        names: *const *const c_char,
        nodes: *const ctn_node,
        path: *const c_char,
    ) -> ctn_status;
    // checkpoint.h, since 1.3: whole graphs
    pub fn ctn_graph_save(
        g: *mut ctn_graph,
        plan: *mut ctn_plan,
        n_outputs: u32,
        outputs: *const ctn_node,
        output_names: *const *const c_char,
        metadata_json: *const c_char,
        path: *const c_char,
    ) -> ctn_status;
    pub fn ctn_graph_load(
        ctx: *mut ctn_context,
        path: *const c_char,
        out_graph: *mut *mut ctn_graph,
        out_saved: *mut *mut ctn_saved_graph,
    ) -> ctn_status;
    pub fn ctn_saved_graph_release(saved: *mut ctn_saved_graph);
    pub fn ctn_saved_graph_count(saved: *const ctn_saved_graph, kind: i32, out_count: *mut u32) -> ctn_status;
    pub fn ctn_saved_graph_entry(
        saved: *const ctn_saved_graph,
        kind: i32,
        index: u32,
        out_name: *mut *const c_char,
        out_node: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_saved_graph_metadata_get(
        saved: *const ctn_saved_graph,
        key: *const c_char,
        out_value: *mut *const c_char,
    ) -> ctn_status;
    // chutney.h / nn.h, since 1.3: run options
    pub fn ctn_cancel_create(out: *mut *mut ctn_cancel) -> ctn_status;
    pub fn ctn_cancel_request(c: *mut ctn_cancel) -> ctn_status;
    pub fn ctn_cancel_reset(c: *mut ctn_cancel) -> ctn_status;
    pub fn ctn_cancel_requested(c: *const ctn_cancel, out: *mut i32) -> ctn_status;
    pub fn ctn_cancel_release(c: *mut ctn_cancel);
    pub fn ctn_plan_run_with_options(
        p: *mut ctn_plan,
        options: *const ctn_run_options,
        n_feeds: u32,
        feed_nodes: *const ctn_node,
        feed_values: *const *const ctn_tensor,
        n_outputs: u32,
        outputs: *const *mut ctn_tensor,
    ) -> ctn_status;
    pub fn ctn_model_run_with_options(
        m: *mut ctn_model,
        p: *mut ctn_plan,
        options: *const ctn_run_options,
        n_feeds: u32,
        feed_nodes: *const ctn_node,
        feed_values: *const *const ctn_tensor,
        n_outputs: u32,
        outputs: *const *mut ctn_tensor,
    ) -> ctn_status;
    // onnx.h, since 1.3
    pub fn ctn_onnx_export(
        g: *mut ctn_graph,
        plan: *mut ctn_plan,
        n_outputs: u32,
        outputs: *const ctn_node,
        output_names: *const *const c_char,
        path: *const c_char,
    ) -> ctn_status;
    // onnx.h, since 1.2: import
    pub fn ctn_onnx_load(
        ctx: *mut ctn_context,
        path: *const c_char,
        options: *const ctn_onnx_options,
        out_graph: *mut *mut ctn_graph,
        out_model: *mut *mut ctn_onnx_model,
    ) -> ctn_status;
    pub fn ctn_onnx_model_release(model: *mut ctn_onnx_model);
    pub fn ctn_onnx_model_count(model: *const ctn_onnx_model, kind: i32, out_count: *mut u32) -> ctn_status;
    pub fn ctn_onnx_model_entry(
        model: *const ctn_onnx_model,
        kind: i32,
        index: u32,
        out_name: *mut *const c_char,
        out_node: *mut ctn_node,
    ) -> ctn_status;
    pub fn ctn_onnx_model_op_type(
        model: *const ctn_onnx_model,
        index: u32,
        out_uses: *mut u32,
        out_supported: *mut i32,
        out_lowered_to: *mut *const c_char,
    ) -> ctn_status;
    pub fn ctn_onnx_model_version(
        model: *const ctn_onnx_model,
        out_opset: *mut i64,
        out_ir_version: *mut i64,
    ) -> ctn_status;
    pub fn ctn_onnx_tensor_load(path: *const c_char, out: *mut *mut ctn_tensor, out_name: *mut *const c_char) -> ctn_status;
}

/// `CTN_API` functions of `abi/chutney/*.h` deliberately not declared here, each with the
/// reason. `tests/completeness.rs` accepts exactly these as missing.
pub const LEFT_OUT: &[(&str, &str)] = &[
    ("ctn_tensor_from_dlpack", "dlpack.h: DLPack interop is not part of the application API this crate covers yet"),
    ("ctn_tensor_to_dlpack", "dlpack.h: DLPack interop is not part of the application API this crate covers yet"),
];
