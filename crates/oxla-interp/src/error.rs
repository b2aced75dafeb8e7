//! Errors of an evaluation. Every error raised while running an instruction
//! names the computation, the instruction and its opcode, so a message alone
//! says where a module went wrong.

use oxla_hlo::Opcode;

/// Which runtime service failed (see [`crate::Services`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceKind {
    Infeed,
    Outfeed,
    CustomCall,
    Collective,
}

impl std::fmt::Display for ServiceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ServiceKind::Infeed => "infeed",
            ServiceKind::Outfeed => "outfeed",
            ServiceKind::CustomCall => "custom-call",
            ServiceKind::Collective => "collective",
        })
    }
}

/// Why an evaluation failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// The number of arguments differs from the entry computation's parameter count.
    #[error(
        "entry computation `{computation}` takes {expected} argument(s), but {actual} were given"
    )]
    ArgumentCount {
        computation: String,
        expected: usize,
        actual: usize,
    },

    /// An argument's shape is not compatible with its parameter's (layouts are ignored).
    #[error(
        "argument {index} has shape {actual}, but parameter `{parameter}` of entry computation `{computation}` has shape {expected}"
    )]
    ArgumentShape {
        computation: String,
        parameter: String,
        index: usize,
        expected: String,
        actual: String,
    },

    /// The module breaks an invariant the verifier checks (for example a
    /// missing computation); evaluate only verified modules.
    #[error("invalid module: {message}")]
    InvalidModule { message: String },

    /// An instruction could not be evaluated (for example a module that was not
    /// verified, or a value a runtime service returned with the wrong shape).
    #[error("in computation `{computation}`, instruction `{instruction}` ({opcode}): {message}")]
    Instruction {
        computation: String,
        instruction: String,
        opcode: Opcode,
        message: String,
    },

    /// A `while` loop ran more iterations than [`crate::EvalOptions::while_iteration_limit`] allows.
    #[error(
        "in computation `{computation}`, instruction `{instruction}` (while): the loop exceeded the iteration limit of {limit}"
    )]
    WhileIterationLimit {
        computation: String,
        instruction: String,
        limit: u64,
    },

    /// An instruction's result would hold an array larger than
    /// [`crate::EvalOptions::max_array_bytes`]; nothing was allocated.
    #[error(
        "in computation `{computation}`, instruction `{instruction}` ({opcode}): the result array {shape} needs {bytes} bytes, more than the memory limit of {limit} bytes"
    )]
    MemoryLimit {
        computation: String,
        instruction: String,
        opcode: Opcode,
        /// The result array (a leaf of the result, for tuples) over the limit.
        shape: String,
        /// Its size in bytes (`u64::MAX` if that does not fit in 64 bits).
        bytes: u64,
        limit: u64,
    },

    /// Computations called computations more than [`crate::MAX_CALL_DEPTH`]
    /// levels deep.
    #[error(
        "in computation `{computation}`, instruction `{instruction}` ({opcode}): calls nest more than {limit} levels deep"
    )]
    CallDepth {
        computation: String,
        instruction: String,
        opcode: Opcode,
        limit: usize,
    },

    /// A runtime service (infeed, outfeed, custom-call, collectives) reported an error.
    #[error(
        "in computation `{computation}`, instruction `{instruction}` ({opcode}): {service}: {message}"
    )]
    Service {
        computation: String,
        instruction: String,
        opcode: Opcode,
        service: ServiceKind,
        message: String,
    },
}

/// The error a runtime service returns; the interpreter adds where it happened.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ServiceError(pub String);

impl ServiceError {
    pub fn new(message: impl Into<String>) -> ServiceError {
        ServiceError(message.into())
    }
}

/// The failure of one instruction before it is tied to its location.
#[derive(Debug)]
pub(crate) enum OpError {
    /// A message about the instruction being evaluated.
    Message(String),
    /// A runtime service failed.
    Service(ServiceKind, String),
    /// An error already located elsewhere (inside a called computation).
    Located(Box<EvalError>),
    /// The while-loop iteration limit was exceeded.
    WhileLimit(u64),
    /// A result array of `shape` and `bytes` is over the memory `limit`.
    MemoryLimit {
        shape: String,
        bytes: u64,
        limit: u64,
    },
    /// Calls nest deeper than this limit.
    CallDepth(usize),
}

pub(crate) type OpResult<T> = Result<T, OpError>;

impl From<String> for OpError {
    fn from(message: String) -> OpError {
        OpError::Message(message)
    }
}

impl From<&str> for OpError {
    fn from(message: &str) -> OpError {
        OpError::Message(message.to_string())
    }
}

impl From<EvalError> for OpError {
    fn from(e: EvalError) -> OpError {
        OpError::Located(Box::new(e))
    }
}

impl From<oxla_hlo::LiteralError> for OpError {
    fn from(e: oxla_hlo::LiteralError) -> OpError {
        OpError::Message(e.to_string())
    }
}

impl From<oxla_hlo::ShapeError> for OpError {
    fn from(e: oxla_hlo::ShapeError) -> OpError {
        OpError::Message(e.to_string())
    }
}

impl OpError {
    /// Ties the failure to the instruction it happened in.
    pub(crate) fn locate(self, computation: &str, instruction: &str, opcode: Opcode) -> EvalError {
        match self {
            OpError::Message(message) => EvalError::Instruction {
                computation: computation.to_string(),
                instruction: instruction.to_string(),
                opcode,
                message,
            },
            OpError::Service(service, message) => EvalError::Service {
                computation: computation.to_string(),
                instruction: instruction.to_string(),
                opcode,
                service,
                message,
            },
            OpError::Located(e) => *e,
            OpError::WhileLimit(limit) => EvalError::WhileIterationLimit {
                computation: computation.to_string(),
                instruction: instruction.to_string(),
                limit,
            },
            OpError::MemoryLimit {
                shape,
                bytes,
                limit,
            } => EvalError::MemoryLimit {
                computation: computation.to_string(),
                instruction: instruction.to_string(),
                opcode,
                shape,
                bytes,
                limit,
            },
            OpError::CallDepth(limit) => EvalError::CallDepth {
                computation: computation.to_string(),
                instruction: instruction.to_string(),
                opcode,
                limit,
            },
        }
    }
}

/// Shorthand for an instruction-level error message.
pub(crate) fn fail<T>(message: impl Into<String>) -> OpResult<T> {
    Err(OpError::Message(message.into()))
}
