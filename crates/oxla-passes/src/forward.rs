//! Redirecting uses: when a pass finds that instruction `k` computes the
//! same value as an earlier instruction `j`, every later use of `k` is
//! rewritten to `j`, and `k` is left for dead-code elimination.

use oxla_hlo::{HloComputation, HloInstruction, InstrId};

/// For each instruction, the instruction its uses now read.
pub(crate) struct Forward(Vec<InstrId>);

impl Forward {
    pub fn new(n: usize) -> Forward {
        Forward((0..n).map(InstrId::new).collect())
    }

    /// Redirects uses of `k` to `to`, which must come before `k`.
    pub fn set(&mut self, k: usize, to: InstrId) {
        // `to` was processed before `k`, so its own target is final.
        self.0[k] = self.0[to.index()];
    }

    pub fn get(&self, id: InstrId) -> InstrId {
        self.0[id.index()]
    }

    /// Rewrites the operands and control predecessors of `instr`.
    pub fn apply(&self, instr: &mut HloInstruction) -> bool {
        let mut changed = false;
        for op in instr
            .operands
            .iter_mut()
            .chain(instr.control_predecessors.iter_mut())
        {
            let to = self.get(*op);
            changed |= to != *op;
            *op = to;
        }
        changed
    }

    /// Points the root at its target; returns whether it moved.
    pub fn finish(&self, comp: &mut HloComputation) -> bool {
        let root = comp.root();
        let to = self.get(root);
        comp.set_root(to);
        to != root
    }
}
