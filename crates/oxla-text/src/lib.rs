//! HLO text, read and written as XLA and JAX write it.
//!
//! [`parse_module`] reads a module and verifies it, so HLO enters oxla only
//! verified; [`print_module`] writes XLA's default style, which XLA's own
//! parser reads back. Printing then parsing gives an equal module, and
//! printing is a fixed point. Parsing never panics: errors carry a line and
//! column, nesting is bounded, and numbers are range-checked.
//!
//! Deliberate departures from XLA, each for a reason:
//! * a float literal written `-0` reads as -0.0 (XLA reads +0 and so loses
//!   the sign its own printer wrote);
//! * of a layout only `minor_to_major` is kept (tiles and memory spaces
//!   describe device memory, which oxla does not model);
//! * constants are always printed in full (XLA elides large ones as
//!   `{...}`, which cannot be read back), except that an array with no
//!   elements whose nested form would have more than 1024 empty rows
//!   (`f32[1099511627776,0]`) is `{}`, which reads back as any empty array;
//! * attributes with no effect on execution (`metadata`, `sharding`,
//!   `frontend_attributes`, ...) are kept as text and printed back verbatim.

mod attr_table;
mod error;
mod floats;
mod lexer;
mod parser;
mod printer;
mod strings;

pub use error::{ParseError, TextError};

use oxla_hlo::{HloModule, Literal, Shape};

use parser::Parser;

/// Parses a module and runs the verifier on it; a module that does not
/// verify is an error.
pub fn parse_module(text: &str) -> Result<HloModule, TextError> {
    let module = parse_module_unverified(text)?;
    oxla_hlo::verifier::verify(&module)?;
    Ok(module)
}

/// Parses a module without verifying it (for tests and fuzzing).
pub fn parse_module_unverified(text: &str) -> Result<HloModule, ParseError> {
    Parser::new(text).module()
}

/// The module in XLA's default text style.
pub fn print_module(module: &HloModule) -> String {
    printer::print_module(module)
}

/// Parses a literal of a known shape: `{{1, 2}, {3, 4}}`, `(1, {true, false})`, `nan(0x1)`.
pub fn parse_literal(text: &str, shape: &Shape) -> Result<Literal, ParseError> {
    let mut p = Parser::new(text);
    let literal = p.literal(shape)?;
    p.expect_eof()?;
    Ok(literal)
}

/// Parses a shape: `f32[2,3]{1,0}`, `(s32[], token[])`.
pub fn parse_shape(text: &str) -> Result<Shape, ParseError> {
    let mut p = Parser::new(text);
    let shape = p.shape()?;
    p.expect_eof()?;
    Ok(shape)
}
