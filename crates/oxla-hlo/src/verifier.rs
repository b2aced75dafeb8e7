//! The verifier: checks a whole module and reports every problem it finds,
//! each tied to its computation and instruction. It runs after the builder
//! builds, after the parser parses, and after every pass that rewrites a module.

use std::collections::HashSet;
use std::fmt;

use crate::ir::{ComputationId, HloModule};
use crate::shape_inference::infer_instruction;

/// One problem in a module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    pub computation: String,
    /// The instruction concerned, when the problem is an instruction's.
    pub instruction: Option<String>,
    pub message: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.instruction {
            Some(i) => write!(
                f,
                "in {}, instruction {}: {}",
                self.computation, i, self.message
            ),
            None => write!(f, "in {}: {}", self.computation, self.message),
        }
    }
}

/// Every problem found in a module (never empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyErrors(pub Vec<VerifyError>);

impl fmt::Display for VerifyErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for VerifyErrors {}

/// Checks every invariant of the IR (see [`crate::ir`]) and every
/// instruction's shape against shape inference.
pub fn verify(module: &HloModule) -> Result<(), VerifyErrors> {
    let mut errors = Vec::new();
    let n = module.computations().len();
    if module.entry_id().index() >= n {
        errors.push(VerifyError {
            computation: module.name.clone(),
            instruction: None,
            message: format!("entry computation {} does not exist", module.entry_id()),
        });
        return Err(VerifyErrors(errors));
    }
    let mut computation_names = HashSet::new();
    for (ci, comp) in module.computations().iter().enumerate() {
        // Names are unique within a computation; XLA allows repeats across computations.
        let mut instruction_names = HashSet::new();
        let here = |instruction: Option<&str>, message: String| VerifyError {
            computation: comp.name.clone(),
            instruction: instruction.map(str::to_string),
            message,
        };
        if !computation_names.insert(comp.name.as_str()) {
            errors.push(here(None, "another computation has the same name".into()));
        }
        let count = comp.instructions().len();
        if count == 0 {
            errors.push(here(None, "has no instructions".into()));
            continue;
        }
        if comp.root().index() >= count {
            errors.push(here(None, format!("root {} does not exist", comp.root())));
        }
        // Parameters numbered 0..n without gaps or repeats.
        let mut numbers: Vec<usize> = comp
            .parameters()
            .iter()
            .filter_map(|&id| comp.instruction(id).attrs.parameter_number)
            .collect();
        numbers.sort_unstable();
        if numbers.iter().enumerate().any(|(i, &p)| i != p) {
            errors.push(here(
                None,
                format!(
                    "parameter numbers {numbers:?} must be 0..{} without gaps or repeats",
                    numbers.len()
                ),
            ));
        }
        for (ii, instr) in comp.instructions().iter().enumerate() {
            let name = instr.name.as_str();
            if !instruction_names.insert(name) {
                errors.push(here(
                    Some(name),
                    "another instruction in this computation has the same name".into(),
                ));
            }
            if let Some(&bad) = instr
                .operands
                .iter()
                .chain(&instr.control_predecessors)
                .find(|o| o.index() >= ii)
            {
                errors.push(here(
                    Some(name),
                    format!("uses {bad}, which is not defined before it (instructions must be in dependency order)"),
                ));
                continue;
            }
            if let Some(bad) = instr.called.all().into_iter().find(|c| c.index() >= ci) {
                let what = if bad.index() < n {
                    format!(
                        "calls {}, which is not defined before it (calls must not form cycles)",
                        module.computation(bad).name
                    )
                } else {
                    format!("calls {bad}, which does not exist")
                };
                errors.push(here(Some(name), what));
                continue;
            }
            // Shapes can be made unchecked (and come from other programs).
            if let Err(e) = instr.shape.validate() {
                errors.push(here(Some(name), format!("has an invalid shape: {e}")));
                continue;
            }
            let operand_shapes: Vec<_> = instr
                .operands
                .iter()
                .map(|&o| &comp.instruction(o).shape)
                .collect();
            let lookup = |id: ComputationId| {
                module
                    .computations()
                    .get(id.index())
                    .map(|c| c.program_shape())
            };
            match infer_instruction(instr, &operand_shapes, &lookup) {
                Ok(shape) if shape.compatible(&instr.shape) => {}
                Ok(shape) => errors.push(here(
                    Some(name),
                    format!(
                        "declared shape {} differs from the inferred shape {shape}",
                        instr.shape
                    ),
                )),
                Err(e) => errors.push(here(Some(name), e.to_string())),
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(VerifyErrors(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{HloComputation, HloInstruction, InstrId, Opcode};
    use crate::{PrimitiveType, Shape};

    fn param(name: &str, n: usize, shape: Shape) -> HloInstruction {
        let mut p = HloInstruction::new(name, Opcode::Parameter, shape, vec![]);
        p.attrs.parameter_number = Some(n);
        p
    }

    #[test]
    fn reports_every_error_with_its_instruction() {
        let f2 = Shape::array(PrimitiveType::F32, [2]).unwrap();
        let f3 = Shape::array(PrimitiveType::F32, [3]).unwrap();
        let instrs = vec![
            param("x", 0, f2.clone()),
            param("y", 2, f3.clone()),
            HloInstruction::new(
                "sum",
                Opcode::Add,
                f2.clone(),
                vec![InstrId::new(0), InstrId::new(1)],
            ),
            HloInstruction::new("neg", Opcode::Negate, f3.clone(), vec![InstrId::new(0)]),
        ];
        let comp = HloComputation::new("main", instrs, InstrId::new(3));
        let module = HloModule::new("m", vec![comp], ComputationId::new(0));
        let errors = verify(&module).unwrap_err();
        let text = errors.to_string();
        assert_eq!(errors.0.len(), 3, "{text}");
        assert!(text.contains("parameter numbers [0, 2]"), "{text}");
        assert!(
            text.contains("instruction sum: add: operands must have the same dimensions"),
            "{text}"
        );
        assert!(
            text.contains(
                "instruction neg: declared shape f32[3] differs from the inferred shape f32[2]"
            ),
            "{text}"
        );
    }

    #[test]
    fn accepts_a_valid_module() {
        let f2 = Shape::array(PrimitiveType::F32, [2]).unwrap();
        let instrs = vec![
            param("x", 0, f2.clone()),
            HloInstruction::new("e", Opcode::Exp, f2.clone(), vec![InstrId::new(0)]),
        ];
        let module = HloModule::new(
            "m",
            vec![HloComputation::new("main", instrs, InstrId::new(1))],
            ComputationId::new(0),
        );
        assert_eq!(verify(&module), Ok(()));
    }

    /// Found by the `builder_calls` fuzz target: a parameter declared with
    /// an unchecked negative dimension verified, then printed as text that
    /// does not parse.
    #[test]
    fn rejects_invalid_declared_shapes() {
        use crate::ArrayShape;
        let bad = Shape::Array(ArrayShape::new_unchecked(PrimitiveType::Pred, [-1, 0, 0]));
        let mut deep = Shape::scalar(PrimitiveType::F32);
        for _ in 0..=crate::MAX_TUPLE_DEPTH {
            deep = Shape::tuple(vec![deep]);
        }
        for (shape, message) in [
            (bad, "dimension 0 of pred[-1,0,0] is negative (-1)"),
            (deep, "tuple shapes nest more than 64 levels deep"),
        ] {
            let module = HloModule::new(
                "m",
                vec![HloComputation::new(
                    "main",
                    vec![param("p", 0, shape)],
                    InstrId::new(0),
                )],
                ComputationId::new(0),
            );
            assert_eq!(
                verify(&module).unwrap_err().to_string(),
                format!("in main, instruction p: has an invalid shape: {message}")
            );
        }
    }

    #[test]
    fn rejects_forward_references() {
        let f2 = Shape::array(PrimitiveType::F32, [2]).unwrap();
        let instrs = vec![
            HloInstruction::new("e", Opcode::Exp, f2.clone(), vec![InstrId::new(1)]),
            param("x", 0, f2.clone()),
        ];
        let module = HloModule::new(
            "m",
            vec![HloComputation::new("main", instrs, InstrId::new(0))],
            ComputationId::new(0),
        );
        assert!(
            verify(&module)
                .unwrap_err()
                .to_string()
                .contains("dependency order")
        );
    }
}
