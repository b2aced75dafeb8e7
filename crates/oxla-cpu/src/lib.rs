//! oxla's compiled CPU backend. `compile` runs the optimisation passes,
//! fuses element-wise work into loop kernels, and lowers each computation
//! to a program of native kernels; operations without a kernel run through
//! the reference interpreter, so every module runs, and results agree with
//! the interpreter (exactly for integers, within a stated tolerance for
//! floats).

mod buffer;
mod error;
mod exec;
mod fusion;
mod kernels;
mod program;
mod small_loop;
mod threads;
mod value;

pub use error::{CpuError, CpuResult};

use oxla_hlo::{HloModule, Literal};
use oxla_interp::{EvalError, EvalOptions, Services, Session};

use crate::buffer::Pool;
use crate::exec::Exec;
use crate::program::Program;
use crate::value::Value;

/// A compiled module.
pub struct CpuExecutable {
    /// The module after the optimisation passes.
    module: HloModule,
    programs: Vec<Program>,
    /// The module as given, with every operation interpreted, for
    /// executions that flush denormals as XLA:CPU does (the native kernels
    /// keep them, and constant folding does not flush).
    original: HloModule,
    interpreted: Vec<Program>,
    /// Arrays earlier executions finished with, for later ones to reuse.
    pool: Pool,
    /// Whether some operation is large enough to split across threads.
    parallel: bool,
}

/// Compiles a verified module.
pub fn compile(module: &HloModule) -> CpuResult<CpuExecutable> {
    let original = module.clone();
    let module = oxla_passes::optimize(module);
    let programs = program::lower(&module, true)?;
    let interpreted = program::lower(&original, false)?;
    let parallel = has_parallel_work(&module);
    Ok(CpuExecutable {
        module,
        programs,
        original,
        interpreted,
        pool: Pool::default(),
        parallel,
    })
}

/// Whether any array in the module is big enough for a kernel to split it,
/// a dot or convolution sums enough products for `gemm` or the batch loop
/// to split it, or a LAPACK routine works on matrices big enough for its
/// matrix products and divide-and-conquer halves to run on several threads.
///
/// An execution outside the pool whose kernel still splits its work would
/// hand it to rayon's global pool: a second set of threads, a hand-off
/// there and back, and `OXLA_NUM_THREADS` ignored.
fn has_parallel_work(module: &HloModule) -> bool {
    let big = |shape: &oxla_hlo::Shape, min: usize| {
        shape
            .leaves()
            .iter()
            .any(|a| a.element_count().is_ok_and(|n| n >= min))
    };
    module.computations().iter().any(|c| {
        c.instructions().iter().any(|i| {
            let rows = matches!(
                i.opcode,
                oxla_hlo::Opcode::Sort
                    | oxla_hlo::Opcode::ReduceWindow
                    | oxla_hlo::Opcode::SelectAndScatter
            );
            big(&i.shape, kernels::fused::PARALLEL_MIN)
                || (i.opcode == oxla_hlo::Opcode::Fft
                    && (big(&i.shape, kernels::fft::FFT_PARALLEL_MIN)
                        || i.operands.iter().any(|&o| {
                            big(&c.instruction(o).shape, kernels::fft::FFT_PARALLEL_MIN)
                        })))
                || (rows
                    && (big(&i.shape, ROWS_SPLIT_MIN)
                        || i.operands
                            .iter()
                            .any(|&o| big(&c.instruction(o).shape, ROWS_SPLIT_MIN))))
                || multiply_adds(c, i) >= kernels::dot::PARALLEL_MIN_FLOPS
                || (is_lapack(i)
                    && i.operands
                        .iter()
                        .any(|&o| big(&c.instruction(o).shape, LAPACK_PARALLEL_MIN)))
        })
    })
}

/// The multiply-adds of a dot or convolution (its result's elements times
/// the length of each one's sum), at most those of a LAPACK call (its
/// largest operand's elements times the longest matrix side of any
/// operand, which bounds what `lapack.rs` weighs before running batch
/// elements in parallel), saturating; 0 for other operations.
fn multiply_adds(c: &oxla_hlo::HloComputation, i: &oxla_hlo::HloInstruction) -> usize {
    use oxla_hlo::{ArrayShape, Opcode};
    let operand = |k: usize| c.instruction(*i.operands.get(k)?).shape.as_array();
    // Shapes are verified: dimensions are sizes, and a count that would
    // overflow is as large as counts go.
    let elements = |a: &ArrayShape| a.element_count().unwrap_or(usize::MAX);
    let size = |a: &ArrayShape, d: i64| {
        usize::try_from(d)
            .ok()
            .and_then(|d| a.dims_usize().get(d).copied())
            .unwrap_or(0)
    };
    let sum_len = match (i.opcode, operand(0), operand(1)) {
        (Opcode::Dot, Some(lhs), _) => i.attrs.dot_dnums.as_ref().map_or(0, |dn| {
            dn.lhs_contracting_dimensions
                .iter()
                .fold(1usize, |p, &d| p.saturating_mul(size(lhs, d)))
        }),
        (Opcode::Convolution, _, Some(kernel)) => i.attrs.conv_dnums.as_ref().map_or(0, |dn| {
            elements(kernel) / size(kernel, dn.kernel_output_feature_dimension).max(1)
        }),
        (Opcode::CustomCall, ..) if is_lapack(i) => {
            let shapes = || (0..i.operands.len()).filter_map(operand);
            let most = shapes().map(elements).max().unwrap_or(0);
            let side = shapes()
                .flat_map(|a| a.dims_usize().into_iter().rev().take(2))
                .max()
                .unwrap_or(0);
            return most.saturating_mul(side);
        }
        _ => 0,
    };
    i.shape
        .as_array()
        .map_or(0, elements)
        .saturating_mul(sum_len)
}

/// Whether `i` is one of JAX's LAPACK custom calls.
fn is_lapack(i: &oxla_hlo::HloInstruction) -> bool {
    i.opcode == oxla_hlo::Opcode::CustomCall
        && i.attrs
            .custom_call_target
            .as_deref()
            .is_some_and(|t| t.starts_with("lapack_"))
}

/// Elements from which sorts, reduce-windows and select-and-scatters
/// split their rows (every other kernel from `fused::PARALLEL_MIN`, 2^17).
const ROWS_SPLIT_MIN: usize = 1 << 16;

/// Elements of a LAPACK operand (128 x 128) from which the execution
/// enters the thread pool.
const LAPACK_PARALLEL_MIN: usize = 1 << 14;

impl CpuExecutable {
    /// The module as compiled (after the optimisation passes).
    pub fn module(&self) -> &HloModule {
        &self.module
    }

    /// The compiled programs, one line per step: what computes each value
    /// (a native kernel, control flow, or the interpreter) and what it reads.
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for program in &self.programs {
            let comp = self.module.computation(program.computation);
            let _ = writeln!(out, "{}:", comp.name);
            for step in &program.steps {
                let instr = comp.instruction(step.instr);
                let what = match &step.kind {
                    program::Kind::Parameter(n) => format!("parameter {n}"),
                    program::Kind::Constant(_) => "constant".to_string(),
                    program::Kind::Tuple => "tuple".to_string(),
                    program::Kind::GetTupleElement(i) => format!("get-tuple-element {i}"),
                    program::Kind::Call(_) => "call".to_string(),
                    program::Kind::While { small: None, .. } => "while".to_string(),
                    program::Kind::While { small: Some(l), .. } => {
                        format!("while (small-state loop{})", l.summary())
                    }
                    program::Kind::Conditional { .. } => "conditional".to_string(),
                    program::Kind::Kernel(k) => {
                        let name_of = |slot: usize| {
                            comp.instructions()
                                .get(slot)
                                .map_or_else(|| format!("value {slot}"), |i| i.name.clone())
                        };
                        format!("{}{}", k.name(), k.detail(&name_of))
                    }
                    program::Kind::Rng(k) => k.name().to_string(),
                    program::Kind::Interpret => format!("interpreted {}", instr.opcode),
                };
                let reads: Vec<&str> = step
                    .inputs
                    .iter()
                    .map(|&i| comp.instructions()[i].name.as_str())
                    .collect();
                let _ = writeln!(out, "  {} = {what} ({})", instr.name, reads.join(", "));
            }
        }
        out
    }

    /// How many steps of the compiled programs run native kernels (the rest
    /// are control flow, tuples, constants and interpreted operations).
    pub fn native_steps(&self) -> usize {
        self.programs
            .iter()
            .flat_map(|p| &p.steps)
            .filter(|s| matches!(s.kind, program::Kind::Kernel(_) | program::Kind::Rng(_)))
            .count()
    }

    /// Gives the arrays of a result the caller no longer needs back to this
    /// executable, so the next execution writes into memory that is already
    /// mapped instead of fresh pages (as a caller running one step function
    /// in a loop would).
    pub fn recycle(&self, result: Literal) {
        self.pool.give_value(Value::from_literal(result));
    }

    /// Runs the entry computation on `args`.
    pub fn execute(
        &self,
        args: &[Literal],
        options: &EvalOptions,
        services: &dyn Services,
    ) -> CpuResult<Literal> {
        let entry = self.module.entry();
        if args.len() != entry.num_parameters() {
            return Err(CpuError::Eval(EvalError::ArgumentCount {
                computation: entry.name.clone(),
                expected: entry.num_parameters(),
                actual: args.len(),
            }));
        }
        for (index, (arg, &param)) in args.iter().zip(entry.parameters()).enumerate() {
            let p = entry.instruction(param);
            if !arg.shape().compatible(&p.shape) {
                return Err(CpuError::Eval(EvalError::ArgumentShape {
                    computation: entry.name.clone(),
                    parameter: p.name.clone(),
                    index,
                    expected: p.shape.to_string(),
                    actual: arg.shape().to_string(),
                }));
            }
        }
        // The passes unroll loops of at most `MAX_TRIPS` iterations; under a
        // lower iteration limit such a loop must still stop with the error.
        let unrolled_too_far = options
            .while_iteration_limit
            .is_some_and(|l| l < oxla_passes::MAX_TRIPS as u64);
        let (module, programs) = if options.flush_denormals || unrolled_too_far {
            (&self.original, &self.interpreted)
        } else {
            (&self.module, &self.programs)
        };
        let run = || -> CpuResult<Literal> {
            let session = Session::new(module, options, services);
            let mut exec = Exec::new(module, programs, options, session, &self.pool);
            let mut values: Vec<Value> = args.iter().map(Value::borrowed).collect();
            let result = exec.run(module.entry_id().index(), &mut values)?;
            Ok(result.into_literal())
        };
        // Replicas of one program meet at collectives: inside a pool with fewer
        // threads than replicas, the ones waiting for a thread would never
        // arrive. Replicated executions stay on their own threads.
        if self.parallel && services.replica_count() <= 1 {
            threads::in_pool(run)
        } else {
            run()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(text: &str) -> HloModule {
        oxla_text::parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    fn entry_root_work(m: &HloModule) -> usize {
        let c = m.computation(m.entry_id());
        let root = c.instruction(c.root());
        multiply_adds(c, root)
    }

    #[test]
    fn small_arrays_with_a_big_sum_enter_the_pool() {
        // 256^3 multiply-adds over arrays of 64K elements: gemm splits the
        // product, so the execution must run inside oxla's pool.
        let matmul = module(
            "HloModule m\nENTRY e {\n  a = f32[256,256] parameter(0)\n  b = f32[256,256] parameter(1)\n  ROOT d = f32[256,256] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
        );
        assert_eq!(entry_root_work(&matmul), 256 * 256 * 256);
        assert!(has_parallel_work(&matmul));
        // 64^3 stays on the caller's thread.
        let small = module(
            "HloModule m\nENTRY e {\n  a = f32[64,64] parameter(0)\n  b = f32[64,64] parameter(1)\n  ROOT d = f32[64,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
        );
        assert_eq!(entry_root_work(&small), 64 * 64 * 64);
        assert!(!has_parallel_work(&small));
        // A batched dot contracting two dimensions: 4 x 32 x 32 results,
        // each a sum of 16 x 64.
        let batched = module(
            "HloModule m\nENTRY e {\n  a = f32[4,32,16,64] parameter(0)\n  b = f32[4,16,64,32] parameter(1)\n  ROOT d = f32[4,32,32] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2,3}, rhs_contracting_dims={1,2}\n}\n",
        );
        assert_eq!(entry_root_work(&batched), 4 * 32 * 32 * 16 * 64);
        assert!(has_parallel_work(&batched));
        // A 3x3 convolution, 64 to 64 features on 16x16: each of the
        // 8*16*16*64 results sums 3*3*64 products.
        let conv = module(
            "HloModule m\nENTRY e {\n  x = f32[8,64,16,16] parameter(0)\n  k = f32[64,64,3,3] parameter(1)\n  ROOT c = f32[8,64,16,16] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n}\n",
        );
        assert_eq!(entry_root_work(&conv), 8 * 16 * 16 * 64 * 3 * 3 * 64);
        assert!(has_parallel_work(&conv));
        // The same convolution on one 4x4 image and 8 features is small.
        let tiny = module(
            "HloModule m\nENTRY e {\n  x = f32[1,8,4,4] parameter(0)\n  k = f32[8,8,3,3] parameter(1)\n  ROOT c = f32[1,8,4,4] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01\n}\n",
        );
        assert_eq!(entry_root_work(&tiny), 4 * 4 * 8 * 3 * 3 * 8);
        assert!(!has_parallel_work(&tiny));
    }

    #[test]
    fn a_sort_that_splits_its_rows_enters_the_pool() {
        // 256 rows of 256: the sort kernel orders rows in parallel.
        let sort = module(
            "HloModule m\ncmp {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT lt = pred[] compare(p, q), direction=LT\n}\nENTRY e {\n  a = f32[256,256] parameter(0)\n  ROOT s = f32[256,256] sort(a), dimensions={1}, to_apply=cmp\n}\n",
        );
        assert!(has_parallel_work(&sort));
        let small = module(
            "HloModule m\ncmp {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT lt = pred[] compare(p, q), direction=LT\n}\nENTRY e {\n  a = f32[64,256] parameter(0)\n  ROOT s = f32[64,256] sort(a), dimensions={1}, to_apply=cmp\n}\n",
        );
        assert!(!has_parallel_work(&small));
        // 96K elements of element-wise work alone stay on the caller's thread.
        let loop_only = module(
            "HloModule m\nENTRY e {\n  a = f32[384,256] parameter(0)\n  ROOT s = f32[384,256] sine(a)\n}\n",
        );
        assert!(!has_parallel_work(&loop_only));
    }

    #[test]
    fn batched_lapack_calls_that_split_their_batch_enter_the_pool() {
        // Two 90 x 90 factorisations: 16,200 elements, but 2 * 8100 * 90
        // multiply-adds, so lapack.rs runs the two in parallel.
        let lu = module(
            "HloModule m\nENTRY e {\n  a = f32[2,90,90] parameter(0)\n  ROOT r = (f32[2,90,90], s32[2,90], s32[2]) custom-call(a), custom_call_target=\"lapack_sgetrf_ffi\"\n}\n",
        );
        assert_eq!(entry_root_work(&lu), 2 * 90 * 90 * 90);
        assert!(has_parallel_work(&lu));
        // Two 8 x 8 ones do not.
        let small = module(
            "HloModule m\nENTRY e {\n  a = f32[2,8,8] parameter(0)\n  ROOT r = (f32[2,8,8], s32[2,8], s32[2]) custom-call(a), custom_call_target=\"lapack_sgetrf_ffi\"\n}\n",
        );
        assert!(!has_parallel_work(&small));
    }
}
