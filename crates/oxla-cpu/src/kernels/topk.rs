//! `topk`: the `k` largest (or smallest) elements of each row of the last
//! dimension, in order, with their indices. The interpreter's rule is a
//! stable sort by the comparison (floats in IEEE total order, integers
//! signed or unsigned by type), so ties go to the lower index: that is the
//! order of the key `(element as ordered bits, inverted for largest; index)`,
//! unique per element. Short `k` keeps the `k` best keys seen so far and
//! passes over every element that does not beat the worst of them with one
//! comparison; long `k` selects with `select_nth_unstable` and sorts the
//! selection. Both give exactly the interpreter's values and indices.

use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, HloComputation, HloInstruction, PrimitiveType,
};
use rayon::prelude::*;

use super::Kernel;
use super::fused::PARALLEL_MIN;
use super::sort::RadixKey;
use crate::buffer::Pool;
use crate::value::Value;

/// Up to this `k`, the best keys are kept in a sorted buffer.
const BUFFERED_K: usize = 128;

pub(crate) struct TopKKernel {
    /// The length of the operand's rows (its last dimension).
    n: usize,
    k: usize,
    largest: bool,
    values: ArrayShape,
    indices: ArrayShape,
}

pub(crate) fn plan(comp: &HloComputation, instr: &HloInstruction) -> Option<TopKKernel> {
    let operand = comp
        .instruction(*instr.operands.first()?)
        .shape
        .as_array()?;
    let parts = instr.shape.leaves();
    let [values, indices] = parts.as_slice() else {
        return None;
    };
    let ty = values.element_type();
    if ty.is_complex() || indices.element_type() != PrimitiveType::S32 {
        return None;
    }
    Some(TopKKernel {
        n: usize::try_from(*operand.dims().last()?).ok()?,
        k: usize::try_from(instr.attrs.k?).ok()?,
        largest: instr.attrs.largest.unwrap_or(true),
        values: (*values).clone(),
        indices: (*indices).clone(),
    })
}

/// The rows' best keys (ordered bits in the high half, index in the low),
/// `k` a row, best first.
fn best_keys(row: &[u64], k: usize, out: &mut [u128], scratch: &mut Vec<u128>) {
    let key = |i: usize| (row[i] as u128) << 64 | i as u128;
    if k == 0 {
        return;
    }
    if k <= BUFFERED_K {
        // `out` holds the best keys so far, ascending; a later element has a
        // larger index, so it enters only if its bits are below the worst's.
        for (i, o) in out.iter_mut().enumerate() {
            *o = key(i);
        }
        out.sort_unstable();
        for (i, &bits) in row.iter().enumerate().skip(k) {
            if bits < (out[k - 1] >> 64) as u64 {
                let at = out.partition_point(|&o| (o >> 64) as u64 <= bits);
                out.copy_within(at..k - 1, at + 1);
                out[at] = key(i);
            }
        }
    } else {
        scratch.clear();
        scratch.extend((0..row.len()).map(key));
        if k < scratch.len() {
            scratch.select_nth_unstable(k);
        }
        let best = &mut scratch[..k];
        best.sort_unstable();
        out.copy_from_slice(best);
    }
}

impl TopKKernel {
    fn select<T: RadixKey + oxla_hlo::NativeType>(
        &self,
        x: &[T],
        pool: &Pool,
    ) -> Result<(Vec<T>, Vec<i32>), String> {
        let (n, k, largest) = (self.n, self.k, self.largest);
        let rows = x.len().checked_div(n).unwrap_or(0);
        if k > n || rows * n != x.len() {
            return Err(format!("topk: k = {k} does not fit rows of {n}"));
        }
        let mut values = pool.take::<T>(rows * k);
        let mut indices = pool.take::<i32>(rows * k);
        let row = |((r, v), ix): ((usize, &mut [T]), &mut [i32]),
                   (bits, best, scratch): &mut (Vec<u64>, Vec<u128>, Vec<u128>)| {
            let src = &x[r * n..(r + 1) * n];
            bits.clear();
            bits.extend(src.iter().map(|&e| match largest {
                true => !e.bits(),
                false => e.bits(),
            }));
            best_keys(bits, k, best, scratch);
            for ((v, ix), &key) in v.iter_mut().zip(ix.iter_mut()).zip(best.iter()) {
                let i = key as u64 as usize;
                *v = src[i];
                *ix = i as i32;
            }
        };
        let init = || (Vec::with_capacity(n), vec![0u128; k], Vec::new());
        let tasks = values
            .chunks_mut(k.max(1))
            .enumerate()
            .zip(indices.chunks_mut(k.max(1)));
        if k > 0 && rows > 1 && x.len() >= PARALLEL_MIN {
            tasks
                .collect::<Vec<_>>()
                .into_par_iter()
                .for_each_init(init, |s, t| row(t, s));
        } else if k > 0 {
            let mut s = init();
            tasks.for_each(|t| row(t, &mut s));
        }
        Ok((values, indices))
    }
}

impl Kernel for TopKKernel {
    fn name(&self) -> &'static str {
        "topk"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        let x = inputs
            .first()
            .and_then(Value::array)
            .ok_or("topk reads an array")?;
        macro_rules! typed {
            ($($v:ident),*) => {
                match x.data() {
                    $(ArrayData::$v(x) => {
                        let (v, i) = self.select(x, pool)?;
                        (ArrayData::$v(v), i)
                    })*
                    _ => return Err(format!("topk does not apply to {}", x.shape())),
                }
            };
        }
        let (values, indices) = typed!(
            Pred, S8, S16, S32, S64, U8, U16, U32, U64, F16, BF16, F32, F64
        );
        let values = ArrayLiteral::new(self.values.clone(), values).map_err(|e| e.to_string())?;
        let indices = ArrayLiteral::new(self.indices.clone(), ArrayData::S32(indices))
            .map_err(|e| e.to_string())?;
        Ok(Value::Tuple(
            vec![Value::owned(values), Value::owned(indices)].into(),
        ))
    }
}
