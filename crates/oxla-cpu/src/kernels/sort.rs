//! `sort` with a comparator of the form `compare(f(a_i), f(b_i))`: operand
//! `i` is the key, mapped element-wise by `f` (JAX's comparators canonicalise
//! NaN and -0 this way), and the other operands follow its permutation. The
//! keys are computed for the whole array at once by a fused loop; rows are
//! then sorted stably, with a radix sort when the comparison is a total
//! order (integers, TOTALORDER floats) and otherwise with the same merge
//! sort as the interpreter, so even a comparator that is not a strict weak
//! order gives the interpreter's answer.

use std::collections::HashMap;

use oxla_hlo::ir::{ComparisonDirection, ComparisonType};
use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, HloComputation, HloInstruction, HloModule, InstrId,
    Opcode, PrimitiveType, Scalar, with_array_data,
};
use rayon::prelude::*;

use super::Kernel;
use super::fused::{FusedLoop, Leaf, Op, Src};
use super::view::View;
use crate::buffer::Pool;
use crate::fusion::{allocate_registers, binary_of, unary_of};
use crate::value::Value;

#[derive(Clone, Debug)]
pub(crate) struct SortKernel {
    dims: Vec<i64>,
    dimension: usize,
    key_operand: usize,
    /// The key function, or `None` when the key is the operand itself.
    key: Option<FusedLoop>,
    key_type: PrimitiveType,
    dir: ComparisonDirection,
    total_order: bool,
}

pub(crate) fn plan(
    module: &HloModule,
    comp: &HloComputation,
    instr: &HloInstruction,
) -> Option<SortKernel> {
    let cmp = module.computations().get(instr.called.to_apply?.index())?;
    let root = cmp.root_instruction();
    if root.opcode != Opcode::Compare {
        return None;
    }
    let dir = root.attrs.comparison_direction?;
    if !matches!(dir, ComparisonDirection::Lt | ComparisonDirection::Gt) {
        return None;
    }
    let (a, b) = (root.operands[0], root.operands[1]);
    let pa = single_param(cmp, a)?;
    let pb = single_param(cmp, b)?;
    if pa % 2 != 0 || pb != pa + 1 || !same_function(cmp, a, b, pa, pb) {
        return None;
    }
    let key_operand = pa / 2;
    let operand = comp
        .instruction(*instr.operands.get(key_operand)?)
        .shape
        .as_array()?;
    let dims = operand.dims().to_vec();
    let key_type = cmp.instruction(a).shape.element_type()?;
    let ty = root
        .attrs
        .comparison_type
        .unwrap_or_else(|| oxla_hlo::shape_inference::default_comparison_type(key_type));
    let total_order = match ty {
        ComparisonType::TotalOrder => true,
        ComparisonType::Signed | ComparisonType::Unsigned => !key_type.is_floating(),
        ComparisonType::Float => false,
    };
    if key_type.is_complex() || (!total_order && !key_type.is_float()) {
        return None;
    }
    let is_param = cmp.instruction(a).opcode == Opcode::Parameter;
    let key = if is_param {
        None
    } else {
        if !matches!(key_type, PrimitiveType::F32 | PrimitiveType::F64)
            || operand.element_type() != key_type
        {
            return None;
        }
        Some(key_loop(cmp, a, pa, key_type, &dims)?)
    };
    Some(SortKernel {
        dims,
        dimension: *instr.attrs.dimensions.as_ref()?.first()? as usize,
        key_operand,
        key,
        key_type,
        dir,
        total_order,
    })
}

/// The one parameter an expression depends on.
fn single_param(comp: &HloComputation, id: InstrId) -> Option<usize> {
    let mut found = None;
    let mut stack = vec![id];
    while let Some(i) = stack.pop() {
        let instr = comp.instruction(i);
        if instr.opcode == Opcode::Parameter {
            let p = instr.attrs.parameter_number?;
            if found.is_some_and(|f| f != p) {
                return None;
            }
            found = Some(p);
        }
        stack.extend(instr.operands.iter().copied());
    }
    found
}

/// Whether expressions `a` (over parameter `pa`) and `b` (over `pb`) compute the same function.
fn same_function(comp: &HloComputation, a: InstrId, b: InstrId, pa: usize, pb: usize) -> bool {
    let (x, y) = (comp.instruction(a), comp.instruction(b));
    if x.opcode != y.opcode || x.operands.len() != y.operands.len() || !x.shape.compatible(&y.shape)
    {
        return false;
    }
    match x.opcode {
        Opcode::Parameter => {
            x.attrs.parameter_number == Some(pa) && y.attrs.parameter_number == Some(pb)
        }
        _ => {
            let same_attrs = x.attrs == y.attrs && x.called == y.called;
            same_attrs
                && x.operands
                    .iter()
                    .zip(&y.operands)
                    .all(|(&p, &q)| p == q || same_function(comp, p, q, pa, pb))
        }
    }
}

/// The key function as a fused loop over the operand's dimensions.
fn key_loop(
    cmp: &HloComputation,
    root: InstrId,
    param: usize,
    ty: PrimitiveType,
    dims: &[i64],
) -> Option<FusedLoop> {
    struct B<'c> {
        cmp: &'c HloComputation,
        param: usize,
        ty: PrimitiveType,
        dims: &'c [i64],
        leaves: Vec<Leaf>,
        code: Vec<Op>,
        memo: HashMap<InstrId, Src>,
    }
    impl B<'_> {
        fn value(&mut self, id: InstrId) -> Option<Src> {
            if let Some(&s) = self.memo.get(&id) {
                return Some(s);
            }
            let instr = self.cmp.instruction(id);
            let et = instr.shape.element_type()?;
            if et != self.ty && et != PrimitiveType::Pred {
                return None;
            }
            let s = match instr.opcode {
                Opcode::Parameter if instr.attrs.parameter_number == Some(self.param) => {
                    self.leaves.push(Leaf::Input {
                        input: 0,
                        ty: self.ty,
                        view: View::contiguous(self.dims),
                        starts: Vec::new(),
                    });
                    Src::Leaf(self.leaves.len() - 1)
                }
                Opcode::Constant => {
                    let v = match instr.attrs.literal.as_ref()?.as_array()?.data().scalar(0) {
                        Scalar::Float(f) => f,
                        Scalar::Pred(p) => p as u8 as f64,
                        Scalar::Int(i) => i as f64,
                        Scalar::Complex(..) => return None,
                    };
                    self.leaves.push(Leaf::Scalar(v));
                    Src::Leaf(self.leaves.len() - 1)
                }
                op => {
                    let mut ops = Vec::new();
                    for &o in &instr.operands {
                        ops.push(self.value(o)?);
                    }
                    let op = if let Some(u) = unary_of(op) {
                        Op::Unary(u, ops[0])
                    } else if let Some(b) = binary_of(op) {
                        Op::Binary(b, ops[0], ops[1])
                    } else {
                        match op {
                            Opcode::Compare
                                if matches!(
                                    instr.attrs.comparison_type,
                                    None | Some(ComparisonType::Float)
                                ) =>
                            {
                                Op::Compare(instr.attrs.comparison_direction?, ops[0], ops[1])
                            }
                            Opcode::Select => Op::Select(ops[0], ops[1], ops[2]),
                            Opcode::Clamp => Op::Clamp(ops[0], ops[1], ops[2]),
                            _ => return None,
                        }
                    };
                    self.code.push(op);
                    Src::Reg(self.code.len() - 1)
                }
            };
            self.memo.insert(id, s);
            Some(s)
        }
    }
    let mut b = B {
        cmp,
        param,
        ty,
        dims,
        leaves: Vec::new(),
        code: Vec::new(),
        memo: HashMap::new(),
    };
    let result = b.value(root)?;
    let (code, (registers, physical)) = allocate_registers(b.code, &[result]);
    let result = match result {
        Src::Reg(r) => Src::Reg(physical[r]),
        leaf => leaf,
    };
    Some(FusedLoop {
        ty,
        out_ty: ty,
        dims: dims.to_vec(),
        leaves: b.leaves,
        code,
        result,
        extra: Vec::new(),
        registers,
    })
}

/// A key that orders like the comparison: unsigned integers, possibly inverted.
pub(crate) trait RadixKey: Copy {
    fn bits(self) -> u64;
}

macro_rules! int_key {
    ($($t:ty => $u:ty),*) => {
        $(impl RadixKey for $t {
            fn bits(self) -> u64 {
                // Flip the sign bit so signed order becomes unsigned order.
                ((self as $u) ^ (1 << (<$u>::BITS - 1))) as u64
            }
        })*
    };
}
int_key!(i8 => u8, i16 => u16, i32 => u32, i64 => u64);

macro_rules! uint_key {
    ($($t:ty),*) => {
        $(impl RadixKey for $t {
            fn bits(self) -> u64 {
                self as u64
            }
        })*
    };
}
uint_key!(u8, u16, u32, u64);

impl RadixKey for bool {
    fn bits(self) -> u64 {
        self as u64
    }
}

/// IEEE total order as unsigned bits: flip all bits of negatives, the sign bit of the rest.
macro_rules! float_key {
    ($($t:ty => $u:ty),*) => {
        $(impl RadixKey for $t {
            fn bits(self) -> u64 {
                let b = self.to_bits();
                let flipped = if b >> (<$u>::BITS - 1) == 1 { !b } else { b | (1 << (<$u>::BITS - 1)) };
                flipped as u64
            }
        })*
    };
}
float_key!(f32 => u32, f64 => u64);

impl RadixKey for oxla_hlo::half::f16 {
    fn bits(self) -> u64 {
        let b = self.to_bits();
        (if b >> 15 == 1 { !b } else { b | 0x8000 }) as u64
    }
}

impl RadixKey for oxla_hlo::half::bf16 {
    fn bits(self) -> u64 {
        let b = self.to_bits();
        (if b >> 15 == 1 { !b } else { b | 0x8000 }) as u64
    }
}

/// Stable LSD radix sort of positions by 64-bit keys (8 bits a pass, only
/// over the bytes that vary).
fn radix_sort(keys: &[u64], order: &mut Vec<u32>) {
    let n = keys.len();
    let (mut or, mut and) = (0u64, u64::MAX);
    for &k in keys {
        or |= k;
        and &= k;
    }
    let varying = or ^ and;
    let mut tmp = vec![0u32; n];
    for byte in 0..8 {
        let shift = byte * 8;
        if (varying >> shift) & 0xff == 0 {
            continue;
        }
        let mut counts = [0usize; 257];
        for &i in order.iter() {
            counts[((keys[i as usize] >> shift) & 0xff) as usize + 1] += 1;
        }
        for b in 0..256 {
            counts[b + 1] += counts[b];
        }
        for &i in order.iter() {
            let b = ((keys[i as usize] >> shift) & 0xff) as usize;
            tmp[counts[b]] = i;
            counts[b] += 1;
        }
        std::mem::swap(order, &mut tmp);
    }
}

/// The interpreter's stable merge sort: the right element goes first only
/// when it comes strictly before the left one.
fn merge_sort(order: &mut Vec<u32>, before: impl Fn(u32, u32) -> bool) {
    let n = order.len();
    let mut buf = order.clone();
    let mut width = 1;
    while width < n {
        let mut lo = 0;
        while lo < n {
            let mid = (lo + width).min(n);
            let hi = (lo + 2 * width).min(n);
            let (mut a, mut b, mut k) = (lo, mid, lo);
            while a < mid && b < hi {
                if before(order[b], order[a]) {
                    buf[k] = order[b];
                    b += 1;
                } else {
                    buf[k] = order[a];
                    a += 1;
                }
                k += 1;
            }
            buf[k..k + mid - a].copy_from_slice(&order[a..mid]);
            k += mid - a;
            buf[k..k + hi - b].copy_from_slice(&order[b..hi]);
            lo = hi;
        }
        std::mem::swap(order, &mut buf);
        width *= 2;
    }
}

impl SortKernel {
    /// The sorted order of each row (positions along the sort dimension).
    fn permutations(&self, keys: &ArrayData) -> Vec<Vec<u32>> {
        let d = self.dimension;
        let n = self.dims[d] as usize;
        let inner: usize = self.dims[d + 1..].iter().map(|&x| x as usize).product();
        let outer: usize = self.dims[..d].iter().map(|&x| x as usize).product();
        let rows = outer * inner;
        let descending = self.dir == ComparisonDirection::Gt;
        let row_order = |row: usize| -> Vec<u32> {
            let (o, i) = (row / inner.max(1), row % inner.max(1));
            let at = |p: usize| o * n * inner + p * inner + i;
            let mut order: Vec<u32> = (0..n as u32).collect();
            if self.total_order {
                let k: Vec<u64> = with_array_data!(keys, v => radix_bits(v, &at, n, descending));
                radix_sort(&k, &mut order);
            } else {
                let f: Vec<f64> = (0..n)
                    .map(|p| keys.scalar(at(p)))
                    .map(|s| match s {
                        Scalar::Float(x) => x,
                        _ => f64::NAN,
                    })
                    .collect();
                if descending {
                    merge_sort(&mut order, |x, y| f[x as usize] > f[y as usize]);
                } else {
                    merge_sort(&mut order, |x, y| f[x as usize] < f[y as usize]);
                }
            }
            order
        };
        if rows > 1 && rows * n >= 1 << 16 {
            (0..rows).into_par_iter().map(row_order).collect()
        } else {
            (0..rows).map(row_order).collect()
        }
    }

    /// An operand with each row permuted.
    fn apply(&self, data: &ArrayData, perms: &[Vec<u32>]) -> ArrayData {
        let d = self.dimension;
        let n = self.dims[d] as usize;
        let inner: usize = self.dims[d + 1..].iter().map(|&x| x as usize).product();
        let mut index = Vec::with_capacity(data.len());
        let outer: usize = self.dims[..d].iter().map(|&x| x as usize).product();
        for o in 0..outer {
            let rows = &perms[o * inner..(o + 1) * inner];
            for p in 0..n {
                for (i, perm) in rows.iter().enumerate() {
                    let src = perm[p] as usize;
                    index.push(o * n * inner + src * inner + i);
                }
            }
        }
        data.take(&index)
    }
}

/// Radix bits of the elements along one row (complex keys never get here).
fn radix_bits<T: MaybeKey>(v: &[T], at: &dyn Fn(usize) -> usize, n: usize, desc: bool) -> Vec<u64> {
    (0..n)
        .map(|p| v[at(p)].key())
        .map(|k| if desc { !k } else { k })
        .collect()
}

trait MaybeKey: Copy {
    fn key(self) -> u64;
}

impl<T: RadixKey> MaybeKey for T {
    fn key(self) -> u64 {
        self.bits()
    }
}

impl MaybeKey for oxla_hlo::num_complex::Complex32 {
    fn key(self) -> u64 {
        0
    }
}

impl MaybeKey for oxla_hlo::num_complex::Complex64 {
    fn key(self) -> u64 {
        0
    }
}

impl Kernel for SortKernel {
    fn name(&self) -> &'static str {
        "sort"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let arrays: Vec<&ArrayLiteral> = inputs
            .iter()
            .map(|v| v.array().ok_or("sort reads arrays"))
            .collect::<Result<_, _>>()?;
        let operand = arrays.get(self.key_operand).ok_or("missing key operand")?;
        let computed;
        let keys: &ArrayData = match &self.key {
            None => operand.data(),
            Some(f) => {
                let v = f.run(&mut [Value::Array(crate::value::Buf::Arg(operand))], pool)?;
                computed = v
                    .array()
                    .ok_or("key function did not give an array")?
                    .data()
                    .clone();
                &computed
            }
        };
        if keys.element_type() != self.key_type
            && self.key.is_none()
            && keys.element_type() != operand.element_type()
        {
            return Err("sort key type mismatch".into());
        }
        let perms = self.permutations(keys);
        let outs: Vec<Value<'a>> = arrays
            .iter()
            .map(|a| {
                let shape = ArrayShape::new(a.element_type(), a.dims().to_vec())
                    .map_err(|e| e.to_string())?;
                Ok(Value::owned(
                    ArrayLiteral::new(shape, self.apply(a.data(), &perms))
                        .map_err(|e| e.to_string())?,
                ))
            })
            .collect::<Result<_, String>>()?;
        Ok(if outs.len() == 1 {
            outs.into_iter().next().unwrap_or(Value::Token)
        } else {
            Value::Tuple(outs.into())
        })
    }
}
