//! Random computations decoded from bytes, for oxla's fuzz targets (`fuzz/`)
//! and property tests. [`generate`] reads an [`arbitrary::Unstructured`] and
//! makes a sequence of `XlaBuilder` calls with random shapes and attributes,
//! including nested computations (`call`, `while`, `conditional`, `map`,
//! reducers), and arguments for the result's parameters.
//!
//! In valid mode only the calls the builder accepts are kept (each call is
//! tried on a replay of the ones before it), so the computation always
//! builds: a build failure is a bug in oxla. In wild mode attributes and
//! shapes may also be hostile (negative, huge, out of range), and generation
//! stops at the first call the builder rejects, whose error `build` must
//! then return.

mod propose;
mod step;
mod values;

use arbitrary::{Result, Unstructured};
use oxla_builder::{BuildError, XlaBuilder, XlaComputation, XlaOp};
use oxla_hlo::{Literal, Shape};

use crate::step::{Step, apply};
use crate::values::Draw;

/// How large and how hostile generated computations are.
#[derive(Clone, Debug)]
pub struct Options {
    /// The most builder calls in one computation (nested ones get half).
    pub max_ops: usize,
    /// How deeply computations may nest (`call`, `while`, `conditional`, `map`).
    pub max_depth: usize,
    /// Whether attributes and shapes may be hostile (see the crate docs).
    pub wild: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_ops: 16,
            max_depth: 2,
            wild: false,
        }
    }
}

/// A generated computation and arguments for it.
pub struct Generated {
    /// What `XlaBuilder::build` returned.
    pub built: std::result::Result<XlaComputation, BuildError>,
    /// One value per entry parameter (in wild mode possibly of the wrong shape).
    pub args: Vec<Literal>,
}

/// Decodes a computation from `u`. Running out of bytes only makes it smaller.
pub fn generate(u: &mut Unstructured<'_>, options: &Options) -> Result<Generated> {
    let mut g = Gen {
        draw: Draw {
            u,
            wild: options.wild,
        },
        options: options.clone(),
        comps: Vec::new(),
        reducers: Vec::new(),
        next_name: 0,
    };
    let n_params = g.draw.range(0, 3)? as usize;
    let mut params = Vec::with_capacity(n_params);
    for _ in 0..n_params {
        let ty = g.draw.element_type()?;
        let shape = Shape::Array(g.draw.array_shape(ty)?);
        params.push(if g.draw.one_in(8)? {
            Shape::tuple(vec![shape, Shape::scalar(ty)])
        } else {
            shape
        });
    }
    let max_ops = options.max_ops;
    let body = g.body("main", params, max_ops, 0)?;
    let built = g.finish(&body, Root::Everything);
    g.draw.wild = false;
    let args = body
        .params
        .iter()
        .map(|s| g.draw.argument(s))
        .collect::<Result<Vec<_>>>()?;
    Ok(Generated { built, args })
}

/// The number of parts of `shape` (arrays, tokens and tuples).
fn parts(shape: &Shape) -> usize {
    match shape {
        Shape::Tuple(t) => 1 + t.iter().map(parts).sum::<usize>(),
        _ => 1,
    }
}

/// What a computation returns.
#[derive(Clone, Copy)]
enum Root<'s> {
    /// A tuple of every value made after the parameters (so that all of
    /// them are evaluated), or the first parameter if there are none.
    Everything,
    /// Some value of this shape (a parameter of that shape must exist).
    Shaped(&'s Shape),
    /// Some rank-0 array (every parameter must be one).
    Scalar,
}

/// A computation being generated.
struct Body {
    name: String,
    params: Vec<Shape>,
    steps: Vec<Step>,
    /// Shapes of the values: parameters, then one per step (`None` for a
    /// step the builder rejected, which only wild mode keeps).
    shapes: Vec<Option<Shape>>,
}

struct Gen<'u, 'a> {
    draw: Draw<'u, 'a>,
    options: Options,
    comps: Vec<XlaComputation>,
    /// Reducer computations already made: (element type, kind, index in `comps`).
    reducers: Vec<(oxla_hlo::PrimitiveType, usize, usize)>,
    next_name: usize,
}

impl Gen<'_, '_> {
    fn fresh_name(&mut self, base: &str) -> String {
        self.next_name += 1;
        format!("{base}_{}", self.next_name)
    }

    /// Up to `max_ops` accepted steps on parameters of `params`.
    fn body(
        &mut self,
        name: &str,
        params: Vec<Shape>,
        max_ops: usize,
        depth: usize,
    ) -> Result<Body> {
        let mut body = Body {
            name: name.to_string(),
            shapes: params.iter().cloned().map(Some).collect(),
            params,
            steps: Vec::new(),
        };
        let n = self.draw.range(0, max_ops as i64)? as usize;
        // Rejected proposals cost a try each; bound the tries, not just the steps.
        let mut tries = 0;
        while body.steps.len() < n && tries < 4 * n.max(1) && !self.draw.u.is_empty() {
            tries += 1;
            let Some(step) = self.propose(&body, depth)? else {
                continue;
            };
            match self.try_step(&body, &step) {
                Some(shape) => {
                    body.steps.push(step);
                    body.shapes.push(Some(shape));
                }
                None if self.draw.wild => {
                    body.steps.push(step);
                    body.shapes.push(None);
                    break;
                }
                None => {}
            }
        }
        Ok(body)
    }

    /// The shape `step` makes after `body`'s steps, or `None` if the builder rejects it.
    fn try_step(&self, body: &Body, step: &Step) -> Option<Shape> {
        let b = XlaBuilder::new(&body.name);
        let ops = self.replay(&b, body);
        if b.first_error().is_some() {
            return None;
        }
        apply(&b, &ops, step, &self.comps).shape().ok()
    }

    fn replay<'b>(&self, b: &'b XlaBuilder, body: &Body) -> Vec<XlaOp<'b>> {
        let mut ops: Vec<XlaOp<'b>> = body
            .params
            .iter()
            .enumerate()
            .map(|(i, s)| b.parameter(i, s, &format!("p{i}")))
            .collect();
        for step in &body.steps {
            let op = apply(b, &ops, step, &self.comps);
            ops.push(op);
        }
        ops
    }

    /// Builds `body` with the given kind of root.
    fn finish(
        &mut self,
        body: &Body,
        root: Root<'_>,
    ) -> std::result::Result<XlaComputation, BuildError> {
        let b = XlaBuilder::new(&body.name);
        let ops = self.replay(&b, body);
        let n_params = body.params.len();
        let candidates = |want: &dyn Fn(&Shape) -> bool| -> Vec<usize> {
            (0..ops.len())
                .filter(|&i| body.shapes[i].as_ref().is_some_and(want))
                .collect()
        };
        let root_op = match root {
            Root::Everything if ops.len() > n_params => {
                // As many values as one tuple shape can hold.
                let mut total = 1;
                let mut members = Vec::new();
                for (k, op) in ops.iter().enumerate().skip(n_params) {
                    let size = body.shapes[k].as_ref().map_or(1, parts);
                    if total + size < oxla_hlo::MAX_SHAPE_PARTS {
                        total += size;
                        members.push(*op);
                    }
                }
                b.tuple(&members)
            }
            Root::Everything if n_params > 0 => ops[0],
            Root::Everything => b.constant_r0(0.0f32),
            Root::Shaped(s) => {
                let c = candidates(&|x| x.compatible(s));
                let i = self.draw.below(c.len()).unwrap_or(0);
                c.get(i).map_or_else(|| b.constant_r0(0.0f32), |&k| ops[k])
            }
            Root::Scalar => {
                let c = candidates(&|x| x.as_array().is_some_and(|a| a.is_scalar()));
                let i = self.draw.below(c.len()).unwrap_or(0);
                c.get(i).map_or_else(|| b.constant_r0(0.0f32), |&k| ops[k])
            }
        };
        b.build(root_op)
    }

    /// A nested computation on `params`, built, added to `comps`; its index.
    /// `None` if it did not build (possible only in wild mode).
    fn nested(
        &mut self,
        base: &str,
        params: Vec<Shape>,
        root: Root<'_>,
        depth: usize,
    ) -> Result<Option<usize>> {
        let name = self.fresh_name(base);
        // Nested computations are valid; hostility stays in the entry computation.
        let wild = std::mem::replace(&mut self.draw.wild, false);
        let max_ops = (self.options.max_ops / 2).max(1);
        let body = self.body(&name, params, max_ops, depth);
        let built = body.map(|body| self.finish(&body, root));
        self.draw.wild = wild;
        Ok(built?.ok().map(|c| {
            self.comps.push(c);
            self.comps.len() - 1
        }))
    }
}
