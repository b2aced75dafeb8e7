//! Rebuilding a computation with some of its instructions replaced by copies
//! of whole computations: the step call inlining and loop unrolling share.

use std::collections::{HashMap, HashSet};

use oxla_hlo::{HloComputation, HloInstruction, HloModule, InstrId, Opcode};

/// Every instruction name of a module, and for each base name the next
/// suffix to try, so copies get names no other instruction has: `add.16`
/// copied becomes `add.N` for the first free `N` (counted per base, so
/// names neither grow with nesting nor cost more the more copies there are).
pub(crate) struct Names {
    taken: HashSet<String>,
    next: HashMap<String, usize>,
}

impl Names {
    pub fn of(module: &HloModule) -> Names {
        Names {
            taken: module
                .computations()
                .iter()
                .flat_map(|c| c.instructions())
                .map(|i| i.name.clone())
                .collect(),
            next: HashMap::new(),
        }
    }

    /// A name for a copy of the instruction named `name`.
    pub fn fresh(&mut self, name: &str) -> String {
        let base = match name.rsplit_once('.') {
            Some((b, n))
                if !b.is_empty() && !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) =>
            {
                b
            }
            _ => name,
        };
        let next = self.next.entry(base.to_string()).or_insert(1);
        loop {
            let candidate = format!("{base}.{next}");
            *next += 1;
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
        }
    }
}

/// The instructions of a computation being rebuilt, and the module's names.
pub(crate) struct Splice<'a> {
    pub out: Vec<HloInstruction>,
    names: &'a mut Names,
}

impl Splice<'_> {
    /// Appends `instr`; returns its id.
    fn push(&mut self, instr: HloInstruction) -> InstrId {
        self.out.push(instr);
        InstrId::new(self.out.len() - 1)
    }

    /// Appends `instr` under a fresh name derived from `like`; returns its id.
    pub fn add(&mut self, mut instr: HloInstruction, like: &str) -> InstrId {
        instr.name = self.names.fresh(like);
        self.push(instr)
    }

    /// The instruction `id` names among those rebuilt so far.
    pub fn get(&self, id: InstrId) -> &HloInstruction {
        &self.out[id.index()]
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
            copy.name = self.names.fresh(&instr.name);
            map.push(self.push(copy));
        }
        map.get(callee.root().index()).copied()
    }
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
    names: &mut Names,
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
