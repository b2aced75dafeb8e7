//! `oxla opt`: the module after the passes, after each pass, and the CPU
//! backend's compiled plan.

use std::process::Command;

const MODULE: &str = "HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

ENTRY e {
  x = f32[4,8] parameter(0)
  w = f32[8,3] parameter(1)
  d = f32[4,3] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[4,3] tanh(d)
  one = f32[] constant(1)
  b = f32[4,3] broadcast(one), dimensions={}
  n = f32[4,3] multiply(t, b)
  z = f32[] constant(0)
  ROOT s = f32[4] reduce(n, z), dimensions={1}, to_apply=add
}
";

/// Runs `oxla opt m.hlo ARGS` on `MODULE`; returns stdout.
fn opt(args: &[&str]) -> String {
    let dir = std::env::temp_dir().join(format!(
        "oxla-inspect-{}-{}",
        std::process::id(),
        args.join("")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("m.hlo"), MODULE).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_oxla"))
        .arg("opt")
        .arg("m.hlo")
        .args(args)
        .current_dir(&dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn plan_names_the_kernel_of_each_step() {
    let plan = opt(&["--plan"]);
    let entry: Vec<&str> = plan
        .lines()
        .skip_while(|l| *l != "e:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    // The parameters, the product through gemm, the reduction's initial
    // value, then the tanh and the multiply by one fused into the row sum:
    // the broadcast is gone, and nothing is left to interpret.
    assert_eq!(
        entry,
        [
            "  x = parameter 0 ()",
            "  w = parameter 1 ()",
            "  d = dot (gemm) (x, w)",
            "  z = constant ()",
            "  s = fused reduction (d, z)",
        ],
        "{plan}"
    );
    assert!(!plan.contains("interpreted"), "{plan}");
}

#[test]
fn after_each_prints_the_module_after_every_pass_that_changed_it() {
    let dumps = opt(&["--after-each"]);
    let headers: Vec<&str> = dumps
        .lines()
        .filter(|l| l.starts_with("// after "))
        .collect();
    assert!(!headers.is_empty(), "{dumps}");
    // Multiplying by a broadcast one is an identity the simplifier removes.
    let last = dumps.rsplit("// after ").next().unwrap();
    assert!(!last.contains("multiply("), "{dumps}");
    assert!(opt(&[]).contains("tanh("));
}
