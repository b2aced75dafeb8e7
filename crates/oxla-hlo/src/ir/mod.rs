//! The HLO IR: a module holds computations, a computation holds instructions.
//! Both live in arenas (`Vec`s) addressed by typed ids; an instruction names its
//! operands by [`InstrId`] within its own computation and the computations it
//! calls by [`ComputationId`] within its module.
//!
//! Invariants (checked by [`crate::verifier`]): instructions are stored in
//! dependency order (operands before users); parameters are numbered 0..n
//! without gaps; a computation only calls computations stored before it, so
//! calls never form a cycle; every instruction's shape is what shape
//! inference gives for its operands and attributes.

mod attrs;
mod ids;
mod opcode;

pub use attrs::*;
pub use ids::{ComputationId, InstrId};
pub use opcode::{Arity, OpFamily, Opcode};

use crate::shape::{ProgramShape, Shape};

/// One HLO instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct HloInstruction {
    /// Unique within its computation (HLO text names are unique per module).
    pub name: String,
    pub opcode: Opcode,
    /// The result shape.
    pub shape: Shape,
    pub operands: Vec<InstrId>,
    pub attrs: Attrs,
    pub called: Called,
    /// Instructions that must run before this one although it does not use their values.
    pub control_predecessors: Vec<InstrId>,
}

impl HloInstruction {
    /// An instruction with no attributes, called computations or control edges.
    pub fn new(
        name: impl Into<String>,
        opcode: Opcode,
        shape: Shape,
        operands: Vec<InstrId>,
    ) -> HloInstruction {
        HloInstruction {
            name: name.into(),
            opcode,
            shape,
            operands,
            attrs: Attrs::default(),
            called: Called::default(),
            control_predecessors: Vec::new(),
        }
    }

    /// The value of a one-element integer `constant` (a bound or step the
    /// passes and backends reason about), or `None` for anything else.
    pub fn integer_constant(&self) -> Option<i128> {
        if self.opcode != Opcode::Constant {
            return None;
        }
        let array = self.attrs.literal.as_ref()?.as_array()?;
        if array.element_count() != 1 || !array.element_type().is_integral() {
            return None;
        }
        match array.data().scalar(0) {
            crate::Scalar::Int(v) => Some(v),
            _ => None,
        }
    }
}

/// A computation: a list of instructions in dependency order, the parameters
/// among them, and the root whose value is the computation's result.
#[derive(Clone, Debug, PartialEq)]
pub struct HloComputation {
    pub name: String,
    instructions: Vec<HloInstruction>,
    root: InstrId,
    /// Parameter instructions indexed by parameter number.
    parameters: Vec<InstrId>,
}

impl HloComputation {
    /// A computation from instructions in dependency order and the root's id.
    /// Parameters are found by their `parameter_number`; gaps or duplicates
    /// are left for the verifier to report.
    pub fn new(
        name: impl Into<String>,
        instructions: Vec<HloInstruction>,
        root: InstrId,
    ) -> HloComputation {
        let mut c = HloComputation {
            name: name.into(),
            instructions,
            root,
            parameters: Vec::new(),
        };
        c.index_parameters();
        c
    }

    fn index_parameters(&mut self) {
        let mut params: Vec<(usize, InstrId)> = self
            .instructions
            .iter()
            .enumerate()
            .filter(|(_, i)| i.opcode == Opcode::Parameter)
            .map(|(k, i)| {
                (
                    i.attrs.parameter_number.unwrap_or(usize::MAX),
                    InstrId::new(k),
                )
            })
            .collect();
        params.sort();
        self.parameters = params.into_iter().map(|(_, id)| id).collect();
    }

    pub fn instructions(&self) -> &[HloInstruction] {
        &self.instructions
    }

    /// Mutable access for passes; call [`HloComputation::reindex`] after changing parameters.
    pub fn instructions_mut(&mut self) -> &mut Vec<HloInstruction> {
        &mut self.instructions
    }

    /// Recomputes the parameter index after instructions were edited.
    pub fn reindex(&mut self) {
        self.index_parameters();
    }

    pub fn instruction(&self, id: InstrId) -> &HloInstruction {
        &self.instructions[id.index()]
    }

    pub fn ids(&self) -> impl Iterator<Item = InstrId> + '_ {
        (0..self.instructions.len()).map(InstrId::new)
    }

    pub fn root(&self) -> InstrId {
        self.root
    }

    pub fn set_root(&mut self, root: InstrId) {
        self.root = root;
    }

    pub fn root_instruction(&self) -> &HloInstruction {
        self.instruction(self.root)
    }

    /// Parameter instructions in parameter-number order.
    pub fn parameters(&self) -> &[InstrId] {
        &self.parameters
    }

    pub fn num_parameters(&self) -> usize {
        self.parameters.len()
    }

    pub fn parameter_shape(&self, n: usize) -> Option<&Shape> {
        self.parameters
            .get(n)
            .map(|&id| &self.instruction(id).shape)
    }

    /// Parameter shapes and the result shape.
    pub fn program_shape(&self) -> ProgramShape {
        ProgramShape {
            parameters: self
                .parameters
                .iter()
                .map(|&id| self.instruction(id).shape.clone())
                .collect(),
            result: self.root_instruction().shape.clone(),
        }
    }

    /// The instruction named `name`.
    pub fn find(&self, name: &str) -> Option<InstrId> {
        self.instructions
            .iter()
            .position(|i| i.name == name)
            .map(InstrId::new)
    }

    /// For each instruction, the instructions that use it as an operand.
    pub fn users(&self) -> Vec<Vec<InstrId>> {
        let mut users = vec![Vec::new(); self.instructions.len()];
        for (k, instr) in self.instructions.iter().enumerate() {
            for &op in &instr.operands {
                if let Some(u) = users.get_mut(op.index())
                    && !u.contains(&InstrId::new(k))
                {
                    u.push(InstrId::new(k));
                }
            }
        }
        users
    }
}

/// A module: computations in call order (callees before callers) and the entry.
#[derive(Clone, Debug, PartialEq)]
pub struct HloModule {
    pub name: String,
    computations: Vec<HloComputation>,
    entry: ComputationId,
    /// Header attributes other than `entry_computation_layout` (which is
    /// derived from the entry computation), kept as written.
    pub header_attributes: Vec<(String, String)>,
}

impl HloModule {
    /// A module from computations in call order; `entry` must index one of them.
    pub fn new(
        name: impl Into<String>,
        computations: Vec<HloComputation>,
        entry: ComputationId,
    ) -> HloModule {
        HloModule {
            name: name.into(),
            computations,
            entry,
            header_attributes: Vec::new(),
        }
    }

    pub fn computations(&self) -> &[HloComputation] {
        &self.computations
    }

    pub fn computations_mut(&mut self) -> &mut Vec<HloComputation> {
        &mut self.computations
    }

    pub fn computation(&self, id: ComputationId) -> &HloComputation {
        &self.computations[id.index()]
    }

    pub fn computation_ids(&self) -> impl Iterator<Item = ComputationId> + '_ {
        (0..self.computations.len()).map(ComputationId::new)
    }

    pub fn entry_id(&self) -> ComputationId {
        self.entry
    }

    pub fn set_entry(&mut self, entry: ComputationId) {
        self.entry = entry;
    }

    pub fn entry(&self) -> &HloComputation {
        self.computation(self.entry)
    }

    /// The entry computation's signature.
    pub fn program_shape(&self) -> ProgramShape {
        self.entry().program_shape()
    }

    /// The computation named `name`.
    pub fn find_computation(&self, name: &str) -> Option<ComputationId> {
        self.computations
            .iter()
            .position(|c| c.name == name)
            .map(ComputationId::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Literal;

    fn constant(literal: Literal) -> HloInstruction {
        let shape = literal.shape();
        let mut instr = HloInstruction::new("c", Opcode::Constant, shape, vec![]);
        instr.attrs.literal = Some(literal);
        instr
    }

    #[test]
    fn integer_constants_of_one_element_only() {
        assert_eq!(
            constant(Literal::scalar(-7i32)).integer_constant(),
            Some(-7)
        );
        assert_eq!(
            constant(Literal::scalar(u64::MAX)).integer_constant(),
            Some(i128::from(u64::MAX))
        );
        assert_eq!(constant(Literal::vec1(&[5u8])).integer_constant(), Some(5));
        assert_eq!(constant(Literal::vec1(&[1i64, 2])).integer_constant(), None);
        assert_eq!(constant(Literal::scalar(2.0f32)).integer_constant(), None);
        assert_eq!(constant(Literal::scalar(true)).integer_constant(), None);
        let param = HloInstruction::new(
            "p",
            Opcode::Parameter,
            Literal::scalar(0i32).shape(),
            vec![],
        );
        assert_eq!(param.integer_constant(), None);
    }
}
