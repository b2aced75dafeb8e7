//! The client's error: everything that can go wrong compiling or running.

use oxla_builder::BuildError;
use oxla_interp::EvalError;

/// What went wrong in the client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error("the module does not verify:\n{0}")]
    Verify(#[from] oxla_hlo::verifier::VerifyErrors),
    #[error("compile: {0}")]
    Compile(String),
    #[error(transparent)]
    Eval(#[from] EvalError),
    #[error(transparent)]
    Cpu(#[from] oxla_cpu::CpuError),
    #[error("replica {replica}: {source}")]
    Replica { replica: usize, source: Box<Error> },
    #[error("{0}")]
    Usage(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
