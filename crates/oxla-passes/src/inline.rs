//! Call inlining: a `call` becomes a copy of the computation it calls, its
//! parameters reading the call's operands, so the passes and the backend's
//! fusion see across what JAX wraps in `closed_call`s and `jit`-ed helpers
//! (XLA's `CallInliner` does the same). Calls whose computation has an
//! effect, or that carry control edges, stay as they are.

use oxla_hlo::{HloModule, Opcode};

use crate::Pass;
use crate::effects::Effects;
use crate::splice::{Names, rebuild};

/// A computation is not grown past this many instructions by inlining.
const MAX_INSTRUCTIONS: usize = 1 << 16;
/// Nor the module past this many times its size (plus `MAX_INSTRUCTIONS`):
/// every computation is flattened, so chains of calls that each add work
/// would otherwise grow the module quadratically.
const MAX_GROWTH: usize = 4;

pub struct Inline;

impl Pass for Inline {
    fn name(&self) -> &'static str {
        "inline"
    }

    fn run(&self, module: &mut HloModule) -> bool {
        if !module
            .computations()
            .iter()
            .any(|c| c.instructions().iter().any(|i| i.opcode == Opcode::Call))
        {
            return false;
        }
        let effects = Effects::new(module);
        let mut names = Names::of(module);
        let mut changed = false;
        let count = |m: &HloModule| -> usize {
            m.computations()
                .iter()
                .map(|c| c.instructions().len())
                .sum()
        };
        let budget = count(module)
            .saturating_mul(MAX_GROWTH)
            .saturating_add(MAX_INSTRUCTIONS);
        let mut total = count(module);
        // Callees come before callers: each callee is inlined into before
        // its callers copy it.
        for c in 0..module.computations().len() {
            let mut size = module.computations()[c].instructions().len();
            changed |= rebuild(module, c, &mut names, |callees, splice, instr, operands| {
                if instr.opcode != Opcode::Call
                    || !instr.control_predecessors.is_empty()
                    || effects.of(instr)
                {
                    return None;
                }
                let callee = callees.get(instr.called.to_apply?.index())?;
                let added = callee.instructions().len();
                if size + added > MAX_INSTRUCTIONS || total + added > budget {
                    return None;
                }
                let root = splice.inline(callee, operands)?;
                size += added;
                total += added;
                Some(root)
            });
        }
        changed
    }
}
