//! oxla for NumPy users: implicit broadcasting and type promotion as the
//! Array API specifies them, as a layer over the strict XLA builder.
//!
//! [`broadcast_shapes`] implements the Array API algorithm. [`Tensor`] wraps
//! an `XlaOp`; its operations (`+ - * / %`, [`add`], [`less`], [`where_`],
//! ...) broadcast and promote implicitly and lower every implicit step to
//! explicit XLA operations, so the computation the builder records is as
//! strict as if it had been written by hand.

mod array;
mod broadcast;
mod ops;
mod print;
mod promote;

pub use array::{Array, ArrayOperand, IntoArrayOperand, Ix, NpError, where_array};
pub use broadcast::{BroadcastError, broadcast_pair, broadcast_shapes};
pub use ops::*;
pub use print::{numpy_dtype, numpy_repr, numpy_str};
pub use promote::{PromotionError, WeakScalar, result_type, weak_result_type};
