//! Reductions the float reduce kernels do not take, folded in the
//! interpreter's order: each output starts from the init values and takes
//! the reduced elements one by one, row-major, the accumulator as the
//! reducer's first parameters. Two kinds:
//!
//! - **Integer and predicate reductions** by add, multiply, maximum,
//!   minimum, and, or, xor (`jnp.sum` of integers, `jnp.any`): a typed fold
//!   (see `typed::fold_fn`).
//! - **Selections** (`jnp.argmax`, `jnp.argmin`): a reduce of a value array
//!   and an index array whose reducer only compares the two values with each
//!   other, the two indices with each other, combines those predicates, and
//!   selects the accumulator's pair or the element's. Its choice depends only
//!   on how the values compare (less, equal, greater, or which is NaN) and
//!   how the indices compare, so evaluating the reducer once per case at
//!   compile time gives a table that is exact for every input.

use oxla_hlo::ir::ComparisonDirection;
use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, HloComputation, HloInstruction, HloModule, NativeType,
    Opcode, PrimitiveType, Shape,
};
use rayon::prelude::*;

use super::Kernel;
use super::fused::PARALLEL_MIN;
use super::typed::{self, FoldFn, Lanes};
use crate::buffer::Pool;
use crate::value::Value;

/// Where the reduced elements of each output sit in the operand.
#[derive(Clone, Debug)]
pub(crate) struct Geometry {
    /// Kept dimensions, outermost first: (size, operand stride).
    kept: Vec<(usize, usize)>,
    /// Offsets of the reduced elements before the last reduced dimension,
    /// row-major.
    outer: Vec<usize>,
    /// The last reduced dimension: length and stride (0 and 1 if none).
    inner: usize,
    inner_stride: usize,
    pub out_count: usize,
    /// The operand's element count.
    pub len: usize,
}

/// More outer offsets than this and the reduction is left to the interpreter.
const MAX_OUTER: usize = 1 << 22;

impl Geometry {
    fn new(dims: &[i64], reduced: &[i64]) -> Option<Geometry> {
        let dims: Vec<usize> = dims
            .iter()
            .map(|&d| usize::try_from(d).ok())
            .collect::<Option<_>>()?;
        let mut red: Vec<usize> = reduced
            .iter()
            .map(|&d| usize::try_from(d).ok())
            .collect::<Option<_>>()?;
        red.sort_unstable();
        red.dedup();
        if red.len() != reduced.len() || red.iter().any(|&d| d >= dims.len()) {
            return None;
        }
        let mut strides = vec![1usize; dims.len()];
        for d in (0..dims.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1].checked_mul(dims[d + 1])?;
        }
        let kept: Vec<(usize, usize)> = (0..dims.len())
            .filter(|d| !red.contains(d))
            .map(|d| (dims[d], strides[d]))
            .collect();
        let out_count = kept
            .iter()
            .try_fold(1usize, |n, &(s, _)| n.checked_mul(s))?;
        let len = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d))?;
        // Empty operands (whose other dimensions may be huge) stay with the
        // interpreter, which gives their init values at once.
        if len == 0 {
            return None;
        }
        let (inner, inner_stride) = match red.last() {
            Some(&d) => (dims[d], strides[d]),
            None => (1, 1),
        };
        // Row-major: the first reduced dimension varies slowest.
        let mut outer = vec![0usize];
        for &d in red.iter().rev().skip(1) {
            if outer.len().checked_mul(dims[d])? > MAX_OUTER {
                return None;
            }
            let step = strides[d];
            outer = (0..dims[d])
                .flat_map(|i| outer.iter().map(move |&o| i * step + o))
                .collect();
        }
        Some(Geometry {
            kept,
            outer,
            inner,
            inner_stride,
            out_count,
            len,
        })
    }

    fn base(&self, mut o: usize) -> usize {
        let mut base = 0;
        for &(size, stride) in self.kept.iter().rev() {
            base += (o % size) * stride;
            o /= size;
        }
        base
    }

    /// Where the runs of reduced elements of the output at operand offset
    /// `base` start, in order; each run is [`Geometry::inner`] long.
    pub fn runs(&self, base: usize) -> impl Iterator<Item = usize> + '_ {
        self.outer.iter().map(move |&o| base + o)
    }

    /// The length and stride of each run.
    pub fn inner(&self) -> (usize, usize) {
        (self.inner, self.inner_stride)
    }

    /// Outputs per task: all of them, or a share of them per thread when
    /// the work (elements read) is large.
    fn chunks(&self, work: usize) -> usize {
        if work >= PARALLEL_MIN && self.out_count > 1 {
            self.out_count
                .div_ceil(rayon::current_num_threads() * 4)
                .max(1)
        } else {
            self.out_count.max(1)
        }
    }

    /// `out[o] = f(base of o)` for every output `o`.
    pub fn each<T: Send>(&self, out: &mut [T], f: impl Fn(usize) -> T + Sync) {
        let work = self.out_count.saturating_mul(self.outer.len() * self.inner);
        let chunk = self.chunks(work);
        out.par_chunks_mut(chunk).enumerate().for_each(|(c, part)| {
            for (k, o) in part.iter_mut().enumerate() {
                *o = f(self.base(c * chunk + k));
            }
        });
    }

    /// Like [`Geometry::each`] with two outputs.
    fn each2<A: Send, B: Send>(
        &self,
        a: &mut [A],
        b: &mut [B],
        f: impl Fn(usize) -> (A, B) + Sync,
    ) {
        let work = self.out_count.saturating_mul(self.outer.len() * self.inner);
        let chunk = self.chunks(work);
        a.par_chunks_mut(chunk)
            .zip(b.par_chunks_mut(chunk))
            .enumerate()
            .for_each(|(c, (pa, pb))| {
                for (k, (x, y)) in pa.iter_mut().zip(pb.iter_mut()).enumerate() {
                    (*x, *y) = f(self.base(c * chunk + k));
                }
            });
    }
}

/// A fold of one integer or predicate array.
pub(crate) struct FoldKernel {
    geometry: Geometry,
    fold: FoldFn,
    shape: ArrayShape,
}

/// A selection reduce (see the module comment).
pub(crate) struct SelectKernel {
    geometry: Geometry,
    values: PrimitiveType,
    indices: PrimitiveType,
    /// `keep[value case * 3 + index case]`: whether the accumulated value
    /// (`.0`) and index (`.1`) stay. They can differ: JAX's argmax keeps
    /// the element's value but the accumulated index when the values tie.
    keep: [(bool, bool); 18],
    shape: Shape,
}

pub(crate) enum Plan {
    Fold(FoldKernel),
    Select(SelectKernel),
}

fn operand_shape<'c>(
    comp: &'c HloComputation,
    instr: &HloInstruction,
    k: usize,
) -> Option<&'c ArrayShape> {
    comp.instruction(*instr.operands.get(k)?).shape.as_array()
}

pub(crate) fn plan(
    module: &HloModule,
    comp: &HloComputation,
    instr: &HloInstruction,
) -> Option<Plan> {
    let reducer = module.computations().get(instr.called.to_apply?.index())?;
    let x = operand_shape(comp, instr, 0)?;
    let geometry = Geometry::new(x.dims(), instr.attrs.dimensions.as_ref()?)?;
    match instr.operands.len() {
        2 => {
            let shape = instr.shape.as_array()?.clone();
            let root = reducer.root_instruction();
            let params: Vec<Option<usize>> = root
                .operands
                .iter()
                .map(|o| {
                    let p = reducer.instruction(*o);
                    (p.opcode == Opcode::Parameter).then_some(p.attrs.parameter_number?)
                })
                .collect();
            // The accumulator's parameter first, or second (the operation commutes).
            let ok = reducer.num_parameters() == 2
                && (params == [Some(0), Some(1)] || params == [Some(1), Some(0)]);
            let fold = typed::fold_fn(root.opcode, x.element_type()).filter(|_| ok)?;
            (shape.element_type() == x.element_type()).then_some(())?;
            Some(Plan::Fold(FoldKernel {
                geometry,
                fold,
                shape,
            }))
        }
        4 => {
            let j = operand_shape(comp, instr, 1)?;
            if j.dims() != x.dims() {
                return None;
            }
            let keep = selection_table(reducer, x.element_type(), j.element_type())?;
            Some(Plan::Select(SelectKernel {
                geometry,
                values: x.element_type(),
                indices: j.element_type(),
                keep,
                shape: instr.shape.clone(),
            }))
        }
        _ => None,
    }
}

/// Which parameter (0 to 3) a value of the reducer is, or what a predicate
/// is, for one case of the comparisons.
#[derive(Clone, Copy, PartialEq)]
enum Eval {
    Param(usize),
    Pred(bool),
}

/// The reducer's choice per case, if it is a selection: `keep[v * 3 + i]`
/// where `v` is how the accumulated value compares with the element's
/// (less, equal, greater, only the accumulator NaN, only the element NaN,
/// both NaN) and `i` how the indices compare (less, equal, greater).
fn selection_table(
    r: &HloComputation,
    vt: PrimitiveType,
    it: PrimitiveType,
) -> Option<[(bool, bool); 18]> {
    let lanes = |t: PrimitiveType| {
        matches!(
            t,
            PrimitiveType::F32
                | PrimitiveType::F64
                | PrimitiveType::S32
                | PrimitiveType::S64
                | PrimitiveType::U8
                | PrimitiveType::U32
                | PrimitiveType::U64
        )
    };
    if !lanes(vt) || !lanes(it) || it.is_float() || r.num_parameters() != 4 {
        return None;
    }
    let types = [vt, it, vt, it];
    for (p, &t) in types.iter().enumerate() {
        let shape = r.parameter_shape(p)?.as_array()?;
        if shape.element_type() != t || !shape.dims().is_empty() {
            return None;
        }
    }
    let value_cases: &[(f64, f64)] = &[
        (1.0, 2.0),
        (1.0, 1.0),
        (2.0, 1.0),
        (f64::NAN, 1.0),
        (1.0, f64::NAN),
        (f64::NAN, f64::NAN),
    ];
    let index_cases: &[(f64, f64)] = &[(1.0, 2.0), (1.0, 1.0), (2.0, 1.0)];
    let mut keep = [(false, false); 18];
    for (v, &(a, c)) in value_cases.iter().enumerate() {
        // Integers are never NaN: those cases never happen.
        if v >= 3 && !vt.is_float() {
            continue;
        }
        for (i, &(p, q)) in index_cases.iter().enumerate() {
            let scalars = [a, p, c, q];
            let evals = evaluate(r, &scalars)?;
            let root = r.root_instruction();
            if root.opcode != Opcode::Tuple || root.operands.len() != 2 {
                return None;
            }
            let pick = |k: usize| match evals[root.operands[k].index()] {
                Eval::Param(p) => Some(p),
                Eval::Pred(_) => None,
            };
            keep[v * 3 + i] = match (pick(0)?, pick(1)?) {
                (v @ (0 | 2), i @ (1 | 3)) => (v == 0, i == 1),
                _ => return None,
            };
        }
    }
    Some(keep)
}

/// Evaluates the reducer on one case: parameters stand for themselves,
/// comparisons of values with values and indices with indices become
/// predicates, and selects pick a parameter. `None` for anything else.
fn evaluate(r: &HloComputation, scalars: &[f64; 4]) -> Option<Vec<Eval>> {
    let mut evals: Vec<Eval> = Vec::with_capacity(r.instructions().len());
    for instr in r.instructions() {
        let arg = |k: usize| instr.operands.get(k).map(|o| evals[o.index()]);
        let pred = |k: usize| match arg(k)? {
            Eval::Pred(b) => Some(b),
            Eval::Param(_) => None,
        };
        let e = match instr.opcode {
            Opcode::Parameter => Eval::Param(instr.attrs.parameter_number?),
            Opcode::Compare => {
                let (Eval::Param(x), Eval::Param(y)) = (arg(0)?, arg(1)?) else {
                    return None;
                };
                // Values with values, indices with indices, under the
                // type's own order.
                if x % 2 != y % 2 || instr.operands.len() != 2 {
                    return None;
                }
                if let Some(t) = instr.attrs.comparison_type {
                    use oxla_hlo::ir::ComparisonType::*;
                    let ty = r.instruction(instr.operands[0]).shape.element_type()?;
                    let natural = match ty {
                        t if t.is_float() => Float,
                        t if t.is_signed_int() => Signed,
                        _ => Unsigned,
                    };
                    if t != natural {
                        return None;
                    }
                }
                let (a, b) = (scalars[x], scalars[y]);
                Eval::Pred(match instr.attrs.comparison_direction? {
                    ComparisonDirection::Eq => a == b,
                    ComparisonDirection::Ne => a != b,
                    ComparisonDirection::Lt => a < b,
                    ComparisonDirection::Le => a <= b,
                    ComparisonDirection::Gt => a > b,
                    ComparisonDirection::Ge => a >= b,
                })
            }
            Opcode::And if instr.operands.len() == 2 => Eval::Pred(pred(0)? & pred(1)?),
            Opcode::Or if instr.operands.len() == 2 => Eval::Pred(pred(0)? | pred(1)?),
            Opcode::Xor if instr.operands.len() == 2 => Eval::Pred(pred(0)? ^ pred(1)?),
            Opcode::Not if instr.operands.len() == 1 => Eval::Pred(!pred(0)?),
            Opcode::Select => match (pred(0)?, arg(1)?, arg(2)?) {
                (b, Eval::Param(x), Eval::Param(y)) if x % 2 == y % 2 => {
                    Eval::Param(if b { x } else { y })
                }
                _ => return None,
            },
            Opcode::Tuple => Eval::Pred(false),
            _ => return None,
        };
        evals.push(e);
    }
    Some(evals)
}

/// The case of values `a` (accumulated) and `c` (the element's).
#[inline(always)]
fn value_case<T: Lanes>(a: T, c: T) -> usize {
    if a < c {
        0
    } else if a == c {
        1
    } else if a > c {
        2
    } else {
        // Unordered: one of them is NaN (a value unordered with itself).
        let nan = |x: T| x.partial_cmp(&x).is_none();
        match (nan(a), nan(c)) {
            (true, false) => 3,
            (false, true) => 4,
            _ => 5,
        }
    }
}

#[inline(always)]
fn index_case<I: Lanes>(i: I, j: I) -> usize {
    if i < j {
        0
    } else if i == j {
        1
    } else {
        2
    }
}

fn select_typed<T: Lanes + Send + Sync, I: Lanes + Send + Sync>(
    k: &SelectKernel,
    x: &ArrayData,
    j: &ArrayData,
    inits: (&ArrayData, &ArrayData),
    pool: &Pool,
) -> Option<(ArrayData, ArrayData)> {
    let (x, j) = (T::slice(x)?, I::slice(j)?);
    if x.len() != k.geometry.len || j.len() != k.geometry.len {
        return None;
    }
    let (&[v0], &[i0]) = (T::slice(inits.0)?, I::slice(inits.1)?) else {
        return None;
    };
    let g = &k.geometry;
    let (n, stride) = g.inner();
    let mut vo = pool.take::<T>(g.out_count);
    let mut io = pool.take::<I>(g.out_count);
    let keep = &k.keep;
    // Value cases in which the reducer keeps the accumulated pair whatever
    // the indices: an element in such a case changes nothing, so it is
    // passed over without reading its index. For argmax, every element
    // below the running maximum; for argmin, every one above the minimum;
    // for both, everything after a NaN has been taken.
    let still = |case: usize| (0..3).all(|i| keep[case * 3 + i] == (true, true));
    let (below, above) = (still(2), still(0));
    let sink = still(3) && still(5);
    let nan = |x: T| x.partial_cmp(&x).is_none();
    let quiet = |c: T, v: T| (below && c < v) || (above && c > v);
    let vectors = (below || above) && stride == 1;
    g.each2(&mut vo, &mut io, |base| {
        let (mut v, mut i) = (v0, i0);
        'runs: for start in g.runs(base) {
            if sink && nan(v) {
                break;
            }
            let mut e = 0;
            while e < n {
                if vectors && e + 16 <= n {
                    let chunk = &x[start + e..start + e + 16];
                    // No early exit: the whole chunk compares in vectors.
                    let calm = if below {
                        chunk.iter().fold(true, |q, &c| q & (c < v))
                    } else {
                        above && chunk.iter().fold(true, |q, &c| q & (c > v))
                    };
                    if calm {
                        e += 16;
                        continue;
                    }
                }
                let at = start + e * stride;
                e += 1;
                let c = x[at];
                if quiet(c, v) {
                    continue;
                }
                let q = j[at];
                let (keep_v, keep_i) = keep[value_case(v, c) * 3 + index_case(i, q)];
                if !keep_i {
                    i = q;
                }
                if !keep_v {
                    v = c;
                    if sink && nan(v) {
                        break 'runs;
                    }
                }
            }
        }
        (v, i)
    });
    Some((T::wrap(vo), I::wrap(io)))
}

fn arrays<'v>(inputs: &'v [Value<'_>]) -> Result<Vec<&'v ArrayData>, String> {
    inputs
        .iter()
        .map(|v| {
            v.array()
                .map(ArrayLiteral::data)
                .ok_or_else(|| "a reduce reads arrays".to_string())
        })
        .collect()
}

impl Kernel for FoldKernel {
    fn name(&self) -> &'static str {
        "fold"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let data = arrays(inputs)?;
        let [x, init] = data.as_slice() else {
            return Err("a reduce of one array reads two operands".into());
        };
        let n = self.geometry.out_count;
        let mut out =
            oxla_hlo::with_native_type!(self.shape.element_type(), T => T::wrap(pool.take::<T>(n)));
        if !(self.fold)(x, init, &self.geometry, &mut out) {
            return Err("operands of unexpected types or shapes".into());
        }
        let out = ArrayLiteral::new(self.shape.clone(), out).map_err(|e| e.to_string())?;
        Ok(Value::owned(out))
    }
}

impl Kernel for SelectKernel {
    fn name(&self) -> &'static str {
        "selection reduce"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let data = arrays(inputs)?;
        let [x, j, v0, i0] = data.as_slice() else {
            return Err("a selection reduce reads four operands".into());
        };
        macro_rules! indices {
            ($t:ty) => {
                match self.indices {
                    PrimitiveType::S32 => select_typed::<$t, i32>(self, x, j, (v0, i0), pool),
                    PrimitiveType::S64 => select_typed::<$t, i64>(self, x, j, (v0, i0), pool),
                    PrimitiveType::U8 => select_typed::<$t, u8>(self, x, j, (v0, i0), pool),
                    PrimitiveType::U32 => select_typed::<$t, u32>(self, x, j, (v0, i0), pool),
                    PrimitiveType::U64 => select_typed::<$t, u64>(self, x, j, (v0, i0), pool),
                    _ => None,
                }
            };
        }
        let result = match self.values {
            PrimitiveType::F32 => indices!(f32),
            PrimitiveType::F64 => indices!(f64),
            PrimitiveType::S32 => indices!(i32),
            PrimitiveType::S64 => indices!(i64),
            PrimitiveType::U8 => indices!(u8),
            PrimitiveType::U32 => indices!(u32),
            PrimitiveType::U64 => indices!(u64),
            _ => None,
        };
        let (vo, io) = result.ok_or("operands of unexpected types or shapes")?;
        let Shape::Tuple(parts) = &self.shape else {
            return Err("a selection reduce returns a pair".into());
        };
        let (Some(Shape::Array(vs)), Some(Shape::Array(is))) = (parts.first(), parts.get(1)) else {
            return Err("a selection reduce returns two arrays".into());
        };
        let vo = ArrayLiteral::new(vs.clone(), vo).map_err(|e| e.to_string())?;
        let io = ArrayLiteral::new(is.clone(), io).map_err(|e| e.to_string())?;
        Ok(Value::Tuple(
            vec![Value::owned(vo), Value::owned(io)].into(),
        ))
    }
}
