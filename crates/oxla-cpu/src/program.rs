//! Lowering a module to programs: one per computation, a list of steps in
//! execution order, each reading and writing numbered value slots, with the
//! slots each step releases. Control flow stays structured (a step of a
//! `while` runs other programs); everything else is a native kernel, or, for
//! operations without one, the interpreter.

use std::sync::Arc;

use oxla_hlo::{ComputationId, HloComputation, HloModule, InstrId, Literal, Opcode};

use crate::error::{CpuError, CpuResult};
use crate::kernels::{self, Kernel};

/// What a step does.
pub(crate) enum Kind {
    Parameter(usize),
    Constant(Arc<Literal>),
    Tuple,
    GetTupleElement(usize),
    Call(usize),
    While {
        cond: usize,
        body: usize,
        /// The loop compiled whole, when its state is small.
        small: Option<Box<crate::small_loop::SmallLoop>>,
    },
    Conditional {
        branches: Vec<usize>,
    },
    Kernel(Box<dyn Kernel>),
    /// An `rng`, which draws from the execution's stream.
    Rng(Box<kernels::stream::RngKernel>),
    /// Evaluated by the interpreter session (operations without a native kernel).
    Interpret,
}

/// One step of a program.
pub(crate) struct Step {
    pub instr: InstrId,
    pub kind: Kind,
    /// Slots read, one per operand.
    pub inputs: Vec<usize>,
    /// The slot written (the instruction's index).
    pub output: usize,
    /// Bytes of the largest array the step makes (for the memory limit).
    pub largest: u64,
}

fn largest_leaf(instr: &oxla_hlo::HloInstruction) -> u64 {
    instr
        .shape
        .leaves()
        .iter()
        .map(|a| a.byte_size().map_or(u64::MAX, |b| b as u64))
        .max()
        .unwrap_or(0)
}

/// A computation, lowered.
pub(crate) struct Program {
    pub computation: ComputationId,
    pub steps: Vec<Step>,
    pub num_slots: usize,
    /// How many times steps read each slot (the root counts once more).
    pub uses: Vec<u32>,
    pub root: usize,
}

/// Lowers every computation of `module`; program `i` is computation `i`.
/// Without `native`, every operation is left to the interpreter (XLA:CPU's
/// denormal-flushing mode runs that way: the kernels compute with IEEE
/// denormals).
pub(crate) fn lower(module: &HloModule, native: bool) -> CpuResult<Vec<Program>> {
    module
        .computations()
        .iter()
        .enumerate()
        .map(|(i, comp)| lower_computation(module, ComputationId::new(i), comp, native))
        .collect()
}

fn lower_computation(
    module: &HloModule,
    id: ComputationId,
    comp: &HloComputation,
    native: bool,
) -> CpuResult<Program> {
    let instrs = comp.instructions();
    let n = instrs.len();
    let root = comp.root().index();
    if root >= n {
        return Err(CpuError::Compile(format!(
            "computation `{}` has no root",
            comp.name
        )));
    }
    // Live: reaches the root, or has a side effect (as the interpreter decides).
    let mut live = vec![false; n];
    live[root] = true;
    for (k, instr) in instrs.iter().enumerate() {
        live[k] |= instr.opcode.has_side_effect();
    }
    for k in (0..n).rev() {
        if live[k] {
            for op in &instrs[k].operands {
                live[op.index()] = true;
            }
        }
    }
    let fusion = if native {
        crate::fusion::plan(module, comp, &live)
    } else {
        crate::fusion::Fusion {
            groups: Default::default(),
            absorbed: vec![false; n],
        }
    };
    let mut groups = fusion.groups;
    let mut steps = Vec::new();
    for k in (0..n).filter(|&k| live[k] && !fusion.absorbed[k]) {
        let instr = &instrs[k];
        if let Some(group) = groups.remove(&k) {
            steps.push(Step {
                instr: InstrId::new(k),
                kind: Kind::Kernel(group.kernel),
                inputs: group.inputs,
                output: k,
                largest: largest_leaf(instr),
            });
            continue;
        }
        let kind = match instr.opcode {
            Opcode::Parameter => Kind::Parameter(instr.attrs.parameter_number.unwrap_or(0)),
            Opcode::Constant => match &instr.attrs.literal {
                Some(l) => Kind::Constant(Arc::new(l.clone())),
                None => {
                    return Err(CpuError::Compile(format!(
                        "constant `{}` has no value",
                        instr.name
                    )));
                }
            },
            Opcode::Tuple => Kind::Tuple,
            Opcode::GetTupleElement => Kind::GetTupleElement(instr.attrs.tuple_index.unwrap_or(0)),
            Opcode::Call => match instr.called.to_apply {
                Some(c) => Kind::Call(c.index()),
                None => Kind::Interpret,
            },
            Opcode::While => match (instr.called.condition, instr.called.body) {
                (Some(c), Some(b)) => Kind::While {
                    cond: c.index(),
                    body: b.index(),
                    small: native
                        .then(|| crate::small_loop::plan(module, id, InstrId::new(k)))
                        .flatten()
                        .map(Box::new),
                },
                _ => Kind::Interpret,
            },
            Opcode::Rng if native => match kernels::stream::plan(instr) {
                Some(k) => Kind::Rng(Box::new(k)),
                None => Kind::Interpret,
            },
            Opcode::Conditional => Kind::Conditional {
                branches: instr.called.branches.iter().map(|b| b.index()).collect(),
            },
            _ => match kernels::select(module, comp, InstrId::new(k)).filter(|_| native) {
                Some(kernel) => Kind::Kernel(kernel),
                None => Kind::Interpret,
            },
        };
        steps.push(Step {
            instr: InstrId::new(k),
            kind,
            inputs: instr.operands.iter().map(|o| o.index()).collect(),
            output: k,
            largest: largest_leaf(instr),
        });
    }
    let steps = if native {
        form_pipelines(steps, root)
    } else {
        steps
    };
    // Reads of each slot by the final steps.
    let mut uses = vec![0u32; n];
    uses[root] += 1;
    for step in &steps {
        for &i in &step.inputs {
            uses[i] += 1;
        }
    }
    Ok(Program {
        computation: id,
        steps,
        num_slots: n,
        uses,
        root,
    })
}

/// Longest chains tried for a row pipeline.
const MAX_PIPELINE: usize = 8;

/// Replaces chains of fused reductions and loops over the same rows with
/// row pipelines (see `kernels::pipeline`). A chain starts at a reduction
/// or a loop (a pipeline needs a reduction in it, which sets its rows) and
/// takes the kernel steps after it, passing over constants and parameters;
/// every value but the last must be read only inside the chain.
fn form_pipelines(steps: Vec<Step>, root: usize) -> Vec<Step> {
    use crate::kernels::pipeline;
    let stage_of = |step: &Step| match &step.kind {
        Kind::Kernel(k) => k.row_stage(),
        _ => None,
    };
    let mut readers: std::collections::HashMap<usize, Vec<usize>> = Default::default();
    for (i, step) in steps.iter().enumerate() {
        for &slot in &step.inputs {
            readers.entry(slot).or_default().push(i);
        }
    }
    // For each chain found: its member steps, the pipeline and its inputs.
    let mut found: Vec<(Vec<usize>, pipeline::RowPipeline, Vec<usize>)> = Vec::new();
    let mut i = 0;
    while i < steps.len() {
        let Some(first) = stage_of(&steps[i]) else {
            i += 1;
            continue;
        };
        let mut chain = vec![(first, steps[i].inputs.clone(), steps[i].output)];
        let mut members = vec![i];
        let mut best = None;
        let mut j = i + 1;
        while j < steps.len() && members.len() < MAX_PIPELINE {
            match &steps[j].kind {
                Kind::Constant(_) | Kind::Parameter(_) => {}
                _ => {
                    let Some(stage) = stage_of(&steps[j]) else {
                        break;
                    };
                    chain.push((stage, steps[j].inputs.clone(), steps[j].output));
                    members.push(j);
                    let inner = &members[..members.len() - 1];
                    let contained = inner.iter().all(|&m| {
                        let slot = steps[m].output;
                        slot != root
                            && readers
                                .get(&slot)
                                .is_none_or(|r| r.iter().all(|x| members.contains(x)))
                    });
                    if contained {
                        match pipeline::build(&chain) {
                            Some((p, inputs)) => best = Some((members.clone(), p, inputs)),
                            None => break,
                        }
                    }
                }
            }
            j += 1;
        }
        match best {
            Some(b) => {
                i = b.0.last().map_or(i + 1, |&l| l + 1);
                found.push(b);
            }
            None => i += 1,
        }
    }
    if found.is_empty() {
        return steps;
    }
    let mut replaced: std::collections::HashMap<usize, (pipeline::RowPipeline, Vec<usize>, u64)> =
        Default::default();
    let mut dropped = std::collections::HashSet::new();
    for (members, p, inputs) in found {
        let largest = members.iter().map(|&m| steps[m].largest).max().unwrap_or(0);
        let Some((&last, rest)) = members.split_last() else {
            continue;
        };
        dropped.extend(rest.iter().copied());
        replaced.insert(last, (p, inputs, largest));
    }
    steps
        .into_iter()
        .enumerate()
        .filter(|(k, _)| !dropped.contains(k))
        .map(|(k, step)| match replaced.remove(&k) {
            Some((p, inputs, largest)) => Step {
                instr: step.instr,
                kind: Kind::Kernel(Box::new(p)),
                inputs,
                output: step.output,
                largest,
            },
            None => step,
        })
        .collect()
}
