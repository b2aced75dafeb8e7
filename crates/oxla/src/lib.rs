//! oxla: XLA rebuilt in pure Rust. Build a static-shaped computation with
//! [`XlaBuilder`] (or read HLO text), compile it, and run it.
//!
//! This crate gathers oxla's parts behind one dependency: the core types
//! ([`Shape`], [`Literal`], [`HloModule`]), the builder, and [`np`], a
//! NumPy-style layer with implicit broadcasting. Programs that run large
//! arrays should install [`AlignedAlloc`] as their global allocator.
//!
//! Like XLA, [`Client::compile`] rewrites a computation before running it
//! (`x / 3` as `x * (1/3)`, bf16 arithmetic in f32 with excess precision,
//! ...), so results are XLA's bit for bit wherever the operations are
//! exact; [`CompileOptions::with_xla_rewrites`]`(false)` runs it as written.

mod alloc;
mod client;
pub mod np;

pub use alloc::AlignedAlloc;

pub use client::{
    Backend, Client, CompileOptions, CustomCallCFn, CustomCallFn, Error, Executable,
    ExecuteOptions, Result,
};

pub use oxla_builder::{BuildError, Padding, PaddingConfig, XlaBuilder, XlaComputation, XlaOp};
pub use oxla_hlo::{
    ArrayShape, HloModule, Literal, NativeType, PrimitiveType, ProgramShape, Shape,
};
pub use oxla_hlo::{half, num_complex};
