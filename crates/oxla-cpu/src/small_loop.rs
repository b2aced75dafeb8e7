//! Loops over small values. A `while` whose state is a few small arrays (a
//! counter, some short vectors) and whose condition and body use only
//! element-wise and index operations runs here instead of through the
//! executor: both computations are compiled into one register file of typed
//! arrays and a list of operations over it. Tuples and get-tuple-element
//! become register numbers, reshapes become aliases, broadcasts, transposes,
//! slices and reverses become index tables, constants and iotas are filled
//! in once, and element-wise operations run as typed loops (the common
//! arithmetic and comparisons) or through the interpreter's scalar semantics
//! (everything else), so results agree with the interpreter bit for bit. An
//! iteration allocates nothing.

use std::sync::Mutex;

use oxla_hlo::{
    ArrayData, ArrayShape, ComputationId, HloComputation, HloInstruction, HloModule, InstrId,
    NativeType, Opcode, PrimitiveType, Scalar, with_array_data,
};
use oxla_interp::{ElementwiseFunction, ElementwiseScratch};

use crate::kernels::elementwise::scalar_function;
use crate::kernels::typed::{self, BinFn};
use crate::kernels::view::View;
use crate::value::Value;

/// Arrays larger than this leave the loop to the executor, whose kernels
/// vectorise and split work across threads.
pub(crate) const MAX_ELEMENTS: usize = 4096;

type Reg = usize;

enum Op {
    /// Typed arithmetic or a comparison (under the operands' default
    /// comparison type), as one call.
    Binary {
        f: BinFn,
        a: Reg,
        b: Reg,
        out: Reg,
    },
    Select {
        p: Reg,
        a: Reg,
        b: Reg,
        out: Reg,
    },
    /// Any other element-wise operation, with the interpreter's semantics.
    Function {
        f: ElementwiseFunction,
        args: Vec<Reg>,
        out: Reg,
    },
    /// `out[i] = src[index[i]]`.
    Gather {
        src: Reg,
        index: Vec<u32>,
        out: Reg,
    },
    /// A nested loop: the moves that set its state, and the loop.
    While(Box<(Vec<Move>, LoopCode)>),
    Conditional(Box<BranchCode>),
}

impl Op {
    /// The one register a simple operation writes.
    fn out(&self) -> Option<Reg> {
        match *self {
            Op::Binary { out, .. }
            | Op::Select { out, .. }
            | Op::Function { out, .. }
            | Op::Gather { out, .. } => Some(out),
            Op::While(_) | Op::Conditional(_) => None,
        }
    }
}

/// Compiled computations: operations, and the instruction each came from.
#[derive(Default)]
struct Code {
    ops: Vec<Op>,
    origins: Vec<(ComputationId, InstrId)>,
}

/// A compiled loop.
pub(crate) struct SmallLoop {
    /// The state's arrays in tuple order (one, when the state is an array).
    state: Vec<ArrayShape>,
    tuple: bool,
    /// The register file as a run starts: the state first, then constants
    /// and the values of the condition and body.
    template: Vec<ArrayData>,
    code: LoopCode,
    /// Bytes of the largest register (for the memory limit).
    pub largest: u64,
    /// Register files of finished runs.
    spare: Mutex<Vec<Vec<ArrayData>>>,
}

/// A `while`, compiled: its state registers, condition and body.
struct LoopCode {
    /// The `while` instruction (for the iteration-limit error).
    origin: (ComputationId, InstrId),
    state: Vec<Reg>,
    cond: Code,
    pred: Reg,
    body: Code,
    /// How the body's results become the next state: copies in order, the
    /// ones that read state registers going through temporaries first.
    writeback: Vec<Move>,
}

/// A `conditional`, compiled: each branch's code and how its results reach
/// the conditional's registers.
struct BranchCode {
    selector: Reg,
    branches: Vec<(Code, Vec<Move>)>,
}

/// One step of passing values on: loop results to the next state, a
/// branch's results to the conditional's.
#[derive(Clone, Copy, Debug)]
enum Move {
    /// Copy register `.0` into `.1`.
    Copy(Reg, Reg),
    /// Exchange the buffers of registers `.0` and `.1`.
    Swap(Reg, Reg),
}

/// Why a run stopped early.
pub(crate) enum LoopError {
    /// The `while` instruction reached the iteration limit.
    Limit {
        computation: ComputationId,
        instr: InstrId,
        limit: u64,
    },
    /// An operation failed (not expected of a verified module).
    Op {
        computation: ComputationId,
        instr: InstrId,
        message: String,
    },
    /// The state passed in is not what the loop was compiled for.
    State(String),
}

/// The arrays of a shape that is an array or a tuple of arrays.
fn leaves(shape: &oxla_hlo::Shape) -> Option<(Vec<ArrayShape>, bool)> {
    match shape {
        oxla_hlo::Shape::Tuple(parts) => {
            let arrays: Option<Vec<ArrayShape>> =
                parts.iter().map(|p| p.as_array().cloned()).collect();
            Some((arrays?, true))
        }
        oxla_hlo::Shape::Array(a) => Some((vec![a.clone()], false)),
        _ => None,
    }
}

/// The loop for the `while` instruction `instr` of computation `comp`, if
/// its state and computations qualify.
pub(crate) fn plan(module: &HloModule, comp: ComputationId, instr: InstrId) -> Option<SmallLoop> {
    let while_instr = module.computations().get(comp.index())?.instruction(instr);
    let (state, tuple) = leaves(&while_instr.shape)?;
    let mut c = Compiler {
        regs: Vec::new(),
        shapes: Vec::new(),
    };
    let code = c.compile_while(module, (comp, instr), 0)?;
    let largest = c
        .shapes
        .iter()
        .map(|s| s.byte_size().map_or(u64::MAX, |b| b as u64))
        .max()
        .unwrap_or(0);
    Some(SmallLoop {
        state,
        tuple,
        template: c.regs,
        code,
        largest,
        spare: Mutex::new(Vec::new()),
    })
}

struct Compiler {
    regs: Vec<ArrayData>,
    shapes: Vec<ArrayShape>,
}

/// Where the value of an instruction being compiled is.
#[derive(Clone, PartialEq)]
enum Slot {
    None,
    Reg(Reg),
    /// A tuple of arrays.
    Tuple(Vec<Reg>),
}

/// How deeply calls are compiled inline.
const MAX_INLINE_DEPTH: usize = 16;

impl Compiler {
    fn new_reg(&mut self, shape: &ArrayShape) -> Option<Reg> {
        let n = shape.element_count().ok()?;
        if n > MAX_ELEMENTS {
            return None;
        }
        self.regs.push(ArrayData::zeros(shape.element_type(), n));
        self.shapes.push(shape.clone());
        Some(self.regs.len() - 1)
    }

    fn constant(&mut self, shape: &ArrayShape, data: ArrayData) -> Option<Reg> {
        let r = self.new_reg(shape)?;
        if data.len() != self.regs[r].len() || data.element_type() != shape.element_type() {
            return None;
        }
        self.regs[r] = data;
        Some(r)
    }

    /// Registers for the arrays of `shapes`.
    fn new_regs(&mut self, shapes: &[ArrayShape]) -> Option<Vec<Reg>> {
        shapes.iter().map(|s| self.new_reg(s)).collect()
    }

    /// The `while` at `origin`, with fresh state registers.
    fn compile_while(
        &mut self,
        module: &HloModule,
        origin: (ComputationId, InstrId),
        depth: usize,
    ) -> Option<LoopCode> {
        let instr = module
            .computations()
            .get(origin.0.index())?
            .instruction(origin.1);
        let (cond_id, body_id) = (instr.called.condition?, instr.called.body?);
        let (shapes, tuple) = leaves(&instr.shape)?;
        let state = self.new_regs(&shapes)?;
        let param = if tuple {
            Slot::Tuple(state.clone())
        } else {
            Slot::Reg(state[0])
        };
        let mut cond = Code::default();
        let mut body = Code::default();
        let param = std::slice::from_ref(&param);
        let Slot::Reg(pred) = self.compile(module, cond_id, param, &mut cond, depth + 1)? else {
            return None;
        };
        let pred_shape = &self.shapes[pred];
        if pred_shape.element_type() != PrimitiveType::Pred || !pred_shape.is_scalar() {
            return None;
        }
        let results = self.compile(module, body_id, param, &mut body, depth + 1)?;
        let results = self.results(&results, &shapes, tuple)?;
        // Results that are other state values go through temporaries, so no
        // copy overwrites a value a later copy reads. A result the body
        // computes afresh each iteration, and returns once, trades buffers
        // with its state value instead of being copied.
        let computed: Vec<Reg> = body.ops.iter().filter_map(Op::out).collect();
        let mut first = Vec::new();
        let mut then = Vec::new();
        for (i, &r) in results.iter().enumerate() {
            if r == state[i] {
                continue;
            }
            if state.contains(&r) {
                let t = self.new_reg(&shapes[i])?;
                first.push(Move::Copy(r, t));
                then.push(Move::Copy(t, state[i]));
            } else if computed.contains(&r) && results.iter().filter(|&&o| o == r).count() == 1 {
                then.push(Move::Swap(r, state[i]));
            } else {
                then.push(Move::Copy(r, state[i]));
            }
        }
        first.extend(then);
        Some(LoopCode {
            origin,
            state,
            cond,
            pred,
            body,
            writeback: first,
        })
    }

    /// The registers of a computation's result `slot`, checked against the
    /// arrays it should have.
    fn results(&self, slot: &Slot, shapes: &[ArrayShape], tuple: bool) -> Option<Vec<Reg>> {
        let regs = match slot {
            Slot::Reg(r) if !tuple => vec![*r],
            Slot::Tuple(parts) if tuple => parts.clone(),
            _ => return None,
        };
        let same = |(&r, s): (&Reg, &ArrayShape)| {
            self.shapes[r].dims() == s.dims() && self.shapes[r].element_type() == s.element_type()
        };
        (regs.len() == shapes.len() && regs.iter().zip(shapes).all(same)).then_some(regs)
    }

    /// Compiles `comp`, whose parameters are `params`, appending its
    /// operations to `code`; returns the slot of its root. Calls are
    /// compiled inline, `depth` levels deep at most.
    fn compile(
        &mut self,
        module: &HloModule,
        id: ComputationId,
        params: &[Slot],
        code: &mut Code,
        depth: usize,
    ) -> Option<Slot> {
        let comp = module.computations().get(id.index())?;
        let instrs = comp.instructions();
        if depth > MAX_INLINE_DEPTH
            || comp.num_parameters() != params.len()
            || instrs.iter().any(|i| i.opcode.has_side_effect())
        {
            return None;
        }
        let root = comp.root().index();
        let mut live = vec![false; instrs.len()];
        *live.get_mut(root)? = true;
        for k in (0..instrs.len()).rev() {
            if live[k] {
                for op in &instrs[k].operands {
                    *live.get_mut(op.index())? = true;
                }
            }
        }
        let mut slots = vec![Slot::None; instrs.len()];
        for (k, instr) in instrs.iter().enumerate() {
            if !live[k] {
                continue;
            }
            let operands: Vec<Slot> = instr
                .operands
                .iter()
                .map(|o| slots.get(o.index()).cloned())
                .collect::<Option<_>>()?;
            let regs: Vec<Reg> = operands
                .iter()
                .filter_map(|s| match s {
                    Slot::Reg(r) => Some(*r),
                    _ => None,
                })
                .collect();
            let all_regs = regs.len() == operands.len();
            let slot = match instr.opcode {
                Opcode::Parameter => params.get(instr.attrs.parameter_number?)?.clone(),
                Opcode::GetTupleElement => match operands.first()? {
                    Slot::Tuple(parts) => Slot::Reg(*parts.get(instr.attrs.tuple_index?)?),
                    _ => return None,
                },
                Opcode::Tuple if all_regs => Slot::Tuple(regs),
                Opcode::Call if all_regs => {
                    let args: Vec<Slot> = regs.into_iter().map(Slot::Reg).collect();
                    self.compile(module, instr.called.to_apply?, &args, code, depth + 1)?
                }
                Opcode::While => {
                    let init = match operands.first()? {
                        Slot::Reg(r) => vec![*r],
                        Slot::Tuple(parts) => parts.clone(),
                        Slot::None => return None,
                    };
                    let lc = self.compile_while(module, (id, InstrId::new(k)), depth + 1)?;
                    if init.len() != lc.state.len() {
                        return None;
                    }
                    let slot = match operands.first()? {
                        Slot::Reg(_) => Slot::Reg(lc.state[0]),
                        _ => Slot::Tuple(lc.state.clone()),
                    };
                    let init = init
                        .iter()
                        .zip(&lc.state)
                        .map(|(&a, &b)| Move::Copy(a, b))
                        .collect();
                    code.ops.push(Op::While(Box::new((init, lc))));
                    code.origins.push((id, InstrId::new(k)));
                    slot
                }
                Opcode::Conditional => {
                    let Some(Slot::Reg(selector)) = operands.first() else {
                        return None;
                    };
                    let (shapes, tuple) = leaves(&instr.shape)?;
                    let mut branches = Vec::new();
                    let mut outs = Vec::new();
                    for (j, b) in instr.called.branches.iter().enumerate() {
                        let arg = operands.get(j + 1)?;
                        let mut branch = Code::default();
                        let slot = self.compile(
                            module,
                            *b,
                            std::slice::from_ref(arg),
                            &mut branch,
                            depth + 1,
                        )?;
                        outs.push(self.results(&slot, &shapes, tuple)?);
                        branches.push(branch);
                    }
                    if branches.is_empty() || operands.len() != branches.len() + 1 {
                        return None;
                    }
                    let result = self.new_regs(&shapes)?;
                    let branches = branches
                        .into_iter()
                        .zip(outs)
                        .map(|(b, out)| {
                            let moves = out
                                .iter()
                                .zip(&result)
                                .map(|(&a, &r)| Move::Copy(a, r))
                                .collect();
                            (b, moves)
                        })
                        .collect();
                    code.ops.push(Op::Conditional(Box::new(BranchCode {
                        selector: *selector,
                        branches,
                    })));
                    code.origins.push((id, InstrId::new(k)));
                    if tuple {
                        Slot::Tuple(result)
                    } else {
                        Slot::Reg(result[0])
                    }
                }
                _ if all_regs => {
                    let shape = instr.shape.as_array()?;
                    let start = code.ops.len();
                    let r = self.instruction(comp, instr, shape, &regs, &mut code.ops)?;
                    let origin = (id, InstrId::new(k));
                    code.origins
                        .extend(std::iter::repeat_n(origin, code.ops.len() - start));
                    Slot::Reg(r)
                }
                _ => return None,
            };
            slots[k] = slot;
        }
        slots.get(root).cloned()
    }

    /// The register holding `instr`'s value, after adding the operations
    /// that compute it.
    fn instruction(
        &mut self,
        comp: &HloComputation,
        instr: &HloInstruction,
        shape: &ArrayShape,
        regs: &[Reg],
        ops: &mut Vec<Op>,
    ) -> Option<Reg> {
        let ty = shape.element_type();
        let operand = |j: usize| -> Option<&ArrayShape> {
            comp.instruction(*instr.operands.get(j)?).shape.as_array()
        };
        match instr.opcode {
            Opcode::Constant => {
                let lit = instr.attrs.literal.as_ref()?.as_array()?;
                if lit.dims() != shape.dims() {
                    return None;
                }
                self.constant(shape, lit.data().clone())
            }
            Opcode::Iota => {
                let d = usize::try_from(instr.attrs.iota_dimension?).ok()?;
                let n = shape.element_count().ok()?;
                if n > MAX_ELEMENTS || d >= shape.rank() {
                    return None;
                }
                let dims = shape.dims();
                let inner: i64 = dims[d + 1..].iter().product();
                let size = dims[d];
                let values: Vec<Scalar> = (0..n as i64)
                    .map(|i| Scalar::Int(((i / inner.max(1)) % size.max(1)) as i128))
                    .collect();
                self.constant(shape, ArrayData::from_scalars(ty, &values))
            }
            // Same elements in the same order: the operand's register.
            Opcode::Reshape | Opcode::Copy | Opcode::Bitcast => {
                let from = operand(0)?;
                (from.element_type() == ty
                    && from.element_count().ok()? == shape.element_count().ok()?)
                .then_some(regs[0])
            }
            Opcode::Broadcast | Opcode::Transpose | Opcode::Slice | Opcode::Reverse => {
                let from = View::contiguous(operand(0)?.dims());
                let view = match instr.opcode {
                    Opcode::Broadcast => {
                        from.broadcast(shape.dims(), instr.attrs.dimensions.as_ref()?)
                    }
                    Opcode::Transpose => from.transpose(instr.attrs.dimensions.as_ref()?),
                    Opcode::Slice => from.slice(instr.attrs.slice.as_ref()?),
                    _ => from.reverse(instr.attrs.dimensions.as_ref()?),
                };
                if view.dims != shape.dims() || operand(0)?.element_type() != ty {
                    return None;
                }
                let index = index_table(&view)?;
                let out = self.new_reg(shape)?;
                if index
                    .iter()
                    .any(|&i| i as usize >= self.regs[regs[0]].len())
                {
                    return None;
                }
                ops.push(Op::Gather {
                    src: regs[0],
                    index,
                    out,
                });
                Some(out)
            }
            _ => {
                let f = scalar_function(instr, comp)?;
                let out = self.new_reg(shape)?;
                // Every operand has the result's elements, or is a scalar
                // used for each (a predicate of select).
                let n = shape.element_count().ok()?;
                for &r in regs {
                    let len = self.regs[r].len();
                    if len != n && len != 1 {
                        return None;
                    }
                }
                let same = |j: usize| self.regs[regs[j]].len() == n;
                let binary = regs.len() == 2 && same(0) && same(1);
                let typed = typed::binary_fn(instr, comp).filter(|_| binary);
                let op = if let Some(f) = typed {
                    Op::Binary {
                        f,
                        a: regs[0],
                        b: regs[1],
                        out,
                    }
                } else if instr.opcode == Opcode::Select && same(1) && same(2) {
                    Op::Select {
                        p: regs[0],
                        a: regs[1],
                        b: regs[2],
                        out,
                    }
                } else {
                    Op::Function {
                        f,
                        args: regs.to_vec(),
                        out,
                    }
                };
                ops.push(op);
                Some(out)
            }
        }
    }
}

/// The buffer element each element of `view` reads, in row-major order.
fn index_table(view: &View) -> Option<Vec<u32>> {
    let n: i64 = view.dims.iter().product();
    let mut out = Vec::with_capacity(usize::try_from(n).ok()?);
    let rank = view.dims.len();
    let mut index = vec![0i64; rank];
    for _ in 0..n {
        let at = view.offset
            + index
                .iter()
                .zip(&view.strides)
                .map(|(i, s)| i * s)
                .sum::<i64>();
        out.push(u32::try_from(at).ok()?);
        for d in (0..rank).rev() {
            index[d] += 1;
            if index[d] < view.dims[d] {
                break;
            }
            index[d] = 0;
        }
    }
    Some(out)
}

static EMPTY: ArrayData = ArrayData::Pred(Vec::new());

impl SmallLoop {
    /// Runs the loop from `state` (moved in), at most `limit` iterations.
    pub(crate) fn run<'a>(
        &self,
        state: Value<'a>,
        limit: Option<u64>,
    ) -> Result<Value<'a>, LoopError> {
        let mut regs = self
            .spare
            .lock()
            .ok()
            .and_then(|mut s| s.pop())
            .unwrap_or_else(|| self.template.clone());
        let result = self.run_in(&mut regs, state, limit);
        if let Ok(mut spare) = self.spare.lock() {
            spare.push(regs);
        }
        result
    }

    fn run_in<'a>(
        &self,
        regs: &mut [ArrayData],
        state: Value<'a>,
        limit: Option<u64>,
    ) -> Result<Value<'a>, LoopError> {
        let leaves: Vec<Value<'a>> = match state {
            Value::Tuple(t) if self.tuple => t.to_vec(),
            Value::Array(_) if !self.tuple => vec![state],
            _ => {
                return Err(LoopError::State(
                    "the loop state has the wrong structure".into(),
                ));
            }
        };
        if leaves.len() != self.state.len() {
            return Err(LoopError::State(format!(
                "the loop state has {} parts, not {}",
                leaves.len(),
                self.state.len()
            )));
        }
        for (i, (leaf, shape)) in leaves.iter().zip(&self.state).enumerate() {
            match leaf.array() {
                Some(a)
                    if a.dims() == shape.dims()
                        && copy_into(&mut regs[self.code.state[i]], a.data()) => {}
                _ => {
                    return Err(LoopError::State(format!(
                        "part {i} of the loop state is not {shape}"
                    )));
                }
            }
        }
        drop(leaves);
        let mut scratch = ElementwiseScratch::default();
        run_loop(&self.code, regs, &mut scratch, limit)?;
        let out: Vec<Value<'a>> = self
            .state
            .iter()
            .zip(&self.code.state)
            .map(|(shape, &r)| {
                oxla_hlo::ArrayLiteral::new(shape.clone(), regs[r].clone())
                    .map(Value::owned)
                    .map_err(|e| LoopError::State(e.to_string()))
            })
            .collect::<Result<_, _>>()?;
        Ok(if self.tuple {
            Value::Tuple(out.into())
        } else {
            out.into_iter().next().unwrap_or(Value::Token)
        })
    }
}

fn pred_true(regs: &[ArrayData], r: Reg) -> bool {
    matches!(regs.get(r), Some(ArrayData::Pred(p)) if p.first() == Some(&true))
}

fn run_moves(regs: &mut [ArrayData], moves: &[Move]) -> Result<(), LoopError> {
    for &m in moves {
        if !pass_on(regs, m) {
            return Err(LoopError::State("a result changed type".into()));
        }
    }
    Ok(())
}

fn run_loop(
    code: &LoopCode,
    regs: &mut [ArrayData],
    scratch: &mut ElementwiseScratch,
    limit: Option<u64>,
) -> Result<(), LoopError> {
    let mut iterations = 0u64;
    loop {
        run_code(&code.cond, regs, scratch, limit)?;
        if !pred_true(regs, code.pred) {
            return Ok(());
        }
        if let Some(l) = limit
            && iterations >= l
        {
            return Err(LoopError::Limit {
                computation: code.origin.0,
                instr: code.origin.1,
                limit: l,
            });
        }
        iterations += 1;
        run_code(&code.body, regs, scratch, limit)?;
        run_moves(regs, &code.writeback)?;
    }
}

fn run_code(
    code: &Code,
    regs: &mut [ArrayData],
    scratch: &mut ElementwiseScratch,
    limit: Option<u64>,
) -> Result<(), LoopError> {
    for (k, op) in code.ops.iter().enumerate() {
        let result = match (op, op.out()) {
            (Op::While(w), _) => {
                let (init, lc) = &**w;
                run_moves(regs, init)?;
                run_loop(lc, regs, scratch, limit)?;
                continue;
            }
            (Op::Conditional(c), _) => {
                let n = c.branches.len();
                let branch = match regs.get(c.selector) {
                    // A pred picks branch 0 when true, branch 1 when false.
                    Some(ArrayData::Pred(p)) => usize::from(p.first() != Some(&true)),
                    // An index out of range (negative too) picks the last branch.
                    Some(ArrayData::S32(i)) => i
                        .first()
                        .and_then(|&i| usize::try_from(i).ok())
                        .filter(|&i| i < n)
                        .unwrap_or(n - 1),
                    _ => n,
                };
                match c.branches.get(branch) {
                    Some((branch, moves)) => {
                        run_code(branch, regs, scratch, limit)?;
                        run_moves(regs, moves)?;
                        continue;
                    }
                    None => Err("the branch selector must be a pred or s32 scalar".to_string()),
                }
            }
            (_, Some(out)) => {
                // Operands always come before the result in the register file.
                let (r, rest) = regs.split_at_mut(out);
                apply(op, r, &mut rest[0], scratch)
            }
            (_, None) => Ok(false),
        };
        let message = match result {
            Ok(true) => continue,
            Ok(false) => "operands of unexpected types".to_string(),
            Err(m) => m,
        };
        let (computation, instr) = code.origins[k];
        return Err(LoopError::Op {
            computation,
            instr,
            message,
        });
    }
    Ok(())
}

/// Runs one operation on registers `r` (those before its result) into `o`.
#[inline(always)]
fn apply(
    op: &Op,
    r: &[ArrayData],
    o: &mut ArrayData,
    scratch: &mut ElementwiseScratch,
) -> Result<bool, String> {
    let get = |i: Reg| r.get(i).ok_or("an operand after its result");
    Ok(match op {
        Op::Binary { f, a, b, .. } => f(get(*a)?, get(*b)?, o),
        Op::Select { p, a, b, .. } => typed::select(get(*p)?, get(*a)?, get(*b)?, o),
        Op::Gather { src, index, .. } => gather(get(*src)?, index, o),
        Op::While(_) | Op::Conditional(_) => false,
        Op::Function { f, args, .. } => {
            let mut refs: [&ArrayData; 4] = [&EMPTY; 4];
            for (slot, &a) in refs.iter_mut().zip(args) {
                *slot = get(a)?;
            }
            let n = args.len().min(4);
            f.apply_into(&refs[..n], o, scratch)
                .map_err(|e| e.to_string())?;
            args.len() <= 4
        }
    })
}

fn pass_on(regs: &mut [ArrayData], m: Move) -> bool {
    let (Move::Copy(a, b) | Move::Swap(a, b)) = m;
    if a == b || a.max(b) >= regs.len() {
        return a == b;
    }
    let (lo, hi) = regs.split_at_mut(a.max(b));
    let (x, y) = (&mut lo[a.min(b)], &mut hi[0]);
    match m {
        Move::Swap(..) => {
            std::mem::swap(x, y);
            true
        }
        Move::Copy(..) if a < b => copy_into(y, x),
        Move::Copy(..) => copy_into(x, y),
    }
}

/// Copies `src` into `dst` of the same type and length.
fn copy_into(dst: &mut ArrayData, src: &ArrayData) -> bool {
    fn go<T: NativeType>(d: &mut [T], src: &ArrayData) -> bool {
        match T::slice(src) {
            Some(s) if s.len() == d.len() => {
                d.copy_from_slice(s);
                true
            }
            _ => false,
        }
    }
    with_array_data!(dst, d => go(d, src))
}

fn gather(src: &ArrayData, index: &[u32], out: &mut ArrayData) -> bool {
    fn go<T: NativeType>(o: &mut [T], src: &ArrayData, index: &[u32]) -> bool {
        match T::slice(src) {
            Some(s) if o.len() == index.len() => {
                for (o, &i) in o.iter_mut().zip(index) {
                    *o = s[i as usize];
                }
                true
            }
            _ => false,
        }
    }
    with_array_data!(out, o => go(o, src, index))
}
