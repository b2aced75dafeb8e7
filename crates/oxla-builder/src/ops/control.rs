//! Tuples and control flow: tuple, get-tuple-element, call, while, conditional.

use std::panic::Location;

use oxla_hlo::Shape;
use oxla_hlo::ir::Opcode;
use oxla_hlo::shape_inference as infer;

use crate::builder::{Extra, XlaBuilder};
use crate::computation::XlaComputation;
use crate::op::XlaOp;

impl<'b> XlaOp<'b> {
    /// Element `index` of a tuple.
    #[track_caller]
    pub fn get_tuple_element(self, index: usize) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("get-tuple-element", &[self], loc) else {
            return b.failed();
        };
        let mut extra = Extra::default();
        extra.attrs.tuple_index = Some(index);
        b.add(
            Opcode::GetTupleElement,
            infer::get_tuple_element(&s[0], index),
            ids,
            extra,
            loc,
        )
    }
}

impl XlaBuilder {
    /// A tuple of the given values (each of any shape).
    #[track_caller]
    pub fn tuple<'b>(&'b self, elements: &[XlaOp<'b>]) -> XlaOp<'b> {
        self.tuple_at(elements, Location::caller())
    }

    pub(crate) fn tuple_at<'b>(
        &'b self,
        elements: &[XlaOp<'b>],
        loc: &'static Location<'static>,
    ) -> XlaOp<'b> {
        let Some((ids, s)) = self.shapes("tuple", elements, loc) else {
            return self.failed();
        };
        self.add(
            Opcode::Tuple,
            Ok(Shape::Tuple(s)),
            ids,
            Extra::default(),
            loc,
        )
    }

    /// Calls `computation` with `args`, which must match its parameters.
    #[track_caller]
    pub fn call<'b>(&'b self, computation: &XlaComputation, args: &[XlaOp<'b>]) -> XlaOp<'b> {
        let loc = Location::caller();
        let Some((ids, s)) = self.shapes("call", args, loc) else {
            return self.failed();
        };
        let (comp, sig) = self.embed(computation);
        let refs: Vec<&Shape> = s.iter().collect();
        let mut extra = Extra::default();
        extra.called.to_apply = Some(comp);
        self.add(Opcode::Call, infer::call(&refs, &sig), ids, extra, loc)
    }

    /// Repeats `body: T -> T` from `init` while `condition: T -> pred` holds;
    /// the result is the last value of the body (or `init` if it never ran).
    #[track_caller]
    pub fn while_loop<'b>(
        &'b self,
        condition: &XlaComputation,
        body: &XlaComputation,
        init: XlaOp<'b>,
    ) -> XlaOp<'b> {
        let loc = Location::caller();
        let Some((ids, s)) = self.shapes("while", &[init], loc) else {
            return self.failed();
        };
        let (cond, cond_sig) = self.embed(condition);
        let (body, body_sig) = self.embed(body);
        let mut extra = Extra::default();
        extra.called.condition = Some(cond);
        extra.called.body = Some(body);
        self.add(
            Opcode::While,
            infer::while_loop(&cond_sig, &body_sig, &s[0]),
            ids,
            extra,
            loc,
        )
    }

    /// `if pred { true_computation(true_operand) } else { false_computation(false_operand) }`.
    #[track_caller]
    pub fn conditional<'b>(
        &'b self,
        pred: XlaOp<'b>,
        true_operand: XlaOp<'b>,
        true_computation: &XlaComputation,
        false_operand: XlaOp<'b>,
        false_computation: &XlaComputation,
    ) -> XlaOp<'b> {
        self.conditional_impl(
            pred,
            &[true_operand, false_operand],
            &[true_computation, false_computation],
            Location::caller(),
        )
    }

    /// Runs `branches[index](operands[index])`; an out-of-range `index` (s32) runs the last branch.
    #[track_caller]
    pub fn switch<'b>(
        &'b self,
        index: XlaOp<'b>,
        operands: &[XlaOp<'b>],
        branches: &[&XlaComputation],
    ) -> XlaOp<'b> {
        self.conditional_impl(index, operands, branches, Location::caller())
    }

    fn conditional_impl<'b>(
        &'b self,
        selector: XlaOp<'b>,
        operands: &[XlaOp<'b>],
        branches: &[&XlaComputation],
        loc: &'static Location<'static>,
    ) -> XlaOp<'b> {
        let mut all = vec![selector];
        all.extend_from_slice(operands);
        let Some((ids, s)) = self.shapes("conditional", &all, loc) else {
            return self.failed();
        };
        let mut extra = Extra::default();
        let mut sigs = Vec::with_capacity(branches.len());
        for b in branches {
            let (id, sig) = self.embed(b);
            extra.called.branches.push(id);
            sigs.push(sig);
        }
        let refs: Vec<&Shape> = s[1..].iter().collect();
        self.add(
            Opcode::Conditional,
            infer::conditional(&s[0], &refs, &sigs),
            ids,
            extra,
            loc,
        )
    }
}

impl<'b> XlaOp<'b> {
    /// `opt-barrier`: the value itself, but a fence optimisations do not move code across.
    #[track_caller]
    pub fn optimization_barrier(self) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("opt-barrier", &[self], loc) else {
            return b.failed();
        };
        b.add(
            Opcode::OptimizationBarrier,
            Ok(s[0].clone()),
            ids,
            Extra::default(),
            loc,
        )
    }
}

impl XlaBuilder {
    /// `scan` along `dimension`: `body(x_0.., carry_0..) -> (y_0.., carry_0..)`
    /// runs once per position of the inputs (backwards when `reverse`); the
    /// result is the outputs stacked along `dimension`, then the final carries.
    #[track_caller]
    pub fn scan<'b>(
        &'b self,
        inputs: &[XlaOp<'b>],
        carries: &[XlaOp<'b>],
        body: &XlaComputation,
        dimension: i64,
        reverse: bool,
    ) -> XlaOp<'b> {
        let loc = Location::caller();
        let all: Vec<XlaOp<'b>> = inputs.iter().chain(carries).copied().collect();
        let Some((ids, s)) = self.shapes("scan", &all, loc) else {
            return self.failed();
        };
        let (comp, sig) = self.embed(body);
        let refs: Vec<&Shape> = s.iter().collect();
        let mut extra = Extra::default();
        extra.attrs.dimensions = Some(vec![dimension]);
        extra.attrs.num_carries = Some(carries.len() as i64);
        extra.attrs.is_reverse = reverse.then_some(true);
        extra.called.to_apply = Some(comp);
        let shape = infer::scan(
            &refs[..inputs.len()],
            &refs[inputs.len()..],
            dimension,
            &sig,
        );
        self.add(Opcode::Scan, shape, ids, extra, loc)
    }
}
