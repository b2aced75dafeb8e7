//! Which instructions have effects beyond their value: those whose opcode
//! has one (rng, infeed, collectives, custom calls, ...) and those calling
//! a computation that contains one anywhere (a `map` whose function draws
//! random numbers advances the stream like an `rng` would). Passes never
//! remove, merge or fold such an instruction. The LAPACK custom calls JAX
//! writes for its factorisations (`lapack_sgetrf_ffi`, ...) are functions
//! of their operands, as XLA treats a custom call not marked
//! `custom_call_has_side_effect`, so a `jit`-ed `solve` or `inv` inlines.

use oxla_hlo::{HloInstruction, HloModule, Opcode};

/// Whether `instr` itself, apart from what it calls, has an effect.
fn own(instr: &HloInstruction) -> bool {
    instr.opcode.has_side_effect()
        && !(instr.opcode == Opcode::CustomCall
            && instr
                .attrs
                .custom_call_target
                .as_deref()
                .is_some_and(|t| t.starts_with("lapack_") && t.ends_with("_ffi")))
}

pub(crate) struct Effects {
    /// Per computation: whether running it has an effect.
    computations: Vec<bool>,
}

impl Effects {
    pub(crate) fn new(module: &HloModule) -> Effects {
        // Callees come before callers, so one forward sweep suffices.
        let mut computations: Vec<bool> = Vec::with_capacity(module.computations().len());
        for comp in module.computations() {
            let effect = comp.instructions().iter().any(|i| {
                own(i)
                    || i.called
                        .all()
                        .iter()
                        .any(|c| computations.get(c.index()).copied().unwrap_or(true))
            });
            computations.push(effect);
        }
        Effects { computations }
    }

    pub(crate) fn of(&self, instr: &HloInstruction) -> bool {
        own(instr)
            || instr
                .called
                .all()
                .iter()
                .any(|c| self.computations.get(c.index()).copied().unwrap_or(true))
    }
}
