//! `oxla`: run, benchmark and print HLO modules.
//!
//! ```text
//! oxla run MODULE.hlo [--input X.npy]... [--output-dir DIR] [--backend interp|cpu] [--seed N]
//! oxla bench MODULE.hlo [--backend ...] [--iters N] [--seed N] [--input X.npy]... [--json]
//! oxla parse MODULE.hlo
//! ```
//!
//! Errors are one line on stderr and a non-zero exit status.

mod npy;
mod random;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use oxla::{Backend, Client, CompileOptions, Executable, ExecuteOptions};
use oxla_hlo::{HloModule, Literal, Shape};

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
        #[arg(long, value_enum, default_value = "interp")]
        backend: BackendArg,
        /// Seed for random inputs (when no --input is given) and for random-number ops.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Times compilation and execution.
    Bench {
        module: PathBuf,
        #[arg(long = "input")]
        inputs: Vec<PathBuf>,
        #[arg(long, value_enum, default_value = "interp")]
        backend: BackendArg,
        #[arg(long, default_value_t = 10)]
        iters: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Prints one JSON line: {"compile_ms": .., "run_ms": {"median": .., "min": .., "max": .., "iters": ..}}.
        #[arg(long)]
        json: bool,
    },
    /// Parses a module and prints it back in canonical HLO text.
    Parse { module: PathBuf },
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
        Command::Run {
            module,
            inputs,
            output_dir,
            backend,
            seed,
        } => {
            let m = load(&module)?;
            let args = arguments(&m, &inputs, seed)?;
            let exe = compile(m, backend)?;
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
            json,
        } => {
            let text = read_text(&module)?;
            let start = Instant::now();
            let m = parse(&module, &text)?;
            let args = arguments(&m, &inputs, seed)?;
            let compile_start = Instant::now();
            let exe = compile(m, backend)?;
            let compile_ms = (Instant::now() - compile_start).as_secs_f64() * 1e3;
            let parse_ms = (compile_start - start).as_secs_f64() * 1e3;
            let options = ExecuteOptions::with_seed(seed);
            exe.execute_with(&args, &options)?; // warm-up
            let mut times = Vec::with_capacity(iters.max(1));
            for _ in 0..iters.max(1) {
                let t = Instant::now();
                exe.execute_with(&args, &options)?;
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
            times.sort_by(f64::total_cmp);
            let median = times[times.len() / 2];
            let (min, max) = (times[0], times[times.len() - 1]);
            if json {
                println!(
                    "{{\"compile_ms\": {compile_ms:.4}, \"run_ms\": {{\"median\": {median:.4}, \"min\": {min:.4}, \"max\": {max:.4}, \"iters\": {}}}}}",
                    times.len()
                );
            } else {
                println!("parse:   {parse_ms:.3} ms");
                println!("compile: {compile_ms:.3} ms");
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
    oxla_text::parse_module(text).map_err(|e| anyhow::anyhow!("{}:{e}", path.display()))
}

fn load(path: &Path) -> Result<HloModule> {
    parse(path, &read_text(path)?)
}

fn compile(module: HloModule, backend: BackendArg) -> Result<Executable> {
    let backend = match backend {
        BackendArg::Interp => Backend::Interpreter,
        BackendArg::Cpu => bail!("the cpu backend is not available yet; use --backend interp"),
    };
    Ok(Client::new(backend).compile_module(module, &CompileOptions::default())?)
}

/// The entry arguments: read from `inputs` (one per parameter leaf), or random.
fn arguments(module: &HloModule, inputs: &[PathBuf], seed: u64) -> Result<Vec<Literal>> {
    let params = module.program_shape().parameters;
    if inputs.is_empty() {
        return random::arguments(&params, seed);
    }
    let leaves: usize = params.iter().map(|p| p.leaves().len()).sum();
    if inputs.len() != leaves {
        bail!(
            "the module takes {leaves} input arrays (parameter leaves) but {} --input files were given",
            inputs.len()
        );
    }
    let mut files = inputs.iter();
    params.iter().map(|p| assemble(p, &mut files)).collect()
}

/// Builds one parameter value from the next files, leaf by leaf.
fn assemble<'a>(shape: &Shape, files: &mut impl Iterator<Item = &'a PathBuf>) -> Result<Literal> {
    Ok(match shape {
        Shape::Array(a) => {
            let path = files.next().context("too few --input files")?;
            npy::read(path, a)?
        }
        Shape::Tuple(t) => Literal::Tuple(
            t.iter()
                .map(|s| assemble(s, files))
                .collect::<Result<_>>()?,
        ),
        Shape::Token => Literal::Token,
    })
}

fn write_outputs(dir: &Path, result: &Literal) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (i, leaf) in result.leaves().into_iter().enumerate() {
        npy::write(&dir.join(format!("out{i}.npy")), leaf)?;
    }
    Ok(())
}
