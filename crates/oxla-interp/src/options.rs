//! Knobs of one evaluation: the random seed and the safety limits that keep a
//! hostile module from running forever or exhausting memory.

/// The default [`EvalOptions::max_array_bytes`]: 4 GiB. Larger than any array
/// the interpreter can process in reasonable time (a billion f32 elements),
/// and small enough that a module asking for more fails with an error
/// rather than exhausting a typical machine's memory.
pub const DEFAULT_MAX_ARRAY_BYTES: u64 = 4 << 30;

/// How deeply computations may call computations (`call`, `while`,
/// `conditional`, `map`, `reduce`, ...) during one evaluation. Each level
/// takes a few kilobytes of the stack; this depth fits the 2 MiB stacks of
/// spawned threads with room to spare, and is far deeper than any real
/// program nests. Deeper nesting is an [`crate::EvalError::CallDepth`].
pub const MAX_CALL_DEPTH: usize = 64;

/// Options for [`crate::evaluate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalOptions {
    /// Seed of the `rng` instruction's generator. The same module, arguments and
    /// seed always give the same values. (`rng-bit-generator` takes its state
    /// from its operand and does not use the seed.)
    pub seed: u64,
    /// The most iterations any single execution of a `while` may run; exceeding
    /// it is an [`crate::EvalError::WhileIterationLimit`]. It bounds the steps of
    /// a `scan` too (an error naming the scan). `None` means no limit.
    pub while_iteration_limit: Option<u64>,
    /// The largest array, in bytes of element data, evaluation may create.
    /// Each instruction's result shape is checked before the instruction
    /// runs, so an array over the limit is never allocated: it is an
    /// [`crate::EvalError::MemoryLimit`] naming the instruction, the shape
    /// and the limit. The limit is per array, not a total; while an
    /// instruction runs it may also hold index tables of up to 8 bytes per
    /// result element. Defaults to [`DEFAULT_MAX_ARRAY_BYTES`].
    pub max_array_bytes: u64,
    /// Model XLA:CPU's flush-to-zero/denormals-are-zero mode: f32 and f64
    /// arithmetic (and bf16's, done in f32) reads denormal operands as zero and
    /// flushes denormal results, while bit operations keep them. Off by
    /// default: the interpreter follows IEEE, as the spec does.
    pub flush_denormals: bool,
}

impl Default for EvalOptions {
    fn default() -> EvalOptions {
        EvalOptions {
            seed: 0,
            while_iteration_limit: None,
            max_array_bytes: DEFAULT_MAX_ARRAY_BYTES,
            flush_denormals: false,
        }
    }
}

impl EvalOptions {
    /// Options with the given seed, no iteration limit and the default memory limit.
    pub fn with_seed(seed: u64) -> EvalOptions {
        EvalOptions {
            seed,
            ..EvalOptions::default()
        }
    }

    /// These options with denormals flushed as on XLA:CPU (see [`EvalOptions::flush_denormals`]).
    pub fn flush_denormals(mut self, flush: bool) -> EvalOptions {
        self.flush_denormals = flush;
        self
    }

    /// These options with a `while` iteration limit.
    pub fn while_iteration_limit(mut self, limit: u64) -> EvalOptions {
        self.while_iteration_limit = Some(limit);
        self
    }

    /// These options with a different limit on the size of any one array
    /// (see [`EvalOptions::max_array_bytes`]).
    pub fn max_array_bytes(mut self, bytes: u64) -> EvalOptions {
        self.max_array_bytes = bytes;
        self
    }
}
