//! Common-subexpression elimination: an instruction identical to an earlier
//! one (same opcode, operands, attributes, called computations and shape)
//! is replaced by it. Constants are compared bit for bit, so `0.0` and
//! `-0.0`, or two NaNs with different payloads, stay apart. Called
//! computations are compared by structure, not name: JAX writes a region
//! of its own for every reduce, so the two sums over the same array in a
//! mean and a variance call two identical computations.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use oxla_hlo::ir::{Attrs, Called};
use oxla_hlo::{
    ComputationId, HloComputation, HloInstruction, HloModule, InstrId, Literal, Opcode,
};

use crate::Pass;
use crate::effects::Effects;
use crate::forward::Forward;

pub struct Cse;

impl Pass for Cse {
    fn name(&self) -> &'static str {
        "cse"
    }

    fn run(&self, module: &mut HloModule) -> bool {
        let effects = Effects::new(module);
        let canon = canonical_computations(module);
        let mut changed = false;
        for comp in module.computations_mut() {
            let n = comp.instructions().len();
            let mut forward = Forward::new(n);
            let mut seen: HashMap<(Opcode, Vec<InstrId>, u64), Vec<usize>> = HashMap::new();
            for k in 0..n {
                let instrs = comp.instructions_mut();
                changed |= forward.apply(&mut instrs[k]);
                let instr = &instrs[k];
                if !eligible(instr) || effects.of(instr) {
                    continue;
                }
                let key = (instr.opcode, instr.operands.clone(), fingerprint(instr));
                let candidates = seen.entry(key).or_default();
                match candidates
                    .iter()
                    .find(|&&j| same_value(&instrs[j], instr, &canon))
                {
                    Some(&j) => {
                        forward.set(k, InstrId::new(j));
                        changed = true;
                    }
                    None => candidates.push(k),
                }
            }
            changed |= forward.finish(comp);
        }
        changed
    }
}

/// Separates constants by content so that many constants do not all land
/// in one bucket.
fn fingerprint(instr: &HloInstruction) -> u64 {
    let Some(literal) = &instr.attrs.literal else {
        return 0;
    };
    let mut h = DefaultHasher::new();
    for leaf in literal.leaves() {
        leaf.to_bytes().hash(&mut h);
    }
    h.finish()
}

fn eligible(instr: &HloInstruction) -> bool {
    instr.opcode != Opcode::Parameter
        && !instr.opcode.has_side_effect()
        && instr.control_predecessors.is_empty()
}

fn same_value(a: &HloInstruction, b: &HloInstruction, canon: &[usize]) -> bool {
    a.opcode == b.opcode
        && a.operands == b.operands
        && a.shape == b.shape
        && canonical(&a.called, canon) == canonical(&b.called, canon)
        && same_attrs(&a.attrs, &b.attrs)
}

/// `called` with every computation replaced by the first one of the same
/// structure.
fn canonical(called: &Called, canon: &[usize]) -> Called {
    let map =
        |c: ComputationId| ComputationId::new(canon.get(c.index()).copied().unwrap_or(c.index()));
    Called {
        to_apply: called.to_apply.map(map),
        condition: called.condition.map(map),
        body: called.body.map(map),
        select: called.select.map(map),
        scatter: called.scatter.map(map),
        branches: called.branches.iter().copied().map(map).collect(),
        called: called.called.iter().copied().map(map).collect(),
    }
}

/// For each computation, the first computation with the same structure:
/// the same instructions (opcode, operands, shape, attributes, control
/// predecessors and, recursively, called computations) in the same order
/// with the same root; names and metadata aside. Computations come callee
/// first, so a computation's callees are mapped before it is.
fn canonical_computations(module: &HloModule) -> Vec<usize> {
    let comps = module.computations();
    let mut canon: Vec<usize> = (0..comps.len()).collect();
    let mut by_size: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
    for (c, comp) in comps.iter().enumerate() {
        let key = (comp.instructions().len(), comp.root().index());
        let candidates = by_size.entry(key).or_default();
        match candidates
            .iter()
            .find(|&&d| same_computation(&comps[d], comp, &canon))
        {
            Some(&d) => canon[c] = d,
            None => candidates.push(c),
        }
    }
    canon
}

fn same_computation(a: &HloComputation, b: &HloComputation, canon: &[usize]) -> bool {
    a.root() == b.root()
        && a.instructions().len() == b.instructions().len()
        && a.instructions().iter().zip(b.instructions()).all(|(x, y)| {
            x.control_predecessors == y.control_predecessors && same_value(x, y, canon)
        })
}

/// Attribute equality that ignores attributes without effect on the value
/// (metadata and the like) and compares literals bit for bit.
fn same_attrs(a: &Attrs, b: &Attrs) -> bool {
    let literals_equal = match (&a.literal, &b.literal) {
        (None, None) => true,
        (Some(x), Some(y)) => same_bits(x, y),
        _ => false,
    };
    if !literals_equal {
        return false;
    }
    let strip = |attrs: &Attrs| Attrs {
        literal: None,
        passthrough: Vec::new(),
        ..attrs.clone()
    };
    strip(a) == strip(b)
}

fn same_bits(a: &Literal, b: &Literal) -> bool {
    let (la, lb) = (a.leaves(), b.leaves());
    a.shape() == b.shape()
        && la.len() == lb.len()
        && la
            .iter()
            .zip(&lb)
            .all(|(x, y)| x.shape() == y.shape() && x.to_bytes() == y.to_bytes())
}
