//! Loops over small values. A `while` whose state is a few small arrays (a
//! counter, some short vectors) and whose condition and body use only
//! element-wise and index operations runs here instead of through the
//! executor: both computations are compiled into one register file of typed
//! arrays and a list of operations over it. Tuples and get-tuple-element
//! become register numbers, reshapes become aliases, broadcasts, transposes,
//! slices and reverses become index tables, constants and iotas are filled
//! in once, element-wise operations run as typed loops (the common
//! arithmetic and comparisons) or through the interpreter's scalar semantics
//! (everything else), so results agree with the interpreter bit for bit,
//! and `dynamic-slice`, `dynamic-update-slice` and `scatter` (the index
//! bookkeeping of JAX's pivots-to-permutation loop, say) read their start
//! indices at run time. An iteration allocates nothing but a scatter's
//! list of window offsets. State arrays too large for the register program
//! stay in it when the loop only slices them and updates them in place
//! (JAX's `scan` reading its inputs and stacking its outputs row by row).

use std::sync::Mutex;

use oxla_hlo::ir::ComparisonDirection;
use oxla_hlo::{
    ArrayData, ArrayShape, ComputationId, HloComputation, HloInstruction, HloModule, InstrId,
    NativeType, Opcode, PrimitiveType, Scalar, with_array_data,
};
use oxla_interp::{ElementwiseFunction, ElementwiseScratch};

use crate::kernels::elementwise::scalar_function;
use crate::kernels::gather::{ScatterKernel, plan_scatter};
use crate::kernels::slices::{clamped_starts, copy_span, row_major, slice_into, update_into};
use crate::kernels::typed::{self, ScalarFn, Typed, UpdateFn};
use crate::kernels::view::View;
use crate::value::{Value, unshare};

/// Arrays larger than this leave the loop to the executor, whose kernels
/// vectorise and split work across threads; but for large state arrays
/// that the loop only indexes (see [`LARGE_ELEMENTS`]).
pub(crate) const MAX_ELEMENTS: usize = 4096;

/// The largest state array a loop keeps when its iterations only read
/// blocks of it (`dynamic-slice`, slices) and update blocks of it in place
/// (`dynamic-update-slice`, `scatter`): JAX's `scan` and `fori_loop`
/// reading their inputs and stacking their outputs a row at a time. Each
/// run copies it in and out once.
const LARGE_ELEMENTS: usize = 1 << 24;

/// Start indices an indexing operation reads at most (one per dimension).
const MAX_RANK: usize = 8;

type Reg = usize;

/// A place in the scalar bank: one value as raw bits (see `typed::Lanes`).
type Bank = usize;

/// Where a value the loop machinery itself reads is: a register, or a slot
/// of the scalar bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loc {
    Reg(Reg),
    Bank(Bank),
}

enum Op {
    /// Typed arithmetic or a comparison (under the operands' default
    /// comparison type), as one call.
    Binary {
        f: Typed,
        a: Reg,
        b: Reg,
        out: Reg,
    },
    /// The same on scalars in the bank: no storage to look up.
    Scalar {
        f: ScalarFn,
        /// `f`, when the loop runs it inline.
        inline: Option<typed::InlineOp>,
        a: Bank,
        b: Bank,
        out: Bank,
    },
    ScalarSelect {
        p: Bank,
        a: Bank,
        b: Bank,
        out: Bank,
    },
    /// Typed arithmetic whose result replaces one of its operands (a state
    /// value the body updates).
    Update {
        f: UpdateFn,
        x: Reg,
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
    /// Indexing with indices read at run time.
    Indexed(Box<Indexed>),
    /// Typed arithmetic reading or writing blocks of larger arrays in place
    /// (see [`window_ops`]).
    Window(Box<WindowOp>),
    /// A nested loop: the moves that set its state, and the loop.
    While(Box<(Vec<Move>, LoopCode)>),
    Conditional(Box<BranchCode>),
}

impl Op {
    /// The one register a simple operation writes.
    fn out(&self) -> Option<Reg> {
        match *self {
            Op::Binary { out, .. }
            | Op::Update { out, .. }
            | Op::Select { out, .. }
            | Op::Function { out, .. }
            | Op::Gather { out, .. } => Some(out),
            Op::While(_)
            | Op::Conditional(_)
            | Op::Scalar { .. }
            | Op::ScalarSelect { .. }
            | Op::Indexed(_)
            | Op::Window(_) => None,
        }
    }
}

/// An indexing operation whose indices are values of the loop: it reads
/// whole registers, so a scalar operand or result that lives in the scalar
/// bank is copied into its register first, or out of it after.
struct Indexed {
    kind: IndexKind,
    /// The instruction's operands, in order.
    args: Vec<Reg>,
    out: Reg,
    /// Operands that live in the bank, and their registers.
    loads: Vec<(Bank, Reg)>,
    /// The bank slot of a result that lives there.
    store: Option<Bank>,
    /// The start indices' bank slots, when every one is a banked integer
    /// scalar (a `dynamic-slice` or `dynamic-update-slice` at a loop
    /// counter, JAX's `fori_loop` and `scan`): read there directly, with
    /// no trip through their registers.
    banked_starts: Option<Vec<(Bank, IndexBits)>>,
    /// For a `dynamic-slice` of a state array the loop never writes: which
    /// of the arrays borrowed from the caller it reads (see
    /// [`borrow_states`]) instead of its register.
    borrowed: Option<usize>,
}

/// How an integer index lies in the bank: its width in bits and whether
/// it is signed.
#[derive(Clone, Copy, Debug)]
struct IndexBits {
    width: u32,
    signed: bool,
}

impl IndexBits {
    fn of(ty: PrimitiveType) -> Option<IndexBits> {
        ty.is_integral().then(|| IndexBits {
            width: ty.bit_width() as u32,
            signed: ty.is_signed_int(),
        })
    }

    /// The index whose bits (zero-extended, see `typed::Lanes`) are
    /// `bits`, clamped into `[0, last]`.
    #[inline(always)]
    fn clamped(self, bits: u64, last: usize) -> usize {
        let up = bits << (64 - self.width);
        let v = if self.signed {
            let v = (up as i64) >> (64 - self.width);
            if v < 0 {
                return 0;
            }
            v as u64
        } else {
            up >> (64 - self.width)
        };
        usize::try_from(v).map_or(last, |v| v.min(last))
    }
}

impl Indexed {
    /// An update (`dynamic-update-slice`, `scatter`) of its array operand
    /// in place: `out` is that operand, whose old value nothing reads
    /// after (see `updates_in_place`).
    fn in_place(&self) -> bool {
        self.args.first() == Some(&self.out)
    }
}

/// Where a windowed operation's operand or result is.
enum Place {
    /// A whole register.
    Reg(Reg),
    /// The block of register `array` (or of borrowed array `borrowed`)
    /// placed at the start indices in `slots`, clamped as
    /// `dynamic-slice` and `dynamic-update-slice` clamp them, and one run
    /// of the array's elements (see `Block::run`).
    Block {
        array: Reg,
        borrowed: Option<usize>,
        block: Block,
        slots: Vec<(Bank, IndexBits)>,
    },
}

impl Place {
    /// The register it is in (a borrowed array has none).
    fn reg(&self) -> Option<Reg> {
        match *self {
            Place::Reg(r) => Some(r),
            Place::Block {
                borrowed: Some(_), ..
            } => None,
            Place::Block { array, .. } => Some(array),
        }
    }

    /// The array it reads: a borrowed one, or a register other than the
    /// one being written (those before and after it, see `around`).
    #[inline(always)]
    fn array<'r>(
        &self,
        lo: &'r [ArrayData],
        hi: &'r [ArrayData],
        lent: &[&'r ArrayData],
    ) -> Option<&'r ArrayData> {
        match *self {
            Place::Block {
                borrowed: Some(k), ..
            } => lent.get(k).copied(),
            _ => beside(lo, hi, self.reg()?),
        }
    }

    /// Its first element's offset in its array, now.
    #[inline(always)]
    fn offset(&self, bank: &[u64]) -> Option<usize> {
        match self {
            Place::Reg(_) => Some(0),
            Place::Block { block, slots, .. } => block.offset(slots, bank),
        }
    }

    /// Whether it reads or writes bank slot `b` or register `r` (`at`).
    fn touches(&self, at: Loc) -> bool {
        let slot = |b| match self {
            Place::Block { slots, .. } => slots.iter().any(|&(s, _)| s == b),
            Place::Reg(_) => false,
        };
        match at {
            Loc::Bank(b) => slot(b),
            Loc::Reg(r) => self.reg() == Some(r),
        }
    }
}

/// `out = a op b` over `n` elements, where each of the three may be a
/// block of a larger array: a `dynamic-slice` read where it lies, or a
/// `dynamic-update-slice` written there, with no copy between.
struct WindowOp {
    f: typed::WindowFn,
    a: Place,
    b: Place,
    out: Place,
    n: usize,
}

enum IndexKind {
    /// Operands: the array, then its start indices.
    DynamicSlice(Block),
    /// Operands: the array, the update (the block), then the start indices.
    DynamicUpdateSlice(Block),
    /// Operands: the array, the indices, the updates.
    Scatter(ScatterKernel),
}

/// A block of an array placed at run-time starts.
#[derive(Clone)]
struct Block {
    /// The array's dimensions and row-major strides.
    dims: Vec<usize>,
    strides: Vec<usize>,
    /// The block's dimensions.
    sizes: Vec<usize>,
    /// The largest start in each dimension at which the block fits.
    last: Vec<usize>,
    /// The block's element count, when its elements are one run of the
    /// array's (ones, then at most one partial dimension, then whole ones:
    /// a row, or rows): one copy moves it.
    run: Option<usize>,
}

impl Block {
    fn new(dims: Vec<usize>, sizes: Vec<usize>) -> Block {
        let partial = sizes.iter().position(|&s| s != 1).unwrap_or(sizes.len());
        let whole = sizes
            .iter()
            .zip(&dims)
            .skip(partial + 1)
            .all(|(s, d)| s == d);
        Block {
            strides: row_major(&dims),
            last: dims
                .iter()
                .zip(&sizes)
                .map(|(d, s)| d.saturating_sub(*s))
                .collect(),
            run: (whole && sizes.len() == dims.len()).then(|| sizes.iter().product()),
            dims,
            sizes,
        }
    }

    /// [`Block::place`]'s offset alone: what a windowed operation reads
    /// each iteration.
    #[inline(always)]
    fn offset(&self, slots: &[(Bank, IndexBits)], bank: &[u64]) -> Option<usize> {
        if slots.len() != self.last.len() || slots.len() != self.strides.len() {
            return None;
        }
        let mut offset = 0;
        for ((&(slot, bits), &last), &stride) in slots.iter().zip(&self.last).zip(&self.strides) {
            // (A dimension the block spans whole starts at 0.)
            if last != 0 {
                offset += bits.clamped(*bank.get(slot)?, last) * stride;
            }
        }
        Some(offset)
    }

    /// The block's starts read from `bank` and clamped so that it fits,
    /// into `starts`, and its first element's offset in the array.
    #[inline(always)]
    fn place(
        &self,
        slots: &[(Bank, IndexBits)],
        bank: &[u64],
        starts: &mut [usize; MAX_RANK],
    ) -> Option<usize> {
        let mut offset = 0;
        for (d, &(slot, bits)) in slots.iter().enumerate() {
            // (A dimension the block spans whole starts at 0.)
            let s = match *self.last.get(d)? {
                0 => 0,
                last => bits.clamped(*bank.get(slot)?, last),
            };
            *starts.get_mut(d)? = s;
            offset += s * self.strides.get(d)?;
        }
        Some(offset)
    }
}

/// What a run's operations share: the iteration limit, the state arrays
/// the loop borrowed (see [`borrow_states`]), and scratch space.
struct Context<'l> {
    limit: Option<u64>,
    lent: &'l [&'l ArrayData],
    elementwise: ElementwiseScratch,
    starts: Vec<usize>,
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
    template: Frame,
    /// Where each state value lives.
    state_locs: Vec<Loc>,
    /// For each state value, whether the loop borrows it from the caller
    /// (a read-only array, see [`borrow_states`]), and which of the
    /// borrowed ones it is.
    lent: Vec<Option<usize>>,
    /// Operations on blocks in place (see [`window_ops`]).
    windowed: usize,
    code: LoopCode,
    /// Bytes of the largest register (for the memory limit).
    pub largest: u64,
    /// Register files of finished runs.
    spare: Mutex<Vec<Frame>>,
}

/// The values of a run: array registers, and the scalar bank, which holds
/// the scalars (counters, flags, bounds) that only typed arithmetic,
/// comparisons, selects and moves touch.
#[derive(Clone)]
struct Frame {
    regs: Vec<ArrayData>,
    bank: Vec<u64>,
}

/// A `while`, compiled: its state registers, condition and body.
struct LoopCode {
    /// The `while` instruction (for the iteration-limit error).
    origin: (ComputationId, InstrId),
    state: Vec<Reg>,
    cond: Code,
    pred: Loc,
    body: Code,
    /// How the body's results become the next state: copies in order, the
    /// ones that read state registers going through temporaries first.
    writeback: Vec<Move>,
    /// When the condition only compares a counter the body steps by a
    /// fixed amount with a fixed bound: its trip count is known on entry.
    counted: Option<Counted>,
}

/// A counted loop: the condition is `counter dir bound` (all in the scalar
/// bank, of an integer type), and one body operation steps the counter by
/// `step`, which like `bound` nothing in the loop writes.
#[derive(Clone, Copy, Debug)]
struct Counted {
    counter: Bank,
    bound: Bank,
    step: Bank,
    ty: PrimitiveType,
    /// The comparison with the counter on the left.
    dir: ComparisonDirection,
    /// The step is subtracted.
    down: bool,
    /// The stepping operation `(f, a, b)`, taken out of the body when
    /// nothing else reads the counter: a counted run then sets the
    /// counter once, at the end; a run that tests the condition applies
    /// it after the body.
    taken: Option<(ScalarFn, Bank, Bank)>,
}

impl Counted {
    /// The number of iterations from the bank's values, when the counter
    /// moves toward the bound and no value it takes wraps its type (a
    /// wrapping or endless loop runs the condition each time).
    fn trips(&self, bank: &[u64]) -> Option<u64> {
        let (bits, min, max): (fn(u64) -> i128, i128, i128) = match self.ty {
            PrimitiveType::S32 => (
                |v| i128::from(v as u32 as i32),
                i32::MIN.into(),
                i32::MAX.into(),
            ),
            PrimitiveType::S64 => (|v| i128::from(v as i64), i64::MIN.into(), i64::MAX.into()),
            PrimitiveType::U32 => (|v| i128::from(v as u32), 0, u32::MAX.into()),
            PrimitiveType::U64 => (i128::from, 0, u64::MAX.into()),
            _ => return None,
        };
        let get = |b: Bank| bank.get(b).map(|&v| bits(v));
        let (i, n, s) = (get(self.counter)?, get(self.bound)?, get(self.step)?);
        let s = if self.down { -s } else { s };
        let trips = match self.dir {
            // Steps of `s` from `i` that stay below `n`: ceil((n - i) / s).
            ComparisonDirection::Lt if s > 0 => (n - i + s - 1).max(0) / s,
            ComparisonDirection::Le if s > 0 => (n - i + s).max(0) / s,
            ComparisonDirection::Gt if s < 0 => (i - n - s - 1).max(0) / -s,
            ComparisonDirection::Ge if s < 0 => (i - n - s).max(0) / -s,
            _ => return None,
        };
        let last = i + trips * s;
        (min <= last && last <= max)
            .then(|| u64::try_from(trips).ok())
            .flatten()
    }

    /// The counter after `trips` steps from its value in `bank` (which
    /// `trips` found not to wrap).
    fn after(&self, bank: &[u64], trips: u64) -> Option<u64> {
        let width = match self.ty {
            PrimitiveType::S32 | PrimitiveType::U32 => 32,
            PrimitiveType::S64 | PrimitiveType::U64 => 64,
            _ => return None,
        };
        let step = bank.get(self.step)?;
        let moved = step.wrapping_mul(trips);
        let i = *bank.get(self.counter)?;
        let v = if self.down {
            i.wrapping_sub(moved)
        } else {
            i.wrapping_add(moved)
        };
        Some(v & (u64::MAX >> (64 - width)))
    }
}

/// A `conditional`, compiled: each branch's code and how its results reach
/// the conditional's registers.
struct BranchCode {
    selector: Loc,
    /// Whether the selector is a pred (else an s32 index).
    pred: bool,
    branches: Vec<(Code, Vec<Move>)>,
}

/// One step of passing values on: loop results to the next state, a
/// branch's results to the conditional's.
#[derive(Clone, Copy, Debug)]
enum Move {
    /// Copy register `.0` into `.1`.
    Copy(Reg, Reg),
    /// Copy bank slot `.0` into `.1`.
    Bank(Bank, Bank),
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
        fixed: Vec::new(),
    };
    let mut code = c.compile_while(module, (comp, instr), 0)?;
    let largest = c
        .shapes
        .iter()
        .map(|s| s.byte_size().map_or(u64::MAX, |b| b as u64))
        .max()
        .unwrap_or(0);
    let slots = bank_slots(&c.regs, &code);
    let bank = c
        .regs
        .iter()
        .zip(&slots)
        .filter(|(_, s)| s.is_some())
        .map(|(r, _)| typed::bits_of(r).unwrap_or(0))
        .collect();
    let loc = |r: Reg| slots[r].map_or(Loc::Reg(r), Loc::Bank);
    let state_locs: Vec<Loc> = code.state.iter().map(|&r| loc(r)).collect();
    bank_loop(&mut code, &slots, &c.regs);
    count_loops(module, &mut code, &slots);
    if !only_indexed(&code, &mut c.regs) {
        return None;
    }
    let lent = borrow_states(&mut code, &state_locs);
    let lens: Vec<usize> = c.regs.iter().map(ArrayData::len).collect();
    let windowed = window_ops(&mut code, &lens);
    for (&r, l) in code.state.iter().zip(&lent) {
        if l.is_some() {
            c.regs[r] = ArrayData::zeros(c.regs[r].element_type(), 0);
        }
    }
    Some(SmallLoop {
        state,
        tuple,
        template: Frame { regs: c.regs, bank },
        state_locs,
        lent,
        windowed,
        code,
        largest,
        spare: Mutex::new(Vec::new()),
    })
}

/// The bank slot of each register that can live in the scalar bank: a
/// single element of a `typed::Lanes` type that only typed binary
/// operations, selects of scalars and moves between such registers touch.
fn bank_slots(regs: &[ArrayData], code: &LoopCode) -> Vec<Option<Bank>> {
    let mut ok: Vec<bool> = regs
        .iter()
        .map(|r| r.len() == 1 && typed::scalar_type(r.element_type()))
        .collect();
    // Ruling one register out can rule out those it meets in an operation
    // or a move: repeat until nothing changes.
    loop {
        let before = ok.clone();
        exclude_loop(code, &mut ok);
        if ok == before {
            break;
        }
    }
    let mut next = 0;
    ok.iter()
        .map(|&b| {
            b.then(|| {
                next += 1;
                next - 1
            })
        })
        .collect()
}

/// Whether every large register (over [`MAX_ELEMENTS`] elements) is only
/// indexed: a state array, read by `dynamic-slice` or a gather into small
/// results, updated in place, or swapped with another state array. Large
/// registers nothing touches (results of updates that went in place) are
/// emptied.
fn only_indexed(lc: &LoopCode, regs: &mut [ArrayData]) -> bool {
    let large: Vec<bool> = regs.iter().map(|r| r.len() > MAX_ELEMENTS).collect();
    let mut touched = vec![false; regs.len()];
    lc.state.iter().for_each(|&r| touched[r] = true);
    let fits = indexed_loop(lc, &large, &mut touched);
    for (r, reg) in regs.iter_mut().enumerate() {
        if large[r] && !touched[r] {
            *reg = ArrayData::zeros(reg.element_type(), 0);
        }
    }
    fits
}

fn indexed_loop(lc: &LoopCode, large: &[bool], touched: &mut [bool]) -> bool {
    indexed_code(&lc.cond, large, touched)
        && indexed_code(&lc.body, large, touched)
        && indexed_moves(&lc.writeback, large, touched)
}

fn indexed_moves(moves: &[Move], large: &[bool], touched: &mut [bool]) -> bool {
    moves.iter().all(|&m| match m {
        Move::Copy(a, b) => !large[a] && !large[b],
        Move::Swap(a, b) => {
            touched[a] = true;
            touched[b] = true;
            true
        }
        Move::Bank(..) => true,
    })
}

fn indexed_code(code: &Code, large: &[bool], touched: &mut [bool]) -> bool {
    let small = |regs: &[Reg]| regs.iter().all(|&r| !large[r]);
    code.ops.iter().all(|op| match op {
        Op::Binary { a, b, out, .. } => small(&[*a, *b, *out]),
        Op::Update { x, out, .. } => small(&[*x, *out]),
        Op::Select { p, a, b, out } => small(&[*p, *a, *b, *out]),
        Op::Function { args, out, .. } => small(args) && small(&[*out]),
        Op::Scalar { .. } | Op::ScalarSelect { .. } => true,
        // (Made after this check, of blocks it allowed.)
        Op::Window(w) => {
            for r in [&w.a, &w.b, &w.out].into_iter().filter_map(Place::reg) {
                touched[r] = true;
            }
            true
        }
        Op::Gather { src, out, .. } => {
            touched[*src] = true;
            small(&[*out])
        }
        Op::Indexed(ix) => {
            let Some((&array, rest)) = ix.args.split_first() else {
                return false;
            };
            // A large array: sliced into a small result, or updated in place.
            let indexes = match ix.kind {
                IndexKind::DynamicSlice(_) => !large[ix.out],
                _ => ix.in_place(),
            };
            touched[array] = true;
            touched[ix.out] = true;
            small(rest) && (small(&[array, ix.out]) || indexes)
        }
        Op::While(w) => indexed_moves(&w.0, large, touched) && indexed_loop(&w.1, large, touched),
        Op::Conditional(c) => c.branches.iter().all(|(branch, moves)| {
            indexed_code(branch, large, touched) && indexed_moves(moves, large, touched)
        }),
    })
}

/// The state arrays a run can borrow from the caller rather than copy
/// in: those the loop only reads, through `dynamic-slice`s of its own code
/// (JAX's `fori_loop` and `scan` reading their inputs a row at a time).
/// No operation or move writes them, so each leaves the loop as it came.
/// Marks those slices as reading the borrowed array; returns, for each
/// state value, which borrowed array it is.
fn borrow_states(lc: &mut LoopCode, locs: &[Loc]) -> Vec<Option<usize>> {
    let mut next = 0;
    let mut lent = vec![None; lc.state.len()];
    for (i, &r) in lc.state.iter().enumerate() {
        let at = Loc::Reg(r);
        let sliced = |op: &Op| match op {
            Op::Indexed(ix) => {
                matches!(ix.kind, IndexKind::DynamicSlice(_))
                    && ix.out != r
                    && ix.args.iter().position(|&a| a == r) == Some(0)
                    && ix.args.iter().filter(|&&a| a == r).count() == 1
            }
            _ => false,
        };
        let ops = lc.cond.ops.iter().chain(&lc.body.ops);
        let only_sliced = ops
            .map(|op| (touches(op, at), op))
            .all(|((reads, writes), op)| !writes && (!reads || sliced(op)));
        let moved = lc
            .writeback
            .iter()
            .any(|&m| move_touches(m, at) != (false, false));
        if locs.get(i) == Some(&at)
            && lc.pred != at
            && lc.state.iter().filter(|&&s| s == r).count() == 1
            && only_sliced
            && !moved
        {
            lent[i] = Some(next);
            for op in lc.cond.ops.iter_mut().chain(&mut lc.body.ops) {
                if let Op::Indexed(ix) = op
                    && ix.args.first() == Some(&r)
                {
                    ix.borrowed = Some(next);
                }
            }
            next += 1;
        }
    }
    lent
}

/// Moves `dynamic-slice`s and `dynamic-update-slice`s of one run of
/// elements into the element-wise arithmetic that alone reads or makes
/// their blocks, as the block of a larger array it reads or writes in
/// place (`x[i] * 2` stored into `out[i]`, a loop over rows): no copy
/// into a register or out of one, and one operation where there were
/// three. A slice moves when nothing between it and the arithmetic writes
/// its array or its starts; an update when nothing between touches its
/// array or writes its starts. Only the loop's own condition and body
/// change; returns how many operations became windowed.
fn window_ops(lc: &mut LoopCode, lens: &[usize]) -> usize {
    let LoopCode {
        cond,
        body,
        writeback,
        state,
        pred,
        ..
    } = lc;
    let mut made = window_code(body, (&*cond, writeback, state, *pred), lens);
    made += window_code(cond, (&*body, writeback, state, *pred), lens);
    made
}

/// [`window_ops`] on one of a loop's computations; `rest` is the rest of
/// the loop (the other computation, the moves, the state and the
/// predicate), where a register this one keeps to itself never appears.
fn window_code(code: &mut Code, rest: (&Code, &[Move], &[Reg], Loc), lens: &[usize]) -> usize {
    let (other, moves, state, pred) = rest;
    let elsewhere = |r: Reg| {
        let at = Loc::Reg(r);
        state.contains(&r)
            || pred == at
            || moves.iter().any(|&m| move_touches(m, at) != (false, false))
            || other.ops.iter().any(|op| touches(op, at) != (false, false))
    };
    let ops = &code.ops;
    let writers =
        |at: Loc| -> Vec<usize> { (0..ops.len()).filter(|&k| touches(&ops[k], at).1).collect() };
    let readers =
        |at: Loc| -> Vec<usize> { (0..ops.len()).filter(|&k| touches(&ops[k], at).0).collect() };
    // Whether an operation strictly between `from` and `to` writes a slot.
    let slots_kept = |slots: &[(Bank, IndexBits)], from: usize, to: usize| {
        slots
            .iter()
            .all(|&(b, _)| writers(Loc::Bank(b)).iter().all(|&k| k <= from || k >= to))
    };
    let mut gone = vec![false; ops.len()];
    let mut made = Vec::new();
    for j in 0..ops.len() {
        let Op::Binary { f, a, b, out } = ops[j] else {
            continue;
        };
        let (Some(window), n) = (f.window, lens[out]) else {
            continue;
        };
        if a == b || lens[a] != n || lens[b] != n {
            continue;
        }
        // A slice read where it lies.
        let read = |x: Reg| -> Option<(Place, usize)> {
            let [i] = writers(Loc::Reg(x))[..] else {
                return None;
            };
            let (ix, block, slots) = banked_block(&ops[i], false)?;
            let array = *ix.args.first()?;
            let array_kept =
                ix.borrowed.is_some() || writers(Loc::Reg(array)).iter().all(|&k| k <= i || k >= j);
            (i < j
                && ix.out == x
                && block.run == Some(n)
                && ix.loads.is_empty()
                && ix.store.is_none()
                && readers(Loc::Reg(x)) == [j]
                && !elsewhere(x)
                && array_kept
                && slots_kept(slots, i, j))
            .then(|| {
                let place = Place::Block {
                    array,
                    borrowed: ix.borrowed,
                    block: block.clone(),
                    slots: slots.to_vec(),
                };
                (place, i)
            })
        };
        let (pa, ia) = read(a).map_or((Place::Reg(a), None), |(p, i)| (p, Some(i)));
        let (pb, ib) = read(b).map_or((Place::Reg(b), None), |(p, i)| (p, Some(i)));
        // An update written where it goes.
        let write = || -> Option<(Place, usize)> {
            let [k] = readers(Loc::Reg(out))[..] else {
                return None;
            };
            let (ix, block, slots) = banked_block(&ops[k], true)?;
            let array = ix.out;
            let apart = |p: &Place| p.reg() != Some(array);
            let untouched = (j + 1..k).all(|m| touches(&ops[m], Loc::Reg(array)) == (false, false));
            (j < k
                && ix.in_place()
                && ix.args.get(1) == Some(&out)
                && ix.args.iter().filter(|&&r| r == out).count() == 1
                && block.run == Some(n)
                && ix.loads.is_empty()
                && ix.store.is_none()
                && ix.borrowed.is_none()
                && writers(Loc::Reg(out)) == [j]
                && !elsewhere(out)
                && apart(&pa)
                && apart(&pb)
                && untouched
                && slots_kept(slots, j, k))
            .then(|| {
                let place = Place::Block {
                    array,
                    borrowed: None,
                    block: block.clone(),
                    slots: slots.to_vec(),
                };
                (place, k)
            })
        };
        let (po, io) = write().map_or((Place::Reg(out), None), |(p, k)| (p, Some(k)));
        let moved: Vec<usize> = [ia, ib, io].into_iter().flatten().collect();
        if moved.is_empty() {
            continue;
        }
        moved.iter().for_each(|&m| gone[m] = true);
        let op = WindowOp {
            f: window,
            a: pa,
            b: pb,
            out: po,
            n,
        };
        made.push((j, op));
    }
    let count = made.len();
    for (j, op) in made {
        code.ops[j] = Op::Window(Box::new(op));
    }
    let mut keep = gone.iter().map(|&g| !g);
    code.ops.retain(|_| keep.next().unwrap_or(true));
    let mut keep = gone.iter().map(|&g| !g);
    code.origins.retain(|_| keep.next().unwrap_or(true));
    count
}

/// `op`, when it is a `dynamic-slice` (or, `update`, a
/// `dynamic-update-slice`) at banked starts: with its block and the
/// starts' slots.
fn banked_block(op: &Op, update: bool) -> Option<(&Indexed, &Block, &[(Bank, IndexBits)])> {
    let Op::Indexed(ix) = op else {
        return None;
    };
    let block = match (&ix.kind, update) {
        (IndexKind::DynamicSlice(b), false) | (IndexKind::DynamicUpdateSlice(b), true) => b,
        _ => return None,
    };
    Some((ix, block, ix.banked_starts.as_deref()?))
}

/// Rules out registers that meet a register ruled out, or an operation
/// other than the bank's.
fn exclude_loop(lc: &LoopCode, ok: &mut [bool]) {
    exclude_code(&lc.cond, ok);
    exclude_code(&lc.body, ok);
    exclude_moves(&lc.writeback, ok);
}

fn exclude_all(regs: &[Reg], ok: &mut [bool]) {
    if !regs.iter().all(|&r| ok[r]) {
        regs.iter().for_each(|&r| ok[r] = false);
    }
}

fn exclude_moves(moves: &[Move], ok: &mut [bool]) {
    for m in moves {
        if let Move::Copy(a, b) | Move::Swap(a, b) = *m {
            exclude_all(&[a, b], ok);
        }
    }
}

fn exclude_code(code: &Code, ok: &mut [bool]) {
    for op in &code.ops {
        match op {
            Op::Binary { a, b, out, .. } => exclude_all(&[*a, *b, *out], ok),
            Op::Select { p, a, b, out } => exclude_all(&[*p, *a, *b, *out], ok),
            Op::Function { args, out, .. } => {
                args.iter().for_each(|&r| ok[r] = false);
                ok[*out] = false;
            }
            Op::Gather { src: x, out, .. } | Op::Update { x, out, .. } => {
                ok[*x] = false;
                ok[*out] = false;
            }
            Op::Window(w) => {
                for r in [&w.a, &w.b, &w.out].into_iter().filter_map(Place::reg) {
                    ok[r] = false;
                }
            }
            Op::While(w) => {
                exclude_moves(&w.0, ok);
                exclude_loop(&w.1, ok);
            }
            Op::Conditional(c) => {
                for (branch, moves) in &c.branches {
                    exclude_code(branch, ok);
                    exclude_moves(moves, ok);
                }
            }
            // A banked operand or result is copied to or from its
            // register around the operation (see `bank_code`).
            Op::Scalar { .. } | Op::ScalarSelect { .. } | Op::Indexed(_) => {}
        }
    }
}

/// Rewrites a loop's operations and moves on banked registers to use the bank.
fn bank_loop(lc: &mut LoopCode, slots: &[Option<Bank>], regs: &[ArrayData]) {
    if let Loc::Reg(r) = lc.pred
        && let Some(s) = slots[r]
    {
        lc.pred = Loc::Bank(s);
    }
    bank_code(&mut lc.cond, slots, regs);
    bank_code(&mut lc.body, slots, regs);
    bank_moves(&mut lc.writeback, slots);
    write_state_directly(lc);
}

/// Whether a move reads or writes `at`.
fn move_touches(m: Move, at: Loc) -> (bool, bool) {
    match m {
        Move::Bank(a, b) => (Loc::Bank(a) == at, Loc::Bank(b) == at),
        Move::Copy(a, b) => (Loc::Reg(a) == at, Loc::Reg(b) == at),
        Move::Swap(a, b) => {
            let t = Loc::Reg(a) == at || Loc::Reg(b) == at;
            (t, t)
        }
    }
}

/// Whether `op` (with any code nested in it) reads or writes `at`.
fn touches(op: &Op, at: Loc) -> (bool, bool) {
    let or = |a: (bool, bool), b: (bool, bool)| (a.0 | b.0, a.1 | b.1);
    let code = |c: &Code| {
        c.ops
            .iter()
            .fold((false, false), |acc, op| or(acc, touches(op, at)))
    };
    let moves = |m: &[Move]| {
        m.iter()
            .fold((false, false), |acc, m| or(acc, move_touches(*m, at)))
    };
    let bank = |slots: &[Bank], out: Bank| {
        (
            slots.iter().any(|&b| Loc::Bank(b) == at),
            Loc::Bank(out) == at,
        )
    };
    let regs =
        |regs: &[Reg], out: Reg| (regs.iter().any(|&r| Loc::Reg(r) == at), Loc::Reg(out) == at);
    match op {
        Op::Scalar { a, b, out, .. } => bank(&[*a, *b], *out),
        Op::ScalarSelect { p, a, b, out } => bank(&[*p, *a, *b], *out),
        Op::Binary { a, b, out, .. } => regs(&[*a, *b], *out),
        Op::Update { x, out, .. } => regs(&[*x, *out], *out),
        Op::Select { p, a, b, out } => regs(&[*p, *a, *b], *out),
        Op::Function { args, out, .. } => regs(args, *out),
        Op::Gather { src, out, .. } => regs(&[*src], *out),
        Op::Window(w) => {
            // A block result is read around the write.
            let block_out = matches!(w.out, Place::Block { .. }) && w.out.touches(at);
            (
                w.a.touches(at) || w.b.touches(at) || block_out,
                matches!(at, Loc::Reg(_)) && w.out.touches(at),
            )
        }
        Op::Indexed(ix) => {
            let (reads, writes) = regs(&ix.args, ix.out);
            let starts = ix.banked_starts.as_deref().unwrap_or(&[]);
            (
                reads
                    || ix.loads.iter().any(|&(b, _)| Loc::Bank(b) == at)
                    || starts.iter().any(|&(b, _)| Loc::Bank(b) == at),
                writes || ix.store.map(Loc::Bank) == Some(at),
            )
        }
        Op::While(w) => {
            let lc = &w.1;
            let t = or(moves(&w.0), or(code(&lc.cond), code(&lc.body)));
            or(or(t, moves(&lc.writeback)), (lc.pred == at, false))
        }
        Op::Conditional(c) => c
            .branches
            .iter()
            .fold((c.selector == at, false), |acc, (b, m)| {
                or(acc, or(code(b), moves(m)))
            }),
    }
}

/// The operation that computes body result `r` into state `s` instead, if
/// `op` can: bank operations and element-wise arithmetic may write over an
/// operand; others only when they do not read `s`.
fn retargeted(op: &Op, s: Loc) -> Option<Op> {
    let reads_s = touches(op, s).0;
    Some(match (op, s) {
        (
            &Op::Scalar {
                f, inline, a, b, ..
            },
            Loc::Bank(out),
        ) => Op::Scalar {
            f,
            inline,
            a,
            b,
            out,
        },
        (&Op::ScalarSelect { p, a, b, .. }, Loc::Bank(out)) => Op::ScalarSelect { p, a, b, out },
        (&Op::Binary { f, a, b, .. }, Loc::Reg(out)) if !reads_s => Op::Binary { f, a, b, out },
        (&Op::Binary { f, a, b, .. }, Loc::Reg(out)) => {
            let [first, second] = f.update?;
            match (a == out, b == out) {
                (true, false) => Op::Update {
                    f: first,
                    x: b,
                    out,
                },
                (false, true) => Op::Update {
                    f: second,
                    x: a,
                    out,
                },
                _ => return None,
            }
        }
        (&Op::Select { p, a, b, .. }, Loc::Reg(out)) if !reads_s => Op::Select { p, a, b, out },
        _ => return None,
    })
}

/// Whether `op` updates state register `s` (its array operand), so that
/// it can write the result there in place.
fn updates_in_place(op: &Op, s: Loc) -> bool {
    match (op, s) {
        (Op::Indexed(ix), Loc::Reg(out)) => {
            !matches!(ix.kind, IndexKind::DynamicSlice(_))
                && ix.args.first() == Some(&out)
                && !ix.args[1..].contains(&out)
                && ix.store.is_none()
        }
        _ => false,
    }
}

/// A value the body computes once and passes on to the next state is
/// computed into the state's place directly, when nothing after it in the
/// iteration reads the old state or the computed value again and the
/// operation can write there (see `retargeted`), or updates the old state
/// (in place, see `updates_in_place`): its move goes.
fn write_state_directly(lc: &mut LoopCode) {
    let mut k = 0;
    while k < lc.writeback.len() {
        let (r, s) = match lc.writeback[k] {
            Move::Bank(r, s) => (Loc::Bank(r), Loc::Bank(s)),
            Move::Copy(r, s) | Move::Swap(r, s) => (Loc::Reg(r), Loc::Reg(s)),
        };
        let ops = &lc.body.ops;
        let writers: Vec<usize> = (0..ops.len()).filter(|&j| touches(&ops[j], r).1).collect();
        let direct = match writers[..] {
            [j] => {
                let later_use = ops[j + 1..].iter().any(|op| {
                    let (rr, _) = touches(op, r);
                    let (sr, sw) = touches(op, s);
                    rr || sr || sw
                });
                let other_writes = ops
                    .iter()
                    .enumerate()
                    .any(|(i, op)| i != j && touches(op, s).1);
                let other_moves = lc.writeback.iter().enumerate().any(|(i, &m)| {
                    let hit = |at: Loc| move_touches(m, at) != (false, false);
                    i != k && (hit(r) || hit(s))
                });
                if later_use || other_writes || other_moves {
                    None
                } else if updates_in_place(&ops[j], s) {
                    Some((j, None))
                } else {
                    retargeted(&ops[j], s).map(|op| (j, Some(op)))
                }
            }
            _ => None,
        };
        match direct {
            Some((j, Some(op))) => {
                lc.body.ops[j] = op;
                lc.writeback.remove(k);
            }
            Some((j, None)) => {
                // (`updates_in_place` found an update of register `s`.)
                if let (Op::Indexed(ix), Loc::Reg(out)) = (&mut lc.body.ops[j], s) {
                    ix.out = out;
                }
                lc.writeback.remove(k);
            }
            None => k += 1,
        }
    }
}

fn bank_moves(moves: &mut [Move], slots: &[Option<Bank>]) {
    for m in moves {
        if let Move::Copy(a, b) | Move::Swap(a, b) = *m
            && let (Some(a), Some(b)) = (slots[a], slots[b])
        {
            *m = Move::Bank(a, b);
        }
    }
}

fn bank_code(code: &mut Code, slots: &[Option<Bank>], regs: &[ArrayData]) {
    for op in &mut code.ops {
        match op {
            Op::Binary { f, a, b, out } => {
                if let (Some(a), Some(b), Some(out)) = (slots[*a], slots[*b], slots[*out]) {
                    *op = Op::Scalar {
                        f: f.scalar,
                        inline: f.inline,
                        a,
                        b,
                        out,
                    };
                }
            }
            Op::Select { p, a, b, out } => {
                if let (Some(p), Some(a), Some(b), Some(out)) =
                    (slots[*p], slots[*a], slots[*b], slots[*out])
                {
                    *op = Op::ScalarSelect { p, a, b, out };
                }
            }
            Op::Indexed(ix) => {
                // The operands before the start indices.
                let arrays = match &ix.kind {
                    IndexKind::DynamicSlice(b) => Some((1, b)),
                    IndexKind::DynamicUpdateSlice(b) => Some((2, b)),
                    IndexKind::Scatter(_) => None,
                };
                ix.banked_starts = arrays.and_then(|(n, b)| {
                    let starts = ix.args.get(n..)?;
                    (starts.len() == b.dims.len())
                        .then(|| {
                            starts
                                .iter()
                                .map(|&r| Some((slots[r]?, IndexBits::of(regs[r].element_type())?)))
                                .collect::<Option<Vec<_>>>()
                        })
                        .flatten()
                });
                let loaded = match (&ix.banked_starts, arrays) {
                    (Some(_), Some((n, _))) => n,
                    _ => ix.args.len(),
                };
                ix.loads = ix.args[..loaded]
                    .iter()
                    .filter_map(|&r| Some((slots[r]?, r)))
                    .collect();
                ix.store = slots[ix.out];
            }
            Op::While(w) => {
                bank_moves(&mut w.0, slots);
                bank_loop(&mut w.1, slots, regs);
            }
            Op::Conditional(c) => {
                if let Loc::Reg(r) = c.selector
                    && let Some(s) = slots[r]
                {
                    c.selector = Loc::Bank(s);
                }
                for (branch, moves) in &mut c.branches {
                    bank_code(branch, slots, regs);
                    bank_moves(moves, slots);
                }
            }
            _ => {}
        }
    }
}

/// Finds the counted loops (see [`Counted`]) among `lc` and the loops nested in it.
fn count_loops(module: &HloModule, lc: &mut LoopCode, slots: &[Option<Bank>]) {
    lc.counted = counted(module, lc, slots).map(|(mut c, stepped, temp)| {
        if let Some(taken) = takeable(lc, &c, stepped, temp) {
            c.taken = Some(taken);
            lc.body.ops.remove(stepped);
            lc.body.origins.remove(stepped);
            if let Some(m) = temp {
                lc.writeback.remove(m);
            }
        }
        c
    });
    let nested = |code: &mut Code| {
        for op in &mut code.ops {
            match op {
                Op::While(w) => count_loops(module, &mut w.1, slots),
                Op::Conditional(c) => c
                    .branches
                    .iter_mut()
                    .flat_map(|(b, _)| b.ops.iter_mut())
                    .for_each(|op| {
                        if let Op::While(w) = op {
                            count_loops(module, &mut w.1, slots);
                        }
                    }),
                _ => {}
            }
        }
    };
    nested(&mut lc.cond);
    nested(&mut lc.body);
}

/// The stepping operation of counted loop `c`, body operation `stepped`
/// (through writeback move `temp`), as it would compute straight into
/// the counter, if nothing else reads the counter or the temporary.
fn takeable(
    lc: &LoopCode,
    c: &Counted,
    stepped: usize,
    temp: Option<usize>,
) -> Option<(ScalarFn, Bank, Bank)> {
    let Op::Scalar { f, a, b, out, .. } = lc.body.ops[stepped] else {
        return None;
    };
    let read_elsewhere = |at: Bank| {
        let at = Loc::Bank(at);
        let mut ops = lc.body.ops.iter().enumerate();
        ops.any(|(k, op)| k != stepped && touches(op, at).0)
            || lc
                .writeback
                .iter()
                .enumerate()
                .any(|(k, &m)| Some(k) != temp && move_touches(m, at).0)
    };
    (!read_elsewhere(c.counter) && !read_elsewhere(out)).then_some((f, a, b))
}

/// Whether `lc` is a counted loop, and how: the loop, its stepping body
/// operation, and the writeback move that carries the step to the counter
/// when the operation computes into a temporary.
fn counted(
    module: &HloModule,
    lc: &LoopCode,
    slots: &[Option<Bank>],
) -> Option<(Counted, usize, Option<usize>)> {
    let instr = |(c, i): (ComputationId, InstrId)| {
        let comp = module.computations().get(c.index())?;
        let instr = comp.instruction(i);
        let operand = comp.instruction(*instr.operands.first()?);
        Some((instr, operand.shape.as_array()?.element_type()))
    };
    // The condition is one comparison, into the predicate.
    let (Loc::Bank(pred), [Op::Scalar { a, b, out, .. }]) = (lc.pred, &lc.cond.ops[..]) else {
        return None;
    };
    let (compare, ty) = instr(*lc.cond.origins.first()?)?;
    if *out != pred || compare.opcode != Opcode::Compare {
        return None;
    }
    let written = |at: Bank| {
        let at = Loc::Bank(at);
        lc.cond
            .ops
            .iter()
            .chain(&lc.body.ops)
            .any(|op| touches(op, at).1)
            || lc.writeback.iter().any(|&m| move_touches(m, at).1)
    };
    let state = |at: Bank| lc.state.iter().any(|&r| slots[r] == Some(at));
    // One side is a state value the iteration writes, the other a bound it never does.
    let (counter, bound, dir) = match (written(*a), written(*b)) {
        (true, false) => (*a, *b, compare.attrs.comparison_direction?),
        (false, true) => (*b, *a, flipped(compare.attrs.comparison_direction?)),
        _ => return None,
    };
    if !state(counter) || bound == pred {
        return None;
    }
    // The counter's one writer: a step computed into it, or into a
    // temporary that the writeback then moves there.
    let writers = |at: Bank| {
        let ops = lc.body.ops.iter().enumerate();
        ops.filter(|(_, op)| touches(op, Loc::Bank(at)).1)
            .map(|(k, _)| k)
            .collect::<Vec<_>>()
    };
    let moves_into = |at: Bank| {
        lc.writeback
            .iter()
            .filter(|&&m| move_touches(m, Loc::Bank(at)).1)
            .copied()
            .collect::<Vec<_>>()
    };
    let (stepped, temp) = match (&writers(counter)[..], &moves_into(counter)[..]) {
        (&[k], []) => (k, None),
        ([], &[Move::Bank(t, c)]) if c == counter && moves_into(t).is_empty() => {
            let m = lc
                .writeback
                .iter()
                .position(|&m| matches!(m, Move::Bank(x, y) if (x, y) == (t, c)))?;
            match writers(t)[..] {
                [k] => (k, Some(m)),
                _ => return None,
            }
        }
        _ => return None,
    };
    let Op::Scalar { a: x, b: y, .. } = lc.body.ops[stepped] else {
        return None;
    };
    let (step_instr, step_ty) = instr(*lc.body.origins.get(stepped)?)?;
    let (step, down) = match step_instr.opcode {
        Opcode::Add if x == counter => (y, false),
        Opcode::Add if y == counter => (x, false),
        Opcode::Subtract if x == counter => (y, true),
        _ => return None,
    };
    if step == counter || step == pred || written(step) || step_ty != ty {
        return None;
    }
    let c = Counted {
        counter,
        bound,
        step,
        ty,
        dir,
        down,
        taken: None,
    };
    Some((c, stepped, temp))
}

/// `dir` with its operands exchanged: `a < b` is `b > a`.
fn flipped(dir: ComparisonDirection) -> ComparisonDirection {
    match dir {
        ComparisonDirection::Lt => ComparisonDirection::Gt,
        ComparisonDirection::Gt => ComparisonDirection::Lt,
        ComparisonDirection::Le => ComparisonDirection::Ge,
        ComparisonDirection::Ge => ComparisonDirection::Le,
        d => d,
    }
}

struct Compiler {
    regs: Vec<ArrayData>,
    shapes: Vec<ArrayShape>,
    /// Registers holding a value known when compiling (a constant, or a
    /// broadcast, transpose, slice or reverse of one), which no operation
    /// writes: state registers, the only ones updated in place or swapped
    /// with a result, are always fresh ones.
    fixed: Vec<bool>,
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
        self.new_reg_up_to(shape, MAX_ELEMENTS)
    }

    /// A register for a state array, or an update's result, which may be
    /// large (see [`LARGE_ELEMENTS`] and [`only_indexed`]).
    fn new_large_reg(&mut self, shape: &ArrayShape) -> Option<Reg> {
        self.new_reg_up_to(shape, LARGE_ELEMENTS)
    }

    fn new_reg_up_to(&mut self, shape: &ArrayShape, most: usize) -> Option<Reg> {
        let n = shape.element_count().ok()?;
        if n > most {
            return None;
        }
        self.regs.push(ArrayData::zeros(shape.element_type(), n));
        self.shapes.push(shape.clone());
        self.fixed.push(false);
        Some(self.regs.len() - 1)
    }

    fn constant(&mut self, shape: &ArrayShape, data: ArrayData) -> Option<Reg> {
        let r = self.new_reg(shape)?;
        if data.len() != self.regs[r].len() || data.element_type() != shape.element_type() {
            return None;
        }
        self.regs[r] = data;
        self.fixed[r] = true;
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
        let state = shapes
            .iter()
            .map(|s| self.new_large_reg(s))
            .collect::<Option<Vec<Reg>>>()?;
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
            pred: Loc::Reg(pred),
            body,
            writeback: first,
            counted: None,
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
                        selector: Loc::Reg(*selector),
                        pred: self.shapes[*selector].element_type() == PrimitiveType::Pred,
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
                    let r = self.instruction(module, comp, instr, shape, &regs, &mut code.ops)?;
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
        module: &HloModule,
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
            Opcode::DynamicSlice | Opcode::DynamicUpdateSlice | Opcode::Scatter => {
                let array = operand(0)?;
                let dims = array.dims_usize();
                let kind = match instr.opcode {
                    Opcode::DynamicSlice => {
                        IndexKind::DynamicSlice(Block::new(dims, shape.dims_usize()))
                    }
                    Opcode::DynamicUpdateSlice => {
                        IndexKind::DynamicUpdateSlice(Block::new(dims, operand(1)?.dims_usize()))
                    }
                    // One operand, one indices array, one updates array.
                    _ if regs.len() == 3 => IndexKind::Scatter(plan_scatter(module, comp, instr)?),
                    _ => return None,
                };
                let keeps_shape = !matches!(kind, IndexKind::DynamicSlice(_));
                if array.element_type() != ty
                    || (keeps_shape && array.dims() != shape.dims())
                    || regs.len() > MAX_RANK + 2
                {
                    return None;
                }
                let out = if keeps_shape {
                    self.new_large_reg(shape)?
                } else {
                    self.new_reg(shape)?
                };
                ops.push(Op::Indexed(Box::new(Indexed {
                    kind,
                    args: regs.to_vec(),
                    out,
                    loads: Vec::new(),
                    store: None,
                    banked_starts: None,
                    borrowed: None,
                })));
                Some(out)
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
                if index
                    .iter()
                    .any(|&i| i as usize >= self.regs[regs[0]].len())
                {
                    return None;
                }
                if self.fixed[regs[0]] {
                    // Of a constant (a broadcast of a scalar, most often):
                    // gathered once here instead of every iteration.
                    let mut data = ArrayData::zeros(ty, index.len());
                    return gather(&self.regs[regs[0]], &index, &mut data)
                        .then(|| self.constant(shape, data))
                        .flatten();
                }
                let out = self.new_reg(shape)?;
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
    /// How the loop counts its iterations, for program listings: empty,
    /// or that the trip count is known on entry and whether the counter is
    /// then stepped once at the end.
    /// How the loop runs, for the plan: whether it is counted, and the
    /// arrays it borrows and the operations it windows.
    pub(crate) fn summary(&self) -> String {
        let mut s = match self.code.counted {
            None => "",
            Some(Counted { taken: None, .. }) => ", counted",
            Some(Counted { taken: Some(_), .. }) => ", counted, counter set at the end",
        }
        .to_string();
        let lent = self.lent.iter().flatten().count();
        if lent > 0 {
            s += &format!(", {lent} borrowed");
        }
        if self.windowed > 0 {
            s += &format!(", {} windowed", self.windowed);
        }
        s
    }

    pub(crate) fn run<'a>(
        &self,
        state: Value<'a>,
        limit: Option<u64>,
    ) -> Result<Value<'a>, LoopError> {
        let mut frame = self
            .spare
            .lock()
            .ok()
            .and_then(|mut s| s.pop())
            .unwrap_or_else(|| self.template.clone());
        let result = self.run_in(&mut frame, state, limit);
        if let Ok(mut spare) = self.spare.lock() {
            spare.push(frame);
        }
        result
    }

    fn run_in<'a>(
        &self,
        frame: &mut Frame,
        state: Value<'a>,
        limit: Option<u64>,
    ) -> Result<Value<'a>, LoopError> {
        let leaves: Vec<Value<'a>> = match state {
            Value::Tuple(t) if self.tuple => unshare(t),
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
        // Borrowed parts stay where they are, in `kept`.
        let mut kept: Vec<Value<'a>> = Vec::new();
        for (i, (mut leaf, shape)) in leaves.into_iter().zip(&self.state).enumerate() {
            let fits = leaf.array().is_some_and(|a| {
                a.dims() == shape.dims() && a.element_type() == shape.element_type()
            });
            if fits && self.lent[i].is_some() {
                kept.push(leaf);
                continue;
            }
            let loaded = fits
                && match self.state_locs[i] {
                    // An array no one else holds becomes the register: a
                    // large state is not copied in. Others are copied, into
                    // the register's own buffer when it has one of that size
                    // (a state moved out at the end of the last run leaves
                    // it empty).
                    Loc::Reg(r) => match leaf.take_unshared() {
                        Some(a) => {
                            frame.regs[r] = a.into_data();
                            true
                        }
                        None => leaf.array().is_some_and(|a| {
                            let reg = &mut frame.regs[r];
                            if reg.len() == a.data().len() {
                                copy_into(reg, a.data())
                            } else {
                                *reg = a.data().clone();
                                true
                            }
                        }),
                    },
                    Loc::Bank(b) => leaf
                        .array()
                        .and_then(|a| typed::bits_of(a.data()))
                        .map(|v| frame.bank[b] = v)
                        .is_some(),
                };
            if !loaded {
                return Err(LoopError::State(format!(
                    "part {i} of the loop state is not {shape}"
                )));
            }
        }
        let lent: Vec<&ArrayData> = kept
            .iter()
            .filter_map(|v| v.array().map(|a| a.data()))
            .collect();
        let mut cx = Context {
            limit,
            lent: &lent,
            elementwise: ElementwiseScratch::default(),
            starts: Vec::new(),
        };
        run_loop(&self.code, frame, &mut cx)?;
        drop(lent);
        let mut kept = kept.into_iter();
        let out: Vec<Value<'a>> = self
            .state
            .iter()
            .zip(&self.code.state)
            .zip(&self.state_locs)
            .enumerate()
            .map(|(j, ((shape, &r), loc))| {
                if self.lent[j].is_some() {
                    // Unchanged: what came in goes out.
                    return kept
                        .next()
                        .ok_or_else(|| LoopError::State("a borrowed part missing".into()));
                }
                // The final state leaves by move, unless a later part reads
                // the same register or the register stands for a banked
                // scalar (loading refills only the bank, and the loop's
                // indexing writes banked values into their registers).
                let banked = matches!(loc, Loc::Bank(_));
                let mut data = if banked || self.code.state[j + 1..].contains(&r) {
                    frame.regs[r].clone()
                } else {
                    let empty = ArrayData::zeros(frame.regs[r].element_type(), 0);
                    std::mem::replace(&mut frame.regs[r], empty)
                };
                if let Loc::Bank(b) = *loc
                    && !typed::set_bits(&mut data, frame.bank[b])
                {
                    return Err(LoopError::State("a scalar of an unexpected type".into()));
                }
                oxla_hlo::ArrayLiteral::new(shape.clone(), data)
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

/// The value at `loc`, a pred or an s32, as an integer.
fn read_loc(frame: &Frame, loc: Loc) -> Option<i128> {
    match loc {
        // A pred's bits are 0 or 1, an s32's its two's complement.
        Loc::Bank(b) => frame.bank.get(b).map(|&v| i128::from(v as u32 as i32)),
        Loc::Reg(r) => match frame.regs.get(r)? {
            ArrayData::Pred(p) => p.first().map(|&p| i128::from(p)),
            ArrayData::S32(i) => i.first().map(|&i| i128::from(i)),
            _ => None,
        },
    }
}

#[inline]
fn run_moves(frame: &mut Frame, moves: &[Move]) -> Result<(), LoopError> {
    for &m in moves {
        if !pass_on(frame, m) {
            return Err(moved_type());
        }
    }
    Ok(())
}

#[cold]
fn moved_type() -> LoopError {
    LoopError::State("a result changed type".into())
}

fn run_loop(code: &LoopCode, frame: &mut Frame, cx: &mut Context<'_>) -> Result<(), LoopError> {
    if let Some(c) = code.counted
        && let Some(trips) = c.trips(&frame.bank)
        && cx.limit.is_none_or(|l| trips <= l)
    {
        // The condition would only count: run the body that many times.
        // (Its one result, the predicate, is read by nothing else.)
        let last = c.after(&frame.bank, trips);
        let mut done = 0;
        if let Some(at) = lone_window(code) {
            let stopped;
            (done, stopped) = window_trips(&code.body, at, &code.writeback, frame, cx.lent, trips);
            if stopped {
                // That iteration's scalars before the window ran; the rest
                // of it the general way.
                run_other(&code.body, at, frame, cx)?;
                run_code_from(&code.body, at + 1, frame, cx)?;
                run_moves(frame, &code.writeback)?;
                done += 1;
            }
        }
        for _ in done..trips {
            run_code(&code.body, frame, cx)?;
            run_moves(frame, &code.writeback)?;
        }
        if c.taken.is_some() {
            frame.bank[c.counter] = last.ok_or_else(moved_type)?;
        }
        return Ok(());
    }
    let taken = code.counted.and_then(|c| Some((c.taken?, c.counter)));
    let mut iterations = 0u64;
    loop {
        run_code(&code.cond, frame, cx)?;
        if read_loc(frame, code.pred) != Some(1) {
            return Ok(());
        }
        if let Some(l) = cx.limit
            && iterations >= l
        {
            return Err(LoopError::Limit {
                computation: code.origin.0,
                instr: code.origin.1,
                limit: l,
            });
        }
        iterations += 1;
        run_code(&code.body, frame, cx)?;
        if let Some(((f, a, b), counter)) = taken {
            let bank = &mut frame.bank;
            bank[counter] = f(bank[a], bank[b]);
        }
        run_moves(frame, &code.writeback)?;
    }
}

/// The one windowed operation of a body whose other operations all work
/// on the bank and whose results all go back through it: run by
/// [`window_trips`].
fn lone_window(code: &LoopCode) -> Option<usize> {
    let mut window = None;
    for (k, op) in code.body.ops.iter().enumerate() {
        match op {
            Op::Window(_) if window.is_none() => window = Some(k),
            Op::Scalar { .. } | Op::ScalarSelect { .. } => {}
            _ => return None,
        }
    }
    code.writeback
        .iter()
        .all(|m| matches!(m, Move::Bank(..)))
        .then_some(window)
        .flatten()
}

/// Up to `trips` iterations of a body whose operation `at` is its one
/// windowed operation and the rest scalars in the bank (see
/// [`lone_window`]), the window's arrays looked up once rather than each
/// time: nothing in such a loop moves a register. JAX's `fori_loop` that
/// writes `f(x[i])` into row `i` of its result took 20 us for 1000 rows of
/// f32[1000, 64] the general way, XLA 16.4 (about 13 of them to call it).
/// Returns the iterations completed and whether the next one stopped at
/// the window (its earlier scalars run), which then takes the general way.
fn window_trips(
    body: &Code,
    at: usize,
    writeback: &[Move],
    frame: &mut Frame,
    lent: &[&ArrayData],
    trips: u64,
) -> (u64, bool) {
    let Some(Op::Window(w)) = body.ops.get(at) else {
        return (0, false);
    };
    let (before, after) = (&body.ops[..at], &body.ops[at + 1..]);
    let Frame { regs, bank } = frame;
    let Some(out) = w.out.reg() else {
        return (0, false);
    };
    let Some((lo, o, hi)) = around(regs, out) else {
        return (0, false);
    };
    let (Some(a), Some(b)) = (w.a.array(lo, hi, lent), w.b.array(lo, hi, lent)) else {
        return (0, false);
    };
    for t in 0..trips {
        for op in before {
            scalar_op(op, bank);
        }
        let ran = match (w.a.offset(bank), w.b.offset(bank), w.out.offset(bank)) {
            (Some(ao), Some(bo), Some(oo)) => (w.f)(a, ao, b, bo, o, oo, w.n),
            _ => false,
        };
        if !ran {
            return (t, true);
        }
        for op in after {
            scalar_op(op, bank);
        }
        for m in writeback {
            if let Move::Bank(x, y) = *m {
                bank[y] = bank[x];
            }
        }
    }
    (trips, false)
}

/// Runs `op` if it is a scalar operation in the bank; whether it was.
#[inline(always)]
fn scalar_op(op: &Op, bank: &mut [u64]) -> bool {
    match *op {
        Op::Scalar {
            f,
            inline,
            a,
            b,
            out,
        } => {
            let (x, y) = (bank[a], bank[b]);
            bank[out] = match inline {
                Some(op) => op.apply(x, y),
                None => f(x, y),
            };
            true
        }
        Op::ScalarSelect { p, a, b, out } => {
            bank[out] = if bank[p] != 0 { bank[a] } else { bank[b] };
            true
        }
        _ => false,
    }
}

#[inline(always)]
fn run_code(code: &Code, frame: &mut Frame, cx: &mut Context<'_>) -> Result<(), LoopError> {
    run_code_from(code, 0, frame, cx)
}

/// [`run_code`] from operation `from` on.
#[inline(always)]
fn run_code_from(
    code: &Code,
    from: usize,
    frame: &mut Frame,
    cx: &mut Context<'_>,
) -> Result<(), LoopError> {
    for (k, op) in code.ops.iter().enumerate().skip(from) {
        let done = match *op {
            Op::Scalar { .. } | Op::ScalarSelect { .. } => scalar_op(op, &mut frame.bank),
            Op::Binary { f, a, b, out } => match around(&mut frame.regs, out) {
                Some((lo, o, hi)) => match (beside(lo, hi, a), beside(lo, hi, b)) {
                    (Some(a), Some(b)) => (f.array)(a, b, o),
                    _ => false,
                },
                None => false,
            },
            Op::Update { f, x, out } => match around(&mut frame.regs, out) {
                Some((lo, o, hi)) => beside(lo, hi, x).is_some_and(|x| f(o, x)),
                None => false,
            },
            Op::Window(ref w) => windowed(w, frame, cx.lent).is_some_and(|done| done),
            _ => false,
        };
        if !done {
            run_other(code, k, frame, cx)?;
        }
    }
    Ok(())
}

/// Runs a windowed operation; `None` if a register is missing.
#[inline(always)]
fn windowed(w: &WindowOp, frame: &mut Frame, lent: &[&ArrayData]) -> Option<bool> {
    let bank = &frame.bank;
    let (ao, bo, oo) = (w.a.offset(bank)?, w.b.offset(bank)?, w.out.offset(bank)?);
    let (lo, o, hi) = around(&mut frame.regs, w.out.reg()?)?;
    let (a, b) = (w.a.array(lo, hi, lent)?, w.b.array(lo, hi, lent)?);
    Some((w.f)(a, ao, b, bo, o, oo, w.n))
}

/// Register `out`, and the registers before and after it.
#[inline(always)]
fn around(
    regs: &mut [ArrayData],
    out: Reg,
) -> Option<(&[ArrayData], &mut ArrayData, &[ArrayData])> {
    let (lo, rest) = regs.split_at_mut(out);
    let (o, hi) = rest.split_first_mut()?;
    Some((lo, o, hi))
}

/// Register `i` of those around another (see `around`), `None` if it is that one.
#[inline(always)]
fn beside<'r>(lo: &'r [ArrayData], hi: &'r [ArrayData], i: Reg) -> Option<&'r ArrayData> {
    match lo.get(i) {
        Some(r) => Some(r),
        None => hi.get(i.checked_sub(lo.len() + 1)?),
    }
}

/// Runs operation `k` of `code`, any but the few `run_code` runs itself.
#[inline(never)]
fn run_other(
    code: &Code,
    k: usize,
    frame: &mut Frame,
    cx: &mut Context<'_>,
) -> Result<(), LoopError> {
    let op = &code.ops[k];
    let result = match op {
        Op::While(w) => {
            let (init, lc) = &**w;
            run_moves(frame, init)?;
            return run_loop(lc, frame, cx);
        }
        Op::Conditional(c) => {
            let n = c.branches.len();
            // A pred picks branch 0 when true, branch 1 when false; an s32
            // index out of range (negative too) picks the last.
            let branch = match read_loc(frame, c.selector) {
                Some(v) if c.pred => usize::from(v != 1),
                Some(v) => usize::try_from(v).ok().filter(|&i| i < n).unwrap_or(n - 1),
                None => n,
            };
            match c.branches.get(branch) {
                Some((branch, moves)) => {
                    run_code(branch, frame, cx)?;
                    return run_moves(frame, moves);
                }
                None => Err("the branch selector must be a pred or s32 scalar".to_string()),
            }
        }
        Op::Indexed(ix) => indexed(ix, frame, cx.lent, &mut cx.starts),
        _ => match op.out().and_then(|out| around(&mut frame.regs, out)) {
            Some((lo, o, hi)) => apply(op, (lo, hi), o, &mut cx.elementwise),
            None => Ok(false),
        },
    };
    let message = match result {
        Ok(true) => return Ok(()),
        Ok(false) => "operands of unexpected types".to_string(),
        Err(m) => m,
    };
    let (computation, instr) = code.origins[k];
    Err(LoopError::Op {
        computation,
        instr,
        message,
    })
}

/// Runs an indexing operation, with its banked operands and result moved
/// through their registers, and its array operand borrowed from the
/// caller's (`lent`) if the loop borrowed it.
fn indexed(
    ix: &Indexed,
    frame: &mut Frame,
    lent: &[&ArrayData],
    starts: &mut Vec<usize>,
) -> Result<bool, String> {
    for &(b, r) in &ix.loads {
        if !typed::set_bits(&mut frame.regs[r], frame.bank[b]) {
            return Ok(false);
        }
    }
    let Some((lo, o, hi)) = around(&mut frame.regs, ix.out) else {
        return Ok(false);
    };
    let get = |i: Reg| beside(lo, hi, i).ok_or("an operand that is also the result");
    let mut args: [&ArrayData; 3] = [&EMPTY; 3];
    // (In place, the array operand is the result.)
    let in_place = ix.in_place();
    let first = usize::from(in_place);
    for (slot, &a) in args.iter_mut().zip(&ix.args).skip(first) {
        *slot = get(a)?;
    }
    if let Some(k) = ix.borrowed {
        args[0] = lent.get(k).ok_or("a borrowed array missing")?;
    }
    let done = match (&ix.kind, &ix.banked_starts) {
        (IndexKind::DynamicSlice(b), Some(slots)) => {
            let mut at = [0; MAX_RANK];
            match (b.place(slots, &frame.bank, &mut at), b.run) {
                (Some(offset), Some(n)) => copy_span(o, 0, args[0], offset, n),
                (Some(_), None) => slice_into(args[0], &b.strides, &b.sizes, &at[..slots.len()], o),
                (None, _) => false,
            }
        }
        (IndexKind::DynamicUpdateSlice(b), Some(slots)) => {
            let mut at = [0; MAX_RANK];
            (in_place || copy_into(o, args[0]))
                && match (b.place(slots, &frame.bank, &mut at), b.run) {
                    (Some(offset), Some(n)) => copy_span(o, offset, args[1], 0, n),
                    (Some(_), None) => {
                        update_into(o, &b.strides, args[1], &b.sizes, &at[..slots.len()])
                    }
                    (None, _) => false,
                }
        }
        (IndexKind::DynamicSlice(b), None) => {
            starts_of(ix.args.get(1..).unwrap_or(&[]), lo, hi, b, starts)?;
            slice_into(args[0], &b.strides, &b.sizes, starts, o)
        }
        (IndexKind::DynamicUpdateSlice(b), None) => {
            starts_of(ix.args.get(2..).unwrap_or(&[]), lo, hi, b, starts)?;
            (in_place || copy_into(o, args[0]))
                && update_into(o, &b.strides, args[1], &b.sizes, starts)
        }
        (IndexKind::Scatter(k), _) => {
            (in_place || copy_into(o, args[0])) && {
                k.scatter_into(o, args[1], args[2])?;
                true
            }
        }
    };
    if done && let Some(b) = ix.store {
        match typed::bits_of(o) {
            Some(v) => frame.bank[b] = v,
            None => return Ok(false),
        }
    }
    Ok(done)
}

/// Reads the start-index registers `regs` (around the result) of block
/// `b` into `out`, clamped.
fn starts_of(
    regs: &[Reg],
    lo: &[ArrayData],
    hi: &[ArrayData],
    b: &Block,
    out: &mut Vec<usize>,
) -> Result<(), String> {
    let mut values: [&ArrayData; MAX_RANK] = [&EMPTY; MAX_RANK];
    if regs.len() > MAX_RANK {
        return Err(format!("{} start indices", regs.len()));
    }
    for (slot, &r) in values.iter_mut().zip(regs) {
        *slot = beside(lo, hi, r).ok_or("a start index that is also the result")?;
    }
    clamped_starts(&values[..regs.len()], &b.dims, &b.sizes, out)
}

/// Runs one operation into its result `o`, the registers before it `r.0`
/// and after it `r.1`.
fn apply(
    op: &Op,
    r: (&[ArrayData], &[ArrayData]),
    o: &mut ArrayData,
    scratch: &mut ElementwiseScratch,
) -> Result<bool, String> {
    let get = |i: Reg| beside(r.0, r.1, i).ok_or("an operand that is also the result");
    Ok(match op {
        Op::Binary { f, a, b, .. } => (f.array)(get(*a)?, get(*b)?, o),
        Op::Update { f, x, .. } => f(o, get(*x)?),
        Op::Select { p, a, b, .. } => typed::select(get(*p)?, get(*a)?, get(*b)?, o),
        Op::Gather { src, index, .. } => gather(get(*src)?, index, o),
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
        _ => false,
    })
}

fn pass_on(frame: &mut Frame, m: Move) -> bool {
    let (a, b) = match m {
        Move::Bank(a, b) => {
            let v = frame.bank[a];
            frame.bank[b] = v;
            return true;
        }
        Move::Copy(a, b) | Move::Swap(a, b) => (a, b),
    };
    let regs = &mut frame.regs;
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
        _ => copy_into(x, y),
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
            // A broadcast of a scalar (every index is 0).
            Some(&[v]) if o.len() == index.len() => {
                o.fill(v);
                true
            }
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
