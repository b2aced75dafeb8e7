//! `XlaOp`: a handle to a value being built. Handles are `Copy` and borrow
//! their builder, so `a + b * c` reads like math; an op whose inputs were
//! invalid yields an invalid handle, and the builder reports the first error.

use std::fmt;
use std::ops;
use std::panic::Location;

use oxla_hlo::ir::InstrId;
use oxla_hlo::{NativeType, Shape};

use crate::builder::XlaBuilder;
use crate::error::BuildError;

/// A value in a computation under construction.
#[derive(Clone, Copy)]
pub struct XlaOp<'b> {
    builder: &'b XlaBuilder,
    /// The instruction, or for the placeholder returned after an error, the
    /// index of that error in the builder.
    id: Result<InstrId, usize>,
}

impl<'b> XlaOp<'b> {
    pub(crate) fn new(builder: &'b XlaBuilder, id: InstrId) -> XlaOp<'b> {
        XlaOp {
            builder,
            id: Ok(id),
        }
    }

    pub(crate) fn invalid(builder: &'b XlaBuilder, error: usize) -> XlaOp<'b> {
        XlaOp {
            builder,
            id: Err(error),
        }
    }

    pub(crate) fn id(&self) -> Result<InstrId, usize> {
        self.id
    }

    /// The builder this value belongs to.
    pub fn builder(&self) -> &'b XlaBuilder {
        self.builder
    }

    /// Whether this handle is a real value (not the placeholder of a failed op).
    pub fn is_valid(&self) -> bool {
        self.id.is_ok()
    }

    /// The value's shape, or the error that made this op fail (the op's own,
    /// or the one that invalidated an operand it was built from).
    #[track_caller]
    pub fn shape(&self) -> Result<Shape, BuildError> {
        match self.id {
            Ok(id) => Ok(self.builder.shape_of(id)),
            Err(index) => {
                self.builder.note_failure(index);
                Err(self.builder.error(index).unwrap_or_else(|| {
                    BuildError::new("shape", "invalid handle", Location::caller())
                }))
            }
        }
    }

    /// A scalar constant of the same builder (for operators with Rust scalars).
    #[track_caller]
    fn scalar<T: NativeType>(&self, value: T) -> XlaOp<'b> {
        self.builder.constant_r0(value)
    }
}

impl fmt::Debug for XlaOp<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.id {
            Ok(id) => write!(f, "XlaOp({} in {})", id, self.builder.name()),
            Err(_) => write!(f, "XlaOp(invalid in {})", self.builder.name()),
        }
    }
}

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:ident) => {
        impl<'b> ops::$trait<XlaOp<'b>> for XlaOp<'b> {
            type Output = XlaOp<'b>;
            #[track_caller]
            fn $method(self, rhs: XlaOp<'b>) -> XlaOp<'b> {
                XlaOp::$op(self, rhs)
            }
        }

        /// With a Rust scalar on the right: the scalar becomes a constant of its own type.
        impl<'b, T: NativeType> ops::$trait<T> for XlaOp<'b> {
            type Output = XlaOp<'b>;
            #[track_caller]
            fn $method(self, rhs: T) -> XlaOp<'b> {
                let c = self.scalar(rhs);
                XlaOp::$op(self, c)
            }
        }
    };
}

binary_operator!(Add, add, add);
binary_operator!(Sub, sub, sub);
binary_operator!(Mul, mul, mul);
binary_operator!(Div, div, div);
binary_operator!(Rem, rem, rem);
binary_operator!(BitAnd, bitand, and);
binary_operator!(BitOr, bitor, or);
binary_operator!(BitXor, bitxor, xor);

impl<'b> ops::Neg for XlaOp<'b> {
    type Output = XlaOp<'b>;
    #[track_caller]
    fn neg(self) -> XlaOp<'b> {
        XlaOp::neg(self)
    }
}

impl<'b> ops::Not for XlaOp<'b> {
    type Output = XlaOp<'b>;
    #[track_caller]
    fn not(self) -> XlaOp<'b> {
        XlaOp::not(self)
    }
}
