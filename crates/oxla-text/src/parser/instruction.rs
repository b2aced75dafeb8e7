//! Instructions: `[ROOT] name = [shape] opcode(operands), attr=value, ...`.
//! Operands may carry their shape (`f32[2]{0} %x`, checked against the
//! operand) or be anonymous instructions nested in place
//! (`add(f32[] multiply(a, b), c)`), which become instructions of their own
//! named `<opcode>.anon`. A result shape may be left out where oxla's shape
//! inference can supply it.

use std::collections::{HashMap, HashSet};

use oxla_hlo::shape_inference::infer_instruction;
use oxla_hlo::{ComputationId, HloInstruction, InstrId, Literal, Opcode, Shape};

use super::Parser;
use super::attributes::Pending;
use crate::attr_table::{XLA_ONLY_OPCODES, lookup};
use crate::error::PResult;
use crate::lexer::Tok;

/// The computation being parsed: its instructions so far and their names.
#[derive(Default)]
pub(crate) struct CompCtx {
    pub(super) instructions: Vec<HloInstruction>,
    names: HashMap<String, InstrId>,
    pub(super) root: Option<InstrId>,
    parameter_numbers: HashSet<usize>,
    /// The next suffix to try for each opcode's anonymous names, so naming
    /// many nested instructions stays linear.
    anonymous_suffix: HashMap<Opcode, usize>,
}

impl CompCtx {
    pub(super) fn lookup(&self, name: &str) -> Option<InstrId> {
        self.names.get(name).copied()
    }

    fn shape(&self, id: InstrId) -> Option<&Shape> {
        self.instructions.get(id.index()).map(|i| &i.shape)
    }

    /// `<opcode>.anon`, then `<opcode>.anon.1`, ...: unique within the computation.
    fn anonymous_name(&mut self, op: Opcode) -> String {
        let k = self.anonymous_suffix.entry(op).or_insert(0);
        loop {
            let name = match *k {
                0 => format!("{op}.anon"),
                n => format!("{op}.anon.{n}"),
            };
            *k += 1;
            if !self.names.contains_key(&name) {
                return name;
            }
        }
    }
}

/// What is known of an instruction once its operands are read.
struct Head {
    /// `None` for a nested (anonymous) instruction.
    name: Option<String>,
    name_at: usize,
    shape: Option<Shape>,
    opcode: Opcode,
    op_at: usize,
    operands: Vec<InstrId>,
    parameter_number: Option<usize>,
    literal: Option<Box<Literal>>,
}

/// Opcodes whose result shape is an input rather than something inference derives.
fn needs_written_shape(op: Opcode) -> bool {
    use Opcode as O;
    matches!(
        op,
        O::Parameter
            | O::Constant
            | O::Iota
            | O::Convert
            | O::BitcastConvert
            | O::Bitcast
            | O::Broadcast
            | O::Reshape
            | O::Rng
            | O::RngBitGenerator
            | O::Infeed
            | O::CustomCall
            | O::ReduceScatter
            | O::AllGather
            | O::AllToAll
    )
}

impl<'a> Parser<'a> {
    /// `{ instruction... }`: a computation's body. Returns the instructions
    /// and the root (the `ROOT` instruction, else the last one).
    pub(super) fn computation_body(&mut self) -> PResult<(Vec<HloInstruction>, InstrId)> {
        self.expect(&Tok::LBrace, "'{' to start the computation body")?;
        let mut ctx = CompCtx::default();
        loop {
            let t = self.peek()?.clone();
            match t.tok {
                Tok::RBrace => {
                    self.next()?;
                    if ctx.instructions.is_empty() {
                        return Err(
                            self.error(t.start, "a computation needs at least one instruction")
                        );
                    }
                    let last = InstrId::new(ctx.instructions.len() - 1);
                    let root = ctx.root.unwrap_or(last);
                    return Ok((ctx.instructions, root));
                }
                Tok::Eof => return Err(self.expected("an instruction or '}'", &t)),
                _ => self.instruction(&mut ctx)?,
            }
        }
    }

    fn instruction(&mut self, ctx: &mut CompCtx) -> PResult<()> {
        let first = self.peek()?.start;
        let is_root = self.at_ident("ROOT")?;
        if is_root {
            self.next()?;
        }
        let (name, name_at) = self.name("an instruction name")?;
        self.expect(&Tok::Equal, "'=' after the instruction name")?;
        let shape = if self.at_shape()? {
            Some(self.shape()?)
        } else {
            None
        };
        let id = self.instruction_rhs(ctx, Some(name), name_at, shape, true)?;
        if is_root {
            if ctx.root.is_some() {
                return Err(self.error(first, "a computation can have only one ROOT instruction"));
            }
            ctx.root = Some(id);
        }
        Ok(())
    }

    /// Everything after `name = [shape]`; adds the instruction to `ctx`.
    /// Nested instructions have no name (`None`; they are named once their
    /// own nested operands are) and take no attributes, so a `,` after them
    /// separates operands.
    ///
    /// Nested instructions and inline computations recurse through here, so
    /// the large values (`Attrs`, `HloInstruction`) live on the heap or in
    /// [`Parser::build_instruction`], which is not on the recursive path:
    /// this keeps a nesting level to a few hundred bytes of stack.
    fn instruction_rhs(
        &mut self,
        ctx: &mut CompCtx,
        name: Option<String>,
        name_at: usize,
        shape: Option<Shape>,
        top_level: bool,
    ) -> PResult<InstrId> {
        let op_tok = self.next()?;
        let op_at = op_tok.start;
        let opcode = match op_tok.tok {
            Tok::Ident(word) => Opcode::from_name(word).ok_or_else(|| {
                let why = if XLA_ONLY_OPCODES.contains(&word) {
                    format!("opcode {word} is not supported by oxla")
                } else {
                    format!("unknown opcode {word}")
                };
                self.error(op_at, why)
            })?,
            _ => return Err(self.expected("an opcode", &op_tok)),
        };
        self.expect(&Tok::LParen, &format!("'(' after {opcode}"))?;
        let mut head = Head {
            name,
            name_at,
            shape,
            opcode,
            op_at,
            operands: Vec::new(),
            parameter_number: None,
            literal: None,
        };
        match opcode {
            Opcode::Parameter => {
                let at = self.peek()?.start;
                let n = self.index("a parameter number")?;
                if !ctx.parameter_numbers.insert(n) {
                    return Err(self.error(at, format!("parameter number {n} is used twice")));
                }
                self.expect(&Tok::RParen, "')' after the parameter number")?;
                head.parameter_number = Some(n);
            }
            Opcode::Constant => {
                let Some(shape) = &head.shape else {
                    return Err(
                        self.error(op_at, "constant needs its shape written before the opcode")
                    );
                };
                head.literal = Some(Box::new(self.literal(shape)?));
                self.expect(&Tok::RParen, "')' after the literal")?;
            }
            _ => head.operands = self.operands(ctx)?,
        }
        let pending = match top_level {
            true => self.read_attributes(ctx, opcode)?,
            false => Pending::boxed(),
        };
        self.build_instruction(ctx, head, pending)
    }

    /// `, name=value` pairs after the operands.
    fn read_attributes(&mut self, ctx: &CompCtx, opcode: Opcode) -> PResult<Box<Pending>> {
        let mut pending = Pending::boxed();
        while self.peek_tok()? == &Tok::Comma {
            self.next()?;
            let t = self.next()?;
            let Tok::Ident(attr) = t.tok else {
                return Err(self.expected("an attribute name", &t));
            };
            self.expect(&Tok::Equal, &format!("'=' after attribute {attr}"))?;
            let Some(slot) = lookup(opcode, attr) else {
                return Err(
                    self.error(t.start, format!("unexpected attribute {attr} for {opcode}"))
                );
            };
            if pending.has(slot) {
                return Err(self.error(t.start, format!("duplicate attribute {attr}")));
            }
            self.attribute_value(ctx, slot, &mut pending)?;
        }
        Ok(pending)
    }

    /// Assembles the instruction, infers its shape if it was not written, and adds it.
    #[inline(never)]
    fn build_instruction(
        &self,
        ctx: &mut CompCtx,
        head: Head,
        pending: Box<Pending>,
    ) -> PResult<InstrId> {
        let Head {
            name,
            name_at,
            shape,
            opcode,
            op_at,
            operands,
            parameter_number,
            literal,
        } = head;
        let operand_shapes: Vec<&Shape> = operands.iter().filter_map(|&id| ctx.shape(id)).collect();
        let (mut attrs, called, control_predecessors) =
            self.finalize_attributes(opcode, *pending, &operand_shapes, op_at)?;
        attrs.parameter_number = parameter_number;
        attrs.literal = literal.map(|l| *l);
        let name = name.unwrap_or_else(|| ctx.anonymous_name(opcode));
        let mut instr = HloInstruction {
            name,
            opcode,
            shape: Shape::Tuple(Vec::new()),
            operands,
            attrs,
            called,
            control_predecessors,
        };
        instr.shape = match shape {
            Some(s) => s,
            None if needs_written_shape(opcode) => {
                return Err(self.error(
                    op_at,
                    format!("{opcode} needs its shape written before the opcode"),
                ));
            }
            None => {
                let comps = &self.computations;
                let lookup = |id: ComputationId| comps.get(id.index()).map(|c| c.program_shape());
                let operand_shapes: Vec<&Shape> = instr
                    .operands
                    .iter()
                    .filter_map(|&id| ctx.shape(id))
                    .collect();
                infer_instruction(&instr, &operand_shapes, &lookup).map_err(|e| {
                    self.error(
                        op_at,
                        format!("cannot infer the shape of this {opcode}: {e}"),
                    )
                })?
            }
        };
        if ctx.names.contains_key(&instr.name) {
            return Err(self.error(
                name_at,
                format!(
                    "instruction {} is already defined in this computation",
                    instr.name
                ),
            ));
        }
        let id = InstrId::new(ctx.instructions.len());
        ctx.names.insert(instr.name.clone(), id);
        ctx.instructions.push(instr);
        Ok(id)
    }

    /// The operand list after `(`, up to and including `)`.
    fn operands(&mut self, ctx: &mut CompCtx) -> PResult<Vec<InstrId>> {
        let mut out = Vec::new();
        if self.eat(&Tok::RParen)? {
            return Ok(out);
        }
        loop {
            out.push(self.operand(ctx)?);
            let t = self.next()?;
            match t.tok {
                Tok::Comma => {}
                Tok::RParen => return Ok(out),
                _ => return Err(self.expected("',' or ')' after operand", &t)),
            }
        }
    }

    /// `[shape] name` or `[shape] opcode(...)` (a nested instruction).
    fn operand(&mut self, ctx: &mut CompCtx) -> PResult<InstrId> {
        let start = self.peek()?.start;
        let declared = if self.at_shape()? {
            Some(self.shape()?)
        } else {
            None
        };
        let t = self.peek()?.clone();
        match t.tok {
            Tok::Ident(_) if self.peek_nth(1)?.tok == Tok::LParen => {
                self.enter(start)?;
                let id = self.instruction_rhs(ctx, None, t.start, declared, false)?;
                self.leave();
                Ok(id)
            }
            Tok::Ident(name) | Tok::Name(name) => {
                self.next()?;
                let id = ctx.lookup(name).ok_or_else(|| {
                    self.error(
                        t.start,
                        format!("instruction {name} is not defined before this use"),
                    )
                })?;
                match (&declared, ctx.shape(id)) {
                    (Some(declared), Some(actual)) if !declared.compatible(actual) => Err(self
                        .error(
                            start,
                            format!(
                                "operand {name} has shape {actual}, not the {declared} written here"
                            ),
                        )),
                    _ => Ok(id),
                }
            }
            _ => {
                let what = if declared.is_some() {
                    "an operand name after its shape"
                } else {
                    "an operand"
                };
                Err(self.expected(what, &t))
            }
        }
    }
}
