//! Dead-code elimination: instructions whose values reach neither the root
//! nor an instruction with an effect (see [`crate::effects`]) are removed, and so are
//! computations nothing reachable from the entry calls.

use oxla_hlo::{ComputationId, HloComputation, HloModule, InstrId, Opcode};

use crate::Pass;
use crate::effects::Effects;

pub struct Dce;

impl Pass for Dce {
    fn name(&self) -> &'static str {
        "dce"
    }

    fn run(&self, module: &mut HloModule) -> bool {
        let effects = Effects::new(module);
        let mut changed = false;
        for comp in module.computations_mut() {
            changed |= remove_dead_instructions(comp, &effects);
        }
        changed | remove_dead_computations(module)
    }
}

/// Parameters stay (they fix the computation's signature), and so does
/// anything with a side effect.
fn remove_dead_instructions(comp: &mut HloComputation, effects: &Effects) -> bool {
    let n = comp.instructions().len();
    let mut live = vec![false; n];
    live[comp.root().index()] = true;
    for (k, instr) in comp.instructions().iter().enumerate() {
        if instr.opcode == Opcode::Parameter || effects.of(instr) {
            live[k] = true;
        }
    }
    for k in (0..n).rev() {
        if live[k] {
            let instr = &comp.instructions()[k];
            for op in instr.operands.iter().chain(&instr.control_predecessors) {
                live[op.index()] = true;
            }
        }
    }
    if live.iter().all(|&l| l) {
        return false;
    }
    let mut new_id = vec![None; n];
    let mut next = 0;
    for k in 0..n {
        if live[k] {
            new_id[k] = Some(InstrId::new(next));
            next += 1;
        }
    }
    // Liveness was propagated from each live instruction to its operands
    // above, so every id this maps (the root, operands of live ones) is set.
    let map = |id: InstrId| new_id[id.index()].expect("operands of live instructions are live");
    let root = map(comp.root());
    let instrs = comp.instructions_mut();
    let old = std::mem::take(instrs);
    for (k, mut instr) in old.into_iter().enumerate() {
        if live[k] {
            for op in instr
                .operands
                .iter_mut()
                .chain(instr.control_predecessors.iter_mut())
            {
                *op = map(*op);
            }
            instrs.push(instr);
        }
    }
    comp.set_root(root);
    comp.reindex();
    true
}

fn remove_dead_computations(module: &mut HloModule) -> bool {
    let n = module.computations().len();
    let mut live = vec![false; n];
    live[module.entry_id().index()] = true;
    // Callers come after their callees, so one backward sweep finds every
    // computation reachable from the entry.
    for c in (0..n).rev() {
        if live[c] {
            for instr in module.computations()[c].instructions() {
                for callee in instr.called.all() {
                    live[callee.index()] = true;
                }
            }
        }
    }
    if live.iter().all(|&l| l) {
        return false;
    }
    let mut new_id = vec![ComputationId::new(0); n];
    let mut next = 0;
    for c in 0..n {
        if live[c] {
            new_id[c] = ComputationId::new(next);
            next += 1;
        }
    }
    let entry = new_id[module.entry_id().index()];
    let comps = module.computations_mut();
    let old = std::mem::take(comps);
    for (c, mut comp) in old.into_iter().enumerate() {
        if live[c] {
            for instr in comp.instructions_mut() {
                instr.called.remap(|id| new_id[id.index()]);
            }
            comps.push(comp);
        }
    }
    module.set_entry(entry);
    true
}
