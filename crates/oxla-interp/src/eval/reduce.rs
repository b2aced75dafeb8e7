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
use crate::index::{Counter, dims_usize, strides};
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
/// `taps[o * size + k]`.
pub(crate) fn window_taps(
    input: usize,
    output: usize,
    w: &oxla_hlo::ir::WindowDim,
) -> OpResult<Vec<Option<usize>>> {
    if w.stride < 1 || w.base_dilation < 1 || w.window_dilation < 1 || w.size < 0 {
        return fail("window sizes must be non-negative and strides and dilations positive");
    }
    let input = input as i64;
    let dilated = if input == 0 {
        0
    } else {
        (input - 1) * w.base_dilation + 1
    };
    let mut t = Vec::with_capacity(output * w.size as usize);
    for o in 0..output as i64 {
        for k in 0..w.size {
            let p = o * w.stride + k * w.window_dilation - w.pad_low;
            let valid = p >= 0 && p < dilated && p % w.base_dilation == 0;
            t.push(valid.then_some((p / w.base_dilation) as usize));
        }
    }
    Ok(t)
}

/// Window geometry shared by reduce-window and select-and-scatter.
struct Windows {
    taps: Vec<Vec<Option<usize>>>,
    sizes: Vec<usize>,
    in_strides: Vec<usize>,
}

impl Windows {
    fn new(in_dims: &[usize], out_dims: &[usize], window: &Window) -> OpResult<Windows> {
        if window.dims.len() != in_dims.len() || out_dims.len() != in_dims.len() {
            return fail("the window must have one dimension per operand dimension");
        }
        let taps = (0..in_dims.len())
            .map(|i| window_taps(in_dims[i], out_dims[i], &window.dims[i]))
            .collect::<OpResult<_>>()?;
        Ok(Windows {
            taps,
            sizes: window.dims.iter().map(|w| w.size.max(0) as usize).collect(),
            in_strides: strides(in_dims),
        })
    }

    /// The operand's linear index under window position `k` of output `o`, if it is a real element.
    fn source(&self, o: &[usize], k: &[usize]) -> Option<usize> {
        let mut s = 0;
        for i in 0..o.len() {
            s += self.taps[i][o[i] * self.sizes[i] + k[i]]? * self.in_strides[i];
        }
        Some(s)
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
        let mut c = Counter::new(&red_sizes);
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
        let out_count: usize = out_dims.iter().product();
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
        let windows = Windows::new(&in_dims, &out_dims, attr(&instr.attrs.window, "window")?)?;
        let out_count: usize = out_dims.iter().product();
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
            let mut k = Counter::new(&windows.sizes);
            while !k.done() {
                if let Some(s) = windows.source(c.index(), k.index()) {
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
                }
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
        let windows = Windows::new(&in_dims, &src_dims, attr(&instr.attrs.window, "window")?)?;
        let mut result = ArrayData::splat(x.element_type(), init.to_scalar(), x.element_count());
        let mut select = self.scalar_fn(instr.called.select, "select", Vec::new())?;
        let mut scatter = self.scalar_fn(instr.called.scatter, "scatter", Vec::new())?;
        let mut out = Vec::with_capacity(1);
        let mut c = Counter::new(&src_dims);
        let mut s_linear = 0;
        while !c.done() {
            let mut best: Option<(usize, Elem)> = None;
            let mut k = Counter::new(&windows.sizes);
            while !k.done() {
                if let Some(s) = windows.source(c.index(), k.index()) {
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
                }
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
