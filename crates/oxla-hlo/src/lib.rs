//! oxla's core: element types, shapes, literals, the HLO IR, shape inference
//! and the verifier. Everything else in oxla (builder, text format,
//! interpreter, compiler) reads and writes the types defined here.

pub mod element_type;
pub mod ir;
pub mod literal;
pub mod shape;
pub mod shape_inference;
pub mod verifier;

pub use element_type::PrimitiveType;
pub use ir::{ComputationId, HloComputation, HloInstruction, HloModule, InstrId, Opcode};
pub use literal::{ArrayData, ArrayLiteral, Literal, LiteralError, NativeType, Scalar};
pub use shape::{
    ArrayShape, Layout, MAX_SHAPE_PARTS, MAX_TUPLE_DEPTH, ProgramShape, Shape, ShapeError,
};

// Re-exported for the element-type macros and for users naming element types.
pub use half;
pub use num_complex;
