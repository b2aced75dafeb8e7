//! `Client` and `Executable`: compile a computation once, run it many times,
//! from many threads, on one replica or several. The client owns what lives
//! beside a computation: infeed and outfeed queues, custom-call targets, and
//! the rendezvous replicas use for collectives.

mod custom_call;
mod error;
mod infeed_order;
mod rendezvous;
mod services;

use std::sync::Arc;
use std::time::Duration;

use oxla_builder::XlaComputation;
use oxla_hlo::ir::Opcode;
use oxla_hlo::verifier::verify;
use oxla_hlo::{HloModule, Literal};
use oxla_interp::EvalOptions;

pub use custom_call::{CustomCallCFn, CustomCallFn};
pub use error::{Error, Result};

use custom_call::{Registry, Target, find_symbol};
use rendezvous::Rendezvous;
use services::{Queues, ReplicaServices};

/// Which engine runs compiled computations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// The reference interpreter: every op, every type, plainly evaluated.
    Interpreter,
    /// The compiled CPU backend: fused, vectorised, multi-threaded kernels
    /// (operations without a kernel of their own run through the
    /// interpreter, so every module runs). The default.
    #[default]
    Cpu,
}

/// Options fixed when compiling.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompileOptions {
    /// Number of replicas the executable runs as (see [`Executable::execute_replicated`]).
    pub num_replicas: usize,
    /// The most iterations one execution of a `while` may run before it is an error.
    pub while_iteration_limit: Option<u64>,
    /// The largest array, in bytes, an execution may create; an instruction
    /// whose result would be larger fails before anything is allocated.
    /// Defaults to [`oxla_interp::DEFAULT_MAX_ARRAY_BYTES`] (4 GiB).
    pub max_array_bytes: u64,
    /// How long a replica waits at a collective for the others.
    pub collective_timeout: Duration,
    /// How long an infeed waits for a value to be queued.
    pub infeed_timeout: Duration,
    /// Rewrite the module as XLA does before running it (on by default, as
    /// in XLA): its algebraic simplifier's inexact rules (`x / 3` becomes
    /// `x * (1/3)`, `(x * 2) * 3` becomes `x * 6`, ...) and XLA:CPU's bf16
    /// normalization with excess precision (see
    /// [`oxla_passes::MatchXla`]). Results then match XLA's bit for bit
    /// where the operations are exact. Off, the module runs as written.
    pub xla_rewrites: bool,
}

impl Default for CompileOptions {
    fn default() -> CompileOptions {
        CompileOptions {
            num_replicas: 1,
            while_iteration_limit: None,
            max_array_bytes: oxla_interp::DEFAULT_MAX_ARRAY_BYTES,
            collective_timeout: Duration::from_secs(30),
            infeed_timeout: Duration::from_secs(30),
            xla_rewrites: true,
        }
    }
}

impl CompileOptions {
    pub fn with_replicas(mut self, n: usize) -> CompileOptions {
        self.num_replicas = n;
        self
    }

    pub fn with_while_iteration_limit(mut self, limit: u64) -> CompileOptions {
        self.while_iteration_limit = Some(limit);
        self
    }

    /// Limits the size of any one array an execution creates (see
    /// [`CompileOptions::max_array_bytes`]).
    pub fn with_max_array_bytes(mut self, bytes: u64) -> CompileOptions {
        self.max_array_bytes = bytes;
        self
    }

    pub fn with_collective_timeout(mut self, timeout: Duration) -> CompileOptions {
        self.collective_timeout = timeout;
        self
    }

    pub fn with_infeed_timeout(mut self, timeout: Duration) -> CompileOptions {
        self.infeed_timeout = timeout;
        self
    }

    /// Whether to rewrite the module as XLA does (see
    /// [`CompileOptions::xla_rewrites`]).
    pub fn with_xla_rewrites(mut self, on: bool) -> CompileOptions {
        self.xla_rewrites = on;
        self
    }
}

/// Options of one execution.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecuteOptions {
    /// Seed of the random number ops: the same seed gives the same values on
    /// every run and every backend.
    pub seed: u64,
}

impl ExecuteOptions {
    pub fn with_seed(seed: u64) -> ExecuteOptions {
        ExecuteOptions { seed }
    }
}

struct Shared {
    backend: Backend,
    custom_calls: Arc<Registry>,
    infeed: Arc<Queues>,
    outfeed: Arc<Queues>,
}

/// Compiles computations and holds the runtime state they share. Cheap to
/// clone (clones share state); `Send + Sync`.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

impl Default for Client {
    fn default() -> Client {
        Client::new(Backend::default())
    }
}

impl Client {
    pub fn new(backend: Backend) -> Client {
        Client {
            shared: Arc::new(Shared {
                backend,
                custom_calls: Arc::default(),
                infeed: Arc::default(),
                outfeed: Arc::default(),
            }),
        }
    }

    pub fn backend(&self) -> Backend {
        self.shared.backend
    }

    /// Registers a Rust function as the custom-call target `name`.
    pub fn register_custom_call(
        &self,
        name: &str,
        f: impl Fn(&[Literal], &oxla_hlo::Shape) -> std::result::Result<Literal, String>
        + Send
        + Sync
        + 'static,
    ) {
        self.shared
            .custom_calls
            .insert(name, Target::Rust(Arc::new(f)));
    }

    /// Registers a C function with the spec's signature as the target `name`.
    ///
    /// # Safety
    /// `f` must read each operand and write the result exactly as the spec's
    /// `void target(void* out, void** in)` contract says, within the buffers'
    /// sizes (the byte sizes of the operand and result shapes).
    pub unsafe fn register_custom_call_c(&self, name: &str, f: CustomCallCFn) {
        self.shared.custom_calls.insert(name, Target::C(f));
    }

    /// Finds the exported C symbol `name` in the running process (as XLA's
    /// CPU backend does) and registers it as the target `name`.
    ///
    /// # Safety
    /// The symbol must be a function with the spec's signature, obeying the
    /// contract of [`Client::register_custom_call_c`].
    pub unsafe fn register_custom_call_symbol(&self, name: &str) -> Result<()> {
        let f = find_symbol(name).map_err(Error::Usage)?;
        self.shared.custom_calls.insert(name, Target::C(f));
        Ok(())
    }

    /// Queues `value` for the next Infeed that `replica` executes.
    pub fn transfer_to_infeed(&self, replica: usize, value: Literal) -> Result<()> {
        if value.shape().tuple_depth() > 1 {
            return Err(Error::Usage(format!(
                "infeed values cannot be nested tuples, got {}",
                value.shape()
            )));
        }
        self.shared.infeed.push(replica, value);
        Ok(())
    }

    /// The next value `replica` sent to its outfeed, waiting up to `timeout`.
    pub fn transfer_from_outfeed(&self, replica: usize, timeout: Duration) -> Result<Literal> {
        self.shared.outfeed.pop(replica, timeout).ok_or_else(|| {
            Error::Usage(format!(
                "no outfeed value from replica {replica} within {timeout:?}"
            ))
        })
    }

    /// Compiles a built computation.
    pub fn compile(
        &self,
        computation: &XlaComputation,
        options: &CompileOptions,
    ) -> Result<Executable> {
        self.compile_module(computation.module().clone(), options)
    }

    /// Compiles a module (for instance one parsed from HLO text).
    pub fn compile_module(
        &self,
        module: HloModule,
        options: &CompileOptions,
    ) -> Result<Executable> {
        verify(&module)?;
        if options.num_replicas == 0 {
            return Err(Error::Compile("num_replicas must be at least 1".into()));
        }
        for comp in module.computations() {
            for instr in comp.instructions() {
                if instr.opcode == Opcode::CustomCall {
                    let target = instr.attrs.custom_call_target.as_deref().unwrap_or("");
                    if self.shared.custom_calls.get(target).is_none()
                        && !oxla_interp::is_builtin_custom_call(target)
                    {
                        return Err(Error::Compile(format!(
                            "custom-call `{}` in {} calls the target `{target}`, which is not registered",
                            instr.name, comp.name
                        )));
                    }
                }
                if instr.opcode == Opcode::Infeed
                    && let Some(data) = instr.shape.tuple_shapes().and_then(|t| t.first())
                    && data.tuple_depth() > 1
                {
                    return Err(Error::Compile(format!(
                        "infeed `{}` in {} reads the nested tuple shape {data}, which is not supported",
                        instr.name, comp.name
                    )));
                }
            }
        }
        infeed_order::check(&module).map_err(Error::Compile)?;
        let module = if options.xla_rewrites {
            oxla_passes::match_xla(&module)
        } else {
            module
        };
        let cpu = match self.shared.backend {
            Backend::Interpreter => None,
            Backend::Cpu => Some(Arc::new(
                oxla_cpu::compile(&module).map_err(|e| Error::Compile(e.to_string()))?,
            )),
        };
        Ok(Executable {
            module: Arc::new(module),
            options: options.clone(),
            client: self.clone(),
            cpu,
        })
    }
}

/// A compiled computation. `Send + Sync`: several threads may execute it at once.
#[derive(Clone)]
pub struct Executable {
    module: Arc<HloModule>,
    options: CompileOptions,
    client: Client,
    /// The compiled form, for the CPU backend.
    cpu: Option<Arc<oxla_cpu::CpuExecutable>>,
}

impl Executable {
    /// The module this executable runs: the compiled one, after XLA's
    /// rewrites unless [`CompileOptions::xla_rewrites`] was off.
    pub fn module(&self) -> &HloModule {
        &self.module
    }

    pub fn options(&self) -> &CompileOptions {
        &self.options
    }

    /// The compiled programs, one line per step: the kernel that computes
    /// each value (a fused loop, a product, a copy...), control flow, or
    /// `interpreted OP` where the CPU backend has no kernel for it. `None`
    /// for the interpreter backend, which has no plan.
    pub fn plan(&self) -> Option<String> {
        self.cpu.as_ref().map(|cpu| cpu.describe())
    }

    /// Runs on one replica with seed 0.
    pub fn execute(&self, args: &[Literal]) -> Result<Literal> {
        self.execute_with(args, &ExecuteOptions::default())
    }

    /// Hands a result the caller is done with back to the executable: the
    /// compiled backend reuses its buffers in later executions, so they
    /// write into memory that is already mapped (fresh pages cost a fault
    /// each). Optional; the interpreter simply drops it.
    pub fn recycle(&self, result: Literal) {
        if let Some(cpu) = &self.cpu {
            cpu.recycle(result);
        }
    }

    /// Runs on one replica.
    pub fn execute_with(&self, args: &[Literal], options: &ExecuteOptions) -> Result<Literal> {
        if self.options.num_replicas != 1 {
            return Err(Error::Usage(format!(
                "this executable was compiled for {} replicas; use execute_replicated",
                self.options.num_replicas
            )));
        }
        let rendezvous = Arc::new(Rendezvous::new(self.options.collective_timeout));
        self.run_replica(0, args, options, &rendezvous)
    }

    /// Runs every replica on its own thread, replica `i` on `args[i]`, and
    /// returns one result per replica. A collective that one replica reaches
    /// and another does not ends in an error, never a hang.
    pub fn execute_replicated(
        &self,
        args: &[Vec<Literal>],
        options: &ExecuteOptions,
    ) -> Result<Vec<Literal>> {
        let n = self.options.num_replicas;
        if args.len() != n {
            return Err(Error::Usage(format!(
                "expected one argument list per replica ({n}), got {}",
                args.len()
            )));
        }
        let rendezvous = Arc::new(Rendezvous::new(self.options.collective_timeout));
        let results: Vec<Result<Literal>> = std::thread::scope(|scope| {
            let handles: Vec<_> = args
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let rendezvous = Arc::clone(&rendezvous);
                    scope.spawn(move || self.run_replica(i, a, options, &rendezvous))
                })
                .collect();
            handles
                .into_iter()
                .enumerate()
                .map(|(i, h)| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::Replica {
                            replica: i,
                            source: Box::new(Error::Usage("the replica's thread panicked".into())),
                        })
                    })
                })
                .collect()
        });
        results
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                r.map_err(|e| Error::Replica {
                    replica: i,
                    source: Box::new(e),
                })
            })
            .collect()
    }

    fn run_replica(
        &self,
        replica: usize,
        args: &[Literal],
        options: &ExecuteOptions,
        rendezvous: &Arc<Rendezvous>,
    ) -> Result<Literal> {
        let services = ReplicaServices {
            replica: replica as u32,
            replica_count: self.options.num_replicas as u32,
            rendezvous: Arc::clone(rendezvous),
            infeed: Arc::clone(&self.client.shared.infeed),
            outfeed: Arc::clone(&self.client.shared.outfeed),
            infeed_timeout: self.options.infeed_timeout,
            custom_calls: Arc::clone(&self.client.shared.custom_calls),
        };
        let mut eval = EvalOptions::with_seed(options.seed);
        eval.while_iteration_limit = self.options.while_iteration_limit;
        eval.max_array_bytes = self.options.max_array_bytes;
        let result = match &self.cpu {
            None => {
                oxla_interp::evaluate(&self.module, args, &eval, &services).map_err(Error::from)
            }
            Some(cpu) => cpu.execute(args, &eval, &services).map_err(Error::from),
        };
        rendezvous.finish(replica as u32);
        result
    }
}
