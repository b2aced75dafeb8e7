//! XLA's own numerics. XLA rewrites every module it compiles with rules that
//! are not exact: its algebraic simplifier turns `x / 3` into `x * (1/3)`,
//! folds `(x * 3) * 2` into `x * 6`, `log(exp(x))` into `x`, and XLA:CPU's
//! float normalization computes bf16 arithmetic in f32 and skips the
//! rounding back to bf16 where the result only feeds a convert to f32
//! ("excess precision"). A program JAX hands to XLA is run with those
//! rewrites, so its results are theirs; [`MatchXla`] applies the same rules
//! so oxla's results are XLA's to the last bit wherever the operations
//! themselves are exact (`+ - * /`, `sqrt`, conversions).
//!
//! First, once, XLA:CPU's bf16 normalization (see `normalize_bf16`). Then
//! the simplifier's rules, per instruction in XLA's order within each
//! handler (the first that matches wins, operands are rewritten before
//! their users, and the pipeline repeats to a fixed point, as XLA's
//! simplifier does); among them:
//!
//! - `A / C` (C a constant or a broadcast of one, A not a constant) becomes
//!   `A * (1/C)`, the reciprocal computed in C's own type;
//! - `A / sqrt(B)` becomes `A * rsqrt(B)`, `A / rsqrt(B)` becomes
//!   `A * sqrt(B)`, `A / exp(B)` becomes `A * exp(-B)` and `A / pow(B, C)`
//!   becomes `A * pow(B, -C)`;
//! - `(A / B) / C` becomes `A / (B * C)` and `A / (B / C)` becomes
//!   `(A * C) / B`;
//! - `(A + C1) + C2` becomes `A + (C1 + C2)` and `(A * C1) * C2` becomes
//!   `A * (C1 * C2)`, for constants C1 and C2;
//! - `exp(A) * exp(B)` becomes `exp(A + B)`, `log(exp(A))` becomes `A`,
//!   `pow(exp(A), B)` becomes `exp(A * B)`, `pow(A, 2)` becomes `A * A` and
//!   `pow(A, -1)` becomes `1 / A`;
//! - `convert<f32>(op<bf16>(...))`, for an arithmetic `op`, becomes
//!   `op<f32>(convert<f32>(...))`: the value is not rounded to bf16 on its
//!   way to f32. The op's other users still read the rounded bf16 value,
//!   and a convert from f32 to bf16 feeding an op still rounds, as on
//!   XLA:CPU. f16 arithmetic is not normalized there, and not here.
//!
//! A reciprocal `1/C` is computed at once, in C's type, as XLA's
//! `InvertConstant` does; other new constants (`C1 + C2`, `C1 * C2`, `-C`)
//! are built as instructions over constants that constant folding then
//! evaluates with the interpreter, as XLA leaves them to its folder.

use std::collections::{HashMap, HashSet};

use oxla_hlo::ir::ComparisonDirection;
use oxla_hlo::{
    ArrayData, ArrayLiteral, ArrayShape, HloInstruction, HloModule, InstrId, Literal, Opcode,
    PrimitiveType, Scalar, Shape,
};

use crate::Pass;
use crate::splice::{Names, Splice, rebuild};

pub struct MatchXla;

impl Pass for MatchXla {
    fn name(&self) -> &'static str {
        "match-xla"
    }

    fn run(&self, module: &mut HloModule) -> bool {
        let mut names = Names::of(module);
        let mut changed = normalize_bf16(module, &mut names);
        for c in 0..module.computations().len() {
            // Use counts are the computation's as it stands (XLA's rules
            // ask whether an operand has one user).
            let comp = &module.computations()[c];
            let uses: Vec<usize> = comp.users().iter().map(|u| u.len()).collect();
            let first_operand: Vec<Option<InstrId>> = comp
                .instructions()
                .iter()
                .map(|i| i.operands.first().copied())
                .collect();
            changed |= rebuild(module, c, &mut names, |_, splice, instr, operands| {
                let used = Used {
                    uses: &uses,
                    first_operand: &first_operand,
                    operands: &instr.operands,
                };
                rewrite(splice, instr, operands, &used)
            });
        }
        changed
    }
}

/// Arithmetic XLA:CPU computes in f32 for bf16 operands: the ops whose f32
/// result can fall between bf16 values. (Data movement, comparisons,
/// `max`, `abs` and the like give bf16 values either way; reductions and
/// other ops with computations round inside them.)
fn rounds_in_f32(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        Add | Subtract
            | Multiply
            | Divide
            | Power
            | Atan2
            | Acos
            | Acosh
            | Asin
            | Asinh
            | Atan
            | Atanh
            | Cosh
            | Sinh
            | Cbrt
            | Cos
            | Sin
            | Tan
            | Tanh
            | Erf
            | Exp
            | Expm1
            | Log
            | Log1p
            | Logistic
            | Rsqrt
            | Sqrt
            | Dot
            | Convolution
    )
}

fn element_type(instr: &HloInstruction) -> Option<PrimitiveType> {
    instr.shape.as_array().map(|a| a.element_type())
}

/// `shape` with element type `ty` (an array shape; `None` otherwise).
fn retyped(shape: &Shape, ty: PrimitiveType) -> Option<Shape> {
    shape
        .as_array()
        .map(|a| Shape::Array(a.with_element_type(ty)))
}

/// A new instruction like `like` (its attributes and computations) with
/// another shape and operands.
fn derived(like: &HloInstruction, shape: Shape, operands: Vec<InstrId>) -> HloInstruction {
    let mut new = like.clone();
    new.shape = shape;
    new.operands = operands;
    new.control_predecessors = Vec::new();
    new
}

/// Use counts in the computation being rewritten, for one instruction's
/// (original) operands.
struct Used<'a> {
    uses: &'a [usize],
    first_operand: &'a [Option<InstrId>],
    operands: &'a [InstrId],
}

impl Used<'_> {
    /// Whether operand `i` has one user.
    fn once(&self, i: usize) -> bool {
        self.operands
            .get(i)
            .is_some_and(|o| self.uses[o.index()] == 1)
    }

    /// Whether operand `i`'s own first operand has one user.
    fn input_once(&self, i: usize) -> bool {
        self.operands
            .get(i)
            .and_then(|o| self.first_operand[o.index()])
            .is_some_and(|o| self.uses[o.index()] == 1)
    }
}

fn rewrite(
    splice: &mut Splice,
    instr: &HloInstruction,
    operands: &[InstrId],
    used: &Used,
) -> Option<InstrId> {
    let ty = element_type(instr)?;
    if !ty.is_float() {
        return None;
    }
    let mut r = Rules { s: splice, instr };
    match (instr.opcode, operands) {
        (Opcode::Add, &[a, b]) => r.add(a, b, used.once(0) && used.once(1)),
        (Opcode::Subtract, &[a, b]) => r.subtract(a, b),
        (Opcode::Multiply, &[a, b]) => r.multiply(a, b),
        (Opcode::Divide, &[a, b]) => r.divide(a, b, used.once(1), used.input_once(1)),
        (Opcode::Power, &[a, b]) => r.power(a, b),
        (Opcode::Log, &[a]) => r.log(a),
        (Opcode::Sqrt, &[a]) => r.sqrt(a),
        (Opcode::Rsqrt, &[a]) => r.rsqrt(a),
        _ => None,
    }
}

/// The rules for one instruction, with the instructions rebuilt so far.
struct Rules<'s, 'n, 'i> {
    s: &'s mut Splice<'n>,
    instr: &'i HloInstruction,
}

impl Rules<'_, '_, '_> {
    fn get(&self, id: InstrId) -> &HloInstruction {
        self.s.get(id)
    }

    fn opcode(&self, id: InstrId) -> Opcode {
        self.get(id).opcode
    }

    /// `id`'s operands if it is a binary `op`.
    fn binary(&self, id: InstrId, op: Opcode) -> Option<(InstrId, InstrId)> {
        let instr = self.get(id);
        match instr.operands[..] {
            [a, b] if instr.opcode == op => Some((a, b)),
            _ => None,
        }
    }

    /// `id`'s operand if it is a unary `op`.
    fn unary(&self, id: InstrId, op: Opcode) -> Option<InstrId> {
        let instr = self.get(id);
        match instr.operands[..] {
            [a] if instr.opcode == op => Some(a),
            _ => None,
        }
    }

    /// The array a `constant` instruction holds.
    fn literal(&self, id: InstrId) -> Option<&ArrayLiteral> {
        let instr = self.get(id);
        if instr.opcode != Opcode::Constant {
            return None;
        }
        instr.attrs.literal.as_ref()?.as_array()
    }

    /// The one element of a one-element float constant.
    fn single_float(&self, id: InstrId) -> Option<f64> {
        let array = self.literal(id)?;
        match array.data().scalar(0) {
            Scalar::Float(f) if array.element_count() == 1 => Some(f),
            _ => None,
        }
    }

    fn is_constant(&self, id: InstrId) -> bool {
        self.opcode(id) == Opcode::Constant
    }

    fn is_scalar_constant(&self, id: InstrId) -> bool {
        self.is_constant(id) && self.get(id).shape.is_scalar()
    }

    /// The rank-0 constant `id` broadcasts.
    fn broadcast_scalar_constant(&self, id: InstrId) -> Option<InstrId> {
        let c = self.unary(id, Opcode::Broadcast)?;
        self.is_scalar_constant(c).then_some(c)
    }

    /// Whether every element of `id` (a constant, or broadcasts of one) is
    /// `value`; zero matches +0 only, as XLA compares the bits.
    fn is_all(&self, id: InstrId, value: f64) -> bool {
        let mut id = id;
        while let Some(inner) = self.unary(id, Opcode::Broadcast) {
            id = inner;
        }
        let Some(array) = self.literal(id) else {
            return false;
        };
        let data = array.data();
        data.len() <= 1 << 16
            && (0..data.len()).all(|i| match data.scalar(i) {
                Scalar::Float(f) => f == value && f.is_sign_negative() == value.is_sign_negative(),
                _ => false,
            })
    }

    /// Whether `id` is a constant (or a broadcast of one) whose only value
    /// is a power of two, `±2^k`.
    fn is_power_of_two(&self, id: InstrId) -> bool {
        let c = self.unary(id, Opcode::Broadcast).unwrap_or(id);
        self.single_float(c)
            .is_some_and(|f| f.is_finite() && f != 0.0 && f.abs().log2().fract() == 0.0)
    }

    /// XLA's `IsNonNegative`: values that cannot be negative by construction.
    fn non_negative(&self, id: InstrId, depth: usize) -> bool {
        if depth == 0 {
            return false;
        }
        let instr = self.get(id);
        let ops = &instr.operands;
        match instr.opcode {
            Opcode::Multiply => ops.len() == 2 && ops[0] == ops[1],
            Opcode::Exp | Opcode::Abs | Opcode::Iota => true,
            Opcode::Broadcast => ops
                .first()
                .is_some_and(|&o| self.non_negative(o, depth - 1)),
            Opcode::Constant => self
                .single_float(id)
                .is_some_and(|f| !f.is_nan() && f.is_sign_positive()),
            Opcode::Minimum => ops.iter().all(|&o| self.non_negative(o, depth - 1)),
            Opcode::Maximum => ops.iter().any(|&o| self.non_negative(o, depth - 1)),
            Opcode::Power => ops
                .first()
                .is_some_and(|&o| self.non_negative(o, depth - 1)),
            Opcode::Select => {
                ops.len() == 3 && ops[1..].iter().all(|&o| self.non_negative(o, depth - 1))
            }
            Opcode::Sqrt | Opcode::Rsqrt => {
                ops.first().is_some_and(|&o| self.positive(o, depth - 1))
            }
            _ => false,
        }
    }

    fn positive(&self, id: InstrId, depth: usize) -> bool {
        if depth == 0 {
            return false;
        }
        let instr = self.get(id);
        let ops = &instr.operands;
        match instr.opcode {
            Opcode::Sqrt | Opcode::Rsqrt | Opcode::Abs | Opcode::Power => {
                ops.first().is_some_and(|&o| self.positive(o, depth - 1))
            }
            Opcode::Multiply => {
                ops.len() == 2 && ops[0] == ops[1] && self.positive(ops[0], depth - 1)
            }
            _ => false,
        }
    }

    /// Appends `opcode(operands)` with `shape`.
    fn emit(&mut self, opcode: Opcode, shape: Shape, operands: Vec<InstrId>) -> InstrId {
        let name = self.instr.name.clone();
        self.s.add(
            HloInstruction::new(String::new(), opcode, shape, operands),
            &name,
        )
    }

    /// Appends `opcode(operands)` with the instruction's own shape.
    fn emit_like(&mut self, opcode: Opcode, operands: Vec<InstrId>) -> InstrId {
        self.emit(opcode, self.instr.shape.clone(), operands)
    }

    /// Appends `opcode(operands)` with the shape of `like`.
    fn emit_as(&mut self, like: InstrId, opcode: Opcode, operands: Vec<InstrId>) -> InstrId {
        let shape = self.get(like).shape.clone();
        self.emit(opcode, shape, operands)
    }

    /// A broadcast of `id` to `shape` along `dimensions`.
    fn broadcast(&mut self, id: InstrId, shape: Shape, dimensions: Vec<i64>) -> InstrId {
        let name = self.instr.name.clone();
        let mut b = HloInstruction::new(String::new(), Opcode::Broadcast, shape, vec![id]);
        b.attrs.dimensions = Some(dimensions);
        self.s.add(b, &name)
    }

    /// `value` as the constant `like`'s element type and shape (a scalar
    /// broadcast when `like` is not a scalar).
    fn scalar_like(&mut self, like: InstrId, value: f64) -> Option<InstrId> {
        let shape = self.get(like).shape.clone();
        let array = shape.as_array()?;
        let scalar = ArrayShape::scalar(array.element_type());
        let literal = Literal::splat(&scalar, Scalar::Float(value)).ok()?;
        let mut c = HloInstruction::new(
            String::new(),
            Opcode::Constant,
            Shape::Array(scalar),
            vec![],
        );
        c.attrs.literal = Some(literal);
        let name = self.instr.name.clone();
        let c = self.s.add(c, &name);
        Some(if array.rank() == 0 {
            c
        } else {
            self.broadcast(c, shape, vec![])
        })
    }

    /// `op(c1, c2)` for two constants of the same shape, broadcast to the
    /// instruction's shape when they are scalars and it is not (XLA builds
    /// the instruction and lets constant folding evaluate it in the type).
    fn combine(&mut self, op: Opcode, c1: InstrId, c2: InstrId) -> InstrId {
        let c = self.emit_as(c1, op, vec![c1, c2]);
        if self.get(c).shape.is_scalar() && !self.instr.shape.is_scalar() {
            self.broadcast(c, self.instr.shape.clone(), vec![])
        } else {
            c
        }
    }

    fn add(&mut self, a: InstrId, b: InstrId, both_used_once: bool) -> Option<InstrId> {
        // A + 0 => A and 0 + A => A (+0 only, so -0 + 0 gives -0).
        if self.is_all(b, 0.0) {
            return Some(a);
        }
        if self.is_all(a, 0.0) {
            return Some(b);
        }
        // A constant on the left moves to the right.
        let (a, b) = if self.is_constant(a) && !self.is_constant(b) {
            (b, a)
        } else {
            (a, b)
        };
        // (A + C1) + C2 => A + (C1 + C2); (C1 - A) + C2 => (C1 + C2) - A.
        for (inner, flip) in [(Opcode::Add, false), (Opcode::Subtract, true)] {
            let Some((x, y)) = self.binary(a, inner) else {
                continue;
            };
            let (v, c1) = if flip { (y, x) } else { (x, y) };
            if self.is_constant(v) {
                continue;
            }
            let pair = if self.is_constant(c1) && self.is_constant(b) {
                Some((c1, b))
            } else {
                self.broadcast_scalar_constant(c1)
                    .zip(self.broadcast_scalar_constant(b))
            };
            if let Some((k1, k2)) = pair {
                let sum = self.combine(Opcode::Add, k1, k2);
                let operands = if flip { vec![sum, v] } else { vec![v, sum] };
                return Some(self.emit_like(inner, operands));
            }
        }
        // A*C + B*C => (A+B)*C for C a power of two, each product used once.
        if both_used_once {
            return self.distribute(a, b);
        }
        None
    }

    fn distribute(&mut self, lhs: InstrId, rhs: InstrId) -> Option<InstrId> {
        let (l0, l1) = self.binary(lhs, Opcode::Multiply)?;
        let (r0, r1) = self.binary(rhs, Opcode::Multiply)?;
        for (a, c) in [(l0, l1), (l1, l0)] {
            let b = if r0 == c {
                r1
            } else if r1 == c {
                r0
            } else {
                continue;
            };
            if !self.is_power_of_two(c) {
                continue;
            }
            let sum = self.emit_like(Opcode::Add, vec![a, b]);
            return Some(self.emit_like(Opcode::Multiply, vec![sum, c]));
        }
        None
    }

    fn subtract(&mut self, a: InstrId, b: InstrId) -> Option<InstrId> {
        if self.is_all(b, 0.0) {
            return Some(a);
        }
        // A - C => A + (-C).
        if self.is_constant(a) {
            return None;
        }
        let negated = if self.is_constant(b) {
            self.emit_as(b, Opcode::Negate, vec![b])
        } else {
            let c = self.unary(b, Opcode::Broadcast)?;
            if !self.is_constant(c) {
                return None;
            }
            let n = self.emit_as(c, Opcode::Negate, vec![c]);
            let dims = self.get(b).attrs.dimensions.clone().unwrap_or_default();
            let shape = self.get(b).shape.clone();
            self.broadcast(n, shape, dims)
        };
        Some(self.emit_like(Opcode::Add, vec![a, negated]))
    }

    fn multiply(&mut self, a: InstrId, b: InstrId) -> Option<InstrId> {
        // Mul(Convert(pred P), X) => select(P, X, 0).
        for (p, x) in [(a, b), (b, a)] {
            if let Some(pred) = self.unary(p, Opcode::Convert)
                && element_type(self.get(pred)) == Some(PrimitiveType::Pred)
            {
                let zero = self.scalar_like(x, 0.0)?;
                return Some(self.emit_like(Opcode::Select, vec![pred, x, zero]));
            }
        }
        // Mul(Mul(x, c1), Mul(y, c2)) => Mul(Mul(x, y), c1*c2), raw constants.
        let split = |r: &Self, id: InstrId| -> Option<(InstrId, InstrId)> {
            let (p, q) = r.binary(id, Opcode::Multiply)?;
            match (r.is_constant(p), r.is_constant(q)) {
                (false, true) => Some((p, q)),
                (true, false) => Some((q, p)),
                _ => None,
            }
        };
        if let (Some((x, c1)), Some((y, c2))) = (split(self, a), split(self, b)) {
            let xy = self.emit_like(Opcode::Multiply, vec![x, y]);
            let c = self.combine(Opcode::Multiply, c1, c2);
            return Some(self.emit_like(Opcode::Multiply, vec![xy, c]));
        }
        // Mul(Mul(a, c1), c2) => Mul(a, c1*c2), raw constants in either order.
        for (m, c2) in [(a, b), (b, a)] {
            if self.is_constant(c2)
                && let Some((x, c1)) = split(self, m)
            {
                let c = self.combine(Opcode::Multiply, c1, c2);
                return Some(self.emit_like(Opcode::Multiply, vec![x, c]));
            }
        }
        // Mul(Mul(a, C), Broadcast(b)) => Mul(a, Broadcast(Mul(b, C))), C a
        // rank-0 constant (or a broadcast of one), b not a constant.
        for (m, other) in [(a, b), (b, a)] {
            let Some(inner) = self.unary(other, Opcode::Broadcast) else {
                continue;
            };
            if self.is_constant(inner) {
                continue;
            }
            let Some((p, q)) = self.binary(m, Opcode::Multiply) else {
                continue;
            };
            for (x, c) in [(p, q), (q, p)] {
                if self.is_constant(x) {
                    continue;
                }
                let scalar = if self.is_scalar_constant(c) {
                    Some(c)
                } else {
                    self.broadcast_scalar_constant(c)
                };
                let Some(k) = scalar else { continue };
                let k = if self.get(inner).shape.is_scalar() {
                    k
                } else {
                    let shape = self.get(inner).shape.clone();
                    self.broadcast(k, shape, vec![])
                };
                let scaled = self.emit_as(inner, Opcode::Multiply, vec![inner, k]);
                let dims = self.get(other).attrs.dimensions.clone().unwrap_or_default();
                let shape = self.get(other).shape.clone();
                let b = self.broadcast(scaled, shape, dims);
                return Some(self.emit_like(Opcode::Multiply, vec![x, b]));
            }
        }
        // (A * bcast(C1)) * bcast(C2) => A * bcast(C1 * C2), rank-0 constants.
        if let Some((x, c1)) = self.binary(a, Opcode::Multiply)
            && let Some(k1) = self.broadcast_scalar_constant(c1)
            && let Some(k2) = self.broadcast_scalar_constant(b)
        {
            let c = self.combine(Opcode::Multiply, k1, k2);
            return Some(self.emit_like(Opcode::Multiply, vec![x, c]));
        }
        // exp(A) * exp(B) => exp(A + B).
        if let (Some(x), Some(y)) = (self.unary(a, Opcode::Exp), self.unary(b, Opcode::Exp)) {
            let sum = self.emit_like(Opcode::Add, vec![x, y]);
            return Some(self.emit_like(Opcode::Exp, vec![sum]));
        }
        // sqrt(x) * sqrt(x) => x, rsqrt(x) * rsqrt(x) => 1/x, for x >= 0.
        if a == b {
            if let Some(x) = self.unary(a, Opcode::Sqrt)
                && self.non_negative(x, 8)
            {
                return Some(x);
            }
            if let Some(x) = self.unary(a, Opcode::Rsqrt)
                && self.non_negative(x, 8)
            {
                let one = self.scalar_like(x, 1.0)?;
                return Some(self.emit_like(Opcode::Divide, vec![one, x]));
            }
        }
        None
    }

    fn divide(
        &mut self,
        a: InstrId,
        b: InstrId,
        divisor_used_once: bool,
        divisor_input_used_once: bool,
    ) -> Option<InstrId> {
        // exp(A) / exp(B) => exp(A - B); A / exp(B) => A * exp(-B).
        if let Some(y) = self.unary(b, Opcode::Exp) {
            if let Some(x) = self.unary(a, Opcode::Exp) {
                let d = self.emit_like(Opcode::Subtract, vec![x, y]);
                return Some(self.emit_like(Opcode::Exp, vec![d]));
            }
            let n = self.emit_as(y, Opcode::Negate, vec![y]);
            let e = self.emit_as(y, Opcode::Exp, vec![n]);
            return Some(self.emit_like(Opcode::Multiply, vec![a, e]));
        }
        // A / pow(B, C) => A * pow(B, -C).
        if let Some((x, y)) = self.binary(b, Opcode::Power) {
            let n = self.emit_as(y, Opcode::Negate, vec![y]);
            let p = self.emit_as(x, Opcode::Power, vec![x, n]);
            return Some(self.emit_like(Opcode::Multiply, vec![a, p]));
        }
        // A / sqrt(B) => A * rsqrt(B); A / rsqrt(B) => A * sqrt(B).
        for (from, to) in [(Opcode::Sqrt, Opcode::Rsqrt), (Opcode::Rsqrt, Opcode::Sqrt)] {
            if divisor_used_once && let Some(x) = self.unary(b, from) {
                let r = self.emit_like(to, vec![x]);
                return Some(self.emit_like(Opcode::Multiply, vec![a, r]));
            }
        }
        // A / C => A * (1/C), the reciprocal rounded in C's type.
        if !self.is_constant(a) {
            let (c, dims) = if self.is_constant(b) {
                (Some(b), None)
            } else if let Some(c) = self.unary(b, Opcode::Broadcast)
                && self.is_constant(c)
            {
                (Some(c), self.get(b).attrs.dimensions.clone())
            } else {
                (None, None)
            };
            if let Some(c) = c {
                let inverse = reciprocal(self.get(c))?;
                let name = self.instr.name.clone();
                let k = self.s.add(inverse, &name);
                let k = match dims {
                    Some(dims) => {
                        let shape = self.get(b).shape.clone();
                        self.broadcast(k, shape, dims)
                    }
                    None => k,
                };
                return Some(self.emit_like(Opcode::Multiply, vec![a, k]));
            }
        }
        // A / broadcast(B) => A * broadcast(1 / B), B used once.
        if divisor_input_used_once && let Some(y) = self.unary(b, Opcode::Broadcast) {
            let one = self.scalar_like(y, 1.0)?;
            let r = self.emit_as(y, Opcode::Divide, vec![one, y]);
            let dims = self.get(b).attrs.dimensions.clone().unwrap_or_default();
            let shape = self.get(b).shape.clone();
            let r = self.broadcast(r, shape, dims);
            return Some(self.emit_like(Opcode::Multiply, vec![a, r]));
        }
        // (A / B) / (C / D) => (A * D) / (B * C); (A / B) / C => A / (B * C);
        // A / (B / C) => (A * C) / B.
        match (
            self.binary(a, Opcode::Divide),
            self.binary(b, Opcode::Divide),
        ) {
            (Some((x, y)), Some((z, w))) => {
                let num = self.emit_like(Opcode::Multiply, vec![x, w]);
                let den = self.emit_like(Opcode::Multiply, vec![y, z]);
                Some(self.emit_like(Opcode::Divide, vec![num, den]))
            }
            (Some((x, y)), None) => {
                let den = self.emit_like(Opcode::Multiply, vec![y, b]);
                Some(self.emit_like(Opcode::Divide, vec![x, den]))
            }
            (None, Some((z, w))) => {
                let num = self.emit_like(Opcode::Multiply, vec![a, w]);
                Some(self.emit_like(Opcode::Divide, vec![num, z]))
            }
            (None, None) => None,
        }
    }

    fn power(&mut self, a: InstrId, b: InstrId) -> Option<InstrId> {
        // pow(exp(A), B) => exp(A * B).
        if let Some(x) = self.unary(a, Opcode::Exp) {
            let m = self.emit_like(Opcode::Multiply, vec![x, b]);
            return Some(self.emit_like(Opcode::Exp, vec![m]));
        }
        if self.is_all(b, 2.0) {
            return Some(self.emit_like(Opcode::Multiply, vec![a, a]));
        }
        if self.is_all(b, 3.0) {
            let sq = self.emit_like(Opcode::Multiply, vec![a, a]);
            return Some(self.emit_like(Opcode::Multiply, vec![a, sq]));
        }
        if self.is_all(b, -1.0) {
            let one = self.scalar_like(a, 1.0)?;
            return Some(self.emit_like(Opcode::Divide, vec![one, a]));
        }
        if self.is_all(b, 0.5) && self.non_negative(a, 8) {
            return Some(self.emit_like(Opcode::Sqrt, vec![a]));
        }
        None
    }

    fn log(&mut self, a: InstrId) -> Option<InstrId> {
        // ln(exp(A)) => A.
        if let Some(x) = self.unary(a, Opcode::Exp) {
            return Some(x);
        }
        // ln(pow(A, B)) => select(B == 0, 0, ln(|A|) * B).
        if let Some((x, y)) = self.binary(a, Opcode::Power) {
            let abs = self.emit_as(x, Opcode::Abs, vec![x]);
            let ln = self.emit_as(x, Opcode::Log, vec![abs]);
            let product = self.emit_like(Opcode::Multiply, vec![ln, y]);
            let zero = self.scalar_like(y, 0.0)?;
            let dims = self.get(y).shape.as_array()?.dims().to_vec();
            let pred = Shape::Array(ArrayShape::new_unchecked(PrimitiveType::Pred, dims));
            let name = self.instr.name.clone();
            let mut cmp = HloInstruction::new(String::new(), Opcode::Compare, pred, vec![y, zero]);
            cmp.attrs.comparison_direction = Some(ComparisonDirection::Eq);
            let cmp = self.s.add(cmp, &name);
            return Some(self.emit_like(Opcode::Select, vec![cmp, zero, product]));
        }
        // ln(sqrt(A)) => ln(A) * 0.5; ln(rsqrt(A)) => ln(A) * -0.5.
        for (op, k) in [(Opcode::Sqrt, 0.5), (Opcode::Rsqrt, -0.5)] {
            if let Some(x) = self.unary(a, op) {
                let ln = self.emit_like(Opcode::Log, vec![x]);
                let half = self.scalar_like(x, k)?;
                return Some(self.emit_like(Opcode::Multiply, vec![ln, half]));
            }
        }
        None
    }

    fn sqrt(&mut self, a: InstrId) -> Option<InstrId> {
        // sqrt(A * A) => |A|.
        let (x, y) = self.binary(a, Opcode::Multiply)?;
        (x == y).then(|| self.emit_like(Opcode::Abs, vec![x]))
    }

    fn rsqrt(&mut self, a: InstrId) -> Option<InstrId> {
        // rsqrt(pow(A, -2)) => A and rsqrt(1 / A) => sqrt(A), for A >= 0.
        if let Some((x, y)) = self.binary(a, Opcode::Power)
            && self.is_all(y, -2.0)
            && self.non_negative(x, 8)
        {
            return Some(x);
        }
        if let Some((one, x)) = self.binary(a, Opcode::Divide)
            && self.is_all(one, 1.0)
            && self.non_negative(x, 8)
        {
            return Some(self.emit_like(Opcode::Sqrt, vec![x]));
        }
        None
    }
}

/// `1 / c` for each element of the constant `c`, divided in its own type
/// (halves divide in f32 and round, as their C++ types do). `None` for
/// complex constants, which are left alone.
fn reciprocal(c: &HloInstruction) -> Option<HloInstruction> {
    let literal = c.attrs.literal.as_ref()?.as_array()?;
    let ty = literal.element_type();
    let data = literal.data();
    let n = data.len();
    let inverted = match ty {
        PrimitiveType::F64 => {
            let values: Vec<Scalar> = (0..n)
                .map(|i| Scalar::Float(1.0 / data.scalar(i).as_f64()))
                .collect();
            ArrayData::from_scalars(ty, &values)
        }
        PrimitiveType::F32 | PrimitiveType::F16 | PrimitiveType::BF16 => {
            let values: Vec<Scalar> = (0..n)
                .map(|i| Scalar::Float(f64::from(1.0f32 / data.scalar(i).as_f64() as f32)))
                .collect();
            ArrayData::from_scalars(PrimitiveType::F32, &values).convert(ty)
        }
        _ => return None,
    };
    let literal = Literal::from_data(literal.shape().clone(), inverted).ok()?;
    let mut k = HloInstruction::new(String::new(), Opcode::Constant, c.shape.clone(), vec![]);
    k.attrs.literal = Some(literal);
    Some(k)
}

/// XLA:CPU's float normalization: a bf16 `op` becomes
/// `convert<bf16>(op<f32>(convert<f32>(...)))`, and a convert to f32 of its
/// result reads the f32 value directly. Computations applied per element
/// or per window (reducers, comparators, scatter combiners) are left as
/// they are: normalizing them rounds the same way, and backends recognise
/// them by their plain form.
fn normalize_bf16(module: &mut HloModule, names: &mut Names) -> bool {
    let mut applied: HashSet<usize> = HashSet::new();
    for comp in module.computations() {
        for instr in comp.instructions() {
            let c = &instr.called;
            applied.extend(
                [c.to_apply, c.select, c.scatter]
                    .into_iter()
                    .flatten()
                    .map(|id| id.index()),
            );
            if instr.opcode != Opcode::Call {
                continue;
            }
            // A call's computation runs as part of its caller.
            applied.remove(&c.to_apply.map_or(usize::MAX, |id| id.index()));
        }
    }
    let mut changed = false;
    for c in 0..module.computations().len() {
        if applied.contains(&c) {
            continue;
        }
        let mut normalized: HashMap<InstrId, InstrId> = HashMap::new();
        changed |= rebuild(module, c, names, |_, splice, instr, operands| {
            if instr.opcode == Opcode::Convert
                && element_type(instr) == Some(PrimitiveType::F32)
                && let &[x] = operands
            {
                return normalized.get(&x).copied();
            }
            if element_type(instr) != Some(PrimitiveType::BF16) || !rounds_in_f32(instr.opcode) {
                return None;
            }
            let mut widened = Vec::with_capacity(operands.len());
            for &o in operands {
                widened.push(widen(splice, o)?);
            }
            let wide = derived(instr, retyped(&instr.shape, PrimitiveType::F32)?, widened);
            let wide = splice.add(wide, &instr.name);
            let round = HloInstruction::new(
                String::new(),
                Opcode::Convert,
                instr.shape.clone(),
                vec![wide],
            );
            let round = splice.add(round, &instr.name);
            normalized.insert(round, wide);
            Some(round)
        });
    }
    changed
}

/// `id` as f32 if it is bf16: a constant converted in place, data
/// movement (broadcast, reshape, transpose, slice, reverse) done in f32 on
/// its widened operand, as XLA normalizes it too (so `x / broadcast(y)`
/// still reads a broadcast), anything else through a convert.
fn widen(splice: &mut Splice, id: InstrId) -> Option<InstrId> {
    widen_within(splice, id, 16)
}

fn widen_within(splice: &mut Splice, id: InstrId, depth: usize) -> Option<InstrId> {
    let instr = splice.get(id);
    if element_type(instr) != Some(PrimitiveType::BF16) {
        return Some(id);
    }
    let shape = retyped(&instr.shape, PrimitiveType::F32)?;
    let name = instr.name.clone();
    let moves = matches!(
        instr.opcode,
        Opcode::Broadcast | Opcode::Reshape | Opcode::Transpose | Opcode::Slice | Opcode::Reverse
    );
    let wide = match instr.opcode {
        Opcode::Constant => {
            let literal = instr
                .attrs
                .literal
                .as_ref()?
                .convert(PrimitiveType::F32)
                .ok()?;
            let mut c = HloInstruction::new(String::new(), Opcode::Constant, shape, vec![]);
            c.attrs.literal = Some(literal);
            c
        }
        _ if moves && depth > 0 && instr.operands.len() == 1 => {
            let instr = instr.clone();
            let operand = widen_within(splice, instr.operands[0], depth - 1)?;
            derived(&instr, shape, vec![operand])
        }
        _ => HloInstruction::new(String::new(), Opcode::Convert, shape, vec![id]),
    };
    Some(splice.add(wide, &name))
}
