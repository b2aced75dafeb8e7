//! Constant folding: an instruction whose operands are all constants is
//! evaluated once, at compile time, by the reference interpreter (as XLA
//! folds with its HLO evaluator), and becomes a constant. Folding is
//! skipped where it would not pay: operations that only expand a value
//! (`broadcast`, `iota`) stay lazy so fusion can compute them on the fly,
//! large results and expensive operations stay for run time, and anything
//! with a side effect, randomness or a dependence on the device is left
//! alone.

use std::collections::HashMap;

use oxla_hlo::ir::Attrs;
use oxla_hlo::{ComputationId, HloModule, InstrId, Literal, Opcode};
use oxla_interp::{EvalOptions, NoServices, Session};

use crate::Pass;
use crate::effects::Effects;

pub struct FoldConstants {
    /// Results with more elements than this are only folded when no operand
    /// is smaller (folding must not grow the module much).
    pub max_expansion_elements: usize,
    /// Operands with more elements than this in total are left for run time.
    pub max_operand_elements: usize,
}

impl Default for FoldConstants {
    fn default() -> FoldConstants {
        FoldConstants {
            max_expansion_elements: 1024,
            max_operand_elements: 1 << 22,
        }
    }
}

impl Pass for FoldConstants {
    fn name(&self) -> &'static str {
        "fold-constants"
    }

    fn run(&self, module: &mut HloModule) -> bool {
        let folded = self.fold(module);
        let changed = !folded.is_empty();
        for ((c, k), literal) in folded {
            let comp = &mut module.computations_mut()[c.index()];
            let instr = &mut comp.instructions_mut()[k.index()];
            instr.opcode = Opcode::Constant;
            instr.operands.clear();
            instr.called = Default::default();
            instr.attrs = Attrs {
                literal: Some(literal),
                passthrough: std::mem::take(&mut instr.attrs.passthrough),
                ..Attrs::default()
            };
        }
        changed
    }
}

/// Work that is cheap per element; everything else (products, windows,
/// sorts, decompositions) is only folded on small operands.
fn costly(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Dot
            | Opcode::RaggedDot
            | Opcode::Convolution
            | Opcode::ReduceWindow
            | Opcode::SelectAndScatter
            | Opcode::Sort
            | Opcode::TopK
            | Opcode::Fft
            | Opcode::TriangularSolve
            | Opcode::Cholesky
            | Opcode::Scan
            | Opcode::Map
    )
}

fn foldable(op: Opcode) -> bool {
    !op.has_side_effect()
        && !matches!(
            op,
            Opcode::Parameter
                | Opcode::Constant
                | Opcode::Iota
                | Opcode::Broadcast
                | Opcode::While
                | Opcode::Conditional
                | Opcode::Call
                | Opcode::Tuple
                | Opcode::OptimizationBarrier
                | Opcode::RngBitGenerator
                | Opcode::ReplicaId
                | Opcode::PartitionId
        )
}

impl FoldConstants {
    fn fold(&self, module: &HloModule) -> Vec<((ComputationId, InstrId), Literal)> {
        let options = EvalOptions::default();
        let mut session = Session::new(module, &options, &NoServices);
        let effects = Effects::new(module);
        let mut out = Vec::new();
        for c in module.computation_ids() {
            let comp = module.computation(c);
            // Values known at compile time: constants, and what this sweep folded.
            let mut known: HashMap<InstrId, Literal> = HashMap::new();
            for k in comp.ids() {
                let instr = comp.instruction(k);
                if instr.opcode == Opcode::Constant {
                    if let Some(l) = &instr.attrs.literal {
                        known.insert(k, l.clone());
                    }
                    continue;
                }
                if !foldable(instr.opcode)
                    || effects.of(instr)
                    || instr.operands.is_empty()
                    || !instr.control_predecessors.is_empty()
                    || !instr.shape.is_array()
                {
                    continue;
                }
                let Some(operands) = instr
                    .operands
                    .iter()
                    .map(|o| known.get(o).cloned())
                    .collect::<Option<Vec<_>>>()
                else {
                    continue;
                };
                let sizes: Vec<usize> = operands
                    .iter()
                    .map(|l| l.leaves().iter().map(|a| a.element_count()).sum())
                    .collect();
                let total: usize = sizes.iter().sum();
                let limit = if costly(instr.opcode) {
                    1 << 14
                } else {
                    self.max_operand_elements
                };
                let out_elements = instr
                    .shape
                    .as_array()
                    .and_then(|a| a.element_count().ok())
                    .unwrap_or(usize::MAX);
                let largest = sizes.iter().copied().max().unwrap_or(0);
                if total > limit
                    || (out_elements > self.max_expansion_elements && out_elements > largest)
                {
                    continue;
                }
                // An error (say, a division the interpreter rejects) leaves
                // the instruction to fail, or not, at run time as before.
                if let Ok(literal) = session.eval_instruction(c, k, &operands) {
                    known.insert(k, literal.clone());
                    out.push(((c, k), literal));
                }
            }
        }
        out
    }
}
