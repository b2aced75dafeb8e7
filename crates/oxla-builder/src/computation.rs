//! `XlaComputation`: a built computation, held as a verified `HloModule` whose
//! entry is the computation and whose other computations are the ones it calls.

use std::sync::atomic::{AtomicU64, Ordering};

use oxla_hlo::{HloModule, ProgramShape};

static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// A fresh id that identifies one built computation across builders.
pub(crate) fn next_computation_uid() -> u64 {
    NEXT_UID.fetch_add(1, Ordering::Relaxed)
}

/// A built, verified computation: pass it to ops that take computations
/// (reduce, map, while, call, sort, ...) or compile and run it.
#[derive(Clone, Debug)]
pub struct XlaComputation {
    module: HloModule,
    /// A unique id per computation of `module` (same order), so that a
    /// computation used several times is embedded once.
    uids: Vec<u64>,
}

impl XlaComputation {
    pub(crate) fn new(module: HloModule, uids: Vec<u64>) -> XlaComputation {
        XlaComputation { module, uids }
    }

    pub(crate) fn uid_of(&self, index: usize) -> u64 {
        self.uids[index]
    }

    /// The module: this computation as its entry, plus everything it calls.
    pub fn module(&self) -> &HloModule {
        &self.module
    }

    pub fn into_module(self) -> HloModule {
        self.module
    }

    pub fn name(&self) -> &str {
        &self.module.entry().name
    }

    /// Parameter shapes and result shape.
    pub fn program_shape(&self) -> ProgramShape {
        self.module.program_shape()
    }
}
