//! Errors: argument checks, messages that name the instruction, and a module
//! built directly (without the text format) that the verifier accepts.

use oxla_hlo::ir::Attrs;
use oxla_hlo::{Literal, Opcode, PrimitiveType, Shape};
use oxla_interp::{EvalError, EvalOptions, NoServices, evaluate};

use crate::common::{CompBuilder, build_module, eval_err, lit, module};

const NEG: &str =
    "HloModule t\nENTRY main {\n  x = f32[2] parameter(0)\n  ROOT n = f32[2] negate(x)\n}\n";

#[test]
fn argument_count_and_shapes_are_checked() {
    let e = eval_err(NEG, &[]);
    assert_eq!(
        e,
        EvalError::ArgumentCount {
            computation: "main".into(),
            expected: 1,
            actual: 0
        }
    );
    assert_eq!(
        e.to_string(),
        "entry computation `main` takes 1 argument(s), but 0 were given"
    );
    let e = eval_err(NEG, &[lit("f32[3]", "{1, 2, 3}")]);
    assert_eq!(
        e.to_string(),
        "argument 0 has shape f32[3], but parameter `x` of entry computation `main` has shape f32[2]"
    );
    let e = eval_err(NEG, &[lit("f64[2]", "{1, 2}")]);
    assert!(matches!(e, EvalError::ArgumentShape { index: 0, .. }));
    // Layouts are ignored.
    let with_layout = NEG.replace("f32[2] parameter", "f32[2]{0} parameter");
    let m = module(&with_layout);
    assert!(
        evaluate(
            &m,
            &[lit("f32[2]", "{1, 2}")],
            &EvalOptions::default(),
            &NoServices
        )
        .is_ok()
    );
}

#[test]
fn errors_inside_called_computations_name_the_inner_instruction() {
    let text = r#"HloModule t
inner {
  t = token[] after-all()
  in = (f32[], token[]) infeed(t)
  ROOT d = f32[] get-tuple-element(in), index=0
}
ENTRY e {
  ROOT c = f32[] call(), to_apply=inner
}
"#;
    let e = eval_err(text, &[]);
    assert!(
        e.to_string().starts_with(
            "in computation `inner`, instruction `in` (infeed): infeed: no infeed service"
        ),
        "{e}"
    );
}

#[test]
fn modules_built_directly() {
    // (x + 1) * x over s32, built instruction by instruction.
    let s = Shape::array(PrimitiveType::S32, [3]).unwrap();
    let mut b = CompBuilder::new("main");
    let x = b.param(0, s.clone());
    let one = b.constant(Literal::vec1(&[1i32, 1, 1]));
    let sum = b.add(Opcode::Add, s.clone(), &[x, one], Attrs::default());
    let prod = b.add(Opcode::Multiply, s, &[sum, x], Attrs::default());
    let m = build_module(vec![b.finish(prod)]);
    let out = evaluate(
        &m,
        &[Literal::vec1(&[-1i32, 2, 46341])],
        &EvalOptions::default(),
        &NoServices,
    )
    .unwrap();
    // 46341 * 46342 wraps.
    assert_eq!(
        out.to_vec::<i32>().unwrap(),
        vec![0, 6, 46341i32.wrapping_mul(46342)]
    );
}
