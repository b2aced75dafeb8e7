//! HLO-to-HLO optimisation passes. Each pass rewrites a verified module into
//! an equivalent verified module: the same results on every input, bit for
//! bit (the passes only apply rewrites that are exact, and fold constants
//! with the reference interpreter). The one exception is [`MatchXla`], kept
//! out of the standard pipeline: it applies the inexact rewrites XLA itself
//! applies, so that results match XLA's rather than the program as written. A [`Pipeline`] runs passes to a fixed
//! point and can report the module after each one, which is how
//! `oxla opt --after-each` shows what the compiler did.

mod cse;
mod dce;
mod effects;
mod fold;
mod forward;
mod inline;
mod licm;
mod ranges;
mod simplify;
mod splice;
mod unroll;
mod xla_numerics;

pub use cse::Cse;
pub use dce::Dce;
pub use fold::FoldConstants;
pub use inline::Inline;
pub use licm::HoistInvariants;
pub use ranges::LoopRanges;
pub use simplify::Simplify;
pub use unroll::{MAX_TRIPS, UnrollWhile};
pub use xla_numerics::MatchXla;

use oxla_hlo::HloModule;

/// One rewrite of a module.
pub trait Pass {
    /// A short name, as printed in pass dumps.
    fn name(&self) -> &'static str;

    /// Rewrites `module` in place; returns whether anything changed.
    fn run(&self, module: &mut HloModule) -> bool;
}

/// Passes run in order, repeatedly, until none changes the module (or a
/// bound on rounds is reached, which only a pass that undoes another's work
/// would hit).
pub struct Pipeline {
    passes: Vec<Box<dyn Pass>>,
    max_rounds: usize,
}

impl Pipeline {
    pub fn new(passes: Vec<Box<dyn Pass>>) -> Pipeline {
        Pipeline {
            passes,
            max_rounds: 8,
        }
    }

    /// The pipeline the compiler uses: inline calls, unroll short counted
    /// loops, decide comparisons by the ranges of counted loops' induction
    /// variables, simplify, fold constants, merge common subexpressions,
    /// hoist loop-invariant work out of loops, drop dead code.
    pub fn standard() -> Pipeline {
        Pipeline::new(vec![
            Box::new(Inline),
            Box::new(UnrollWhile),
            Box::new(LoopRanges),
            Box::new(Simplify),
            Box::new(FoldConstants::default()),
            Box::new(Cse),
            Box::new(HoistInvariants),
            Box::new(Dce),
        ])
    }

    /// XLA's inexact rewrites ([`MatchXla`]) with what they need around
    /// them: calls inlined first (XLA inlines before it normalizes), new
    /// constants folded, common subexpressions merged (`sqrt(x) * sqrt(x)`
    /// written twice is one value to XLA) and dead code dropped.
    pub fn xla() -> Pipeline {
        Pipeline::new(vec![
            Box::new(Inline),
            Box::new(MatchXla),
            Box::new(FoldConstants::default()),
            Box::new(Cse),
            Box::new(Dce),
        ])
    }

    pub fn passes(&self) -> impl Iterator<Item = &dyn Pass> {
        self.passes.iter().map(|p| p.as_ref())
    }

    /// Runs the pipeline; `observe(pass, round, changed, module)` is called
    /// after every pass with the module as that pass left it.
    pub fn run_observed(
        &self,
        module: &mut HloModule,
        observe: &mut dyn FnMut(&str, usize, bool, &HloModule),
    ) {
        for round in 0..self.max_rounds {
            let mut any = false;
            for pass in &self.passes {
                let changed = pass.run(module);
                observe(pass.name(), round, changed, module);
                any |= changed;
            }
            if !any {
                break;
            }
        }
    }

    pub fn run(&self, module: &mut HloModule) {
        self.run_observed(module, &mut |_, _, _, _| {});
    }
}

/// `module` rewritten as XLA rewrites it before running it (see
/// [`MatchXla`]): its results are then XLA's, bit for bit where the
/// operations are exact.
pub fn match_xla(module: &HloModule) -> HloModule {
    let mut module = module.clone();
    Pipeline::xla().run(&mut module);
    module
}

/// `module` after the standard pipeline.
pub fn optimize(module: &HloModule) -> HloModule {
    let mut module = module.clone();
    Pipeline::standard().run(&mut module);
    module
}
