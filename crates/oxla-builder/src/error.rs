//! The builder's error: the first shape rule broken while building, with the
//! operation, the message, and where in the caller's code the call was made.

use std::fmt;
use std::panic::Location;

use oxla_hlo::shape_inference::InferError;

/// An error recorded by [`crate::XlaBuilder`]: which operation, what rule it
/// broke (naming the shapes), and the caller's source location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildError {
    pub op: String,
    pub message: String,
    pub location: &'static Location<'static>,
}

impl BuildError {
    pub(crate) fn new(
        op: impl Into<String>,
        message: impl Into<String>,
        location: &'static Location<'static>,
    ) -> Self {
        BuildError {
            op: op.into(),
            message: message.into(),
            location,
        }
    }

    pub(crate) fn from_infer(e: InferError, location: &'static Location<'static>) -> Self {
        BuildError {
            op: e.op,
            message: e.message,
            location,
        }
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} (at {}:{}:{})",
            self.op,
            self.message,
            self.location.file(),
            self.location.line(),
            self.location.column()
        )
    }
}

impl std::error::Error for BuildError {}
