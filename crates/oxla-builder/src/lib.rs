//! `XlaBuilder`, `XlaOp` and `XlaComputation`: build HLO computations op by op,
//! with XLA's strict shape inference.
//!
//! Op calls never fail or panic. An op that breaks a shape rule records the
//! first error, with the operation, the shapes and the caller's source
//! location, and returns a placeholder; [`XlaBuilder::build`] returns that
//! error. [`XlaOp::shape`] checks a value early.
//!
//! ```
//! use oxla_builder::XlaBuilder;
//! use oxla_hlo::{PrimitiveType, Shape};
//!
//! let b = XlaBuilder::new("axpy");
//! let a = b.parameter(0, &Shape::scalar(PrimitiveType::F32), "a");
//! let x = b.parameter(1, &Shape::array(PrimitiveType::F32, [3]).unwrap(), "x");
//! let y = b.parameter(2, &Shape::array(PrimitiveType::F32, [3]).unwrap(), "y");
//! let computation = b.build(a * x + y).unwrap();
//! assert_eq!(computation.program_shape().to_string(), "(f32[], f32[3], f32[3]) -> f32[3]");
//! ```

// Inherent methods carry XLA's op names (`add`, `neg`, `not`, ...); the
// operator traits are implemented too and call them.
#![allow(clippy::should_implement_trait)]

mod builder;
mod computation;
mod error;
mod op;
mod ops;

pub use builder::XlaBuilder;
pub use computation::XlaComputation;
pub use error::BuildError;
pub use op::XlaOp;
pub use ops::PaddingConfig;
pub use oxla_hlo::shape_inference::Padding;
