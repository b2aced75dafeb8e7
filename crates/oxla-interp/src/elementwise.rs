//! Element-wise computations for compilers: a computation of scalar
//! element-wise operations (any element types, conversions included),
//! compiled once and applied to whole arrays element by element with the
//! interpreter's exact semantics: XLA's integer division and shift rules,
//! its conversions, its comparisons. A compiled backend uses it for the
//! element-wise work its own vector loops do not cover (integers, small
//! types, small arrays), so both agree bit for bit.

use oxla_hlo::{ArrayData, ArrayLiteral, ArrayShape, HloComputation};

use crate::element::Elem;
use crate::error::EvalError;
use crate::scalar_program::ScalarProgram;

/// See the module docs.
#[derive(Debug)]
pub struct ElementwiseFunction {
    program: ScalarProgram,
    computation: String,
}

impl ElementwiseFunction {
    /// Compiles `comp` if its parameters are scalars and its root is a
    /// scalar computed from them by element-wise operations only.
    pub fn compile(comp: &HloComputation) -> Option<ElementwiseFunction> {
        if !comp.root_instruction().shape.is_array() {
            return None;
        }
        Some(ElementwiseFunction {
            program: ScalarProgram::compile(comp)?,
            computation: comp.name.clone(),
        })
    }

    /// Applies the function to each element: `args[j]` is parameter `j`,
    /// either an array of `shape`'s dimensions or a rank-0 array used for
    /// every element. The result has `shape`.
    pub fn apply(
        &self,
        args: &[&ArrayLiteral],
        shape: &ArrayShape,
    ) -> Result<ArrayLiteral, EvalError> {
        let fail = |message: String| EvalError::InvalidModule {
            message: format!("in `{}`: {message}", self.computation),
        };
        let n = shape.element_count().map_err(|e| fail(e.to_string()))?;
        for a in args {
            if !a.shape().is_scalar() && a.dims() != shape.dims() {
                return Err(fail(format!(
                    "argument of shape {} for a result of shape {shape}",
                    a.shape()
                )));
            }
        }
        let mut data = ArrayData::zeros(shape.element_type(), n);
        let mut elems: Vec<Elem> = Vec::with_capacity(args.len());
        let mut regs = Vec::new();
        let mut out = Vec::with_capacity(1);
        for i in 0..n {
            elems.clear();
            elems.extend(
                args.iter()
                    .map(|a| Elem::read(a.data(), if a.shape().is_scalar() { 0 } else { i })),
            );
            out.clear();
            self.program
                .run(&elems, &mut regs, &mut out)
                .map_err(|(_, m)| fail(m))?;
            match out.first() {
                Some(e) if e.write(&mut data, i) => {}
                _ => {
                    return Err(fail(format!(
                        "the result is not of type {}",
                        shape.element_type()
                    )));
                }
            }
        }
        ArrayLiteral::new(shape.clone(), data).map_err(|e| fail(e.to_string()))
    }

    /// Like [`apply`](Self::apply), into storage the caller keeps: `out`
    /// holds the result's elements (its length and type say how many and
    /// which), `args[j]` holds parameter `j`'s, as many as `out` or one (used
    /// for every element). Allocates nothing once `scratch` has grown.
    pub fn apply_into(
        &self,
        args: &[&ArrayData],
        out: &mut ArrayData,
        scratch: &mut Scratch,
    ) -> Result<(), EvalError> {
        let fail = |message: String| EvalError::InvalidModule {
            message: format!("in `{}`: {message}", self.computation),
        };
        let n = out.len();
        if let Some(a) = args.iter().find(|a| a.len() != n && a.len() != 1) {
            return Err(fail(format!(
                "an argument of {} elements for a result of {n}",
                a.len()
            )));
        }
        let Scratch {
            elems,
            regs,
            out: results,
        } = scratch;
        for i in 0..n {
            elems.clear();
            elems.extend(
                args.iter()
                    .map(|a| Elem::read(a, if a.len() == 1 { 0 } else { i })),
            );
            results.clear();
            self.program
                .run(elems, regs, results)
                .map_err(|(_, m)| fail(m))?;
            match results.first() {
                Some(e) if e.write(out, i) => {}
                _ => {
                    return Err(fail(format!(
                        "the result is not of type {}",
                        out.element_type()
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Working space for [`ElementwiseFunction::apply_into`], kept by the
/// caller between calls.
#[derive(Debug, Default)]
pub struct Scratch {
    elems: Vec<Elem>,
    regs: Vec<Elem>,
    out: Vec<Elem>,
}
