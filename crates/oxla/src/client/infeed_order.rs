//! The spec's compile-time rule for Infeed: all Infeed operations of a
//! computation must have a total order, given by data dependencies. Two
//! infeeds (or loops, calls or conditionals containing infeeds) neither of
//! which depends on the other would read the queue in an unspecified order.

use std::collections::HashSet;

use oxla_hlo::HloModule;
use oxla_hlo::ir::{HloComputation, InstrId, Opcode};

/// Checks every computation; the error names the unordered pair.
pub(crate) fn check(module: &HloModule) -> Result<(), String> {
    // Callees come before callers, so one pass finds which contain infeeds.
    let mut has_infeed = vec![false; module.computations().len()];
    for (k, comp) in module.computations().iter().enumerate() {
        has_infeed[k] = comp.instructions().iter().any(|i| {
            i.opcode == Opcode::Infeed || i.called.all().iter().any(|c| has_infeed[c.index()])
        });
    }
    for comp in module.computations() {
        let mut sites = Vec::new();
        for id in comp.ids() {
            let instr = comp.instruction(id);
            let applied = [
                instr.called.to_apply,
                instr.called.select,
                instr.called.scatter,
            ];
            let per_element = matches!(
                instr.opcode,
                Opcode::Map
                    | Opcode::Reduce
                    | Opcode::ReduceWindow
                    | Opcode::Sort
                    | Opcode::Scatter
                    | Opcode::SelectAndScatter
                    | Opcode::AllReduce
                    | Opcode::ReduceScatter
            );
            if per_element && applied.iter().flatten().any(|c| has_infeed[c.index()]) {
                return Err(format!(
                    "in {}: `{}` ({}) applies a computation that reads infeed once per element, in no defined order",
                    comp.name, instr.name, instr.opcode
                ));
            }
            if instr.opcode == Opcode::Infeed
                || instr.called.all().iter().any(|c| has_infeed[c.index()])
            {
                sites.push(id);
            }
        }
        let ancestors: Vec<HashSet<InstrId>> =
            sites.iter().map(|&s| ancestors_of(comp, s)).collect();
        for i in 0..sites.len() {
            for j in i + 1..sites.len() {
                let ordered = ancestors[j].contains(&sites[i]) || ancestors[i].contains(&sites[j]);
                if !ordered {
                    return Err(format!(
                        "in {}: the infeeds in `{}` and `{}` have no order between them (neither depends on the other); the spec requires a total order among Infeed operations",
                        comp.name,
                        comp.instruction(sites[i]).name,
                        comp.instruction(sites[j]).name
                    ));
                }
            }
        }
    }
    Ok(())
}

fn ancestors_of(comp: &HloComputation, start: InstrId) -> HashSet<InstrId> {
    let mut seen = HashSet::new();
    let mut stack = vec![start];
    while let Some(id) = stack.pop() {
        let instr = comp.instruction(id);
        for &o in instr.operands.iter().chain(&instr.control_predecessors) {
            if seen.insert(o) {
                stack.push(o);
            }
        }
    }
    seen
}
