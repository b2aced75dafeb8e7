//! Value tests of every op family, mostly written as HLO text.

#[path = "../common/mod.rs"]
mod common;

mod control;
mod conversions;
mod convolution;
mod coverage;
mod dot;
mod errors;
mod floats;
mod gather_scatter;
mod integers;
mod limits;
mod linalg;
mod movement;
mod reduce;
mod rng;
mod services;
mod sort;
