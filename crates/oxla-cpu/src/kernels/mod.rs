//! Native kernels. `select` picks one for an instruction, or `None` to leave
//! it to the interpreter.

/// `fn $name<T: $bound>(args)`: `$body::<T, WIDE>(args)` compiled for
/// AVX-512 (`WIDE` true), AVX2 or the baseline, whichever the CPU has. (A
/// closure handed to a dispatching function is not inlined into it when
/// its body is large, so each loop gets its own wrappers.)
macro_rules! dispatched {
    ($name:ident<T: $bound:path> => $body:ident($($arg:ident: $ty:ty),*)) => {
        fn $name<T: $bound>($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                /// # Safety
                /// The CPU must have AVX-512 F, BW, DQ and VL.
                #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2")]
                unsafe fn avx512<T: $bound>($($arg: $ty),*) {
                    $body::<T, true>($($arg),*)
                }
                /// # Safety
                /// The CPU must have AVX2.
                #[target_feature(enable = "avx2")]
                unsafe fn avx2<T: $bound>($($arg: $ty),*) {
                    $body::<T, false>($($arg),*)
                }
                if std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512dq")
                    && std::is_x86_feature_detected!("avx512vl")
                {
                    // SAFETY: the features were just detected.
                    return unsafe { avx512::<T>($($arg),*) };
                }
                if std::is_x86_feature_detected!("avx2") {
                    // SAFETY: the feature was just detected.
                    return unsafe { avx2::<T>($($arg),*) };
                }
            }
            $body::<T, false>($($arg),*)
        }
    };
}

pub(crate) mod bf16round;
pub(crate) mod conv;
pub(crate) mod copy;
pub(crate) mod dense;
pub(crate) mod dot;
pub(crate) mod elementwise;
pub(crate) mod fft;
pub(crate) mod fold;
pub(crate) mod fused;
pub(crate) mod gather;
pub(crate) mod iota;
pub(crate) mod lapack;
pub(crate) mod math;
pub(crate) mod minmax;
pub(crate) mod orthogonal;
pub(crate) mod packed;
pub(crate) mod pad;
pub(crate) mod pipeline;
pub(crate) mod random;
pub(crate) mod reduce;
#[cfg(target_arch = "x86_64")]
pub(crate) mod sgemm;
#[cfg(target_arch = "x86_64")]
pub(crate) mod sgemm_small;
pub(crate) mod slices;
pub(crate) mod sort;
pub(crate) mod stream;
pub(crate) mod svd;
pub(crate) mod sytrd;
pub(crate) mod tiled;
pub(crate) mod topk;
pub(crate) mod tridiagonal;
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

    /// More of what the kernel is, appended to its name in listings;
    /// `name_of` names a value slot.
    fn detail(&self, _name_of: &dyn Fn(usize) -> String) -> String {
        String::new()
    }

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
        Opcode::Fft => fft::plan(comp, instr),
        Opcode::CustomCall | Opcode::TriangularSolve => {
            lapack::plan(comp, instr).map(|k| Box::new(k) as Box<dyn Kernel>)
        }
        Opcode::TopK => topk::plan(comp, instr).map(|k| Box::new(k) as Box<dyn Kernel>),
        Opcode::RngBitGenerator => random::plan(instr).map(|k| Box::new(k) as Box<dyn Kernel>),
        Opcode::SelectAndScatter => window::plan_select_and_scatter(module, comp, instr)
            .map(|k| Box::new(k) as Box<dyn Kernel>),
        _ => elementwise::plan(instr, comp).map(|k| Box::new(k) as Box<dyn Kernel>),
    }
}
