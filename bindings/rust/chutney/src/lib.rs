//! Safe Rust API of chutney, a deep-learning runtime with a stable C ABI.
//!
//! Build a graph of tensor ops, differentiate it, compile it into a plan and run the plan many
//! times; or run ops eagerly; train with the layer library ([`nn`]), the Fashion-MNIST loader
//! ([`data`]) and safetensors checkpoints ([`checkpoint`]). A thin layer over `chutney-sys`:
//! handles released on drop, every failure a [`Result`] whose [`Error`] carries the status, its
//! name and the library's message.
//!
//! Fit a line (the README's C example):
//!
//! ```
//! use chutney::{Context, Dtype, Tensor};
//!
//! let ctx = Context::new()?;
//! let g = ctx.graph()?;
//! let x = g.input("x", Dtype::F32, &[4, 3])?;          // 1. build: y = x @ w
//! let t = g.input("t", Dtype::F32, &[4, 1])?;
//! let w = g.variable("w", &Tensor::zeros(Dtype::F32, &[3, 1])?)?;
//! let d = g.matmul(x, w, false, false)? - t;
//! let loss = g.mean(d * d, &[], false)?;               // loss = mean((x@w - t)^2)
//! let dw = g.grad(loss, &[w])?[0];                     // 2. differentiate
//! g.assign(w, w - dw * 0.1)?;                          // w -= 0.1 dw after each run
//! let mut plan = g.compile(&[loss])?;                  // 3. compile
//!
//! let xv = Tensor::new(&[1f32, 0., 0., 0., 1., 0., 0., 0., 1., 1., 1., 1.], &[4, 3])?;
//! let tv = Tensor::new(&[1f32, 2., 3., 6.], &[4, 1])?;
//! let mut lv = plan.output(0)?;
//! let first = {
//!     plan.run(&[(x.id(), &xv), (t.id(), &tv)], &mut [&mut lv])?;
//!     lv.item::<f32>()?
//! };
//! for _ in 0..200 {                                    // 4. run, many times
//!     plan.run(&[(x.id(), &xv), (t.id(), &tv)], &mut [&mut lv])?;
//! }
//! assert_eq!(first, 12.5);
//! assert!(lv.item::<f32>()? < 1e-6);
//! assert_eq!(plan.variable(w.id())?.to_vec::<f32>()?.len(), 3);
//! # Ok::<(), chutney::Error>(())
//! ```
//!
//! Threads ([`Context`] is `Send + Sync`; [`Graph`], [`Plan`], [`Tensor`] are `Send`, not
//! `Sync`): one context, a plan per thread.
//!
//! ```
//! # use chutney::{Context, Dtype, Tensor};
//! let ctx = Context::new()?;
//! std::thread::scope(|s| {
//!     for k in 0..2 {
//!         let ctx = &ctx;
//!         s.spawn(move || -> chutney::Result<()> {
//!             let g = ctx.graph()?;
//!             let x = g.input("x", Dtype::F64, &[2])?;
//!             let mut p = g.compile(&[x * 2.0])?;
//!             let xv = Tensor::new(&[k as f64, 1.0], &[2])?;
//!             let out = p.run_outputs(&[(x.id(), &xv)])?;
//!             assert_eq!(out[0].to_vec::<f64>()?, vec![2.0 * k as f64, 2.0]);
//!             Ok(())
//!         });
//!     }
//! });
//! # Ok::<(), chutney::Error>(())
//! ```
#![warn(missing_docs)]

/// `impl Drop` releasing the C handle `self.ptr` with `$release` (every owning wrapper).
macro_rules! release_on_drop {
    ($t:ty => $release:path) => {
        impl Drop for $t {
            fn drop(&mut self) {
                // SAFETY: the value owns the handle `ptr` (from a successful create, never handed
                // out); dropping it is the one release (the comment at the call site says why no
                // borrow outlives it).
                unsafe { $release(self.ptr) }
            }
        }
    };
}

pub mod checkpoint;
mod context;
pub mod data;
mod error;
mod graph;
mod half;
pub mod model_file;
pub mod nn;
pub mod onnx;
mod oplib;
mod plan;
mod tensor;

/// The Rust code blocks of bindings/rust/README.md, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

pub use chutney_sys as sys;
pub use context::{abi_version, check_abi, version, BackendInfo, Context, Options};
pub use error::{Error, Result, Status};
pub use graph::{Attrs, Graph, Node, NodeId};
pub use half::{bf16, f16};
pub use oplib::{GradBuilder, HostTensor, HostTensorMut, OpDef, OpInfo, OpNode, OpSupport, TensorDesc};
pub use plan::{CancelToken, CompileOptions, Plan, PlanStats, RunOptions};
pub use tensor::{Dtype, Element, Tensor, TensorView};
