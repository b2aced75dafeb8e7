//! Proposals: one random builder call at a time, with attributes drawn to be
//! plausible for the operands' shapes (so most are accepted), or in wild
//! mode sometimes hostile. When an op needs a value that does not exist yet
//! (a scalar init, a kernel of the right shape), the proposal is a constant
//! that makes one, for a later proposal to use.

use arbitrary::Result;
use oxla_builder::XlaBuilder;
use oxla_hlo::ir::{ComparisonDirection, DotDimensionNumbers, PadDim, Window, WindowDim};
use oxla_hlo::{ArrayShape, PrimitiveType, Shape};

use crate::step::{BINARY_COUNT, Step, UNARY_COUNT};
use crate::{Body, Gen, Root};

/// Reducer kinds, by the binary op they apply.
const REDUCERS: usize = 6;

impl Gen<'_, '_> {
    /// A value of `body` whose shape satisfies `want`, if any. In wild mode
    /// sometimes any value at all.
    fn pick(&mut self, body: &Body, want: impl Fn(&Shape) -> bool) -> Result<Option<usize>> {
        let n = body.shapes.len();
        if self.draw.wild && n > 0 && self.draw.one_in(16)? {
            return Ok(Some(self.draw.below(n)?));
        }
        let c: Vec<usize> = (0..n)
            .filter(|&i| body.shapes[i].as_ref().is_some_and(&want))
            .collect();
        if c.is_empty() {
            return Ok(None);
        }
        Ok(Some(c[self.draw.below(c.len())?]))
    }

    fn array<'b>(&self, body: &'b Body, i: usize) -> Option<&'b ArrayShape> {
        body.shapes[i].as_ref().and_then(Shape::as_array)
    }

    /// A constant array of `shape` (a proposal that makes a missing operand).
    fn constant(&mut self, shape: &ArrayShape) -> Result<Option<Step>> {
        Ok(Some(Step::Constant(self.draw.literal(shape)?)))
    }

    /// A scalar of `ty` in `body`, or a proposal making one.
    fn scalar_of(&mut self, body: &Body, ty: PrimitiveType) -> Result<Result<usize, Step>> {
        let want = |s: &Shape| {
            s.as_array()
                .is_some_and(|a| a.is_scalar() && a.element_type() == ty)
        };
        match self.pick(body, want)? {
            Some(i) => Ok(Ok(i)),
            None => Ok(Err(Step::Constant(
                self.draw.literal(&ArrayShape::scalar(ty))?,
            ))),
        }
    }

    /// The next proposal for `body`, or `None` if the drawn op has no operands here.
    pub(crate) fn propose(&mut self, body: &Body, depth: usize) -> Result<Option<Step>> {
        let nested_ok = depth < self.options.max_depth;
        let is_array = |s: &Shape| s.is_array();
        let kind = self.draw.range(0, 36)?;
        // Ops on one array operand.
        let x = match self.pick(body, is_array)? {
            Some(x) => x,
            None => return self.fresh_value(),
        };
        let xs = self.array(body, x).cloned();
        let rank = xs.as_ref().map_or(0, |a| a.rank());
        let dims: Vec<i64> = xs.as_ref().map_or(vec![], |a| a.dims().to_vec());
        let ty = xs.as_ref().map_or(PrimitiveType::F32, |a| a.element_type());
        let same_shape = |s: &Shape| {
            xs.as_ref()
                .is_some_and(|a| s.as_array().is_some_and(|b| b.compatible(a)))
        };
        let d = &mut self.draw;
        Ok(Some(match kind {
            0 | 1 => return self.fresh_value(),
            2..=4 => Step::Unary {
                op: d.below(UNARY_COUNT)?,
                x,
            },
            5..=8 => {
                let op = d.below(BINARY_COUNT)?;
                if d.one_in(4)? {
                    // Implicit broadcast of a lower-rank operand of the same type.
                    let want = |s: &Shape| {
                        s.as_array()
                            .is_some_and(|b| b.element_type() == ty && b.rank() <= rank)
                    };
                    let Some(y) = self.pick(body, want)? else {
                        return Ok(None);
                    };
                    let yr = self.array(body, y).map_or(0, |a| a.rank());
                    let mut bd: Vec<i64> = self
                        .draw
                        .subset(rank, yr)?
                        .into_iter()
                        .map(|i| i as i64)
                        .collect();
                    if self.draw.wild && self.draw.one_in(4)? {
                        bd.push(self.draw.int(0, rank as i64)?);
                    }
                    Step::Binary {
                        op,
                        x,
                        y,
                        broadcast: Some(bd),
                    }
                } else {
                    let y = self.pick(body, same_shape)?.unwrap_or(x);
                    Step::Binary {
                        op,
                        x,
                        y,
                        broadcast: None,
                    }
                }
            }
            9 => {
                let direction = *d.u.choose(ComparisonDirection::ALL)?;
                let y = self.pick(body, same_shape)?.unwrap_or(x);
                Step::Compare {
                    x,
                    y,
                    direction,
                    ty: None,
                }
            }
            10 => {
                let pred_like = |s: &Shape| {
                    s.as_array().is_some_and(|p| {
                        p.element_type() == PrimitiveType::Pred
                            && (p.is_scalar() || Some(p.dims()) == xs.as_ref().map(|a| a.dims()))
                    })
                };
                let Some(pred) = self.pick(body, pred_like)? else {
                    return Ok(None);
                };
                let on_false = self.pick(body, same_shape)?.unwrap_or(x);
                Step::Select {
                    pred,
                    on_true: x,
                    on_false,
                }
            }
            11 => {
                let bound = |s: &Shape| {
                    s.as_array().is_some_and(|b| {
                        b.element_type() == ty
                            && (b.is_scalar() || Some(b.dims()) == Some(&dims[..]))
                    })
                };
                let min = self.pick(body, bound)?.unwrap_or(x);
                let max = self.pick(body, bound)?.unwrap_or(x);
                Step::Clamp { min, x, max }
            }
            12 => Step::Convert {
                x,
                ty: d.element_type()?,
            },
            13 => {
                let same_width: Vec<PrimitiveType> = PrimitiveType::ALL
                    .into_iter()
                    .filter(|t| t.byte_size() == ty.byte_size() || d.wild)
                    .collect();
                Step::BitcastConvert {
                    x,
                    ty: *d.u.choose(&same_width)?,
                }
            }
            14 => Step::ReducePrecision {
                x,
                exponent_bits: d.int(1, 11)?,
                mantissa_bits: d.int(0, 52)?,
            },
            15 => {
                let n = d.range(0, 2)? as usize;
                Step::Broadcast {
                    x,
                    sizes: (0..n).map(|_| d.dim()).collect::<Result<_>>()?,
                }
            }
            16 => {
                let extra = d.range(0, 2)? as usize;
                let out_rank = rank + extra;
                let positions = d.subset(out_rank, rank)?;
                let mut out = (0..out_rank).map(|_| d.dim()).collect::<Result<Vec<_>>>()?;
                for (k, &p) in positions.iter().enumerate() {
                    if dims[k] != 1 || d.one_in(2)? {
                        out[p] = dims[k];
                    }
                }
                let mut bd: Vec<i64> = positions.into_iter().map(|p| p as i64).collect();
                if d.wild && d.one_in(4)? && !bd.is_empty() {
                    bd[0] = d.int(0, out_rank as i64)?;
                }
                Step::BroadcastInDim { x, out, dims: bd }
            }
            17 => {
                // Hostile shapes may overflow; any size will do for them.
                let n = dims
                    .iter()
                    .try_fold(1i64, |a, &b| a.checked_mul(b))
                    .unwrap_or(-1);
                let sizes = match d.range(0, 2)? {
                    0 if n == 1 => vec![],
                    1 if (0..=4096).contains(&n) => {
                        let a = (1..=n.max(1)).filter(|a| n % a == 0).collect::<Vec<_>>();
                        let a = *d.u.choose(&a)?;
                        vec![a, n / a.max(1)]
                    }
                    _ => vec![d.int(n, n)?],
                };
                Step::Reshape { x, sizes }
            }
            18 => Step::Transpose {
                x,
                permutation: d.permutation(rank)?,
            },
            19 => {
                let k = d.range(0, rank as i64)? as usize;
                Step::Rev {
                    x,
                    dims: d.subset(rank, k)?.into_iter().map(|i| i as i64).collect(),
                }
            }
            20 => {
                let (mut start, mut limit, mut strides) = (vec![], vec![], vec![]);
                for &n in &dims {
                    let s = d.int(0, n)?;
                    start.push(s);
                    limit.push(d.int(s.max(0).min(n), n)?);
                    strides.push(d.int(1, 3)?);
                }
                Step::Slice {
                    x,
                    start,
                    limit,
                    strides,
                }
            }
            21 | 22 => {
                let int_scalar = |s: &Shape| {
                    s.as_array().is_some_and(|a| {
                        a.is_scalar()
                            && (a.element_type().is_signed_int()
                                || a.element_type().is_unsigned_int())
                    })
                };
                let mut starts = Vec::with_capacity(rank);
                for _ in 0..rank {
                    match self.pick(body, int_scalar)? {
                        Some(i) => starts.push(i),
                        None => {
                            let v = self.draw.range(-2, 4)? as i32;
                            return Ok(Some(Step::Constant(oxla_hlo::Literal::scalar(v))));
                        }
                    }
                }
                if kind == 21 {
                    let sizes = dims
                        .iter()
                        .map(|&n| self.draw.int(0, n))
                        .collect::<Result<_>>()?;
                    Step::DynamicSlice { x, starts, sizes }
                } else {
                    let fits = |s: &Shape| {
                        s.as_array().is_some_and(|u| {
                            u.element_type() == ty
                                && u.rank() == rank
                                && u.dims().iter().zip(&dims).all(|(a, b)| a <= b)
                        })
                    };
                    let update = self.pick(body, fits)?.unwrap_or(x);
                    Step::DynamicUpdateSlice { x, update, starts }
                }
            }
            23 => {
                let value = match self.scalar_of(body, ty)? {
                    Ok(v) => v,
                    Err(step) => return Ok(Some(step)),
                };
                let d = &mut self.draw;
                let config = (0..rank)
                    .map(|_| {
                        Ok(PadDim {
                            low: d.int(-1, 2)?,
                            high: d.int(-1, 2)?,
                            interior: d.int(0, 2)?,
                        })
                    })
                    .collect::<Result<_>>()?;
                Step::Pad { x, value, config }
            }
            24 => {
                if rank == 0 {
                    return Ok(None);
                }
                let dim = d.below(rank)?;
                let joinable = |s: &Shape| {
                    s.as_array().is_some_and(|b| {
                        b.element_type() == ty
                            && b.rank() == rank
                            && (0..rank).all(|k| k == dim || b.dims()[k] == dims[k])
                    })
                };
                let mut xs = vec![x];
                for _ in 0..self.draw.range(0, 2)? {
                    if let Some(y) = self.pick(body, joinable)? {
                        xs.push(y);
                    }
                }
                let dim = if self.draw.wild && self.draw.one_in(8)? {
                    self.draw.int(0, rank as i64)?
                } else {
                    dim as i64
                };
                Step::Concat { xs, dim }
            }
            25 | 26 => {
                let init = match self.scalar_of(body, ty)? {
                    Ok(v) => v,
                    Err(step) => return Ok(Some(step)),
                };
                let Some(comp) = self.reducer(ty)? else {
                    return Ok(None);
                };
                if kind == 25 {
                    let k = self.draw.range(0, rank as i64)? as usize;
                    let dims = self
                        .draw
                        .subset(rank, k)?
                        .into_iter()
                        .map(|i| i as i64)
                        .collect();
                    Step::Reduce {
                        x,
                        init,
                        comp,
                        dims,
                    }
                } else {
                    let d = &mut self.draw;
                    let window = Window {
                        dims: dims
                            .iter()
                            .map(|&n| {
                                Ok(WindowDim {
                                    size: d.int(1, n.saturating_add(1))?,
                                    stride: d.int(1, 2)?,
                                    pad_low: d.int(0, 1)?,
                                    pad_high: d.int(0, 1)?,
                                    window_dilation: d.int(1, 2)?,
                                    base_dilation: d.int(1, 2)?,
                                    window_reversal: d.one_in(4)?,
                                })
                            })
                            .collect::<Result<_>>()?,
                    };
                    Step::ReduceWindow {
                        x,
                        init,
                        comp,
                        window,
                    }
                }
            }
            27 => {
                // Contract one dimension of x with an equal-sized one of y.
                if rank == 0 {
                    return Ok(None);
                }
                let lc = d.below(rank)?;
                let size = dims[lc];
                let partner = |s: &Shape| {
                    s.as_array()
                        .is_some_and(|b| b.element_type() == ty && b.dims().contains(&size))
                };
                let Some(y) = self.pick(body, partner)? else {
                    let mut other = vec![size];
                    if self.draw.one_in(2)? {
                        other.push(self.draw.dim()?);
                    }
                    return self.constant(&ArrayShape::new_unchecked(ty, other));
                };
                let ydims = self.array(body, y).map_or(vec![], |a| a.dims().to_vec());
                let rc = ydims.iter().position(|&n| n == size).unwrap_or(0);
                Step::Dot {
                    x,
                    y,
                    dnums: DotDimensionNumbers {
                        lhs_contracting_dimensions: vec![lc as i64],
                        rhs_contracting_dimensions: vec![rc as i64],
                        ..DotDimensionNumbers::default()
                    },
                }
            }
            28 => {
                // Convolution with the default layout: [batch, feature, spatial...].
                if rank < 3 || !ty.is_float() {
                    return Ok(None);
                }
                let mut kdims = vec![d.range(1, 2)?, dims[1]];
                for &n in &dims[2..] {
                    kdims.push(d.range(1, n.max(1))?);
                }
                let strides = dims[2..]
                    .iter()
                    .map(|_| d.int(1, 2))
                    .collect::<Result<_>>()?;
                let same = d.one_in(2)?;
                let kshape = ArrayShape::new_unchecked(ty, kdims);
                let fits = |s: &Shape| s.as_array().is_some_and(|k| k.compatible(&kshape));
                match self.pick(body, fits)? {
                    Some(kernel) => Step::Conv {
                        x,
                        kernel,
                        strides,
                        same,
                    },
                    None => return self.constant(&kshape),
                }
            }
            29 => Step::Sort { x },
            30 => Step::TopK {
                x,
                k: d.int(0, dims.last().copied().unwrap_or(0))?,
            },
            31 => {
                let n = d.range(0, 3)? as usize;
                // Small operands only: tuples of tuples grow exponentially
                // (the builder's bound on shape size is tested elsewhere).
                let any = |s: &Shape| !s.is_token() && crate::parts(s) <= 64;
                let mut xs = Vec::with_capacity(n);
                for _ in 0..n {
                    if let Some(v) = self.pick(body, any)? {
                        xs.push(v);
                    }
                }
                // Read an element of an existing tuple half of the time.
                if self.draw.one_in(2)?
                    && let Some(t) = self.pick(body, |s| s.is_tuple())?
                {
                    let len = body.shapes[t]
                        .as_ref()
                        .and_then(Shape::tuple_shapes)
                        .map_or(0, |t| t.len());
                    let index = if self.draw.wild && self.draw.one_in(4)? {
                        len
                    } else if len == 0 {
                        return Ok(None);
                    } else {
                        self.draw.below(len)?
                    };
                    return Ok(Some(Step::GetTupleElement { x: t, index }));
                }
                Step::Tuple { xs }
            }
            32 if nested_ok => {
                let Some(xa) = xs.clone() else {
                    return Ok(None);
                };
                let same_dims = |s: &Shape| s.as_array().is_some_and(|b| b.same_dims(&xa));
                let mut operands = vec![x];
                if self.draw.one_in(2)?
                    && let Some(y) = self.pick(body, same_dims)?
                {
                    operands.push(y);
                }
                let params = operands
                    .iter()
                    .map(|&i| Shape::scalar(self.array(body, i).map_or(ty, |a| a.element_type())))
                    .collect();
                match self.nested("mapped", params, Root::Scalar, depth + 1)? {
                    Some(comp) => Step::Map { xs: operands, comp },
                    None => return Ok(None),
                }
            }
            33 if nested_ok => {
                let n = self.draw.range(0, 2)? as usize;
                let mut operands = Vec::new();
                for _ in 0..n {
                    if let Some(v) = self.pick(body, |s| !s.is_token())? {
                        operands.push(v);
                    }
                }
                let params: Vec<Shape> = operands
                    .iter()
                    .filter_map(|&i| body.shapes[i].clone())
                    .collect();
                if params.len() != operands.len() {
                    return Ok(None);
                }
                match self.nested("called", params, Root::Everything, depth + 1)? {
                    Some(comp) => Step::Call { xs: operands, comp },
                    None => return Ok(None),
                }
            }
            34 if nested_ok => {
                let Some(xa) = xs.clone() else {
                    return Ok(None);
                };
                let shape = Shape::Array(xa);
                let trips = self.draw.range(0, 4)? as i32;
                let runaway = self.draw.wild && self.draw.one_in(2)?;
                match self.while_parts(&shape, trips, runaway, depth + 1)? {
                    Some((cond, body)) => Step::While {
                        x,
                        start: 0,
                        cond,
                        body,
                    },
                    None => return Ok(None),
                }
            }
            35 if nested_ok => {
                let pred = match self.scalar_of(body, PrimitiveType::Pred)? {
                    Ok(p) => p,
                    Err(step) => return Ok(Some(step)),
                };
                let Some(xa) = xs.clone() else {
                    return Ok(None);
                };
                let shape = Shape::Array(xa);
                let on_false = self.pick(body, same_shape)?.unwrap_or(x);
                let t = self.nested(
                    "on_true",
                    vec![shape.clone()],
                    Root::Shaped(&shape),
                    depth + 1,
                )?;
                let f = self.nested(
                    "on_false",
                    vec![shape.clone()],
                    Root::Shaped(&shape),
                    depth + 1,
                )?;
                match (t, f) {
                    (Some(true_comp), Some(false_comp)) => Step::Conditional {
                        pred,
                        on_true: x,
                        true_comp,
                        on_false,
                        false_comp,
                    },
                    _ => return Ok(None),
                }
            }
            36 => {
                let rng_ty =
                    *d.u.choose(&[PrimitiveType::F32, PrimitiveType::S32, PrimitiveType::U32])?;
                let (a, b) = match (self.scalar_of(body, rng_ty)?, self.scalar_of(body, rng_ty)?) {
                    (Ok(a), Ok(b)) => (a, b),
                    (Err(step), _) | (_, Err(step)) => return Ok(Some(step)),
                };
                let shape = Shape::Array(self.draw.array_shape(rng_ty)?);
                Step::RngUniform { a, b, shape }
            }
            _ => return Ok(None),
        }))
    }

    /// A constant, iota, or in wild mode a custom call or late parameter.
    fn fresh_value(&mut self) -> Result<Option<Step>> {
        let d = &mut self.draw;
        let ty = d.element_type()?;
        let shape = d.array_shape(ty)?;
        if d.wild && d.one_in(6)? {
            return Ok(Some(if d.one_in(2)? {
                Step::CustomCall {
                    xs: vec![],
                    target: "missing_target".into(),
                    shape: Shape::Array(shape),
                }
            } else {
                Step::Parameter {
                    number: d.int(0, 4)? as usize,
                    shape: Shape::Array(shape),
                }
            }));
        }
        if d.one_in(3)? {
            let rank = shape.rank() as i64;
            return Ok(Some(Step::Iota {
                ty,
                dims: shape.dims().to_vec(),
                dim: d.int(0, (rank - 1).max(0))?,
            }));
        }
        self.constant(&shape)
    }

    /// A reducer `(ty, ty) -> ty` of a random kind, made once per kind and
    /// type; `None` if the type has no binary op at all.
    fn reducer(&mut self, ty: PrimitiveType) -> Result<Option<usize>> {
        let kind = self.draw.below(REDUCERS)?;
        if let Some(&(_, _, i)) = self.reducers.iter().find(|r| r.0 == ty && r.1 == kind) {
            return Ok(Some(i));
        }
        let name = self.fresh_name("reducer");
        let b = XlaBuilder::new(name);
        let s = Shape::scalar(ty);
        let (x, y) = (b.parameter(0, &s, "x"), b.parameter(1, &s, "y"));
        let root = match kind {
            0 => x.add(y),
            1 => x.mul(y),
            2 => x.max(y),
            3 => x.min(y),
            4 => x.or(y),
            _ => x.and(y),
        };
        // A kind the type lacks (`or` on floats) falls back to max, which every type has.
        let built = match b.build(root) {
            Ok(c) => c,
            Err(_) => {
                let b = XlaBuilder::new(self.fresh_name("reducer"));
                let (x, y) = (b.parameter(0, &s, "x"), b.parameter(1, &s, "y"));
                match b.build(x.max(y)) {
                    Ok(c) => c,
                    Err(_) => return Ok(None),
                }
            }
        };
        self.comps.push(built);
        let i = self.comps.len() - 1;
        self.reducers.push((ty, kind, i));
        Ok(Some(i))
    }

    /// Condition and body of a `while` over `(s32[] i, x)`: the body applies a
    /// generated computation to `x` and adds one to `i`; the condition is
    /// `i < trips`, or `true` for a runaway loop.
    fn while_parts(
        &mut self,
        x: &Shape,
        trips: i32,
        runaway: bool,
        depth: usize,
    ) -> Result<Option<(usize, usize)>> {
        let state = Shape::tuple(vec![Shape::scalar(PrimitiveType::S32), x.clone()]);
        let Some(step) = self.nested("step", vec![x.clone()], Root::Shaped(x), depth)? else {
            return Ok(None);
        };
        let cb = XlaBuilder::new(self.fresh_name("cond"));
        let p = cb.parameter(0, &state, "state");
        let go = if runaway {
            cb.constant_r0(true)
        } else {
            p.get_tuple_element(0).lt(cb.constant_r0(trips))
        };
        let bb = XlaBuilder::new(self.fresh_name("body"));
        let p = bb.parameter(0, &state, "state");
        let next = bb.tuple(&[
            p.get_tuple_element(0).add(bb.constant_r0(1i32)),
            bb.call(&self.comps[step], &[p.get_tuple_element(1)]),
        ]);
        match (cb.build(go), bb.build(next)) {
            (Ok(c), Ok(b)) => {
                self.comps.push(c);
                self.comps.push(b);
                Ok(Some((self.comps.len() - 2, self.comps.len() - 1)))
            }
            _ => Ok(None),
        }
    }
}
