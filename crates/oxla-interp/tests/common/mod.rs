//! Helpers shared by the integration tests: running HLO text, making
//! literals from text, and building small modules directly.
#![allow(dead_code)]

use oxla_hlo::ir::Attrs;
use oxla_hlo::{
    ComputationId, HloComputation, HloInstruction, HloModule, InstrId, Literal, Opcode, Shape,
};
use oxla_interp::{EvalError, EvalOptions, NoServices, Services, evaluate};

/// Parses (and verifies) a module, panicking with the parser's message.
pub fn module(text: &str) -> HloModule {
    oxla_text::parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

pub fn shape(text: &str) -> Shape {
    oxla_text::parse_shape(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A literal of the given shape from HLO literal text: `lit("f32[2]", "{1, nan}")`.
pub fn lit(shape_text: &str, values: &str) -> Literal {
    oxla_text::parse_literal(values, &shape(shape_text)).unwrap_or_else(|e| panic!("{e}: {values}"))
}

pub fn try_eval_with(
    text: &str,
    args: &[Literal],
    options: &EvalOptions,
    services: &dyn Services,
) -> Result<Literal, EvalError> {
    evaluate(&module(text), args, options, services)
}

pub fn eval(text: &str, args: &[Literal]) -> Literal {
    try_eval_with(text, args, &EvalOptions::default(), &NoServices)
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

pub fn eval_err(text: &str, args: &[Literal]) -> EvalError {
    match try_eval_with(text, args, &EvalOptions::default(), &NoServices) {
        Ok(v) => panic!("expected an error, got {v}"),
        Err(e) => e,
    }
}

/// The text of a module whose entry applies one instruction to parameters:
/// `ROOT r = OUT OP(p0, p1, ...), ATTRS`, with `params` the parameter shapes
/// and `extra` more computations placed before the entry.
pub fn op_module(out: &str, op: &str, attrs: &str, params: &[&str], extra: &str) -> String {
    let mut text = format!("HloModule t\n\n{extra}\n\nENTRY e {{\n");
    for (i, p) in params.iter().enumerate() {
        text.push_str(&format!("  p{i} = {p} parameter({i})\n"));
    }
    let names: Vec<String> = (0..params.len()).map(|i| format!("p{i}")).collect();
    let attrs = if attrs.is_empty() {
        String::new()
    } else {
        format!(", {attrs}")
    };
    text.push_str(&format!(
        "  ROOT r = {out} {op}({}){attrs}\n}}\n",
        names.join(", ")
    ));
    text
}

/// Evaluates one instruction on arguments given as (shape, literal text).
pub fn eval_op(out: &str, op: &str, attrs: &str, args: &[(&str, &str)]) -> Literal {
    let shapes: Vec<&str> = args.iter().map(|a| a.0).collect();
    let values: Vec<Literal> = args.iter().map(|(s, v)| lit(s, v)).collect();
    eval(&op_module(out, op, attrs, &shapes, ""), &values)
}

/// Asserts bit-identical floats (any NaN equals any NaN; -0 differs from +0).
#[track_caller]
pub fn assert_bits(actual: &Literal, expected: &Literal) {
    assert!(
        actual.bitwise_eq(expected),
        "got {actual}\nexpected {expected}"
    );
}

/// `eval_op` compared bit for bit with `expected` (literal text of shape `out`).
#[track_caller]
pub fn check_op(out: &str, op: &str, attrs: &str, args: &[(&str, &str)], expected: &str) {
    let got = eval_op(out, op, attrs, args);
    assert_bits(&got, &lit(out, expected));
}

/// A scalar binary computation `name` of element type `ty` whose root is `op` (e.g. `add`).
pub fn binary_computation(name: &str, ty: &str, op: &str) -> String {
    format!(
        "{name} {{\n  a = {ty}[] parameter(0)\n  b = {ty}[] parameter(1)\n  ROOT r = {ty}[] {op}(a, b)\n}}\n"
    )
}

/// Builds modules directly from instructions, without the text format.
pub struct CompBuilder {
    name: String,
    instrs: Vec<HloInstruction>,
}

impl CompBuilder {
    pub fn new(name: &str) -> CompBuilder {
        CompBuilder {
            name: name.into(),
            instrs: Vec::new(),
        }
    }

    pub fn add(
        &mut self,
        opcode: Opcode,
        shape: Shape,
        operands: &[InstrId],
        attrs: Attrs,
    ) -> InstrId {
        let mut i = HloInstruction::new(
            format!("i{}", self.instrs.len()),
            opcode,
            shape,
            operands.to_vec(),
        );
        i.attrs = attrs;
        self.instrs.push(i);
        InstrId::new(self.instrs.len() - 1)
    }

    pub fn param(&mut self, n: usize, shape: Shape) -> InstrId {
        let attrs = Attrs {
            parameter_number: Some(n),
            ..Attrs::default()
        };
        self.add(Opcode::Parameter, shape, &[], attrs)
    }

    pub fn constant(&mut self, value: Literal) -> InstrId {
        let shape = value.shape();
        let attrs = Attrs {
            literal: Some(value),
            ..Attrs::default()
        };
        self.add(Opcode::Constant, shape, &[], attrs)
    }

    /// Sets the computations an instruction calls.
    pub fn called(&mut self, id: InstrId, f: impl FnOnce(&mut oxla_hlo::ir::Called)) {
        f(&mut self.instrs[id.index()].called);
    }

    pub fn finish(self, root: InstrId) -> HloComputation {
        HloComputation::new(self.name, self.instrs, root)
    }
}

/// A module from computations in call order; the last one is the entry. Verified.
pub fn build_module(computations: Vec<HloComputation>) -> HloModule {
    let entry = ComputationId::new(computations.len() - 1);
    let m = HloModule::new("built", computations, entry);
    if let Err(e) = oxla_hlo::verifier::verify(&m) {
        panic!("built module does not verify: {e}");
    }
    m
}
