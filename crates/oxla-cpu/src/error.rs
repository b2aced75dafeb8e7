//! The CPU backend's errors: compiling (an unsupported construct) and running
//! (everything the interpreter can report, located at the instruction).

use oxla_interp::EvalError;

#[derive(Debug, thiserror::Error)]
pub enum CpuError {
    #[error("cpu backend: {0}")]
    Compile(String),
    /// Everything found while running, in the interpreter's words, located
    /// at the instruction.
    #[error(transparent)]
    Eval(#[from] EvalError),
}

pub type CpuResult<T> = Result<T, CpuError>;
