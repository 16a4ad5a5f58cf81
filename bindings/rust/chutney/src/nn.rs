//! The layer library (nn.h): models, layers, optimizers, schedules.
use crate::error::{check, cstr, cstring, Result};
use crate::graph::{Graph, GraphCore, Node, NodeId};
use crate::plan::Plan;
use crate::tensor::{Dtype, Tensor};
use chutney_sys as sys;
use std::ptr;

/// Trainable variables (for [`Model::variables`]).
pub const VAR_PARAMETER: u32 = sys::CTN_VAR_PARAMETER;
/// Layer state that is not trained (batch-norm running statistics).
pub const VAR_BUFFER: u32 = sys::CTN_VAR_BUFFER;
/// Optimizer state.
pub const VAR_OPTIMIZER: u32 = sys::CTN_VAR_OPTIMIZER;
/// Every kind of variable: what a checkpoint should hold.
pub const VAR_ALL: u32 = VAR_PARAMETER | VAR_BUFFER | VAR_OPTIMIZER;

/// Weight initialisers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    /// Zeros.
    Zeros,
    /// Ones.
    Ones,
    /// Kaiming uniform.
    KaimingUniform,
    /// Kaiming normal.
    KaimingNormal,
    /// Xavier uniform.
    XavierUniform,
    /// Xavier normal.
    XavierNormal,
    /// U(-gain, gain).
    Uniform,
    /// N(0, gain^2).
    Normal,
}

impl Init {
    fn raw(self) -> sys::ctn_init {
        match self {
            Init::Zeros => sys::CTN_INIT_ZEROS,
            Init::Ones => sys::CTN_INIT_ONES,
            Init::KaimingUniform => sys::CTN_INIT_KAIMING_UNIFORM,
            Init::KaimingNormal => sys::CTN_INIT_KAIMING_NORMAL,
            Init::XavierUniform => sys::CTN_INIT_XAVIER_UNIFORM,
            Init::XavierNormal => sys::CTN_INIT_XAVIER_NORMAL,
            Init::Uniform => sys::CTN_INIT_UNIFORM,
            Init::Normal => sys::CTN_INIT_NORMAL,
        }
    }
}

/// Fills a contiguous f32/f64 tensor deterministically (see nn.h).
pub fn init_fill(t: &mut Tensor, kind: Init, fan_in: i64, fan_out: i64, gain: f64, seed: u64) -> Result<()> {
    // SAFETY: exclusive borrow of a live tensor.
    check(unsafe { sys::ctn_nn_init_fill(t.ptr, kind.raw(), fan_in, fan_out, gain, seed) })
}

/// One layer of [`Model::sequential`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Layer {
    /// Linear with bias, this many output features.
    Linear(i32),
    /// Linear without bias.
    LinearNoBias(i32),
    /// Convolution: output channels, square kernel, stride (0: 1), padding.
    Conv2d {
        /// Output channels.
        out: i32,
        /// Square kernel size.
        kernel: i32,
        /// Stride.
        stride: i32,
        /// Padding.
        pad: i32,
    },
    /// Batch normalisation with default momentum and eps.
    BatchNorm,
    /// Layer normalisation over the last axis.
    LayerNorm,
    /// Dropout with this probability.
    Dropout(f64),
    /// ReLU.
    Relu,
    /// Tanh.
    Tanh,
    /// Sigmoid.
    Sigmoid,
    /// Max pooling with this square window (stride = window).
    MaxPool2d(i32),
    /// Average pooling with this square window.
    AvgPool2d(i32),
    /// `[N, ...] -> [N, prod(...)]`.
    Flatten,
}

impl Layer {
    fn raw(self) -> sys::ctn_layer {
        let mut l = sys::ctn_layer {
            kind: 0,
            units: 0,
            kernel: 0,
            stride: 0,
            pad: 0,
            flags: 0,
            p: 0.0,
            eps: 0.0,
            name: ptr::null(),
        };
        match self {
            Layer::Linear(u) => (l.kind, l.units) = (sys::CTN_LAYER_LINEAR, u),
            Layer::LinearNoBias(u) => {
                (l.kind, l.units, l.flags) = (sys::CTN_LAYER_LINEAR, u, sys::CTN_LAYER_NO_BIAS)
            }
            Layer::Conv2d { out, kernel, stride, pad } => {
                (l.kind, l.units, l.kernel, l.stride, l.pad) = (sys::CTN_LAYER_CONV2D, out, kernel, stride, pad)
            }
            Layer::BatchNorm => l.kind = sys::CTN_LAYER_BATCH_NORM,
            Layer::LayerNorm => l.kind = sys::CTN_LAYER_LAYER_NORM,
            Layer::Dropout(p) => (l.kind, l.p) = (sys::CTN_LAYER_DROPOUT, p),
            Layer::Relu => l.kind = sys::CTN_LAYER_RELU,
            Layer::Tanh => l.kind = sys::CTN_LAYER_TANH,
            Layer::Sigmoid => l.kind = sys::CTN_LAYER_SIGMOID,
            Layer::MaxPool2d(k) => (l.kind, l.kernel) = (sys::CTN_LAYER_MAX_POOL2D, k),
            Layer::AvgPool2d(k) => (l.kind, l.kernel) = (sys::CTN_LAYER_AVG_POOL2D, k),
            Layer::Flatten => l.kind = sys::CTN_LAYER_FLATTEN,
        }
        l
    }
}

/// Optimizer kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptimizerKind {
    /// SGD (with momentum when > 0).
    Sgd,
    /// Adam.
    Adam,
    /// AdamW (decoupled weight decay).
    AdamW,
}

/// What [`Model::minimize`] adds; zero fields pick the library defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Optimizer {
    /// The kind.
    pub kind: OptimizerKind,
    /// Initial learning rate (0: 0.01).
    pub lr: f64,
    /// SGD momentum.
    pub momentum: f64,
    /// SGD Nesterov.
    pub nesterov: bool,
    /// Weight decay.
    pub weight_decay: f64,
    /// Adam beta1 (0: 0.9).
    pub beta1: f64,
    /// Adam beta2 (0: 0.999).
    pub beta2: f64,
    /// Adam epsilon (0: 1e-8).
    pub eps: f64,
    /// Global-norm clipping when > 0.
    pub clip_norm: f64,
}

impl Optimizer {
    fn of(kind: OptimizerKind, lr: f64) -> Optimizer {
        Optimizer {
            kind,
            lr,
            momentum: 0.0,
            nesterov: false,
            weight_decay: 0.0,
            beta1: 0.0,
            beta2: 0.0,
            eps: 0.0,
            clip_norm: 0.0,
        }
    }
    /// SGD with learning rate `lr`.
    pub fn sgd(lr: f64) -> Optimizer {
        Optimizer::of(OptimizerKind::Sgd, lr)
    }
    /// Adam with learning rate `lr`.
    pub fn adam(lr: f64) -> Optimizer {
        Optimizer::of(OptimizerKind::Adam, lr)
    }
    /// AdamW with learning rate `lr`.
    pub fn adamw(lr: f64) -> Optimizer {
        Optimizer::of(OptimizerKind::AdamW, lr)
    }
}

/// A learning-rate schedule (`ctn_lr_schedule`).
pub type LrSchedule = sys::ctn_lr_schedule;

/// The learning rate of schedule `s` at update `step` (>= 1).
pub fn lr_at(s: &LrSchedule, step: i64) -> Result<f64> {
    let mut lr = 0.0;
    // SAFETY: pure function of its arguments.
    check(unsafe { sys::ctn_nn_lr_at(s, step, &mut lr) })?;
    Ok(lr)
}

/// A model (`ctn_model`): named, seeded parameters and layers added to a graph it borrows.
/// Not `Send`: it borrows its graph, which is not `Sync`.
pub struct Model<'g> {
    ptr: *mut sys::ctn_model,
    g: &'g GraphCore,
}

release_on_drop!(Model<'_> => sys::ctn_model_release);

impl std::fmt::Debug for Model<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Model({:p})", self.ptr)
    }
}

impl<'g> Model<'g> {
    /// A model building into `graph`, with parameters of `dtype` (F32 or F64) seeded by `seed`.
    pub fn new(graph: &'g Graph<'_>, dtype: Dtype, seed: u64) -> Result<Model<'g>> {
        let mut out = ptr::null_mut();
        // SAFETY: the graph outlives the model ('g).
        check(unsafe { sys::ctn_model_create(graph.as_raw(), dtype.raw(), seed, &mut out) })?;
        Ok(Model { ptr: out, g: graph.core() })
    }

    fn out(&self, f: impl FnOnce(*mut u32) -> sys::ctn_status) -> Result<Node<'g>> {
        let mut out = sys::CTN_NODE_NONE;
        let st = f(&mut out);
        self.g.node(st, out)
    }

    /// Training (default) or inference mode for layers built afterwards.
    pub fn set_training(&self, training: bool) -> Result<()> {
        // SAFETY: valid model.
        check(unsafe { sys::ctn_model_set_training(self.ptr, training as i32) })
    }

    /// Names the next layer (its variables become `"<name>.weight"`...).
    pub fn name_next(&self, name: &str) -> Result<()> {
        let n = cstring(name, "layer name")?;
        // SAFETY: copied by the library.
        check(unsafe { sys::ctn_model_name_next(self.ptr, n.as_ptr()) })
    }

    /// `x @ weight^T + bias`: `[..., in] -> [..., out]`.
    pub fn linear(&self, x: Node<'_>, in_features: i64, out_features: i64, bias: bool) -> Result<Node<'g>> {
        let x = self.g.id(x)?;
        // SAFETY: valid model.
        self.out(|o| unsafe { sys::ctn_nn_linear(self.ptr, x, in_features, out_features, bias as i32, o) })
    }

    /// ReLU.
    pub fn relu(&self, x: Node<'_>) -> Result<Node<'g>> {
        let x = self.g.id(x)?;
        // SAFETY: valid model.
        self.out(|o| unsafe { sys::ctn_nn_relu(self.ptr, x, o) })
    }

    /// Dropout with probability `p` (identity in inference mode).
    pub fn dropout(&self, x: Node<'_>, p: f64) -> Result<Node<'g>> {
        let x = self.g.id(x)?;
        // SAFETY: valid model.
        self.out(|o| unsafe { sys::ctn_nn_dropout(self.ptr, x, p, o) })
    }

    /// `[N, ...] -> [N, prod(...)]`.
    pub fn flatten(&self, x: Node<'_>) -> Result<Node<'g>> {
        let x = self.g.id(x)?;
        // SAFETY: valid model.
        self.out(|o| unsafe { sys::ctn_nn_flatten(self.ptr, x, o) })
    }

    /// Restarts the automatic layer counters (building the same layers again reuses them).
    pub fn reset_names(&self) -> Result<()> {
        // SAFETY: valid model.
        check(unsafe { sys::ctn_model_reset_names(self.ptr) })
    }

    /// Initialiser of the weights of layers built afterwards (`gain` 0: the kind's default).
    pub fn set_init(&self, init: Init, gain: f64) -> Result<()> {
        // SAFETY: valid model.
        check(unsafe { sys::ctn_model_set_init(self.ptr, init.raw(), gain) })
    }

    /// A variable named `name` (used as is) of kind `kind` (one `VAR_*`), initialised by
    /// `init`; an existing one of that name and shape is returned instead.
    #[allow(clippy::too_many_arguments)]
    pub fn variable(&self, name: &str, kind: u32, shape: &[i64], init: Init, fan_in: i64, fan_out: i64, gain: f64) -> Result<Node<'g>> {
        crate::tensor::numel_of(shape)?;
        let n = cstring(name, "variable name")?;
        // SAFETY: shape holds len (<= 8) values; n outlives the call.
        self.out(|o| unsafe {
            sys::ctn_model_variable(self.ptr, n.as_ptr(), kind, shape.len() as u32, shape.as_ptr(), init.raw(), fan_in, fan_out, gain, o)
        })
    }

    /// 2-d convolution with bias: `[N, in, H, W] -> [N, out, Ho, Wo]`, square kernel.
    pub fn conv2d(&self, x: Node<'_>, in_channels: i64, out_channels: i64, kernel: i32, stride: i32, pad: i32) -> Result<Node<'g>> {
        let x = self.g.id(x)?;
        // SAFETY: valid model.
        self.out(|o| unsafe { sys::ctn_nn_conv2d(self.ptr, x, in_channels, out_channels, kernel, stride, pad, o) })
    }

    /// Batch normalisation over axis 1 (momentum 0: 0.1, eps 0: 1e-5).
    pub fn batch_norm(&self, x: Node<'_>, channels: i64, momentum: f64, eps: f64) -> Result<Node<'g>> {
        let x = self.g.id(x)?;
        // SAFETY: valid model.
        self.out(|o| unsafe { sys::ctn_nn_batch_norm(self.ptr, x, channels, momentum, eps, o) })
    }

    /// Layer normalisation over the last axis (eps 0: 1e-5).
    pub fn layer_norm(&self, x: Node<'_>, features: i64, eps: f64) -> Result<Node<'g>> {
        let x = self.g.id(x)?;
        // SAFETY: valid model.
        self.out(|o| unsafe { sys::ctn_nn_layer_norm(self.ptr, x, features, eps, o) })
    }

    /// Rows of a `[num, dim]` table picked by integer `ids`.
    pub fn embedding(&self, ids: Node<'_>, num: i64, dim: i64) -> Result<Node<'g>> {
        let ids = self.g.id(ids)?;
        // SAFETY: valid model.
        self.out(|o| unsafe { sys::ctn_nn_embedding(self.ptr, ids, num, dim, o) })
    }

    /// An LSTM over `x_seq [T, N, I]`: returns (`h_seq [T, N, H]`, `h_last [N, H]`).
    pub fn lstm(&self, x_seq: Node<'_>, hidden: i64) -> Result<(Node<'g>, Node<'g>)> {
        let x = self.g.id(x_seq)?;
        let (mut hs, mut hl) = (sys::CTN_NODE_NONE, sys::CTN_NODE_NONE);
        // SAFETY: valid model and out-pointers.
        check(unsafe { sys::ctn_nn_lstm(self.ptr, x, hidden, &mut hs, &mut hl) })?;
        Ok((self.g.node(0, hs)?, self.g.node(0, hl)?))
    }

    /// Max pooling with a square window (stride 0: the window).
    pub fn max_pool2d(&self, x: Node<'_>, kernel: i32, stride: i32) -> Result<Node<'g>> {
        let x = self.g.id(x)?;
        // SAFETY: valid model.
        self.out(|o| unsafe { sys::ctn_nn_max_pool2d(self.ptr, x, kernel, stride, o) })
    }

    /// Global-norm clipping of `grads`: returns (the clipped gradients, the 0-d norm).
    pub fn clip_grad_norm(&self, grads: &[Node<'_>], max_norm: f64) -> Result<(Vec<Node<'g>>, Node<'g>)> {
        let ids = self.g.ids(grads)?;
        let mut out = vec![sys::CTN_NODE_NONE; ids.len()];
        let mut norm = sys::CTN_NODE_NONE;
        // SAFETY: ids and out hold len values.
        check(unsafe { sys::ctn_nn_clip_grad_norm(self.ptr, ids.len() as u32, ids.as_ptr(), max_norm, out.as_mut_ptr(), &mut norm) })?;
        let clipped = out.into_iter().map(|id| self.g.node(0, id)).collect::<Result<Vec<_>>>()?;
        Ok((clipped, self.g.node(0, norm)?))
    }

    fn params_len(&self, grads: &[Node<'_>]) -> Result<Vec<u32>> {
        let n = self.variables(VAR_PARAMETER)?.len();
        if grads.len() != n {
            return Err(crate::Error::new(
                crate::Status::INVALID_ARGUMENT,
                format!("{} gradients for {n} trainable parameters", grads.len()),
            ));
        }
        self.g.ids(grads)
    }

    /// SGD updates of every parameter from `grads` (one per parameter, in
    /// `variables(VAR_PARAMETER)` order).
    pub fn sgd(&self, grads: &[Node<'_>], momentum: f64, nesterov: bool, weight_decay: f64) -> Result<()> {
        let ids = self.params_len(grads)?;
        // SAFETY: ids holds one gradient per parameter, what the C call reads.
        check(unsafe { sys::ctn_nn_sgd(self.ptr, ids.as_ptr(), momentum, nesterov as i32, weight_decay) })
    }

    /// Adam (or AdamW with `decoupled`) updates of every parameter from `grads`.
    pub fn adam(&self, grads: &[Node<'_>], beta1: f64, beta2: f64, eps: f64, weight_decay: f64, decoupled: bool) -> Result<()> {
        let ids = self.params_len(grads)?;
        let f = if decoupled { sys::ctn_nn_adamw } else { sys::ctn_nn_adam };
        // SAFETY: ids holds one gradient per parameter.
        check(unsafe { f(self.ptr, ids.as_ptr(), beta1, beta2, eps, weight_decay) })
    }

    /// Applies `layers` in order to `x`.
    pub fn sequential(&self, x: Node<'_>, layers: &[Layer]) -> Result<Node<'g>> {
        let x = self.g.id(x)?;
        let raw: Vec<sys::ctn_layer> = layers.iter().map(|l| l.raw()).collect();
        // SAFETY: raw holds len layers.
        self.out(|o| unsafe { sys::ctn_nn_sequential(self.ptr, x, raw.len() as u32, raw.as_ptr(), o) })
    }

    /// Gradients, optional clipping and the optimizer's updates of every parameter; returns
    /// the 0-d global gradient norm.
    pub fn minimize(&self, loss: Node<'_>, opt: &Optimizer) -> Result<Node<'g>> {
        let l = self.g.id(loss)?;
        let raw = sys::ctn_optimizer {
            struct_size: std::mem::size_of::<sys::ctn_optimizer>() as u32,
            kind: match opt.kind {
                OptimizerKind::Sgd => sys::CTN_OPTIM_SGD,
                OptimizerKind::Adam => sys::CTN_OPTIM_ADAM,
                OptimizerKind::AdamW => sys::CTN_OPTIM_ADAMW,
            },
            lr: opt.lr,
            momentum: opt.momentum,
            nesterov: opt.nesterov as i32,
            reserved: 0,
            weight_decay: opt.weight_decay,
            beta1: opt.beta1,
            beta2: opt.beta2,
            eps: opt.eps,
            clip_norm: opt.clip_norm,
            loss_scale: 0.0,
            loss_scale_interval: 0,
        };
        // SAFETY: raw outlives the call.
        self.out(|o| unsafe { sys::ctn_nn_minimize(self.ptr, l, &raw, o) })
    }

    /// The model's "step" input node.
    pub fn step_node(&self) -> Result<Node<'g>> {
        // SAFETY: valid model.
        self.out(|o| unsafe { sys::ctn_model_step(self.ptr, o) })
    }

    /// The model's "lr" input node.
    pub fn lr_node(&self) -> Result<Node<'g>> {
        // SAFETY: valid model.
        self.out(|o| unsafe { sys::ctn_model_lr(self.ptr, o) })
    }

    /// The step fed by [`Model::run`] (>= 1).
    pub fn set_step(&self, step: i64) -> Result<()> {
        // SAFETY: valid model.
        check(unsafe { sys::ctn_model_set_step(self.ptr, step) })
    }

    /// The learning rate fed by [`Model::run`].
    pub fn set_lr(&self, lr: f64) -> Result<()> {
        // SAFETY: valid model.
        check(unsafe { sys::ctn_model_set_lr(self.ptr, lr) })
    }

    /// Variables of the kinds in `kinds` (`VAR_*` bits), in creation order.
    pub fn variables(&self, kinds: u32) -> Result<Vec<(String, NodeId)>> {
        let mut n = 0u32;
        let mut names: *const *const sys::c_char = ptr::null();
        let mut nodes: *const u32 = ptr::null();
        // SAFETY: the arrays are owned by the model and copied at once.
        check(unsafe { sys::ctn_model_variables(self.ptr, kinds, &mut n, &mut names, &mut nodes) })?;
        let mut v = Vec::with_capacity(n as usize);
        for i in 0..n as usize {
            // SAFETY: both arrays hold n entries.
            unsafe { v.push((cstr(*names.add(i)), NodeId::new(self.g.serial, *nodes.add(i)))) };
        }
        Ok(v)
    }

    /// [`Plan::run`] with the model's step and learning rate appended to `feeds`.
    pub fn run(&self, plan: &mut Plan<'_>, feeds: &[(NodeId, &Tensor)], outputs: &mut [&mut Tensor]) -> Result<()> {
        if plan.graph() != self.g.serial {
            return Err(crate::Error::new(
                crate::Status::INVALID_ARGUMENT,
                format!("Model::run: the plan was compiled from graph #{}, not from the model's graph #{}", plan.graph(), self.g.serial),
            ));
        }
        let ((nodes, values), outs) = plan.run_args(feeds, outputs)?;
        // SAFETY: as Plan::run.
        check(unsafe {
            sys::ctn_model_run(
                self.ptr,
                plan.raw(),
                nodes.n as u32,
                nodes.as_ptr(),
                values.as_ptr(),
                outs.n as u32,
                outs.as_ptr(),
            )
        })
    }
}

/// Copies, for every variable name present in both models, the value in plan `src` (compiled
/// from `src_model`'s graph) into plan `dst` (from `dst_model`'s graph): train -> eval. Returns
/// how many were copied.
pub fn copy_state(src_model: &Model<'_>, src: &Plan<'_>, dst_model: &Model<'_>, dst: &mut Plan<'_>) -> Result<u32> {
    let mut n = 0;
    // SAFETY: valid handles; src is only read, dst exclusively borrowed.
    check(unsafe { sys::ctn_model_copy_state(src_model.ptr, src.raw(), dst_model.ptr, dst.raw(), &mut n) })?;
    Ok(n)
}
