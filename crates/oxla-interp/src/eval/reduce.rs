//! Operations that apply a called computation over an array: `reduce`,
//! `reduce-window`, `select-and-scatter` and `map`. Reductions start from the
//! init values and fold elements in a fixed order (row-major over the reduced
//! dimensions or the window), one application of the computation per element.
//!
//! Window semantics follow XLA:CPU: positions in the padding or in
//! base-dilation holes are skipped (the accumulator starts from the init value
//! once), and select-and-scatter never selects a padding position.

use oxla_hlo::ir::Window;
use oxla_hlo::{ArrayData, ArrayLiteral, ArrayShape, HloInstruction, Shape};

use super::attr;
use crate::element::Elem;
use crate::error::{OpResult, fail};
use crate::index::{Counter, dims_usize, element_count, strides};
use crate::interpreter::Interpreter;
use crate::value::{Value, make_array};

/// The array shapes of a result that is one array or a tuple of arrays.
pub(crate) fn result_arrays(shape: &Shape) -> OpResult<Vec<&ArrayShape>> {
    match shape {
        Shape::Array(a) => Ok(vec![a]),
        Shape::Tuple(t) => t
            .iter()
            .map(|s| match s {
                Shape::Array(a) => Ok(a),
                other => fail(format!("expected array results, got {other}")),
            })
            .collect(),
        Shape::Token => fail("expected array results, got a token"),
    }
}

/// Splits `2N` operands into N arrays and N scalar init values.
fn inputs_and_inits(operands: &[Value]) -> OpResult<(Vec<&ArrayLiteral>, Vec<Elem>)> {
    if !operands.len().is_multiple_of(2) || operands.is_empty() {
        return fail("takes N inputs and N init values");
    }
    let n = operands.len() / 2;
    let inputs: Vec<&ArrayLiteral> = operands[..n]
        .iter()
        .map(Value::as_array)
        .collect::<OpResult<_>>()?;
    let inits: Vec<Elem> = operands[n..]
        .iter()
        .map(Value::as_elem)
        .collect::<OpResult<_>>()?;
    let dims = inputs[0].dims();
    if inputs.iter().any(|x| x.dims() != dims) {
        return fail("all inputs must have the same dimensions");
    }
    Ok((inputs, inits))
}

/// Writes `values[j]` into `outputs[j]` at index `i`.
fn store(outputs: &mut [ArrayData], i: usize, values: &[Elem]) -> OpResult<()> {
    if values.len() != outputs.len() {
        return fail(format!(
            "the computation returned {} values, expected {}",
            values.len(),
            outputs.len()
        ));
    }
    for (o, v) in outputs.iter_mut().zip(values) {
        if !v.write(o, i) {
            return fail(format!(
                "the computation returned a {} value of the wrong type",
                v.element_type()
            ));
        }
    }
    Ok(())
}

fn finish(shapes: &[&ArrayShape], outputs: Vec<ArrayData>) -> OpResult<Value> {
    let arrays = shapes
        .iter()
        .zip(outputs)
        .map(|(s, d)| make_array(s, d))
        .collect::<OpResult<Vec<_>>>()?;
    Ok(Value::tuple_or_single(arrays))
}

/// For one window dimension: the operand index each (output position, window
/// position) pair reads, or `None` for padding and dilation holes.
/// `taps[o * size + k]`. The table has an entry per pair, so it is for
/// convolution, whose window is a kernel of real elements; reduce-window
/// uses [`window_runs`]. Positions are computed in i128, so huge strides,
/// dilations and paddings cannot overflow.
pub(crate) fn window_taps(
    input: usize,
    output: usize,
    w: &oxla_hlo::ir::WindowDim,
) -> OpResult<Vec<Option<usize>>> {
    if w.stride < 1 || w.base_dilation < 1 || w.window_dilation < 1 || w.size < 0 {
        return fail("window sizes must be non-negative and strides and dilations positive");
    }
    let (bd, wd) = (i128::from(w.base_dilation), i128::from(w.window_dilation));
    let (stride, pad) = (i128::from(w.stride), i128::from(w.pad_low));
    let input = input as i128;
    let dilated = if input == 0 { 0 } else { (input - 1) * bd + 1 };
    let mut t = Vec::with_capacity(output.saturating_mul(w.size as usize));
    for o in 0..output as i128 {
        for k in 0..i128::from(w.size) {
            let p = o * stride + k * wd - pad;
            let valid = p >= 0 && p < dilated && p % bd == 0;
            t.push(valid.then_some((p / bd) as usize));
        }
    }
    Ok(t)
}

/// For one window dimension and one output position: the operand indices
/// the window covers, padding and dilation holes left out, in window order:
/// `count` indices from `first`, `step` apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) first: usize,
    pub(crate) step: usize,
    pub(crate) count: usize,
}

/// The [`Run`] of each of `output` positions along one window dimension over
/// an operand dimension of size `input`. Worked out arithmetically, so the
/// cost depends on the output and the real elements read, never on the
/// window size, padding or dilations, which a module may make huge.
pub(crate) fn window_runs(
    input: usize,
    output: usize,
    w: &oxla_hlo::ir::WindowDim,
) -> OpResult<Vec<Run>> {
    if w.stride < 1 || w.base_dilation < 1 || w.window_dilation < 1 || w.size < 0 {
        return fail("window sizes must be non-negative and strides and dilations positive");
    }
    let none = Run {
        first: 0,
        step: 1,
        count: 0,
    };
    if input == 0 || w.size == 0 {
        return Ok(vec![none; output]);
    }
    let (bd, wd) = (i128::from(w.base_dilation), i128::from(w.window_dilation));
    let (stride, pad, size) = (
        i128::from(w.stride),
        i128::from(w.pad_low),
        i128::from(w.size),
    );
    // Operand element q sits at q*bd in the dilated operand; window position
    // k of output o reads o*stride + k*wd - pad. So q is read when
    // q*bd - (o*stride - pad) = k*wd for some 0 <= k < size: the solutions
    // are one residue class of q modulo wd / gcd(bd, wd), in a range.
    let g = gcd(bd, wd);
    let step = wd / g;
    let inverse = mod_inverse((bd / g) % step, step);
    let last = input as i128 - 1;
    let mut runs = Vec::with_capacity(output);
    for o in 0..output as i128 {
        let base = o * stride - pad;
        let lo = div_ceil(base, bd).max(0);
        let hi = div_floor(base.saturating_add((size - 1) * wd), bd).min(last);
        let r = base.rem_euclid(wd);
        if lo > hi || r % g != 0 {
            runs.push(none);
            continue;
        }
        let residue = ((r / g) * inverse).rem_euclid(step);
        let first = lo + (residue - lo).rem_euclid(step);
        runs.push(if first > hi {
            none
        } else {
            // All three are at most `input`, so they fit in usize.
            Run {
                first: first as usize,
                step: step as usize,
                count: ((hi - first) / step + 1) as usize,
            }
        });
    }
    Ok(runs)
}

fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// `x` with `a * x = 1 (mod m)`, for `a` and `m` coprime (0 when `m` is 1).
fn mod_inverse(a: i128, m: i128) -> i128 {
    let (mut old_r, mut r) = (a, m);
    let (mut old_s, mut s) = (1i128, 0i128);
    while r != 0 {
        let q = old_r / r;
        (old_r, r) = (r, old_r - q * r);
        (old_s, s) = (s, old_s - q * s);
    }
    old_s.rem_euclid(m)
}

fn div_floor(a: i128, b: i128) -> i128 {
    a.div_euclid(b)
}

fn div_ceil(a: i128, b: i128) -> i128 {
    -(-a).div_euclid(b)
}

/// Window geometry shared by reduce-window and select-and-scatter.
struct Windows {
    /// `runs[i][o]`: what window dimension `i` reads for output position `o`.
    runs: Vec<Vec<Run>>,
    in_strides: Vec<usize>,
    /// Scratch: the number of elements read along each dimension.
    counts: Vec<usize>,
}

impl Windows {
    fn new(in_dims: &[usize], out_dims: &[usize], window: &Window) -> OpResult<Windows> {
        if window.dims.len() != in_dims.len() || out_dims.len() != in_dims.len() {
            return fail("the window must have one dimension per operand dimension");
        }
        // With no output there is nothing to look up, and the other output
        // dimensions may be huge.
        let runs = if out_dims.contains(&0) {
            vec![Vec::new(); in_dims.len()]
        } else {
            (0..in_dims.len())
                .map(|i| window_runs(in_dims[i], out_dims[i], &window.dims[i]))
                .collect::<OpResult<_>>()?
        };
        Ok(Windows {
            runs,
            in_strides: strides(in_dims),
            counts: vec![0; in_dims.len()],
        })
    }

    /// A counter over the real elements in the window of output `o`, row-major.
    fn elements(&mut self, o: &[usize]) -> Counter {
        for (i, &oi) in o.iter().enumerate() {
            self.counts[i] = self.runs[i][oi].count;
        }
        Counter::new(&self.counts)
    }

    /// The operand's linear index of element `j` of output `o`'s window.
    fn source(&self, o: &[usize], j: &[usize]) -> usize {
        let mut s = 0;
        for i in 0..o.len() {
            let run = &self.runs[i][o[i]];
            s += (run.first + j[i] * run.step) * self.in_strides[i];
        }
        s
    }
}

impl Interpreter<'_> {
    pub(crate) fn reduce(&mut self, instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
        let (inputs, inits) = inputs_and_inits(operands)?;
        let shapes = result_arrays(&instr.shape)?;
        let in_dims = dims_usize(inputs[0].dims());
        let rank = in_dims.len();
        let mut reduced: Vec<usize> = Vec::new();
        for &d in attr(&instr.attrs.dimensions, "dimensions")? {
            match usize::try_from(d) {
                Ok(d) if d < rank && !reduced.contains(&d) => reduced.push(d),
                _ => {
                    return fail(format!(
                        "cannot reduce dimension {d} of a rank-{rank} array"
                    ));
                }
            }
        }
        reduced.sort_unstable();
        let kept: Vec<usize> = (0..rank).filter(|d| !reduced.contains(d)).collect();
        let out_dims: Vec<usize> = kept.iter().map(|&d| in_dims[d]).collect();
        if shapes.len() != inputs.len() || shapes.iter().any(|s| dims_usize(s.dims()) != out_dims) {
            return fail("the result shape does not match the reduced dimensions");
        }
        let st = strides(&in_dims);
        // Offsets of the reduced elements relative to an output's base, row-major.
        let red_sizes: Vec<usize> = reduced.iter().map(|&d| in_dims[d]).collect();
        let mut offsets = Vec::new();
        // An empty operand reduces to the init values: no offsets, however
        // long its other dimensions.
        let mut c = Counter::new(if in_dims.contains(&0) {
            &[0]
        } else {
            &red_sizes[..]
        });
        while !c.done() {
            offsets.push(
                c.index()
                    .iter()
                    .zip(&reduced)
                    .map(|(&i, &d)| i * st[d])
                    .sum::<usize>(),
            );
            c.advance();
        }
        let out_count = element_count(&out_dims);
        let mut outputs: Vec<ArrayData> = shapes
            .iter()
            .map(|s| ArrayData::zeros(s.element_type(), out_count))
            .collect();
        let mut f = self.scalar_fn(instr.called.to_apply, "reduction", Vec::new())?;
        let n = inputs.len();
        let mut acc = Vec::with_capacity(n);
        let mut args = Vec::with_capacity(2 * n);
        let mut out = Vec::with_capacity(n);
        let mut c = Counter::new(&out_dims);
        let mut i = 0;
        while !c.done() {
            let base: usize = c.index().iter().zip(&kept).map(|(&o, &d)| o * st[d]).sum();
            acc.clear();
            acc.extend_from_slice(&inits);
            for &off in &offsets {
                args.clear();
                args.extend_from_slice(&acc);
                args.extend(inputs.iter().map(|x| Elem::read(x.data(), base + off)));
                out.clear();
                self.apply(&mut f, &args, &mut out)?;
                if out.len() != n {
                    return fail(format!(
                        "the reduction returned {} values, expected {n}",
                        out.len()
                    ));
                }
                std::mem::swap(&mut acc, &mut out);
            }
            store(&mut outputs, i, &acc)?;
            i += 1;
            c.advance();
        }
        finish(&shapes, outputs)
    }

    pub(crate) fn reduce_window(
        &mut self,
        instr: &HloInstruction,
        operands: &[Value],
    ) -> OpResult<Value> {
        let (inputs, inits) = inputs_and_inits(operands)?;
        let shapes = result_arrays(&instr.shape)?;
        let in_dims = dims_usize(inputs[0].dims());
        let out_dims = dims_usize(shapes[0].dims());
        if shapes.len() != inputs.len() || shapes.iter().any(|s| dims_usize(s.dims()) != out_dims) {
            return fail("the results must have one shape");
        }
        let mut windows = Windows::new(&in_dims, &out_dims, attr(&instr.attrs.window, "window")?)?;
        let out_count = element_count(&out_dims);
        let mut outputs: Vec<ArrayData> = shapes
            .iter()
            .map(|s| ArrayData::zeros(s.element_type(), out_count))
            .collect();
        let mut f = self.scalar_fn(instr.called.to_apply, "reduction", Vec::new())?;
        let n = inputs.len();
        let mut acc = Vec::with_capacity(n);
        let mut args = Vec::with_capacity(2 * n);
        let mut out = Vec::with_capacity(n);
        let mut c = Counter::new(&out_dims);
        let mut i = 0;
        while !c.done() {
            acc.clear();
            acc.extend_from_slice(&inits);
            let mut k = windows.elements(c.index());
            while !k.done() {
                let s = windows.source(c.index(), k.index());
                args.clear();
                args.extend_from_slice(&acc);
                args.extend(inputs.iter().map(|x| Elem::read(x.data(), s)));
                out.clear();
                self.apply(&mut f, &args, &mut out)?;
                if out.len() != n {
                    return fail(format!(
                        "the reduction returned {} values, expected {n}",
                        out.len()
                    ));
                }
                std::mem::swap(&mut acc, &mut out);
                k.advance();
            }
            store(&mut outputs, i, &acc)?;
            i += 1;
            c.advance();
        }
        finish(&shapes, outputs)
    }

    /// For each source element's window: pick an operand element with
    /// `select` (scanning the window row-major and keeping the current pick
    /// while `select(current, candidate)` holds), then combine the source
    /// value into the result at that position with `scatter`. The result
    /// starts filled with the init value.
    pub(crate) fn select_and_scatter(
        &mut self,
        instr: &HloInstruction,
        operands: &[Value],
    ) -> OpResult<Value> {
        let x = operands[0].as_array()?;
        let source = operands[1].as_array()?;
        let init = operands[2].as_elem()?;
        let in_dims = dims_usize(x.dims());
        let src_dims = dims_usize(source.dims());
        let mut windows = Windows::new(&in_dims, &src_dims, attr(&instr.attrs.window, "window")?)?;
        let mut result = ArrayData::splat(x.element_type(), init.to_scalar(), x.element_count());
        let mut select = self.scalar_fn(instr.called.select, "select", Vec::new())?;
        let mut scatter = self.scalar_fn(instr.called.scatter, "scatter", Vec::new())?;
        let mut out = Vec::with_capacity(1);
        let mut c = Counter::new(&src_dims);
        let mut s_linear = 0;
        while !c.done() {
            let mut best: Option<(usize, Elem)> = None;
            let mut k = windows.elements(c.index());
            while !k.done() {
                let s = windows.source(c.index(), k.index());
                let candidate = Elem::read(x.data(), s);
                best = match best {
                    None => Some((s, candidate)),
                    Some((b, current)) => {
                        out.clear();
                        self.apply(&mut select, &[current, candidate], &mut out)?;
                        match out.as_slice() {
                            [Elem::Pred(true)] => Some((b, current)),
                            [Elem::Pred(false)] => Some((s, candidate)),
                            _ => return fail("the select computation must return one pred"),
                        }
                    }
                };
                k.advance();
            }
            if let Some((b, _)) = best {
                out.clear();
                let args = [Elem::read(&result, b), Elem::read(source.data(), s_linear)];
                self.apply(&mut scatter, &args, &mut out)?;
                store(std::slice::from_mut(&mut result), b, &out)?;
            }
            s_linear += 1;
            c.advance();
        }
        Ok(Value::array(make_array(x.shape(), result)?))
    }

    /// `map`: the computation applied to corresponding elements of the mapped
    /// operands; trailing static operands (oxla's `static_operands`) are passed
    /// whole to every application.
    pub(crate) fn map(&mut self, instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
        let statics = instr.attrs.static_operands.unwrap_or(0);
        if statics >= operands.len() {
            return fail("needs at least one mapped operand besides the static operands");
        }
        let (mapped, fixed) = operands.split_at(operands.len() - statics);
        let mapped: Vec<&ArrayLiteral> = mapped
            .iter()
            .map(Value::as_array)
            .collect::<OpResult<_>>()?;
        let count = mapped[0].element_count();
        if mapped.iter().any(|m| m.element_count() != count) {
            return fail("mapped operands must have the same shape");
        }
        let shape = super::result_array(instr)?;
        let mut result = ArrayData::zeros(shape.element_type(), count);
        let mut f = self.scalar_fn(instr.called.to_apply, "mapped", fixed.to_vec())?;
        let mut args = Vec::with_capacity(mapped.len());
        let mut out = Vec::with_capacity(1);
        for i in 0..count {
            args.clear();
            args.extend(mapped.iter().map(|m| Elem::read(m.data(), i)));
            out.clear();
            self.apply(&mut f, &args, &mut out)?;
            store(std::slice::from_mut(&mut result), i, &out)?;
        }
        Ok(Value::array(make_array(shape, result)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxla_hlo::ir::WindowDim;

    /// The runs list exactly the operand indices a position-by-position walk
    /// over the window finds, in the same order.
    #[test]
    fn runs_match_walking_the_window() {
        for input in 0..5usize {
            for size in 0..5i64 {
                for stride in 1..4i64 {
                    for pad_low in -2..3i64 {
                        for base_dilation in 1..4i64 {
                            for window_dilation in 1..4i64 {
                                let w = WindowDim {
                                    size,
                                    stride,
                                    pad_low,
                                    pad_high: 0,
                                    window_dilation,
                                    base_dilation,
                                    window_reversal: false,
                                };
                                let output = 6;
                                let runs = window_runs(input, output, &w).unwrap();
                                let taps = window_taps(input, output, &w).unwrap();
                                for o in 0..output {
                                    let walked: Vec<usize> = (0..size as usize)
                                        .filter_map(|k| taps[o * size as usize + k])
                                        .collect();
                                    let r = runs[o];
                                    let listed: Vec<usize> =
                                        (0..r.count).map(|j| r.first + j * r.step).collect();
                                    assert_eq!(listed, walked, "{w:?} input {input} output {o}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// A window of 2^40 positions, nearly all padding, over a 3-element
    /// operand: the table this replaced had an entry per window position
    /// and output (terabytes), and the loop visited each.
    #[test]
    fn a_huge_padded_window_costs_only_its_real_elements() {
        let w = WindowDim {
            size: 1 << 40,
            stride: 1 << 40,
            pad_low: (1 << 40) - 1,
            pad_high: 0,
            window_dilation: 1,
            base_dilation: 1 << 20,
            window_reversal: false,
        };
        let runs = window_runs(3, 2, &w).unwrap();
        assert_eq!(
            runs[0],
            Run {
                first: 0,
                step: 1,
                count: 1
            }
        );
        assert_eq!(runs[1].count, 2);
    }
}
