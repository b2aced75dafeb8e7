//! `oxla`: run, benchmark and print HLO modules.
//!
//! ```text
//! oxla run MODULE.hlo [--input X.npy]... [--output-dir DIR] [--backend cpu|interp] [--seed N]
//!          [--memory-limit BYTES] [--while-limit N] [--as-written]
//! oxla bench MODULE.hlo [--backend ...] [--iters N] [--seed N] [--input X.npy]... [--json]
//!          [--memory-limit BYTES] [--while-limit N] [--as-written]
//! oxla parse MODULE.hlo
//! oxla opt MODULE.hlo [--after-each | --plan] [--as-written]
//! ```
//!
//! Errors are one line on stderr and a non-zero exit status.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use oxla::{Backend, Client, CompileOptions, Executable, ExecuteOptions};
use oxla_cli::arguments::entry_arguments;
use oxla_cli::npy;
use oxla_hlo::{HloModule, Literal};
use oxla_text::TextError;

/// Arrays start on a cache line, so vector loads do not straddle two.
#[global_allocator]
static ALLOC: oxla::AlignedAlloc = oxla::AlignedAlloc;

#[derive(Parser)]
#[command(name = "oxla", version, about = "Run, benchmark and print HLO modules")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendArg {
    /// The reference interpreter.
    Interp,
    /// The compiled CPU backend.
    Cpu,
}

/// Guards against modules that would run away or exhaust memory.
#[derive(Args)]
struct Limits {
    /// The largest array, in bytes, the run may create, inputs included
    /// (a number with an optional K, M or G suffix, powers of 1024).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "4G")]
    memory_limit: u64,
    /// The most iterations one execution of a while loop may run (no limit if absent).
    #[arg(long, value_name = "N")]
    while_limit: Option<u64>,
}

#[derive(Subcommand)]
enum Command {
    /// Runs a module and prints its result or writes it as .npy files.
    Run {
        module: PathBuf,
        /// One .npy per entry parameter, in order (tuple parameters take their leaves in order).
        #[arg(long = "input")]
        inputs: Vec<PathBuf>,
        /// Writes the result, flattened depth-first, as DIR/out0.npy, DIR/out1.npy, ...
        #[arg(long)]
        output_dir: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "cpu")]
        backend: BackendArg,
        /// Seed for random inputs (when no --input is given) and for random-number ops.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Runs the module as written: without the inexact rewrites XLA
        /// applies before running a module (`x / 3` as `x * (1/3)`, bf16
        /// arithmetic kept in f32 where it only feeds a convert to f32, ...),
        /// which oxla applies by default so its results are XLA's.
        #[arg(long)]
        as_written: bool,
        #[command(flatten)]
        limits: Limits,
    },
    /// Times compilation and execution.
    Bench {
        module: PathBuf,
        #[arg(long = "input")]
        inputs: Vec<PathBuf>,
        #[arg(long, value_enum, default_value = "cpu")]
        backend: BackendArg,
        #[arg(long, default_value_t = 10)]
        iters: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Compiles the module this many times and reports the median time;
        /// the first compile of a process also pays for faulting in the
        /// compiler's own code, which the later ones do not.
        #[arg(long, default_value_t = 3)]
        compile_reps: usize,
        /// Prints one JSON line: {"compile_ms": .., "compile_first_ms": ..,
        /// "run_ms": {"median": .., "min": .., "max": .., "iters": ..}}.
        #[arg(long)]
        json: bool,
        /// Runs the module as written: without the inexact rewrites XLA
        /// applies before running a module (`x / 3` as `x * (1/3)`, bf16
        /// arithmetic kept in f32 where it only feeds a convert to f32, ...),
        /// which oxla applies by default so its results are XLA's.
        #[arg(long)]
        as_written: bool,
        #[command(flatten)]
        limits: Limits,
    },
    /// Parses a module and prints it back in canonical HLO text.
    Parse { module: PathBuf },
    /// Prints a module after the CPU backend's optimisation passes.
    Opt {
        module: PathBuf,
        /// Prints the module after every pass that changed it, each under a
        /// `// after PASS (round N)` line.
        #[arg(long)]
        after_each: bool,
        /// Prints the CPU backend's compiled programs instead: one line per
        /// step, naming the kernel that computes it (`interpreted OP` where
        /// there is no kernel) and the values it reads.
        #[arg(long, conflicts_with = "after_each")]
        plan: bool,
        /// Runs the module as written: without the inexact rewrites XLA
        /// applies before running a module (`x / 3` as `x * (1/3)`, bf16
        /// arithmetic kept in f32 where it only feeds a convert to f32, ...),
        /// which oxla applies by default so its results are XLA's.
        #[arg(long)]
        as_written: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line: the chain of contexts joined, with inner newlines folded.
            let message = format!("{e:#}")
                .lines()
                .map(str::trim)
                .collect::<Vec<_>>()
                .join("; ");
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Parse { module } => {
            let m = load(&module)?;
            print!("{}", oxla_text::print_module(&m));
            Ok(())
        }
        Command::Opt {
            module,
            plan: true,
            as_written,
            ..
        } => {
            let limits = Limits {
                memory_limit: u64::MAX,
                while_limit: None,
            };
            let exe = compile(load(&module)?, BackendArg::Cpu, &limits, as_written)?;
            print!("{}", exe.plan().unwrap_or_default());
            Ok(())
        }
        Command::Opt {
            module,
            after_each,
            as_written,
            ..
        } => {
            let mut m = load(&module)?;
            let mut dumps = String::new();
            let mut pipelines = vec![oxla_passes::Pipeline::standard()];
            if !as_written {
                pipelines.insert(0, oxla_passes::Pipeline::xla());
            }
            for pipeline in pipelines {
                pipeline.run_observed(&mut m, &mut |pass, round, changed, m| {
                    if after_each && changed {
                        dumps.push_str(&format!(
                            "// after {pass} (round {round})\n{}\n",
                            oxla_text::print_module(m)
                        ));
                    }
                });
            }
            if after_each {
                print!("{dumps}");
            } else {
                print!("{}", oxla_text::print_module(&m));
            }
            Ok(())
        }
        Command::Run {
            module,
            inputs,
            output_dir,
            backend,
            seed,
            as_written,
            limits,
        } => {
            let m = load(&module)?;
            let args = entry_arguments(&m, &inputs, seed, limits.memory_limit)?;
            let exe = compile(m, backend, &limits, as_written)?;
            let result = exe.execute_with(&args, &ExecuteOptions::with_seed(seed))?;
            match output_dir {
                Some(dir) => write_outputs(&dir, &result),
                None => {
                    println!("{result}");
                    Ok(())
                }
            }
        }
        Command::Bench {
            module,
            inputs,
            backend,
            iters,
            seed,
            compile_reps,
            json,
            as_written,
            limits,
        } => {
            let text = read_text(&module)?;
            let start = Instant::now();
            let m = parse(&module, &text)?;
            let args = entry_arguments(&m, &inputs, seed, limits.memory_limit)?;
            let parse_ms = start.elapsed().as_secs_f64() * 1e3;
            // Like the XLA side of bench/compare.py: several compiles, the median.
            let mut compiles = Vec::with_capacity(compile_reps.max(1));
            for _ in 1..compile_reps {
                let module = m.clone();
                let t = Instant::now();
                drop(compile(module, backend, &limits, as_written)?);
                compiles.push(t.elapsed().as_secs_f64() * 1e3);
            }
            let t = Instant::now();
            let exe = compile(m, backend, &limits, as_written)?;
            compiles.push(t.elapsed().as_secs_f64() * 1e3);
            let compile_first_ms = compiles[0];
            compiles.sort_by(f64::total_cmp);
            let compile_ms = compiles[compiles.len() / 2];
            let options = ExecuteOptions::with_seed(seed);
            // Each result goes back to the executable once timed, as a caller
            // running a step in a loop would hand back its buffers.
            exe.recycle(exe.execute_with(&args, &options)?); // warm-up
            let mut times = Vec::with_capacity(iters.max(1));
            for _ in 0..iters.max(1) {
                let t = Instant::now();
                let result = exe.execute_with(&args, &options)?;
                times.push(t.elapsed().as_secs_f64() * 1e3);
                exe.recycle(result);
            }
            times.sort_by(f64::total_cmp);
            let median = times[times.len() / 2];
            let (min, max) = (times[0], times[times.len() - 1]);
            if json {
                println!(
                    "{{\"compile_ms\": {compile_ms:.4}, \"compile_first_ms\": {compile_first_ms:.4}, \"run_ms\": {{\"median\": {median:.4}, \"min\": {min:.4}, \"max\": {max:.4}, \"iters\": {}}}}}",
                    times.len()
                );
            } else {
                println!("parse:   {parse_ms:.3} ms");
                println!(
                    "compile: {compile_ms:.3} ms (median of {}; first {compile_first_ms:.3} ms)",
                    compiles.len()
                );
                println!(
                    "run:     median {median:.3} ms, min {min:.3} ms, max {max:.3} ms over {} runs",
                    times.len()
                );
            }
            Ok(())
        }
    }
}

fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

fn parse(path: &Path, text: &str) -> Result<HloModule> {
    oxla_text::parse_module(text).map_err(|e| match e {
        // `m.hlo:3:14: expected ...`, as compilers place errors.
        TextError::Parse(e) => anyhow::anyhow!("{}:{e}", path.display()),
        TextError::Verify(e) => {
            anyhow::anyhow!("{}: the module does not verify: {e}", path.display())
        }
    })
}

fn load(path: &Path) -> Result<HloModule> {
    parse(path, &read_text(path)?)
}

fn compile(
    module: HloModule,
    backend: BackendArg,
    limits: &Limits,
    as_written: bool,
) -> Result<Executable> {
    let backend = match backend {
        BackendArg::Interp => Backend::Interpreter,
        BackendArg::Cpu => Backend::Cpu,
    };
    // Nothing can feed an infeed from the command line: fail at once rather
    // than wait for values that will never come.
    let mut options = CompileOptions::default()
        .with_max_array_bytes(limits.memory_limit)
        .with_infeed_timeout(Duration::ZERO)
        .with_xla_rewrites(!as_written);
    if let Some(n) = limits.while_limit {
        options = options.with_while_iteration_limit(n);
    }
    Ok(Client::new(backend).compile_module(module, &options)?)
}

/// `4096`, `64K`, `512M`, `4G` (powers of 1024) as a number of bytes.
fn parse_bytes(text: &str) -> std::result::Result<u64, String> {
    let (digits, scale) = match text.char_indices().last() {
        Some((i, 'K' | 'k')) => (&text[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&text[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&text[..i], 1 << 30),
        _ => (text, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| {
            format!("`{text}` is not a byte count (a number with an optional K, M or G suffix)")
        })
}

fn write_outputs(dir: &Path, result: &Literal) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (i, leaf) in result.leaves().into_iter().enumerate() {
        npy::write(&dir.join(format!("out{i}.npy")), leaf)?;
    }
    Ok(())
}
