//! Native kernels. `select` picks one for an instruction, or `None` to leave
//! it to the interpreter.

pub(crate) mod conv;
pub(crate) mod copy;
pub(crate) mod dot;
pub(crate) mod elementwise;
pub(crate) mod fold;
pub(crate) mod fused;
pub(crate) mod gather;
pub(crate) mod iota;
pub(crate) mod math;
pub(crate) mod minmax;
pub(crate) mod pad;
pub(crate) mod pipeline;
pub(crate) mod random;
pub(crate) mod reduce;
pub(crate) mod slices;
pub(crate) mod sort;
pub(crate) mod tiled;
pub(crate) mod typed;
pub(crate) mod view;
pub(crate) mod window;

use oxla_hlo::{HloComputation, HloModule, InstrId, Opcode};

use crate::buffer::Pool;
use crate::value::Value;

/// A compiled operation: reads its operand values, returns the result,
/// whose arrays (and any temporaries) come from `pool`.
pub(crate) trait Kernel: Send + Sync {
    /// What the kernel is, for program listings.
    fn name(&self) -> &'static str;

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String>;

    /// The kernel as a stage of a row pipeline, if it can be one.
    fn row_stage(&self) -> Option<pipeline::Stage> {
        None
    }
}

/// The native kernel for `instr`, if there is one.
pub(crate) fn select(
    module: &HloModule,
    comp: &HloComputation,
    instr: InstrId,
) -> Option<Box<dyn Kernel>> {
    let instr = comp.instruction(instr);
    match instr.opcode {
        Opcode::Dot => dot::plan(comp, instr).map(|k| Box::new(k) as Box<dyn Kernel>),
        Opcode::Convolution => conv::plan(comp, instr).map(|k| Box::new(k) as Box<dyn Kernel>),
        Opcode::Concatenate => {
            slices::plan_concatenate(comp, instr).map(|k| Box::new(k) as Box<dyn Kernel>)
        }
        Opcode::DynamicSlice => {
            slices::plan_dynamic_slice(comp, instr).map(|k| Box::new(k) as Box<dyn Kernel>)
        }
        Opcode::DynamicUpdateSlice => {
            slices::plan_dynamic_update_slice(comp, instr).map(|k| Box::new(k) as Box<dyn Kernel>)
        }
        Opcode::BitcastConvert => {
            slices::plan_bitcast_convert(comp, instr).map(|k| Box::new(k) as Box<dyn Kernel>)
        }
        Opcode::Gather => gather::plan_gather(comp, instr).map(|k| Box::new(k) as Box<dyn Kernel>),
        Opcode::Scatter => {
            gather::plan_scatter(module, comp, instr).map(|k| Box::new(k) as Box<dyn Kernel>)
        }
        Opcode::Reduce => match fold::plan(module, comp, instr)? {
            fold::Plan::Fold(k) => Some(Box::new(k) as Box<dyn Kernel>),
            fold::Plan::Select(k) => Some(Box::new(k) as Box<dyn Kernel>),
        },
        Opcode::Iota => iota::plan(instr).map(|k| Box::new(k) as Box<dyn Kernel>),
        Opcode::Pad => pad::plan(comp, instr).map(|k| Box::new(k) as Box<dyn Kernel>),
        Opcode::Sort => sort::plan(module, comp, instr).map(|k| Box::new(k) as Box<dyn Kernel>),
        Opcode::ReduceWindow => {
            window::plan_reduce_window(module, comp, instr).map(|k| Box::new(k) as Box<dyn Kernel>)
        }
        Opcode::RngBitGenerator => random::plan(instr).map(|k| Box::new(k) as Box<dyn Kernel>),
        Opcode::SelectAndScatter => window::plan_select_and_scatter(module, comp, instr)
            .map(|k| Box::new(k) as Box<dyn Kernel>),
        _ => elementwise::plan(instr, comp).map(|k| Box::new(k) as Box<dyn Kernel>),
    }
}
