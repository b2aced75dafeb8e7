//! The printer: a module in XLA's default style (`HloModule::ToString()`),
//! so that XLA reads it back and a diff against XLA's own output is small.
//! Computations come callees first with the entry last; instructions keep
//! their stored order (operands are already before users) and their names.
//! Shapes of instructions carry layouts, signatures do not.

mod attributes;
mod literal;
mod shape;

use std::fmt::Write as _;

use oxla_hlo::{ComputationId, HloComputation, HloInstruction, HloModule, Opcode};

use self::attributes::{Context, write_attributes};
use self::literal::write_literal;
use self::shape::{index_marker, write_shape};
use crate::attr_table::MODULE_ATTRIBUTES;

pub(crate) fn print_module(module: &HloModule) -> String {
    let mut out = String::new();
    let _ = write!(out, "HloModule {}", module.name);
    let layout_rank = MODULE_ATTRIBUTES
        .iter()
        .position(|&n| n == "entry_computation_layout")
        .unwrap_or(0);
    let rank_of = |name: &str| {
        MODULE_ATTRIBUTES
            .iter()
            .position(|&n| n == name)
            .unwrap_or(usize::MAX)
    };
    for (name, value) in &module.header_attributes {
        if rank_of(name) < layout_rank {
            let _ = write!(out, ", {name}={value}");
        }
    }
    if let Some(entry) = module.computations().get(module.entry_id().index()) {
        out.push_str(", entry_computation_layout={");
        write_signature_shapes(&mut out, entry, true);
        out.push('}');
    }
    for (name, value) in &module.header_attributes {
        if rank_of(name) > layout_rank {
            let _ = write!(out, ", {name}={value}");
        }
    }
    out.push_str("\n\n");
    for id in print_order(module) {
        if let Some(c) = module.computations().get(id.index()) {
            write_computation(&mut out, module, c, id == module.entry_id());
            out.push_str("\n\n");
        }
    }
    out
}

/// Stored order (callees first), with the entry moved last unless something calls it.
fn print_order(module: &HloModule) -> Vec<ComputationId> {
    let entry = module.entry_id();
    let called = module.computations().iter().any(|c| {
        c.instructions()
            .iter()
            .any(|i| i.called.all().contains(&entry))
    });
    let mut order: Vec<ComputationId> = module.computation_ids().collect();
    if !called && entry.index() < order.len() {
        order.retain(|&id| id != entry);
        order.push(entry);
    }
    order
}

/// `(p0, p1)->result` as in entry_computation_layout (with layouts, no
/// names), or `(a: p0, b: p1) -> result` as in a computation header.
fn write_signature_shapes(out: &mut String, c: &HloComputation, layout_form: bool) {
    out.push('(');
    for (i, &id) in c.parameters().iter().enumerate() {
        let Some(p) = c.instructions().get(id.index()) else {
            continue;
        };
        if i > 0 {
            out.push_str(", ");
        }
        if layout_form {
            index_marker(out, i);
        } else {
            let _ = write!(out, "{}: ", p.name);
        }
        write_shape(out, &p.shape, layout_form);
    }
    out.push_str(if layout_form { ")->" } else { ") -> " });
    match c.instructions().get(c.root().index()) {
        Some(root) => write_shape(out, &root.shape, layout_form),
        None => out.push_str("()"),
    }
}

fn write_computation(out: &mut String, module: &HloModule, c: &HloComputation, is_entry: bool) {
    if is_entry {
        out.push_str("ENTRY ");
    }
    let _ = write!(out, "%{} ", c.name);
    write_signature_shapes(out, c, false);
    out.push_str(" {\n");
    for (i, instr) in c.instructions().iter().enumerate() {
        out.push_str("  ");
        if i == c.root().index() {
            out.push_str("ROOT ");
        }
        write_instruction(out, module, c, instr);
        out.push('\n');
    }
    out.push('}');
}

fn write_instruction(
    out: &mut String,
    module: &HloModule,
    c: &HloComputation,
    instr: &HloInstruction,
) {
    let _ = write!(out, "%{} = ", instr.name);
    write_shape(out, &instr.shape, true);
    let _ = write!(out, " {}(", instr.opcode);
    match instr.opcode {
        Opcode::Parameter => {
            let _ = write!(out, "{}", instr.attrs.parameter_number.unwrap_or(0));
        }
        Opcode::Constant => match &instr.attrs.literal {
            Some(l) => write_literal(out, l),
            None => out.push_str("{...}"),
        },
        _ => {
            for (i, id) in instr.operands.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                index_marker(out, i);
                match c.instructions().get(id.index()) {
                    Some(operand) => {
                        let _ = write!(out, "%{}", operand.name);
                    }
                    None => {
                        let _ = write!(out, "%<missing instruction {id}>");
                    }
                }
            }
        }
    }
    out.push(')');
    let ctx = Context {
        module,
        computation: c,
        instr,
    };
    write_attributes(out, &ctx);
}
