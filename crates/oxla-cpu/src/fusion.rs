//! Loop fusion: groups element-wise instructions of one computation with
//! the broadcasts, reshapes, transposes, slices, reverses, iotas and
//! constants that feed them into fused loops, so intermediate values never
//! reach memory. A producer joins its consumer's group when every user of
//! the producer is in the group, or when it is cheap to recompute (index
//! operations, iotas, constants), in which case it may belong to several.

use std::collections::{BTreeSet, HashMap};

use oxla_hlo::ir::ComparisonType;
use oxla_hlo::{HloComputation, HloInstruction, HloModule, InstrId, Opcode, PrimitiveType, Scalar};

use crate::kernels::Kernel;
use crate::kernels::copy::CopyKernel;
use crate::kernels::fused::{Binary, DynamicStart, FusedLoop, Leaf, Op, Src, Unary, is_half};
use crate::kernels::reduce::ReduceLoop;
use crate::kernels::view::View;

/// A fused kernel and the instructions whose values it reads.
pub(crate) struct Group {
    pub kernel: Box<dyn Kernel>,
    pub inputs: Vec<usize>,
}

/// The fusion decisions for one computation.
pub(crate) struct Fusion {
    /// Groups by root instruction.
    pub groups: HashMap<usize, Group>,
    /// Instructions computed inside groups that need no step of their own.
    pub absorbed: Vec<bool>,
}

fn array_type(instr: &HloInstruction) -> Option<PrimitiveType> {
    instr.shape.element_type()
}

fn is_index_op(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Broadcast
            | Opcode::Reshape
            | Opcode::Transpose
            | Opcode::Slice
            | Opcode::Reverse
            | Opcode::Copy
    )
}

pub(crate) fn unary_of(op: Opcode) -> Option<Unary> {
    Some(match op {
        Opcode::Abs => Unary::Abs,
        Opcode::Negate => Unary::Neg,
        Opcode::Exp => Unary::Exp,
        Opcode::Expm1 => Unary::Expm1,
        Opcode::Log => Unary::Log,
        Opcode::Log1p => Unary::Log1p,
        Opcode::Logistic => Unary::Logistic,
        Opcode::Tanh => Unary::Tanh,
        Opcode::Sqrt => Unary::Sqrt,
        Opcode::Rsqrt => Unary::Rsqrt,
        Opcode::Sin => Unary::Sin,
        Opcode::Cos => Unary::Cos,
        Opcode::Floor => Unary::Floor,
        Opcode::Ceil => Unary::Ceil,
        Opcode::RoundNearestEven => Unary::RoundEven,
        Opcode::RoundNearestAfz => Unary::RoundAfz,
        Opcode::Sign => Unary::Sign,
        Opcode::Erf => Unary::Erf,
        Opcode::Not => Unary::Not,
        Opcode::IsFinite => Unary::IsFinite,
        _ => return None,
    })
}

pub(crate) fn binary_of(op: Opcode) -> Option<Binary> {
    Some(match op {
        Opcode::Add => Binary::Add,
        Opcode::Subtract => Binary::Sub,
        Opcode::Multiply => Binary::Mul,
        Opcode::Divide => Binary::Div,
        Opcode::Maximum => Binary::Max,
        Opcode::Minimum => Binary::Min,
        Opcode::Power => Binary::Pow,
        Opcode::Remainder => Binary::Rem,
        Opcode::Atan2 => Binary::Atan2,
        Opcode::And => Binary::And,
        Opcode::Or => Binary::Or,
        _ => return None,
    })
}

/// The float type an element-wise instruction computes in, if a fused loop
/// can evaluate it (f32 or f64 values, and pred values as 0/1).
fn compute_type(comp: &HloComputation, instr: &HloInstruction) -> Option<Option<PrimitiveType>> {
    let out = array_type(instr)?;
    let operand_type = |k: usize| {
        instr
            .operands
            .get(k)
            .and_then(|o| array_type(comp.instruction(*o)))
    };
    let float = |t: PrimitiveType| matches!(t, PrimitiveType::F32 | PrimitiveType::F64);
    let f32 = PrimitiveType::F32;
    let pred = PrimitiveType::Pred;
    match instr.opcode {
        Opcode::Not | Opcode::And | Opcode::Or if out == pred => Some(None),
        Opcode::IsFinite => match operand_type(0)? {
            t if float(t) => Some(Some(t)),
            t if is_half(t) => Some(Some(f32)),
            _ => None,
        },
        op if unary_of(op).is_some() || binary_of(op).is_some() => {
            if float(out) {
                Some(Some(out))
            } else {
                is_half(out).then_some(Some(f32))
            }
        }
        Opcode::Compare => {
            let t = operand_type(0)?;
            let default = matches!(
                instr.attrs.comparison_type,
                None | Some(ComparisonType::Float)
            );
            if float(t) && default {
                Some(Some(t))
            } else if is_half(t) && default {
                Some(Some(f32))
            } else if t == pred
                && matches!(
                    instr.attrs.comparison_type,
                    None | Some(ComparisonType::Unsigned)
                )
            {
                Some(None)
            } else {
                None
            }
        }
        Opcode::Select | Opcode::Clamp if float(out) => Some(Some(out)),
        Opcode::Select | Opcode::Clamp if is_half(out) => Some(Some(f32)),
        Opcode::Select if out == pred => Some(None),
        Opcode::Convert => {
            let from = operand_type(0)?;
            // Half precision computes in f32: widening is exact, narrowing rounds.
            let f32_or_half = |t: PrimitiveType| t == f32 || is_half(t);
            match (from, out) {
                (a, b) if a == b && float(a) => Some(Some(a)),
                (a, b) if a == pred && float(b) => Some(Some(b)),
                (a, b) if float(a) && b == pred => Some(Some(a)),
                (a, b) if a == pred && b == pred => Some(None),
                (a, b)
                    if (is_half(a) || is_half(b))
                        && (f32_or_half(a) || a == pred)
                        && (f32_or_half(b) || b == pred) =>
                {
                    Some(Some(f32))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Whether the value of `instr` can be a leaf or index step of a loop of type `ty`.
fn leaf_type_ok(instr: &HloInstruction, ty: PrimitiveType) -> bool {
    matches!(array_type(instr), Some(t) if t == ty || t == PrimitiveType::Pred
        || (ty == PrimitiveType::F32 && is_half(t)))
}

/// The rounding that makes an f32 result `instr`'s own half-precision
/// value, if its type is bf16 or f16 and the operation can leave f32's
/// precision (not max, select, negate... of values already rounded).
fn half_rounding(instr: &HloInstruction) -> Option<Unary> {
    let round = match array_type(instr)? {
        PrimitiveType::BF16 => Unary::RoundBf16,
        PrimitiveType::F16 => Unary::RoundF16,
        _ => return None,
    };
    let exact = matches!(
        instr.opcode,
        Opcode::Abs
            | Opcode::Negate
            | Opcode::Floor
            | Opcode::Ceil
            | Opcode::RoundNearestEven
            | Opcode::RoundNearestAfz
            | Opcode::Sign
            | Opcode::Maximum
            | Opcode::Minimum
            | Opcode::Select
            | Opcode::Clamp
    );
    (!exact).then_some(round)
}

/// The binary operation a reduction computation applies, if it is just
/// `op(p0, p1)` (either order) with add, multiply, maximum or minimum.
fn reducer(module: &HloModule, instr: &HloInstruction) -> Option<Binary> {
    let comp = module.computations().get(instr.called.to_apply?.index())?;
    let root = comp.root_instruction();
    let op = match root.opcode {
        Opcode::Add => Binary::Add,
        Opcode::Multiply => Binary::Mul,
        Opcode::Maximum => Binary::Max,
        Opcode::Minimum => Binary::Min,
        _ => return None,
    };
    let params: Vec<Option<usize>> = root
        .operands
        .iter()
        .map(|o| {
            comp.instruction(*o)
                .attrs
                .parameter_number
                .filter(|_| comp.instruction(*o).opcode == Opcode::Parameter)
        })
        .collect();
    let ok = comp.num_parameters() == 2
        && (params == [Some(0), Some(1)] || params == [Some(1), Some(0)]);
    ok.then_some(op)
}

/// Plans fusion for the live instructions of `comp`.
pub(crate) fn plan(module: &HloModule, comp: &HloComputation, live: &[bool]) -> Fusion {
    let instrs = comp.instructions();
    let n = instrs.len();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (k, instr) in instrs.iter().enumerate() {
        if live[k] {
            for o in &instr.operands {
                if !users[o.index()].contains(&k) {
                    users[o.index()].push(k);
                }
            }
        }
    }
    let root = comp.root().index();
    let mut in_some_group = vec![false; n];
    // Whether an instruction's value is materialised (has a step of its own).
    let mut emitted = vec![false; n];
    let mut groups: HashMap<usize, Group> = HashMap::new();
    // Values some planned group reads from a buffer.
    let mut group_inputs = vec![false; n];
    // The tiled loops planned: their members, and whether they take float
    // arithmetic.
    let mut tiled: HashMap<usize, (BTreeSet<usize>, bool)> = HashMap::new();
    // The element-wise fused loops planned: their members and type.
    let mut loops: HashMap<usize, (BTreeSet<usize>, PrimitiveType)> = HashMap::new();
    for k in (0..n).rev() {
        if !live[k] {
            continue;
        }
        let instr = &instrs[k];
        if in_some_group[k] {
            // Computed inside groups; it still needs a step if something reads its buffer.
            // Read by a step that is not a group (it runs on buffers), or by a group's inputs.
            let read = |u: &usize| emitted[*u] && !groups.contains_key(u);
            let needed = k == root
                || instr.opcode.has_side_effect()
                || group_inputs[k]
                || users[k].iter().any(read);
            if !needed {
                continue;
            }
        }
        emitted[k] = true;
        let planned = if instr.opcode == Opcode::Reduce {
            plan_reduce(module, comp, k, &users).map(|p| (p, None))
        } else if let Some(p) = plan_fft_abs(comp, k, &users) {
            Some((p, None))
        } else if is_index_op(instr.opcode) {
            plan_copy(comp, k, &users)
                .or_else(|| plan_loop(comp, k, &users))
                .map(|p| (p, None))
        } else {
            // (With what kind of loop it is.)
            plan_tiled(comp, k, &users, true)
                .map(|p| (p, Some(Looped::Tiled(true))))
                .or_else(|| {
                    let ty = loop_type(comp, instr)?;
                    plan_loop(comp, k, &users).map(|p| (p, Some(Looped::Fused(ty))))
                })
                .or_else(|| {
                    plan_tiled(comp, k, &users, false).map(|p| (p, Some(Looped::Tiled(false))))
                })
        };
        let Some(((members, kernel, inputs), looped)) = planned else {
            continue;
        };
        for &m in &members {
            in_some_group[m] = true;
        }
        for &i in &inputs {
            group_inputs[i] = true;
        }
        groups.insert(k, Group { kernel, inputs });
        match looped {
            Some(Looped::Tiled(floats)) => {
                tiled.insert(k, (members, floats));
            }
            Some(Looped::Fused(ty)) => {
                loops.insert(k, (members, ty));
            }
            None => {}
        }
    }
    for t in 0..n {
        if live[t] && instrs[t].opcode == Opcode::Tuple {
            merge_tuple_loops(comp, t, &users, &tiled, &mut groups, &mut emitted);
            if !groups.contains_key(&t) {
                merge_fused_loops(comp, t, &users, &loops, &mut groups, &mut emitted);
            }
        }
    }
    let absorbed = (0..n).map(|k| live[k] && !emitted[k]).collect();
    Fusion { groups, absorbed }
}

/// What kind of loop a planned group is, for multi-output fusion.
enum Looped {
    /// A tiled loop, and whether it takes float arithmetic.
    Tiled(bool),
    /// An element-wise fused loop computing in this type.
    Fused(PrimitiveType),
}

/// The fewest elements of loops merged into a multi-output loop.
const MERGE_MIN: usize = 1024;

/// The operands of tuple `t` to merge into one loop: the distinct ones
/// `eligible` accepts that are `alike` the first of them (one shape, one
/// kind of loop), hold at least [`MERGE_MIN`] elements (a loop state's
/// scalar counters stay apart, in kernels cheaper to start), and whose
/// values only the tuple and the merged loops read. Fewer than two: none.
fn tuple_roots(
    comp: &HloComputation,
    t: usize,
    users: &[Vec<usize>],
    (groups, emitted): (&HashMap<usize, Group>, &[bool]),
    eligible: impl Fn(usize) -> bool,
    alike: impl Fn(usize, usize) -> bool,
) -> Vec<usize> {
    let instrs = comp.instructions();
    let big = |o: usize| {
        instrs[o]
            .shape
            .as_array()
            .and_then(|a| a.element_count().ok())
            .is_some_and(|n| n >= MERGE_MIN)
    };
    let mut roots: Vec<usize> = Vec::new();
    for o in instrs[t].operands.iter().map(|o| o.index()) {
        if eligible(o)
            && big(o)
            && roots.first().is_none_or(|&r| alike(r, o))
            && !roots.contains(&o)
        {
            roots.push(o);
        }
    }
    // A value is read from its buffer by the steps of instructions that
    // use it (an instruction inside a group has none), and by the groups
    // that list it as an input.
    let read_elsewhere = |o: usize, roots: &[usize]| {
        users[o]
            .iter()
            .any(|&u| u != t && !roots.contains(&u) && emitted[u] && !groups.contains_key(&u))
            || groups
                .iter()
                .any(|(k, g)| !roots.contains(k) && g.inputs.contains(&o))
    };
    while let Some(i) = roots.iter().position(|&o| read_elsewhere(o, &roots)) {
        roots.remove(i);
    }
    if roots.len() < 2 {
        roots.clear();
    }
    roots
}

/// Puts the loop merging `roots` in their place, as tuple `t`'s group:
/// `make(elements, node_inputs)` builds its kernel from the tuple's
/// elements (results of the loop, or values passed through, which join
/// the loop's `inputs` after its first `node_inputs`).
fn install_merge(
    comp: &HloComputation,
    t: usize,
    roots: &[usize],
    mut inputs: Vec<usize>,
    (groups, emitted): (&mut HashMap<usize, Group>, &mut [bool]),
    make: impl FnOnce(Vec<crate::kernels::tiled::Element>, usize) -> Box<dyn Kernel>,
) {
    use crate::kernels::tiled::Element;
    let node_inputs = inputs.len();
    let elements = comp.instructions()[t]
        .operands
        .iter()
        .map(|o| o.index())
        .map(|o| match roots.iter().position(|&r| r == o) {
            Some(i) => Element::Result(i),
            None => Element::Input(match inputs.iter().position(|&i| i == o) {
                Some(j) => j,
                None => {
                    inputs.push(o);
                    inputs.len() - 1
                }
            }),
        })
        .collect();
    let kernel = make(elements, node_inputs);
    for r in roots {
        groups.remove(r);
        emitted[*r] = false;
    }
    groups.insert(t, Group { kernel, inputs });
}

/// Multi-output fusion of element-wise fused loops: those over one shape
/// and type that only tuple `t` and each other read become one loop that
/// makes the tuple (an optimiser's new parameters and moments), reading
/// the arrays they share once and computing in registers, once, the
/// values they pass each other.
fn merge_fused_loops(
    comp: &HloComputation,
    t: usize,
    users: &[Vec<usize>],
    loops: &HashMap<usize, (BTreeSet<usize>, PrimitiveType)>,
    groups: &mut HashMap<usize, Group>,
    emitted: &mut [bool],
) {
    use crate::kernels::fused::MultiLoop;
    let instrs = comp.instructions();
    let dims = |o: usize| instrs[o].shape.as_array().map(|a| a.dims());
    let roots = tuple_roots(
        comp,
        t,
        users,
        (groups, emitted),
        |o| loops.contains_key(&o) && groups.contains_key(&o),
        |a, b| dims(a) == dims(b) && loops[&a].1 == loops[&b].1,
    );
    let Some((&first, Some(dims))) = roots.first().map(|r| (r, dims(*r))) else {
        return;
    };
    let ty = loops[&first].1;
    let members: BTreeSet<usize> = roots
        .iter()
        .flat_map(|r| loops[r].0.iter().copied())
        .collect();
    let mut b = Builder::new(comp, ty, &members);
    let mut results = Vec::with_capacity(roots.len());
    for &r in &roots {
        let Some(out_ty) = instrs[r].shape.element_type() else {
            return;
        };
        if !result_type_ok(ty, out_ty) {
            return;
        }
        // (A root read as a leaf, a copy of an input, stays apart.)
        match b.value(r, dims) {
            Some(s @ Src::Reg(_)) => results.push((s, out_ty)),
            _ => return,
        }
    }
    let Some(lp) = b.finish_all(&results, dims) else {
        return;
    };
    let inputs = std::mem::take(&mut b.inputs);
    install_merge(
        comp,
        t,
        &roots,
        inputs,
        (groups, emitted),
        |elements, node_inputs| Box::new(MultiLoop::new(lp, elements, node_inputs)),
    );
}

/// Multi-output fusion: the tiled loops (and lone typed operations) over
/// one shape that only tuple `t` and each other read become one loop that
/// makes the tuple, passing once over the arrays they share (a JAX
/// function's outputs computed from the same inputs), and computing in
/// registers the values they pass each other.
fn merge_tuple_loops(
    comp: &HloComputation,
    t: usize,
    users: &[Vec<usize>],
    tiled: &HashMap<usize, (BTreeSet<usize>, bool)>,
    groups: &mut HashMap<usize, Group>,
    emitted: &mut [bool],
) {
    use crate::kernels::tiled::{TiledLoop, fuse_mixes};
    let instrs = comp.instructions();
    let dims = |o: usize| instrs[o].shape.as_array().map(|a| a.dims());
    let lone = |o: usize| {
        !groups.contains_key(&o) && emitted[o] && typed_op(comp, &instrs[o], false).is_some()
    };
    let looped = |o: usize| tiled.contains_key(&o) && groups.contains_key(&o);
    let roots = tuple_roots(
        comp,
        t,
        users,
        (groups, emitted),
        |o| looped(o) || lone(o),
        |a, b| dims(a).is_some() && dims(a) == dims(b),
    );
    if roots.is_empty() {
        return;
    }
    let mut members = BTreeSet::new();
    let mut floats = false;
    for &r in &roots {
        match tiled.get(&r) {
            Some((m, f)) => {
                members.extend(m.iter().copied());
                floats |= f;
            }
            None => {
                members.insert(r);
            }
        }
    }
    let Some((nodes, adds, inputs, results)) = tiled_nodes(comp, &roots, &members, users, floats)
    else {
        return;
    };
    let Some(shapes) = roots
        .iter()
        .map(|&r| instrs[r].shape.as_array().cloned())
        .collect::<Option<Vec<_>>>()
    else {
        return;
    };
    let (nodes, results) = fuse_mixes(nodes, &adds, results);
    install_merge(
        comp,
        t,
        &roots,
        inputs,
        (groups, emitted),
        |elements, node_inputs| {
            Box::new(TiledLoop::tuple(
                nodes,
                results,
                shapes,
                elements,
                node_inputs,
            ))
        },
    );
}

/// Whether an instruction is something fusion turns into (part of) a kernel.
fn fusible_user(comp: &HloComputation, instr: &HloInstruction) -> bool {
    compute_type(comp, instr).is_some()
        || is_index_op(instr.opcode)
        || instr.opcode == Opcode::Reduce
}

type Planned = (BTreeSet<usize>, Box<dyn Kernel>, Vec<usize>);

/// An element-wise (or index-only) loop rooted at `k`.
fn plan_loop(comp: &HloComputation, k: usize, users: &[Vec<usize>]) -> Option<Planned> {
    let instr = comp.instruction(InstrId::new(k));
    let ty = loop_type(comp, instr)?;
    let dims = instr.shape.as_array()?.dims().to_vec();
    let mut members = grow(
        comp,
        k,
        &instr.operands.iter().map(|o| o.index()).collect::<Vec<_>>(),
        ty,
        &dims,
        users,
        true,
    );
    loop {
        if let Some((kernel, inputs)) = build(comp, k, ty, &members) {
            return Some((members, Box::new(kernel), inputs));
        }
        members = cut_inexpressible(comp, k, ty, &members)?;
    }
}

/// The type a loop rooted at `instr` computes in: its element-wise
/// type (f32 for predicate logic), or an index operation's f32 or f64.
fn loop_type(comp: &HloComputation, instr: &HloInstruction) -> Option<PrimitiveType> {
    match compute_type(comp, instr) {
        Some(t) => Some(t.unwrap_or(PrimitiveType::F32)),
        None if is_index_op(instr.opcode)
            && matches!(
                array_type(instr),
                Some(PrimitiveType::F32 | PrimitiveType::F64)
            ) =>
        {
            array_type(instr)
        }
        None => None,
    }
}

/// `members` less the producer under the lowest index operation whose
/// view cannot be formed (a reshape merging dimensions a transpose
/// permuted): that producer becomes a buffer of its own, over which the
/// operation is a plain view. Members no longer reached from `root` leave
/// too. `None` when no such cut exists.
fn cut_inexpressible(
    comp: &HloComputation,
    root: usize,
    ty: PrimitiveType,
    members: &BTreeSet<usize>,
) -> Option<BTreeSet<usize>> {
    let b = Builder::new(comp, ty, members);
    let operand = |m: usize| {
        comp.instruction(InstrId::new(m))
            .operands
            .first()
            .map(|o| o.index())
    };
    let cut = members.iter().find_map(|&m| {
        let op = operand(m)?;
        let fails = is_index_op(comp.instruction(InstrId::new(m)).opcode)
            && members.contains(&op)
            && b.view_of(m).is_none()
            && b.view_of(op).is_some();
        fails.then_some(op)
    })?;
    let mut kept = BTreeSet::new();
    let mut stack = vec![root];
    while let Some(m) = stack.pop() {
        if m == cut || !members.contains(&m) || !kept.insert(m) {
            continue;
        }
        stack.extend(
            comp.instruction(InstrId::new(m))
                .operands
                .iter()
                .map(|o| o.index()),
        );
    }
    Some(kept)
}

/// An operation a tiled loop computes (see `kernels::tiled`).
enum TypedOp {
    Binary(crate::kernels::typed::BinFn),
    Select,
    Convert(crate::kernels::typed::ConvertFn),
}

/// Logic on predicates (comparisons of predicates too): float loops
/// compute it (as 0/1 values), and so do typed loops, where it joins the
/// integer comparisons it combines.
fn pred_logic(comp: &HloComputation, instr: &HloInstruction) -> bool {
    let pred = PrimitiveType::Pred;
    match instr.opcode {
        Opcode::And | Opcode::Or | Opcode::Xor | Opcode::Not => {
            instr.shape.element_type() == Some(pred)
        }
        Opcode::Compare => instr
            .operands
            .first()
            .is_some_and(|o| comp.instruction(*o).shape.element_type() == Some(pred)),
        _ => false,
    }
}

/// `instr` as a typed operation over operands of its own dimensions, if it
/// is one the float loops do not compute (or, with `floats`, any); logic
/// on predicates either way.
fn typed_op(comp: &HloComputation, instr: &HloInstruction, floats: bool) -> Option<TypedOp> {
    use crate::kernels::typed;
    let out = instr.shape.as_array()?;
    let operands: Vec<&oxla_hlo::ArrayShape> = instr
        .operands
        .iter()
        .map(|o| comp.instruction(*o).shape.as_array())
        .collect::<Option<_>>()?;
    if (!floats && compute_type(comp, instr).is_some() && !pred_logic(comp, instr))
        || operands.iter().any(|a| a.dims() != out.dims())
    {
        return None;
    }
    match (instr.opcode, operands.as_slice()) {
        (Opcode::Select, [p, a, b]) => (p.element_type() == PrimitiveType::Pred
            && a.element_type() == out.element_type()
            && b.element_type() == out.element_type())
        .then_some(TypedOp::Select),
        (Opcode::Convert, [x]) => {
            typed::convert_fn(x.element_type(), out.element_type()).map(TypedOp::Convert)
        }
        (Opcode::BitcastConvert, [x]) => {
            typed::bitcast_fn(x.element_type(), out.element_type()).map(TypedOp::Convert)
        }
        (op, [x]) if x.element_type() == out.element_type() => {
            typed::unary_fn(op, out.element_type()).map(TypedOp::Convert)
        }
        (_, [_, _]) => typed::binary_fn(instr, comp).map(|t| TypedOp::Binary(t.array)),
        _ => None,
    }
}

/// A loop of typed operations (integers, predicates, conversions) rooted at
/// `k`, with the scalars its operands broadcast.
///
/// With `floats`, the loop also takes the float arithmetic a fused loop
/// would compute (`k` is such an operation). It is planned only where that
/// saves a pass over memory: where the float arithmetic finishes typed
/// operations (JAX's uniform random numbers: threefry's bits, made floats
/// by a bitcast, then scaled and shifted), and every array the loop reads
/// is one a fused loop would read from memory as well (no broadcast,
/// reshape or float arithmetic a fused loop would compute in place).
fn plan_tiled(
    comp: &HloComputation,
    k: usize,
    users: &[Vec<usize>],
    floats: bool,
) -> Option<Planned> {
    use crate::kernels::tiled::TiledLoop;
    let instrs = comp.instructions();
    let members = tiled_members(comp, k, users, floats)?;
    let (nodes, adds, inputs, results) = tiled_nodes(comp, &[k], &members, users, floats)?;
    if floats {
        let typed_only = |m: &usize| {
            !pred_logic(comp, &instrs[*m]) && self::typed_op(comp, &instrs[*m], false).is_some()
        };
        let fusible_array = |i: &usize| {
            let instr = &instrs[*i];
            let scalar = instr.shape.as_array().and_then(|a| a.element_count().ok()) == Some(1);
            !scalar && (is_index_op(instr.opcode) || compute_type(comp, instr).is_some())
        };
        if !members.iter().any(typed_only) || inputs.iter().any(fusible_array) {
            return None;
        }
    }
    // (A mix takes the place of the first of its results, so the root, the
    // `b` of one, need not stay the last node.)
    let (nodes, results) = crate::kernels::tiled::fuse_mixes(nodes, &adds, results);
    let kernel = TiledLoop::with_results(nodes, results, vec![instrs[k].shape.as_array()?.clone()]);
    Some((members, Box::new(kernel), inputs))
}

/// A broadcast of one element to `dims` in `comp`: a tiled loop's splat.
fn tiled_splat(comp: &HloComputation, i: &HloInstruction, dims: &[i64]) -> bool {
    i.opcode == Opcode::Broadcast
        && i.shape.as_array().is_some_and(|a| a.dims() == dims)
        && i.operands.first().is_some_and(|o| {
            comp.instruction(*o)
                .shape
                .as_array()
                .is_some_and(|a| a.element_count().ok() == Some(1))
        })
}

/// An iota over `dims` whose values fit its type: a tiled loop makes it
/// per tile.
fn tiled_iota(
    i: &HloInstruction,
    dims: &[i64],
) -> Option<(crate::kernels::tiled::IotaFn, usize, usize)> {
    let a = i.shape.as_array()?;
    if i.opcode != Opcode::Iota || a.dims() != dims {
        return None;
    }
    let d = usize::try_from(i.attrs.iota_dimension?).ok()?;
    let size = *a.dims().get(d)?;
    // (An empty iota, whose other dimensions may be huge, is not one.)
    let stride = a.dims()[d + 1..]
        .iter()
        .try_fold(1usize, |n, &x| n.checked_mul(usize::try_from(x).ok()?))?;
    let (f, max) = crate::kernels::tiled::iota_fn(a.element_type())?;
    let ok = size > 0 && stride > 0 && size as u64 <= max;
    ok.then_some((f, stride, size as usize))
}

/// The instructions a tiled loop rooted at `k` computes.
fn tiled_members(
    comp: &HloComputation,
    k: usize,
    users: &[Vec<usize>],
    floats: bool,
) -> Option<BTreeSet<usize>> {
    let instrs = comp.instructions();
    let root = &instrs[k];
    typed_op(comp, root, floats)?;
    let typed_op = |comp: &HloComputation, instr: &HloInstruction| typed_op(comp, instr, floats);
    let dims = root.shape.as_array()?.dims();
    let mut members = BTreeSet::from([k]);
    let mut queue: BTreeSet<usize> = root.operands.iter().map(|o| o.index()).collect();
    while let Some(o) = queue.pop_last() {
        let instr = &instrs[o];
        if tiled_splat(comp, instr, dims) || tiled_iota(instr, dims).is_some() {
            members.insert(o);
            continue;
        }
        if typed_op(comp, instr).is_none() {
            continue;
        }
        // Joins when every user is in the loop; a value with a few other
        // users that are loops too is recomputed in each.
        let inside = users[o].iter().all(|u| members.contains(u));
        let duplicable = users[o].len() <= 3
            && users[o]
                .iter()
                .all(|&u| typed_op(comp, &instrs[u]).is_some() || fusible_user(comp, &instrs[u]));
        if inside || duplicable {
            members.insert(o);
            queue.extend(instr.operands.iter().map(|o| o.index()));
        }
    }
    (members.len() >= 2).then_some(members)
}

/// A tiled loop's nodes (see `kernels::tiled`) computing each of `roots`
/// (of one shape) from `members`, operands first: the nodes, which of
/// them are adds (for threefry's mixes), the instructions read as kernel
/// inputs, and each root's node.
#[allow(clippy::type_complexity)]
fn tiled_nodes(
    comp: &HloComputation,
    roots: &[usize],
    members: &BTreeSet<usize>,
    users: &[Vec<usize>],
    floats: bool,
) -> Option<(
    Vec<(crate::kernels::tiled::Node, PrimitiveType)>,
    Vec<bool>,
    Vec<usize>,
    Vec<usize>,
)> {
    use crate::kernels::tiled::Node;
    let instrs = comp.instructions();
    let dims = instrs[*roots.first()?].shape.as_array()?.dims();
    let typed_op = |comp: &HloComputation, instr: &HloInstruction| typed_op(comp, instr, floats);
    // How each member is computed, by the instructions it reads.
    enum Form {
        Splat(usize),
        Iota(crate::kernels::tiled::IotaFn, usize, usize),
        Binary(crate::kernels::typed::BinFn, usize, usize),
        BinarySplat(crate::kernels::typed::SplatFn, usize, usize),
        Floor(crate::kernels::typed::FloorFn, usize, usize),
        Remainder(crate::kernels::typed::RemainderFn, usize, usize, usize),
        Rotate(crate::kernels::typed::RotateFn, usize, u32),
        RotateXor(crate::kernels::typed::RotateXorFn, usize, u32, usize),
        Select(usize, usize, usize),
        Convert(crate::kernels::typed::ConvertFn, usize),
    }
    // The division of `a` by the splat `b` among the members, if any: an
    // integer remainder by the same splat takes its quotient.
    let quotient = |a: usize, b: usize| {
        let source = instrs[b].operands.first()?;
        members.iter().copied().find(|&m| {
            let i = &instrs[m];
            i.opcode == Opcode::Divide
                && i.operands.first().map(|o| o.index()) == Some(a)
                && i.operands.get(1).is_some_and(|d| {
                    let d = &instrs[d.index()];
                    d.operands.first() == Some(source) && tiled_splat(comp, d, dims)
                })
        })
    };
    let is_splat = |o: usize| members.contains(&o) && tiled_splat(comp, &instrs[o], dims);
    let form = |m: usize| -> Option<Form> {
        let instr = &instrs[m];
        let ops: Vec<usize> = instr.operands.iter().map(|o| o.index()).collect();
        if tiled_splat(comp, instr, dims) {
            return Some(Form::Splat(*ops.first()?));
        }
        if let Some((f, stride, size)) = tiled_iota(instr, dims) {
            return Some(Form::Iota(f, stride, size));
        }
        if let Some((f, x, k)) = rotation(comp, members, users, m) {
            return Some(Form::Rotate(f, x, k));
        }
        if let Some(Floor {
            f,
            a,
            src,
            modulo,
            d,
        }) = floor_division(comp, m, dims)
        {
            // A modulo whose dividend the loop also floor-divides by the
            // same divisor is `a - q * d` from that quotient: one floor
            // division for both. Exact in wrapping arithmetic, which is
            // arithmetic modulo 2^bits, since the modulo lies in the
            // type's range (`MIN` by -1 included: `MIN - MIN * -1` is 0).
            // Nodes are made operands first, so the quotient's comes
            // before. Both of s32[65536] by 7, on one core: 0.030-0.031 ms
            // against 0.042-0.050 with two floor divisions; over s32[1M],
            // where the stores bound it, 0.32 ms either way (alternating
            // `oxla bench` runs, 30 November 2026).
            if modulo
                && let Some(rem) = crate::kernels::typed::remainder_fn(instr.shape.element_type()?)
                && let Some(q) = members.iter().copied().find(|&q| {
                    floor_division(comp, q, dims)
                        .is_some_and(|div| !div.modulo && div.a == a && div.d == d)
                })
            {
                return Some(Form::Remainder(rem, a, q, src));
            }
            return Some(Form::Floor(f, a, src));
        }
        // An exclusive or with a rotation it alone reads: one pass.
        if let (Opcode::Xor, &[p, q]) = (instr.opcode, ops.as_slice()) {
            let ty = instr.shape.element_type()?;
            for (r, other) in [(p, q), (q, p)] {
                if members.contains(&r)
                    && users[r] == [m]
                    && let Some((_, x, k)) = rotation(comp, members, users, r)
                    && let Some(f) = crate::kernels::typed::rotate_xor_fn(ty)
                {
                    return Some(Form::RotateXor(f, x, k, other));
                }
            }
        }
        Some(match (typed_op(comp, instr)?, ops.as_slice()) {
            (TypedOp::Binary(f), &[a, b]) => {
                let fns = crate::kernels::typed::binary_fn(instr, comp).and_then(|t| t.splat);
                let remainder = (instr.opcode == Opcode::Remainder)
                    .then(|| crate::kernels::typed::remainder_fn(instr.shape.element_type()?))
                    .flatten();
                match fns {
                    Some(_)
                        if is_splat(b)
                            && !is_splat(a)
                            && let Some(f) = remainder
                            && let Some(q) = quotient(a, b) =>
                    {
                        Form::Remainder(f, a, q, instrs[b].operands.first()?.index())
                    }
                    Some([fa, _]) if is_splat(b) && !is_splat(a) => {
                        Form::BinarySplat(fa, a, instrs[b].operands.first()?.index())
                    }
                    Some([_, fb]) if is_splat(a) && !is_splat(b) => {
                        Form::BinarySplat(fb, b, instrs[a].operands.first()?.index())
                    }
                    _ => Form::Binary(f, a, b),
                }
            }
            (TypedOp::Select, &[p, a, b]) => Form::Select(p, a, b),
            (TypedOp::Convert(f), &[a]) => Form::Convert(f, a),
            _ => return None,
        })
    };
    let reads = |f: &Form| -> Vec<usize> {
        match *f {
            Form::Splat(_) | Form::Iota(..) => vec![],
            Form::Binary(_, a, b) => vec![a, b],
            Form::BinarySplat(_, a, _)
            | Form::Floor(_, a, _)
            | Form::Rotate(_, a, _)
            | Form::Convert(_, a) => vec![a],
            Form::RotateXor(_, a, _, b) | Form::Remainder(_, a, b, _) => vec![a, b],
            Form::Select(p, a, b) => vec![p, a, b],
        }
    };
    // Nodes are made on demand from each root, operands first, so members
    // folded into a rotation or a scalar operand get none of their own.
    let mut inputs: Vec<usize> = Vec::new();
    let mut nodes: Vec<(Node, PrimitiveType)> = Vec::new();
    let mut adds: Vec<bool> = Vec::new();
    let mut node_of: HashMap<usize, usize> = HashMap::new();
    let input = |o: usize, inputs: &mut Vec<usize>| match inputs.iter().position(|&i| i == o) {
        Some(j) => j,
        None => {
            inputs.push(o);
            inputs.len() - 1
        }
    };
    let mut results = Vec::with_capacity(roots.len());
    for &root in roots {
        let mut stack = vec![(root, false)];
        while let Some((m, ready)) = stack.pop() {
            if node_of.contains_key(&m) {
                continue;
            }
            let ty = instrs[m].shape.element_type()?;
            if !members.contains(&m) {
                let j = input(m, &mut inputs);
                nodes.push((Node::Input(j), ty));
                adds.push(false);
                node_of.insert(m, nodes.len() - 1);
                continue;
            }
            let f = form(m)?;
            if !ready {
                stack.push((m, true));
                stack.extend(reads(&f).into_iter().rev().map(|o| (o, false)));
                continue;
            }
            let at = |o: usize| node_of.get(&o).copied();
            let node = match f {
                Form::Splat(src) => Node::Splat(input(src, &mut inputs)),
                Form::Iota(f, stride, size) => Node::Iota(f, stride, size),
                Form::Binary(f, a, b) => Node::Binary(f, at(a)?, at(b)?),
                Form::BinarySplat(f, a, src) => {
                    Node::BinarySplat(f, at(a)?, input(src, &mut inputs))
                }
                Form::Remainder(f, a, q, src) => {
                    Node::Remainder(f, at(a)?, at(q)?, input(src, &mut inputs))
                }
                Form::Floor(f, a, src) => Node::Floor(f, at(a)?, input(src, &mut inputs)),
                Form::Rotate(f, a, k) => Node::Rotate(f, at(a)?, k),
                Form::RotateXor(f, a, k, b) => Node::RotateXor(f, at(a)?, k, at(b)?),
                Form::Select(p, a, b) => Node::Select(at(p)?, at(a)?, at(b)?),
                Form::Convert(f, a) => Node::Convert(f, at(a)?),
            };
            nodes.push((node, ty));
            adds.push(instrs[m].opcode == Opcode::Add);
            node_of.insert(m, nodes.len() - 1);
        }
        results.push(*node_of.get(&root)?);
    }
    Some((nodes, adds, inputs, results))
}

/// The one integer (or predicate, as 0 or 1) of constant `i` of `comp`.
fn constant_int(comp: &HloComputation, i: usize) -> Option<i128> {
    let instr = comp.instructions().get(i)?;
    instr.integer_constant().or_else(|| {
        let l = instr.attrs.literal.as_ref()?.as_array()?;
        if instr.opcode != Opcode::Constant || l.element_count() != 1 {
            return None;
        }
        match l.data().scalar(0) {
            Scalar::Pred(b) => Some(b as i128),
            _ => None,
        }
    })
}

/// A tiled loop's splat `i` (over `dims`) of an integer constant: the
/// constant's instruction and value.
fn splat_constant(comp: &HloComputation, i: usize, dims: &[i64]) -> Option<(usize, i128)> {
    let instr = comp.instructions().get(i)?;
    if !tiled_splat(comp, instr, dims) {
        return None;
    }
    let src = instr.operands.first()?.index();
    Some((src, constant_int(comp, src)?))
}

/// Instruction `i` of `comp` where instruction `var` is `x`, if `i` is
/// built of `var`, its sign, integer constants (and broadcasts of them),
/// comparisons and predicate logic (predicates as 0 and 1); the constants
/// met are added to `seen`. Such a value is piecewise constant in `x`, and
/// changes only at -1, 0, 1 or next to a constant it compares with.
fn value_at(
    comp: &HloComputation,
    i: usize,
    var: usize,
    x: i128,
    depth: u32,
    seen: &mut Vec<i128>,
) -> Option<i128> {
    if i == var {
        return Some(x);
    }
    let depth = depth.checked_sub(1)?;
    let instr = comp.instructions().get(i)?;
    let ty = instr.shape.element_type()?;
    let mut arg = |k: usize| value_at(comp, instr.operands.get(k)?.index(), var, x, depth, seen);
    let pred = ty == PrimitiveType::Pred;
    match instr.opcode {
        Opcode::Constant => {
            let c = constant_int(comp, i)?;
            seen.push(c);
            Some(c)
        }
        Opcode::Broadcast => {
            let o = comp.instruction(*instr.operands.first()?);
            let scalar = o.shape.as_array()?.element_count().ok()? == 1;
            if scalar { arg(0) } else { None }
        }
        Opcode::Sign if ty.is_integral() => Some(arg(0)?.signum()),
        Opcode::Not if pred => Some(1 - arg(0)?),
        Opcode::And if pred => Some(arg(0)? & arg(1)?),
        Opcode::Or if pred => Some(arg(0)? | arg(1)?),
        Opcode::Xor if pred => Some(arg(0)? ^ arg(1)?),
        Opcode::Compare => {
            let operand = comp
                .instruction(*instr.operands.first()?)
                .shape
                .element_type()?;
            if !(operand.is_integral() || operand == PrimitiveType::Pred) {
                return None;
            }
            let (a, b) = (arg(0)?, arg(1)?);
            let dir = instr.attrs.comparison_direction?;
            Some(i128::from(crate::kernels::typed::compared(dir, a, b)))
        }
        _ => None,
    }
}

/// Whether predicate `p` of `comp`, as a function of `var` (a signed
/// integer of `bits` bits), is `x < 0` (with `negative`, else `x > 0`) for
/// every value `x` other than 0, and `at_zero` at 0 if that is given. It is
/// checked where `p` may change (see [`value_at`]) and at the ends of the
/// type's range, which covers every value.
fn sign_test(
    comp: &HloComputation,
    p: usize,
    var: usize,
    bits: usize,
    negative: bool,
    at_zero: Option<bool>,
) -> bool {
    const DEPTH: u32 = 12;
    let (min, max) = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
    let mut seen = Vec::new();
    if value_at(comp, p, var, 0, DEPTH, &mut seen).is_none() {
        return false;
    }
    let mut points = vec![min, min + 1, max - 1, max, -2, -1, 0, 1, 2];
    points.extend(seen.iter().flat_map(|&c| [c - 1, c, c + 1]));
    points.retain(|x| (min..=max).contains(x));
    points.into_iter().all(|x| {
        let want = match (x, at_zero) {
            (0, None) => return true,
            (0, Some(z)) => z,
            _ => (x < 0) == negative,
        };
        value_at(comp, p, var, x, DEPTH, &mut Vec::new()) == Some(i128::from(want))
    })
}

/// A floor division or modulo found by [`floor_division`].
struct Floor {
    f: crate::kernels::typed::FloorFn,
    /// The dividend.
    a: usize,
    /// The divisor's scalar, and its value.
    src: usize,
    d: i128,
    modulo: bool,
}

/// Member `m` of a tiled loop (over `dims`) as JAX's floor division or
/// modulo of a signed integer `a` by a constant `d` other than 0 (see
/// `typed::FloorFn`). `jnp.floor_divide(a, d)` is
/// `select(and(p, compare(remainder(a, d), 0, NE)), divide(a, d) - 1,
/// divide(a, d))` and `jnp.remainder(a, d)` is `select(p', r + d, r)` for
/// `r = remainder(a, d)`, where `p` (of `a`) and `p'` (of `r`) test a sign
/// against `d`'s in one of several ways; each is checked to be the test
/// the kernel makes.
fn floor_division(comp: &HloComputation, m: usize, dims: &[i64]) -> Option<Floor> {
    let instrs = comp.instructions();
    let instr = &instrs[m];
    let ty = instr.shape.element_type()?;
    if instr.opcode != Opcode::Select || !ty.is_signed_int() {
        return None;
    }
    let pair = |i: usize, op: Opcode| -> Option<(usize, usize)> {
        let instr = &instrs[i];
        match instr.operands.as_slice() {
            [a, b] if instr.opcode == op => Some((a.index(), b.index())),
            _ => None,
        }
    };
    let constant = |i: usize| splat_constant(comp, i, dims).map(|(_, c)| c);
    let &[p, t, f] = instr.operands.as_slice() else {
        return None;
    };
    let (p, t, f) = (p.index(), t.index(), f.index());
    let bits = ty.bit_width();
    if let Some((a, divisor)) = pair(f, Opcode::Remainder) {
        // The modulo: `r + d` where `r`'s sign is not `d`'s.
        let (src, d) = splat_constant(comp, divisor, dims).filter(|&(_, d)| d != 0)?;
        let (x, y) = pair(t, Opcode::Add)?;
        let plus_d = (x == f && constant(y) == Some(d)) || (y == f && constant(x) == Some(d));
        let test = sign_test(comp, p, f, bits, d > 0, Some(false));
        return (plus_d && test).then(|| {
            Some(Floor {
                f: crate::kernels::typed::floor_fn(ty, true)?,
                a,
                src,
                modulo: true,
                d,
            })
        })?;
    }
    // The division: `q - 1` where the remainder is not 0 and `a`'s sign is
    // not `d`'s (`a` is not 0 where the remainder is not).
    let (a, divisor) = pair(f, Opcode::Divide)?;
    let (src, d) = splat_constant(comp, divisor, dims).filter(|&(_, d)| d != 0)?;
    let less_one = match (pair(t, Opcode::Subtract), pair(t, Opcode::Add)) {
        (Some((x, y)), _) => x == f && constant(y) == Some(1),
        (_, Some((x, y))) => {
            (x == f && constant(y) == Some(-1)) || (y == f && constant(x) == Some(-1))
        }
        _ => false,
    };
    let nonzero_remainder = |c: usize| {
        let i = &instrs[c];
        let Some((x, y)) = pair(c, Opcode::Compare) else {
            return false;
        };
        let ne = i.attrs.comparison_direction == Some(oxla_hlo::ir::ComparisonDirection::Ne);
        let (r, z) = if constant(y) == Some(0) {
            (x, y)
        } else {
            (y, x)
        };
        ne && constant(z) == Some(0)
            && pair(r, Opcode::Remainder).is_some_and(|(ra, rd)| ra == a && constant(rd) == Some(d))
    };
    let (x, y) = pair(p, Opcode::And)?;
    let matched = less_one
        && [(x, y), (y, x)].into_iter().any(|(sign, rem)| {
            nonzero_remainder(rem) && sign_test(comp, sign, a, bits, d > 0, None)
        });
    matched.then(|| {
        Some(Floor {
            f: crate::kernels::typed::floor_fn(ty, false)?,
            a,
            src,
            modulo: false,
            d,
        })
    })?
}

/// Member `m` of a tiled loop as a rotation: `or(shift-left(x, k),
/// shift-right-logical(x, width - k))` by constant splats, the shifts read
/// by nothing else (JAX's threefry rotates this way). Returns the rotation,
/// `x` and `k`.
fn rotation(
    comp: &HloComputation,
    members: &BTreeSet<usize>,
    users: &[Vec<usize>],
    m: usize,
) -> Option<(crate::kernels::typed::RotateFn, usize, u32)> {
    let instrs = comp.instructions();
    let instr = &instrs[m];
    let &[a, b] = instr.operands.as_slice() else {
        return None;
    };
    let (a, b) = (a.index(), b.index());
    let (left, right) = match (instrs[a].opcode, instrs[b].opcode) {
        (Opcode::ShiftLeft, Opcode::ShiftRightLogical) => (a, b),
        (Opcode::ShiftRightLogical, Opcode::ShiftLeft) => (b, a),
        _ => return None,
    };
    let ty = instr.shape.element_type()?;
    let width = ty.bit_width() as i128;
    // The constant a member splats.
    let amount = |s: usize| -> Option<i128> {
        let splat = &instrs[s];
        if splat.opcode != Opcode::Broadcast || !members.contains(&s) {
            return None;
        }
        comp.instruction(*splat.operands.first()?)
            .integer_constant()
    };
    let shift = |s: usize| -> Option<(usize, i128)> {
        let shift = &instrs[s];
        let &[x, by] = shift.operands.as_slice() else {
            return None;
        };
        (members.contains(&s) && users[s] == [m]).then_some(())?;
        Some((x.index(), amount(by.index())?))
    };
    let ((x, k), (y, j)) = (shift(left)?, shift(right)?);
    let ok = instr.opcode == Opcode::Or && x == y && (0..=width).contains(&k) && k + j == width;
    let f = crate::kernels::typed::rotate_fn(ty)?;
    ok.then_some((f, x, (k % width) as u32))
}

/// `abs` at `k` of an RFFT that only it reads: one kernel (see
/// [`crate::kernels::fft::plan_abs`]).
fn plan_fft_abs(comp: &HloComputation, k: usize, users: &[Vec<usize>]) -> Option<Planned> {
    let instr = comp.instruction(InstrId::new(k));
    let &[fft] = &instr.operands[..] else {
        return None;
    };
    let f = comp.instruction(fft);
    if instr.opcode != Opcode::Abs || f.opcode != Opcode::Fft || users[fft.index()] != [k] {
        return None;
    }
    let kernel = crate::kernels::fft::plan_abs(comp, f, instr.shape.as_array()?)?;
    let x = *f.operands.first()?;
    Some((BTreeSet::from([k, fft.index()]), kernel, vec![x.index()]))
}

/// A chain of index operations over one input, of any element type: a copy.
fn plan_copy(comp: &HloComputation, k: usize, users: &[Vec<usize>]) -> Option<Planned> {
    let instr = comp.instruction(InstrId::new(k));
    let out = instr.shape.as_array()?;
    let ty = out.element_type();
    let grown = grow(
        comp,
        k,
        &instr.operands.iter().map(|o| o.index()).collect::<Vec<_>>(),
        ty,
        out.dims(),
        users,
        false,
    );
    // The copy is the chain of index operations from `k` down; whatever the
    // chain reads (a constant or iota included) is a buffer of its own.
    let mut members = BTreeSet::from([k]);
    let mut at = k;
    while let Some(&op) = comp.instruction(InstrId::new(at)).operands.first() {
        let op = op.index();
        if !grown.contains(&op) || !is_index_op(comp.instruction(InstrId::new(op)).opcode) {
            break;
        }
        members.insert(op);
        at = op;
    }
    let (base, view, starts) = loop {
        if let Some(found) = Builder::new(comp, ty, &members).view_of(k) {
            break found;
        }
        members = cut_inexpressible(comp, k, ty, &members)?;
    };
    if members.contains(&base) || !starts.is_empty() {
        return None;
    }
    let kernel = CopyKernel {
        ty,
        view,
        out_dims: out.dims().to_vec(),
    };
    Some((members, Box::new(kernel), vec![base]))
}

/// A reduction rooted at `k`, with the element-wise work on its input fused in.
fn plan_reduce(
    module: &HloModule,
    comp: &HloComputation,
    k: usize,
    users: &[Vec<usize>],
) -> Option<Planned> {
    let instr = comp.instruction(InstrId::new(k));
    if instr.operands.len() != 2 {
        return None;
    }
    let op = reducer(module, instr)?;
    let out_ty = array_type(instr)?;
    // Half-precision maxima and minima are exact in f32; sums and products
    // are not (XLA:CPU rounds each partial to the half type, in its own order).
    let ty = match out_ty {
        PrimitiveType::F32 | PrimitiveType::F64 => out_ty,
        t if is_half(t) && matches!(op, Binary::Max | Binary::Min) => PrimitiveType::F32,
        _ => return None,
    };
    let input = instr.operands[0].index();
    let in_dims = comp
        .instruction(instr.operands[0])
        .shape
        .as_array()?
        .dims()
        .to_vec();
    let mut members = grow(comp, k, &[input], ty, &in_dims, users, false);
    let result = loop {
        let mut b = Builder::new(comp, ty, &members);
        if let Some(result) = b.value(input, &in_dims) {
            break (b, result);
        }
        members = cut_inexpressible(comp, k, ty, &members)?;
    };
    let (mut b, mut result) = result;
    // The maximum (or minimum) of values rounded to the half type is the
    // rounding of their maximum, rounding being monotonic (signed zeros and
    // NaN included). The output is rounded to that type anyway, so the
    // rounding of every element (bf16 softmax's row maximum) goes.
    if let (Some(round), Src::Reg(r)) = (half_rounding(instr), result)
        && r + 1 == b.code.len()
        && let Some(&Op::Unary(u, src)) = b.code.last()
        && u == round
    {
        b.code.pop();
        result = src;
    }
    let init_input = b.input(instr.operands[1].index());
    let input_loop = b.finish(result, ty, &in_dims)?;
    let reduced_dims = instr.attrs.dimensions.as_ref()?;
    let reduced = (0..in_dims.len() as i64)
        .map(|d| reduced_dims.contains(&d))
        .collect();
    let out_dims = instr.shape.as_array()?.dims().to_vec();
    let inputs = b.inputs;
    let kernel = ReduceLoop {
        input: input_loop,
        reduced,
        op,
        init_input,
        out_dims,
        out_ty,
    };
    Some((members, Box::new(kernel), inputs))
}

/// Whether `o`, an element-wise value with users outside a group, is
/// computed once and kept rather than recomputed in each user: a
/// transcendental function, or an f32 value rounded to bf16 or f16 (a
/// rounding is a pass of eight integer operations), read by a reduction of
/// its trailing dimensions (or by an element-wise value only such a
/// reduction reads, as layer norm's `(x - mean)²`) and by another
/// element-wise loop over the same elements (softmax: exp(x - max) feeds
/// the row sum and the quotient). Such a chain runs as a row pipeline
/// (`kernels::pipeline`), where the kept value lives in a block-sized
/// buffer in cache, so keeping it costs a store and a load instead of
/// computing it again.
fn kept_for_rows(comp: &HloComputation, o: usize, users: &[Vec<usize>]) -> bool {
    let instrs = comp.instructions();
    let instr = &instrs[o];
    let f32_typed = |i: &HloInstruction| array_type(i) == Some(PrimitiveType::F32);
    // convert(convert(v) to bf16 or f16) back to f32, with v of f32.
    let rounded = instr.opcode == Opcode::Convert
        && f32_typed(instr)
        && instr.operands.first().is_some_and(|h| {
            let h = &instrs[h.index()];
            h.opcode == Opcode::Convert
                && array_type(h).is_some_and(is_half)
                && h.operands
                    .first()
                    .is_some_and(|v| f32_typed(&instrs[v.index()]))
        });
    let costly = rounded
        || matches!(
            instr.opcode,
            Opcode::Exp
                | Opcode::Expm1
                | Opcode::Log
                | Opcode::Log1p
                | Opcode::Tanh
                | Opcode::Logistic
                | Opcode::Erf
                | Opcode::Sin
                | Opcode::Cos
        );
    let Some(dims) = instr.shape.as_array().map(|a| a.dims()) else {
        return false;
    };
    let rank = dims.len() as i64;
    let row_reduction = |u: usize, of: usize| {
        let u = &instrs[u];
        u.opcode == Opcode::Reduce
            && u.operands.first().map(|x| x.index()) == Some(of)
            && u.attrs.dimensions.as_ref().is_some_and(|r| {
                let mut r = r.clone();
                r.sort_unstable();
                !r.is_empty() && r[0] >= 1 && r.iter().copied().eq(r[0]..rank)
            })
    };
    let same_loop = |u: usize| {
        let u = &instrs[u];
        compute_type(comp, u).is_some() && u.shape.as_array().is_some_and(|a| a.dims() == dims)
    };
    let reduced = |u: usize| {
        row_reduction(u, o)
            || (same_loop(u)
                && !users[u].is_empty()
                && users[u].iter().all(|&r| row_reduction(r, u)))
    };
    costly
        && users[o].iter().any(|&u| {
            reduced(u)
                && users[o]
                    .iter()
                    .any(|&l| l != u && same_loop(l) && !reduced(l))
        })
}

/// The members of the group rooted at `root`, found from the root down
/// starting at `start`; element-wise members run over `root_dims`.
fn grow(
    comp: &HloComputation,
    root: usize,
    start: &[usize],
    ty: PrimitiveType,
    root_dims: &[i64],
    users: &[Vec<usize>],
    dynamic: bool,
) -> BTreeSet<usize> {
    let instrs = comp.instructions();
    let mut members = BTreeSet::from([root]);
    // Candidates in decreasing index order, so a producer is considered
    // after every user that could join.
    let mut queue: BTreeSet<usize> = start.iter().copied().collect();
    while let Some(o) = queue.pop_last() {
        let instr = &instrs[o];
        let cheap = is_index_op(instr.opcode)
            || instr.opcode == Opcode::Iota
            || (instr.opcode == Opcode::Constant && instr.shape.is_scalar());
        let elementwise = compute_type(comp, instr).is_some_and(|t| t.is_none_or(|t| t == ty));
        // Elementwise members run over the loop's own iteration space.
        let same_dims = instr
            .shape
            .as_array()
            .is_some_and(|a| a.dims() == root_dims);
        // Users inside the group that are index operations need an index-only producer.
        let index_users = users[o].iter().any(|u| {
            members.contains(u)
                && (is_index_op(instrs[*u].opcode) || instrs[*u].opcode == Opcode::DynamicSlice)
        });
        let joinable = if elementwise && same_dims && !index_users {
            // Joins when every user is in the group; an element-wise value
            // with a few other users that are kernels too is recomputed in
            // each of them rather than stored and read back.
            let inside = users[o].iter().all(|u| members.contains(u));
            let duplicable = users[o].len() <= 3
                && users[o].iter().all(|&u| fusible_user(comp, &instrs[u]))
                && !kept_for_rows(comp, o, users);
            inside || duplicable
        } else if cheap {
            let typed = match instr.opcode {
                Opcode::Iota => array_type(instr) == Some(ty),
                _ => leaf_type_ok(instr, ty),
            };
            typed && (instr.opcode != Opcode::Copy || leaf_type_ok(instr, ty))
        } else if dynamic && scalar_starts(comp, instr) && leaf_type_ok(instr, ty) {
            // Read in place through a view whose offset the starts move at
            // run time; the sliced operand is a buffer (see `view_of`).
            members.insert(o);
            continue;
        } else {
            false
        };
        if joinable {
            members.insert(o);
            for op in &instr.operands {
                queue.insert(op.index());
            }
        }
    }
    members
}

/// Whether `instr` is a `dynamic-slice` a loop can read in place: a start
/// per dimension, each a one-element integer array.
fn scalar_starts(comp: &HloComputation, instr: &HloInstruction) -> bool {
    let Some(rank) = instr.shape.as_array().map(|a| a.dims().len()) else {
        return false;
    };
    instr.opcode == Opcode::DynamicSlice
        && instr.operands.len() == rank + 1
        && instr.operands[1..].iter().all(|s| {
            let s = comp.instruction(*s);
            s.shape.is_scalar() && array_type(s).is_some_and(|t| t.is_integral())
        })
}

/// Whether a loop computing in `ty` can make a result of type `out_ty`:
/// its own type, pred, or (from f32) a half type it rounds to.
fn result_type_ok(ty: PrimitiveType, out_ty: PrimitiveType) -> bool {
    out_ty == ty || out_ty == PrimitiveType::Pred || (ty == PrimitiveType::F32 && is_half(out_ty))
}

/// Builds the fused loop for a group; `None` if the group cannot be expressed.
fn build(
    comp: &HloComputation,
    root: usize,
    ty: PrimitiveType,
    members: &BTreeSet<usize>,
) -> Option<(FusedLoop, Vec<usize>)> {
    let out = comp.instruction(InstrId::new(root)).shape.as_array()?;
    let out_ty = out.element_type();
    if !result_type_ok(ty, out_ty) {
        return None;
    }
    let mut b = Builder::new(comp, ty, members);
    let result = b.value(root, out.dims())?;
    let kernel = b.finish(result, out_ty, out.dims())?;
    Some((kernel, b.inputs))
}

/// A leaf's identity: the instruction read, the view's strides, dims and
/// offset, and its dynamic starts (as instruction, stride and largest start).
type LeafKey = (usize, Vec<i64>, Vec<i64>, i64, Vec<(usize, i64, i64)>);

struct Builder<'c> {
    comp: &'c HloComputation,
    ty: PrimitiveType,
    members: &'c BTreeSet<usize>,
    leaves: Vec<Leaf>,
    /// Kernel input k is the value of instruction `inputs[k]`.
    inputs: Vec<usize>,
    /// SSA code: operation k writes virtual register k.
    code: Vec<Op>,
    memo: HashMap<usize, Src>,
    leaf_memo: HashMap<LeafKey, Src>,
}

impl<'c> Builder<'c> {
    fn new(
        comp: &'c HloComputation,
        ty: PrimitiveType,
        members: &'c BTreeSet<usize>,
    ) -> Builder<'c> {
        Builder {
            comp,
            ty,
            members,
            leaves: Vec::new(),
            inputs: Vec::new(),
            code: Vec::new(),
            memo: HashMap::new(),
            leaf_memo: HashMap::new(),
        }
    }

    /// The loop computing `result` over `dims`, with registers allocated.
    fn finish(&mut self, result: Src, out_ty: PrimitiveType, dims: &[i64]) -> Option<FusedLoop> {
        self.finish_all(&[(result, out_ty)], dims)
    }

    /// The loop computing `results` (each with its element type; the
    /// first is the main one) over `dims`, with registers allocated.
    fn finish_all(&mut self, results: &[(Src, PrimitiveType)], dims: &[i64]) -> Option<FusedLoop> {
        let srcs: Vec<Src> = results.iter().map(|r| r.0).collect();
        let (code, (registers, physical)) =
            allocate_registers(std::mem::take(&mut self.code), &srcs);
        let mut results = results.iter().map(|&(s, ty)| match s {
            Src::Reg(r) => (Src::Reg(physical[r]), ty),
            leaf => (leaf, ty),
        });
        let (result, out_ty) = results.next()?;
        let leaves = std::mem::take(&mut self.leaves);
        Some(FusedLoop {
            ty: self.ty,
            out_ty,
            dims: dims.to_vec(),
            leaves,
            code,
            result,
            extra: results.collect(),
            registers,
        })
    }

    fn input(&mut self, instr: usize) -> usize {
        match self.inputs.iter().position(|&i| i == instr) {
            Some(k) => k,
            None => {
                self.inputs.push(instr);
                self.inputs.len() - 1
            }
        }
    }

    fn leaf(&mut self, key: LeafKey, leaf: Leaf) -> Src {
        if let Some(&s) = self.leaf_memo.get(&key) {
            return s;
        }
        self.leaves.push(leaf);
        let s = Src::Leaf(self.leaves.len() - 1);
        self.leaf_memo.insert(key, s);
        s
    }

    /// The value of instruction `k` over the loop's iteration space `dims`.
    fn value(&mut self, k: usize, dims: &[i64]) -> Option<Src> {
        if let Some(&s) = self.memo.get(&k) {
            return Some(s);
        }
        let instr = self.comp.instruction(InstrId::new(k));
        let s = if !self.members.contains(&k)
            || is_index_op(instr.opcode)
            || instr.opcode == Opcode::Iota
            || instr.opcode == Opcode::Constant
            || instr.opcode == Opcode::DynamicSlice
        {
            self.view_leaf(k, dims)?
        } else {
            let mut ops = Vec::with_capacity(instr.operands.len());
            for o in &instr.operands {
                ops.push(self.value(o.index(), dims)?);
            }
            let op = if let Some(u) = unary_of(instr.opcode) {
                Op::Unary(u, ops[0])
            } else if let Some(b) = binary_of(instr.opcode) {
                Op::Binary(b, ops[0], ops[1])
            } else {
                match instr.opcode {
                    Opcode::Compare => {
                        Op::Compare(instr.attrs.comparison_direction?, ops[0], ops[1])
                    }
                    Opcode::Select => Op::Select(ops[0], ops[1], ops[2]),
                    Opcode::Clamp => Op::Clamp(ops[0], ops[1], ops[2]),
                    Opcode::Convert => {
                        let from = self
                            .comp
                            .instruction(instr.operands[0])
                            .shape
                            .element_type()?;
                        let to = instr.shape.element_type()?;
                        if is_half(to) && from != to {
                            Op::Unary(half_rounding(instr)?, ops[0])
                        } else if to == PrimitiveType::Pred && from != PrimitiveType::Pred {
                            // x != 0, as 0/1.
                            let zero = self
                                .leaf((usize::MAX, vec![], vec![], 0, vec![]), Leaf::Scalar(0.0));
                            Op::Compare(oxla_hlo::ir::ComparisonDirection::Ne, ops[0], zero)
                        } else {
                            // pred -> float and same-type converts keep the 0/1 or value.
                            self.memo.insert(k, ops[0]);
                            return Some(ops[0]);
                        }
                    }
                    _ => return None,
                }
            };
            self.code.push(op);
            let mut result = Src::Reg(self.code.len() - 1);
            if let Some(round) = half_rounding(instr).filter(|_| instr.opcode != Opcode::Convert) {
                self.code.push(Op::Unary(round, result));
                result = Src::Reg(self.code.len() - 1);
            }
            result
        };
        self.memo.insert(k, s);
        Some(s)
    }

    /// A leaf reading instruction `k` through the chain of index operations above it.
    fn view_leaf(&mut self, k: usize, dims: &[i64]) -> Option<Src> {
        let (base, view, starts) = self.view_of(k)?;
        if view.dims != dims {
            return None;
        }
        let instr = self.comp.instruction(InstrId::new(base));
        let key = (
            base,
            view.strides.clone(),
            view.dims.clone(),
            view.offset,
            starts.clone(),
        );
        if self.members.contains(&base) && !starts.is_empty() {
            // (`grow` keeps a dynamic slice's operand out of the group.)
            return None;
        }
        if self.members.contains(&base) && instr.opcode == Opcode::Iota {
            return Some(self.leaf(key, Leaf::Affine(view)));
        }
        if self.members.contains(&base) && instr.opcode == Opcode::Constant {
            let l = instr.attrs.literal.as_ref()?.as_array()?;
            if l.element_count() != 1 {
                return None;
            }
            let v = match l.data().scalar(0) {
                Scalar::Pred(p) => p as u8 as f64,
                Scalar::Float(f) => f,
                Scalar::Int(i) => i as f64,
                Scalar::Complex(..) => return None,
            };
            return Some(self.leaf(key, Leaf::Scalar(v)));
        }
        let ty = instr.shape.element_type()?;
        let widened = self.ty == PrimitiveType::F32 && is_half(ty);
        if ty != self.ty && ty != PrimitiveType::Pred && !widened {
            return None;
        }
        let input = self.input(base);
        let starts = starts
            .into_iter()
            .map(|(instr, stride, max)| DynamicStart {
                input: self.input(instr),
                stride,
                max,
            })
            .collect();
        Some(self.leaf(
            key,
            Leaf::Input {
                input,
                ty,
                view,
                starts,
            },
        ))
    }

    /// The buffer (or iota/constant) under a chain of member index
    /// operations, the composed view, and the dynamic starts that move its
    /// offset (as the start's instruction, its stride in the buffer and
    /// its largest value).
    fn view_of(&self, k: usize) -> Option<(usize, View, Vec<(usize, i64, i64)>)> {
        let instr = self.comp.instruction(InstrId::new(k));
        let dims = instr.shape.as_array()?.dims().to_vec();
        if !self.members.contains(&k) {
            return Some((k, View::contiguous(&dims), Vec::new()));
        }
        if instr.opcode == Opcode::DynamicSlice {
            // Its operand is a buffer: `grow` does not take it in.
            let base = instr.operands.first()?.index();
            let operand = self.comp.instruction(InstrId::new(base));
            let from = View::contiguous(operand.shape.as_array()?.dims());
            if from.dims.len() != dims.len() || instr.operands.len() != dims.len() + 1 {
                return None;
            }
            let mut starts = Vec::new();
            for (d, s) in instr.operands[1..].iter().enumerate() {
                let max = from.dims[d] - dims[d];
                if max < 0 {
                    return None;
                }
                if max > 0 && from.strides[d] != 0 {
                    starts.push((s.index(), from.strides[d], max));
                }
            }
            let view = View {
                dims,
                offset: 0,
                strides: from.strides,
            };
            return Some((base, view, starts));
        }
        match instr.opcode {
            Opcode::Iota => {
                let d = instr.attrs.iota_dimension? as usize;
                let mut strides = vec![0i64; dims.len()];
                *strides.get_mut(d)? = 1;
                Some((
                    k,
                    View {
                        dims,
                        offset: 0,
                        strides,
                    },
                    Vec::new(),
                ))
            }
            Opcode::Constant => Some((
                k,
                View {
                    dims: dims.clone(),
                    offset: 0,
                    strides: vec![0; dims.len()],
                },
                Vec::new(),
            )),
            _ => {
                let operand = instr.operands.first()?.index();
                let (base, v, starts) = self.view_of(operand)?;
                let view = match instr.opcode {
                    Opcode::Broadcast => v.broadcast(&dims, instr.attrs.dimensions.as_ref()?),
                    Opcode::Transpose => v.transpose(instr.attrs.dimensions.as_ref()?),
                    Opcode::Slice => v.slice(instr.attrs.slice.as_ref()?),
                    Opcode::Reverse => v.reverse(instr.attrs.dimensions.as_ref()?),
                    Opcode::Reshape => v.reshape(&dims)?,
                    Opcode::Copy => v,
                    _ => return None,
                };
                Some((base, view, starts))
            }
        }
    }
}

/// Maps SSA values to a small set of reusable registers: a register is free
/// again after the last read of its value (never, for the values of
/// `results`, which a loop writes out). Returns the code with physical
/// registers, and (register count, virtual-to-physical map).
pub(crate) fn allocate_registers(
    code: Vec<Op>,
    results: &[Src],
) -> (Vec<(Op, usize)>, (usize, Vec<usize>)) {
    let n = code.len();
    // The last operation reading each value; a value nobody reads dies where it is made.
    let mut last_use: Vec<usize> = (0..n).collect();
    for (i, op) in code.iter().enumerate() {
        for s in op.operands() {
            if let Src::Reg(r) = s {
                last_use[r] = i;
            }
        }
    }
    for &s in results {
        if let Src::Reg(r) = s {
            last_use[r] = usize::MAX;
        }
    }
    let mut dies_at: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (v, &lu) in last_use.iter().enumerate() {
        if lu < n {
            dies_at[lu].push(v);
        }
    }
    let mut physical = vec![0usize; n];
    let mut free: Vec<usize> = Vec::new();
    let mut count = 0usize;
    let mut out = Vec::with_capacity(n);
    for (i, op) in code.into_iter().enumerate() {
        // The destination is picked before this operation's operands are
        // freed, so it never aliases one of them.
        let dst = free.pop().unwrap_or_else(|| {
            count += 1;
            count - 1
        });
        physical[i] = dst;
        let map = |s: Src| match s {
            Src::Reg(r) => Src::Reg(physical[r]),
            leaf => leaf,
        };
        let op = match op {
            Op::Unary(u, a) => Op::Unary(u, map(a)),
            Op::Binary(b, x, y) => Op::Binary(b, map(x), map(y)),
            Op::Compare(d, x, y) => Op::Compare(d, map(x), map(y)),
            Op::Select(p, x, y) => Op::Select(map(p), map(x), map(y)),
            Op::Clamp(l, x, h) => Op::Clamp(map(l), map(x), map(h)),
        };
        out.push((op, dst));
        for &v in &dies_at[i] {
            free.push(physical[v]);
        }
    }
    (out, (count, physical))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each instruction's users, by index.
    fn users_of(comp: &HloComputation) -> Vec<Vec<usize>> {
        comp.users()
            .into_iter()
            .map(|u| u.into_iter().map(|i| i.index()).collect())
            .collect()
    }

    /// Which `or`s of `text`'s entry are rotations, and by how much.
    fn rotations(text: &str) -> Vec<(String, u32)> {
        let module = oxla_text::parse_module(text).unwrap();
        let comp = module.entry();
        let users = users_of(comp);
        let members: BTreeSet<usize> = (0..comp.instructions().len()).collect();
        (0..comp.instructions().len())
            .filter_map(|m| {
                rotation(comp, &members, &users, m)
                    .map(|(_, _, k)| (comp.instructions()[m].name.clone(), k))
            })
            .collect()
    }

    /// The entry's instructions `kept_for_rows` keeps, by name.
    fn kept(text: &str) -> Vec<String> {
        let module = oxla_text::parse_module(text).unwrap();
        let comp = module.entry();
        let users = users_of(comp);
        (0..comp.instructions().len())
            .filter(|&o| kept_for_rows(comp, o, &users))
            .map(|o| comp.instructions()[o].name.clone())
            .collect()
    }

    #[test]
    fn roundings_read_by_a_row_reduction_and_a_loop_are_kept() {
        // Layer norm in bf16 as XLA normalizes it: x rounded (r) feeds the
        // row sum and the centring; the centred value rounded (cr) feeds
        // the square the variance sums and the normalized output.
        let norm = "HloModule n
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[8,16] parameter(0)
  h = bf16[8,16] convert(x)
  r = f32[8,16] convert(h)
  zero = f32[] constant(0)
  s = f32[8] reduce(r, zero), dimensions={1}, to_apply=sum
  sb = f32[8,16] broadcast(s), dimensions={0}
  c = f32[8,16] subtract(r, sb)
  ch = bf16[8,16] convert(c)
  cr = f32[8,16] convert(ch)
  sq = f32[8,16] multiply(cr, cr)
  v = f32[8] reduce(sq, zero), dimensions={1}, to_apply=sum
  vb = f32[8,16] broadcast(v), dimensions={0}
  ROOT y = f32[8,16] multiply(cr, vb)
}
";
        assert_eq!(kept(norm), ["r", "cr"]);
        // Without a loop besides the reduction's, nothing is kept.
        let sums = norm.replace(
            "ROOT y = f32[8,16] multiply(cr, vb)",
            "ROOT y = f32[8] add(v, s)",
        );
        assert!(kept(&sums).iter().all(|k| k != "cr"), "{:?}", kept(&sums));
        // A rounding from f64, or a conversion that does not round, is not.
        let wide = norm
            .replace("x = f32[8,16] parameter(0)", "x = f64[8,16] parameter(0)")
            .replace("r = f32[8,16] convert(h)", "r = f32[8,16] convert(x)");
        assert_eq!(kept(&wide), ["cr"]);
        // A cheap value read by the same users is recomputed in each.
        let plain = norm.replace("cr = f32[8,16] convert(ch)", "cr = f32[8,16] negate(c)");
        assert_eq!(kept(&plain), ["r"]);
    }

    fn rotate(k: i64, j: i64, ty: &str) -> String {
        format!(
            "HloModule t\nENTRY e {{\n  x = {ty}[8] parameter(0)\n  k = {ty}[] constant({k})\n  j = {ty}[] constant({j})\n  kb = {ty}[8] broadcast(k), dimensions={{}}\n  jb = {ty}[8] broadcast(j), dimensions={{}}\n  l = {ty}[8] shift-left(x, kb)\n  r = {ty}[8] shift-right-logical(x, jb)\n  ROOT o = {ty}[8] or(r, l)\n}}\n"
        )
    }

    #[test]
    fn rotations_are_shift_pairs_whose_amounts_make_the_width() {
        assert_eq!(rotations(&rotate(13, 19, "u32")), [("o".to_string(), 13)]);
        assert_eq!(rotations(&rotate(0, 32, "u32")), [("o".to_string(), 0)]);
        assert_eq!(rotations(&rotate(32, 0, "u32")), [("o".to_string(), 0)]);
        assert_eq!(rotations(&rotate(60, 4, "s64")), [("o".to_string(), 60)]);
        assert!(rotations(&rotate(13, 20, "u32")).is_empty());
        assert!(rotations(&rotate(33, -1, "s32")).is_empty());
        // u8 has no rotation kernel.
        assert!(rotations(&rotate(3, 5, "u8")).is_empty());
        // A shift read by something else is computed anyway.
        let shared = rotate(13, 19, "u32").replace(
            "ROOT o = u32[8] or(r, l)",
            "o = u32[8] or(r, l)\n  ROOT t = (u32[8], u32[8]) tuple(o, l)",
        );
        assert!(rotations(&shared).is_empty());
        // Shifts of different values are not a rotation.
        let two = rotate(13, 19, "u32").replace(
            "r = u32[8] shift-right-logical(x, jb)",
            "r = u32[8] shift-right-logical(kb, jb)",
        );
        assert!(rotations(&two).is_empty());
    }
}
