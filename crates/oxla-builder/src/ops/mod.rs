//! The builder's operations, one file per family.

mod contraction;
mod control;
mod elementwise;
mod movement;
mod reduction;
mod runtime;

pub use movement::PaddingConfig;
