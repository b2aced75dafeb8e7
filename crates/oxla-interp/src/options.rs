//! Knobs of one evaluation: the random seed and safety limits.

/// Options for [`crate::evaluate`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EvalOptions {
    /// Seed of the `rng` instruction's generator. The same module, arguments and
    /// seed always give the same values. (`rng-bit-generator` takes its state
    /// from its operand and does not use the seed.)
    pub seed: u64,
    /// The most iterations any single execution of a `while` may run; exceeding
    /// it is an [`crate::EvalError::WhileIterationLimit`]. `None` means no limit.
    pub while_iteration_limit: Option<u64>,
    /// Model XLA:CPU's flush-to-zero/denormals-are-zero mode: f32 and f64
    /// arithmetic (and bf16's, done in f32) reads denormal operands as zero and
    /// flushes denormal results, while bit operations keep them. Off by
    /// default: the interpreter follows IEEE, as the spec does.
    pub flush_denormals: bool,
}

impl EvalOptions {
    /// Options with the given seed and no iteration limit.
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
}
