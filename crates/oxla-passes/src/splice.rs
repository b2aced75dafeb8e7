//! Rebuilding a computation with some of its instructions replaced by copies
//! of whole computations: the step call inlining and loop unrolling share.

use std::collections::HashSet;

use oxla_hlo::{HloComputation, HloInstruction, HloModule, InstrId, Opcode};

/// The instructions of a computation being rebuilt, and every instruction
/// name of the module, so copies get names no other instruction has.
pub(crate) struct Splice<'a> {
    pub out: Vec<HloInstruction>,
    names: &'a mut HashSet<String>,
}

impl Splice<'_> {
    /// Appends `instr`; returns its id.
    fn push(&mut self, instr: HloInstruction) -> InstrId {
        self.out.push(instr);
        InstrId::new(self.out.len() - 1)
    }

    /// `base` if no instruction of the module has that name, else the first
    /// free `base.N`.
    fn unique(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut n = 1usize;
        while self.names.contains(&name) {
            name = format!("{base}.{n}");
            n += 1;
        }
        self.names.insert(name.clone());
        name
    }

    /// Appends a copy of `callee`'s instructions with its parameter `p`
    /// reading `args[p]`; returns the id of its root's copy. `None` (with
    /// nothing appended that anything reads) if `args` does not match the
    /// callee's parameters.
    pub fn inline(&mut self, callee: &HloComputation, args: &[InstrId]) -> Option<InstrId> {
        if callee.num_parameters() != args.len() {
            return None;
        }
        let mut map: Vec<InstrId> = Vec::with_capacity(callee.instructions().len());
        for instr in callee.instructions() {
            if instr.opcode == Opcode::Parameter {
                map.push(*args.get(instr.attrs.parameter_number?)?);
                continue;
            }
            let mut copy = instr.clone();
            for op in copy
                .operands
                .iter_mut()
                .chain(copy.control_predecessors.iter_mut())
            {
                *op = *map.get(op.index())?;
            }
            copy.name = self.unique(&instr.name);
            map.push(self.push(copy));
        }
        map.get(callee.root().index()).copied()
    }
}

/// Every instruction name in `module`.
pub(crate) fn names(module: &HloModule) -> HashSet<String> {
    module
        .computations()
        .iter()
        .flat_map(|c| c.instructions())
        .map(|i| i.name.clone())
        .collect()
}

/// Rebuilds computation `c` of `module`: `expand(callees, splice, instr,
/// operands)` may append instructions computing `instr`'s value (its
/// operands already renumbered) and return the id of the one holding it;
/// instructions it leaves (`None`) are kept as they are. `callees` are the
/// computations before `c` (all it can call). Returns whether anything was
/// expanded.
pub(crate) fn rebuild(
    module: &mut HloModule,
    c: usize,
    names: &mut HashSet<String>,
    mut expand: impl FnMut(
        &[HloComputation],
        &mut Splice,
        &HloInstruction,
        &[InstrId],
    ) -> Option<InstrId>,
) -> bool {
    let (callees, rest) = module.computations_mut().split_at_mut(c);
    let Some(comp) = rest.first_mut() else {
        return false;
    };
    let n = comp.instructions().len();
    let mut splice = Splice {
        out: Vec::with_capacity(n),
        names,
    };
    let mut map: Vec<InstrId> = Vec::with_capacity(n);
    let mut changed = false;
    for instr in comp.instructions() {
        // Operands come before users, so every operand is mapped already.
        let operands: Vec<InstrId> = instr.operands.iter().map(|o| map[o.index()]).collect();
        let mark = splice.out.len();
        if let Some(id) = expand(callees, &mut splice, instr, &operands) {
            map.push(id);
            changed = true;
            continue;
        }
        // A failed expansion may have appended copies nothing reads; they go.
        splice.out.truncate(mark);
        let mut copy = instr.clone();
        copy.operands = operands;
        for p in &mut copy.control_predecessors {
            *p = map[p.index()];
        }
        map.push(splice.push(copy));
    }
    if !changed {
        return false;
    }
    let root = map[comp.root().index()];
    *comp.instructions_mut() = splice.out;
    comp.set_root(root);
    comp.reindex();
    true
}
