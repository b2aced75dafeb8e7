//! Loop-invariant code motion: work in a `while` body that reads only state
//! the body passes through unchanged (and constants) is done once, before
//! the loop, and its value rides along in the state as a new element. JAX's
//! `scan` over a step that scales or transposes a closed-over weight, or
//! takes `exp` of a constant table, writes such work into the body; it ran
//! on every trip.
//!
//! The rules are XLA's (`WhileLoopInvariantCodeMotion`):
//! - State element `k` is invariant when the body's root tuple returns
//!   `get-tuple-element(parameter, k)` as element `k`.
//! - An instruction is invariant when it has no effect, no control edges,
//!   and reads only invariants; constants are invariant.
//! - Cheap movement (constants, broadcasts, iotas, reshapes, transposes,
//!   slices, reverses, tuples, element reads) is not hoisted for its own
//!   sake, only copied out when hoisted work reads it; nor is anything whose
//!   result is larger than its operands, which would trade a loop's
//!   recomputation for a large value held across it.
//! - Tuple-shaped results stay, so new state elements are arrays.
//!
//! The body keeps its (now dead) copies for [`crate::Dce`] to drop. Hoisted
//! work runs even when the loop runs no trips; it has no effects, so only
//! its time is spent. A loop is left alone unless its condition and body are
//! called by it alone and read the state only through `get-tuple-element`.

use std::collections::HashMap;

use oxla_hlo::{HloComputation, HloInstruction, HloModule, InstrId, Opcode, Shape};

use crate::Pass;
use crate::effects::Effects;
use crate::splice::{Names, Splice, rebuild};

pub struct HoistInvariants;

impl Pass for HoistInvariants {
    fn name(&self) -> &'static str {
        "hoist-invariants"
    }

    fn run(&self, module: &mut HloModule) -> bool {
        let mut calls = vec![0usize; module.computations().len()];
        for comp in module.computations() {
            for instr in comp.instructions() {
                for c in instr.called.all() {
                    if let Some(n) = calls.get_mut(c.index()) {
                        *n += 1;
                    }
                }
            }
        }
        let effects = Effects::new(module);
        let mut names = Names::of(module);
        let mut changed = false;
        for c in 0..module.computations().len() {
            let mut plans: HashMap<String, Plan> = HashMap::new();
            for instr in module.computations()[c].instructions() {
                if let Some(plan) = plan(module, instr, &calls, &effects) {
                    plans.insert(instr.name.clone(), plan);
                }
            }
            if plans.is_empty() {
                continue;
            }
            // Each loop's condition and body change only once the loop
            // itself has been rebuilt with the longer state.
            let mut hoisted: Vec<&Plan> = Vec::new();
            changed |= rebuild(module, c, &mut names, |_, splice, instr, operands| {
                let plan = plans.get(&instr.name)?;
                let id = hoist(splice, plan, instr, operands)?;
                hoisted.push(plan);
                Some(id)
            });
            for plan in hoisted {
                extend_state(module, plan, &mut names);
            }
        }
        changed
    }
}

/// What hoisting does to one loop.
struct Plan {
    body: usize,
    condition: usize,
    /// The body's parameter.
    param: InstrId,
    /// The state's element count before hoisting.
    arity: usize,
    /// The state's element shapes after hoisting.
    state: Vec<Shape>,
    /// Copies of the body's instructions to compute before the loop, in
    /// the body's order, their operands still body ids: the hoisted work
    /// and the invariants it reads.
    copied: Vec<(InstrId, HloInstruction)>,
    /// The hoisted values the rest of the body reads: they become state
    /// elements `arity..`, in this order.
    slots: Vec<InstrId>,
}

/// Opcodes that are not worth hoisting for their own sake: XLA's list.
fn cheap(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Constant
            | Opcode::Parameter
            | Opcode::GetTupleElement
            | Opcode::Tuple
            | Opcode::Bitcast
            | Opcode::Broadcast
            | Opcode::Iota
            | Opcode::Reshape
            | Opcode::Reverse
            | Opcode::Slice
            | Opcode::Transpose
    )
}

/// Whether `instr`'s result is no larger than its operands together.
fn not_inflating(comp: &HloComputation, instr: &HloInstruction) -> bool {
    let Ok(out) = instr.shape.byte_size() else {
        return false;
    };
    let mut inputs = 0usize;
    for &op in &instr.operands {
        match comp.instruction(op).shape.byte_size() {
            Ok(b) => inputs = inputs.saturating_add(b),
            Err(_) => return false,
        }
    }
    out <= inputs
}

/// Whether every user of `comp`'s parameter 0 reads one element of it.
fn read_by_element(comp: &HloComputation, users: &[Vec<InstrId>]) -> Option<InstrId> {
    let &[param] = comp.parameters() else {
        return None;
    };
    users[param.index()]
        .iter()
        .all(|&u| comp.instruction(u).opcode == Opcode::GetTupleElement)
        .then_some(param)
}

fn plan(
    module: &HloModule,
    instr: &HloInstruction,
    calls: &[usize],
    effects: &Effects,
) -> Option<Plan> {
    if instr.opcode != Opcode::While || !instr.control_predecessors.is_empty() {
        return None;
    }
    let (body_id, cond_id) = (instr.called.body?.index(), instr.called.condition?.index());
    if body_id == cond_id || calls.get(body_id) != Some(&1) || calls.get(cond_id) != Some(&1) {
        return None;
    }
    let body = module.computations().get(body_id)?;
    let cond = module.computations().get(cond_id)?;
    let state = instr.shape.tuple_shapes()?.to_vec();
    let arity = state.len();
    let users = body.users();
    let param = read_by_element(body, &users)?;
    read_by_element(cond, &cond.users())?;
    let root = body.root_instruction();
    if root.opcode != Opcode::Tuple || root.operands.len() != arity {
        return None;
    }
    let passed_through = |k: usize| {
        let e = body.instruction(root.operands[k]);
        e.opcode == Opcode::GetTupleElement
            && e.operands == [param]
            && e.attrs.tuple_index == Some(k)
    };
    let n = body.instructions().len();
    let mut invariant = vec![false; n];
    let mut worth = vec![false; n];
    let mut control_successor = vec![false; n];
    for i in body.instructions() {
        for p in &i.control_predecessors {
            control_successor[p.index()] = true;
        }
    }
    for (k, i) in body.instructions().iter().enumerate() {
        invariant[k] = match i.opcode {
            Opcode::Parameter => false,
            Opcode::GetTupleElement if i.operands == [param] => i
                .attrs
                .tuple_index
                .is_some_and(|t| t < arity && passed_through(t)),
            _ => {
                !effects.of(i)
                    && i.control_predecessors.is_empty()
                    && !control_successor[k]
                    && !matches!(i.shape, Shape::Token)
                    && i.operands.iter().all(|o| invariant[o.index()])
            }
        };
        if invariant[k] && !cheap(i.opcode) {
            if i.shape.is_tuple() || !not_inflating(body, i) {
                invariant[k] = false;
            } else {
                worth[k] = true;
            }
        }
    }
    // Hoisted values the rest of the body (its root included) reads.
    let slots: Vec<InstrId> = (0..n)
        .filter(|&k| worth[k] && users[k].iter().any(|u| !worth[u.index()]))
        .map(InstrId::new)
        .collect();
    if slots.is_empty() {
        return None;
    }
    // Everything the slots read, transitively: all invariant.
    let mut copy = vec![false; n];
    for s in &slots {
        copy[s.index()] = true;
    }
    for k in (0..n).rev() {
        // Reads of the state stop the walk: the parameter stays.
        let i = &body.instructions()[k];
        if copy[k] && i.operands != [param] {
            for o in &i.operands {
                copy[o.index()] = true;
            }
        }
    }
    let copied = (0..n)
        .filter(|&k| copy[k])
        .map(|k| (InstrId::new(k), body.instructions()[k].clone()))
        .collect();
    let mut state = state;
    state.extend(slots.iter().map(|s| body.instruction(*s).shape.clone()));
    Some(Plan {
        body: body_id,
        condition: cond_id,
        param,
        arity,
        state,
        copied,
        slots,
    })
}

/// Gives the loop's condition and body the longer state: the body reads
/// each slot's value from its new element and returns that element as it
/// found it.
fn extend_state(module: &mut HloModule, plan: &Plan, names: &mut Names) {
    let shape = Shape::tuple(plan.state.clone());
    let comps = module.computations_mut();
    if let Some(cond) = comps.get_mut(plan.condition) {
        for i in cond.instructions_mut() {
            if i.opcode == Opcode::Parameter {
                i.shape = shape.clone();
            }
        }
    }
    let Some(body) = comps.get_mut(plan.body) else {
        return;
    };
    let old = std::mem::take(body.instructions_mut());
    let root = body.root();
    let mut out: Vec<HloInstruction> = Vec::with_capacity(old.len() + 2 * plan.slots.len());
    let mut map: Vec<InstrId> = Vec::with_capacity(old.len());
    let mut reads: Vec<InstrId> = Vec::new();
    for mut instr in old {
        for o in instr
            .operands
            .iter_mut()
            .chain(instr.control_predecessors.iter_mut())
        {
            *o = map[o.index()];
        }
        if instr.opcode == Opcode::Parameter {
            instr.shape = shape.clone();
            let name = instr.name.clone();
            out.push(instr);
            let param = InstrId::new(out.len() - 1);
            map.push(param);
            for j in 0..plan.slots.len() {
                let k = plan.arity + j;
                let mut read = element_of(param, k, &plan.state);
                read.name = names.fresh(&name);
                out.push(read);
                reads.push(InstrId::new(out.len() - 1));
            }
            continue;
        }
        out.push(instr);
        map.push(InstrId::new(out.len() - 1));
    }
    // Every read of a slot now reads its state element instead; the
    // slots themselves are left dead.
    let moved: HashMap<InstrId, InstrId> = plan
        .slots
        .iter()
        .zip(&reads)
        .map(|(s, r)| (map[s.index()], *r))
        .collect();
    for (k, instr) in out.iter_mut().enumerate() {
        if moved.contains_key(&InstrId::new(k)) {
            continue;
        }
        for o in &mut instr.operands {
            if let Some(r) = moved.get(o) {
                *o = *r;
            }
        }
    }
    let root = map[root.index()];
    if let Some(r) = out.get_mut(root.index()) {
        r.operands.extend(&reads);
        r.shape = shape;
    }
    *body.instructions_mut() = out;
    body.set_root(root);
    body.reindex();
}

/// `get-tuple-element(tuple, k)` of a tuple whose elements are `state`,
/// yet unnamed.
fn element_of(tuple: InstrId, k: usize, state: &[Shape]) -> HloInstruction {
    let mut read = HloInstruction::new("", Opcode::GetTupleElement, state[k].clone(), vec![tuple]);
    read.attrs.tuple_index = Some(k);
    read
}

/// Computes the hoisted values before the loop `instr` (operands already
/// rebuilt) and starts the loop with them in its state; returns a tuple of
/// the loop's original elements, which is what its users read.
fn hoist(
    splice: &mut Splice,
    plan: &Plan,
    instr: &HloInstruction,
    operands: &[InstrId],
) -> Option<InstrId> {
    let &[init] = operands else {
        return None;
    };
    let init_elements: Option<Vec<InstrId>> = {
        let t = splice.get(init);
        (t.opcode == Opcode::Tuple && t.operands.len() == plan.arity).then(|| t.operands.clone())
    };
    let element = |splice: &mut Splice, k: usize| -> InstrId {
        if let Some(e) = &init_elements {
            return e[k];
        }
        splice.add(element_of(init, k, &plan.state), &instr.name)
    };
    let mut map: HashMap<InstrId, InstrId> = HashMap::new();
    for (id, original) in &plan.copied {
        let new = match original.opcode {
            Opcode::GetTupleElement if original.operands == [plan.param] => {
                element(splice, original.attrs.tuple_index?)
            }
            _ => {
                let mut copy = original.clone();
                for o in &mut copy.operands {
                    *o = *map.get(o)?;
                }
                splice.add(copy, &original.name)
            }
        };
        map.insert(*id, new);
    }
    let mut elements: Vec<InstrId> = (0..plan.arity).map(|k| element(splice, k)).collect();
    for s in &plan.slots {
        elements.push(*map.get(s)?);
    }
    let shape = Shape::tuple(plan.state.clone());
    let start = HloInstruction::new("", Opcode::Tuple, shape.clone(), elements);
    let start = splice.add(start, &instr.name);
    let mut new_loop = instr.clone();
    new_loop.operands = vec![start];
    new_loop.shape = shape;
    let name = instr.name.clone();
    let looped = splice.add(new_loop, &name);
    let outputs: Vec<InstrId> = (0..plan.arity)
        .map(|k| splice.add(element_of(looped, k, &plan.state), &name))
        .collect();
    let result = HloInstruction::new("", Opcode::Tuple, instr.shape.clone(), outputs);
    Some(splice.add(result, &name))
}
