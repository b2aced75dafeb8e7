//! Malformed input: each case asserts the exact `line:column: message`.
//! Messages say what was expected and what was found, or which rule the
//! text breaks, at the place it breaks it.

use oxla_hlo::{PrimitiveType, Shape};
use oxla_text::{TextError, parse_literal, parse_module, parse_module_unverified, parse_shape};

/// A module whose entry body is `body` (instructions, one per line).
fn module(body: &str) -> String {
    format!("HloModule m\n\nENTRY e {{\n{body}\n}}\n")
}

#[track_caller]
fn check(text: &str, expected: &str) {
    match parse_module_unverified(text) {
        Ok(_) => panic!("parsed, but expected the error {expected:?}:\n{text}"),
        Err(e) => assert_eq!(e.to_string(), expected, "\n{text}"),
    }
}

#[track_caller]
fn check_body(body: &str, expected: &str) {
    check(&module(body), expected);
}

#[test]
fn operand_lists() {
    check_body(
        "  p = f32[] parameter(0)\n  ROOT r = f32[] add(p foo)",
        r#"5:24: expected ',' or ')' after operand, found identifier "foo""#,
    );
    check_body(
        "  p = f32[] parameter(0)\n  ROOT r = f32[] add(p, q)",
        "5:25: instruction q is not defined before this use",
    );
    check_body(
        "  r = f32[] negate(p)\n  ROOT p = f32[] parameter(0)",
        "4:20: instruction p is not defined before this use",
    );
    check_body(
        "  p = f32[2] parameter(0)\n  ROOT r = f32[2] negate(f32[3] p)",
        "5:26: operand p has shape f32[2], not the f32[3] written here",
    );
    check_body(
        "  p = f32[] parameter(0)\n  ROOT r = f32[] add(p, f32[] )",
        "5:31: expected an operand name after its shape, found ')'",
    );
}

#[test]
fn opcodes() {
    check_body(
        "  p = f32[] parameter(0)\n  ROOT r = f32[] frobnicate(p)",
        "5:18: unknown opcode frobnicate",
    );
    check_body(
        "  p = f32[] parameter(0)\n  ROOT r = f32[] fusion(p), kind=kLoop",
        "5:18: opcode fusion is not supported by oxla",
    );
    check_body(
        "  ROOT c = constant(1)",
        "4:12: constant needs its shape written before the opcode",
    );
    check_body(
        "  p = f32[2] parameter(0)\n  ROOT r = reshape(p)",
        "5:12: reshape needs its shape written before the opcode",
    );
    check_body(
        "  p = f32[2] parameter(0)\n  q = s32[2] parameter(1)\n  ROOT r = add(p, q)",
        "6:12: cannot infer the shape of this add: add: operands must have the same element type, got f32[2] and s32[2]",
    );
}

#[test]
fn attributes() {
    check_body(
        "  p = f32[] parameter(0)\n  ROOT r = f32[] add(p, p), zzz=1",
        "5:29: unexpected attribute zzz for add",
    );
    check_body(
        "  p = f32[] parameter(0)\n  ROOT r = f32[] add(p, p), dimensions={0}",
        "5:29: unexpected attribute dimensions for add",
    );
    check_body(
        "  p = f32[] parameter(0)\n  ROOT r = f32[2] broadcast(p), dimensions={}, dimensions={}",
        "5:48: duplicate attribute dimensions",
    );
    check_body(
        "  p = f32[2,3] parameter(0)\n  ROOT r = f32[3,2] transpose(p)",
        "5:21: transpose needs attribute `dimensions`",
    );
    check_body(
        "  p = f32[] parameter(0)\n  ROOT r = pred[] compare(p, p), direction=XX",
        "5:44: unknown comparison direction `XX` (expected one of EQ, NE, GE, GT, LE, LT)",
    );
    check_body(
        "  p = f32[] parameter(0)\n  ROOT r = pred[] compare(p, p), direction=",
        "6:1: expected a comparison direction, found '}'",
    );
    check_body(
        "  p = f32[4] parameter(0)\n  ROOT r = f32[2] slice(p), slice={[0:2:1}",
        "5:42: expected ']' to end a slice dimension, found '}'",
    );
    check_body(
        "  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[2] reduce-window(p, z), window={size=2 stride=2x2}, to_apply=c",
        "6:66: window stride has 2 dimensions but size has 1",
    );
    check_body(
        "  p = f32[1,2,2,1] parameter(0)\n  ROOT r = f32[1,2,2,1] convolution(p, p), dim_labels=b0?f_01io->b01f",
        "5:55: dim_labels b0?f_01io->b01f: dimensions labelled '?' are not supported",
    );
    check_body(
        "  p = f32[4] parameter(0)\n  ROOT r = f32[4] all-reduce(p), replica_groups=[2,3]<=[4], to_apply=c",
        "5:49: iota replica groups [2,3] need 6 devices, but the iota has 4",
    );
    check_body(
        "  p = f32[4] parameter(0)\n  ROOT r = f32[4] custom-call(p), custom_call_target=\"a\\/b\"",
        r"5:56: unknown escape sequence \/",
    );
}

#[test]
fn shapes() {
    check_body(
        "  ROOT p = f32[<=4] parameter(0)",
        "4:16: dynamic dimensions are not supported",
    );
    check_body(
        "  ROOT p = f32[2,?] parameter(0)",
        "4:18: dynamic dimensions are not supported",
    );
    check_body(
        "  ROOT p = f8e4m3fn[2] parameter(0)",
        "4:12: element type f8e4m3fn is not supported by oxla",
    );
    check_body(
        "  ROOT p = f33[2] parameter(0)",
        "4:12: unknown element type f33",
    );
    check_body(
        "  ROOT p = f32[2,3]{0,0} parameter(0)",
        "4:20: layout [0, 0] is not a permutation of the 2 dimensions of f32[2,3]",
    );
    assert_eq!(
        parse_shape("f32[99999999999999999999]")
            .unwrap_err()
            .to_string(),
        "1:5: integer 99999999999999999999 does not fit in 64 bits"
    );
    assert_eq!(
        parse_shape("f32[4294967296,4294967296]")
            .unwrap_err()
            .to_string(),
        "1:1: the element count of f32[4294967296,4294967296] overflows"
    );
    assert_eq!(
        parse_shape("f32[-1]").unwrap_err().to_string(),
        "1:5: dimension sizes must not be negative, found -1"
    );
    let deep = format!("{}f32[]{}", "(".repeat(300), ")".repeat(300));
    assert_eq!(
        parse_shape(&deep).unwrap_err().to_string(),
        "1:257: nesting is too deep (more than 256 levels)"
    );
    assert_eq!(
        parse_shape("(f32[], s32[]").unwrap_err().to_string(),
        "1:14: expected ',' or ')' in a tuple shape, found end of input"
    );
}

#[test]
fn literals() {
    let u8s = Shape::array(PrimitiveType::U8, [2]).unwrap();
    assert_eq!(
        parse_literal("{1, 256}", &u8s).unwrap_err().to_string(),
        "1:5: value 256 is out of range for u8"
    );
    assert_eq!(
        parse_literal("{-1, 0}", &u8s).unwrap_err().to_string(),
        "1:2: value -1 is out of range for u8"
    );
    let s64 = Shape::scalar(PrimitiveType::S64);
    assert_eq!(
        parse_literal("9223372036854775808", &s64)
            .unwrap_err()
            .to_string(),
        "1:1: value 9223372036854775808 is out of range for s64"
    );
    check_body(
        "  ROOT c = f16[] constant(65520)",
        "4:27: value 65520 is out of range for f16",
    );
    check_body(
        "  ROOT c = f64[] constant(1e309)",
        "4:27: value 1e309 is out of range for f64",
    );
    check_body(
        "  ROOT c = s32[] constant(1.5)",
        "4:27: expected an integer for s32, found number 1.5",
    );
    check_body(
        "  ROOT c = f32[2,2] constant({{1,2},{3}})",
        "4:39: dimension 1 has size 2, but 1 entries were given",
    );
    check_body(
        "  ROOT c = f32[2] constant({1,2,3})",
        "4:33: expected '}' after the 2 entries of dimension 0, found integer 3",
    );
    check_body(
        "  ROOT c = f32[20] constant({...})",
        "4:29: elided constant {...}: the text does not contain the values (print it with print_large_constants)",
    );
    check_body(
        "  ROOT c = bf16[] constant(nan(0x80))",
        "4:28: NaN payload 0x80 does not fit the 7-bit mantissa of bf16 (it must be between 0x1 and 0x7f)",
    );
    check_body(
        "  ROOT c = c64[] constant(1)",
        "4:27: expected '(' to start a complex value (re, im) of type c64, found integer 1",
    );
    check_body(
        "  ROOT c = pred[] constant(yes)",
        r#"4:28: expected a pred value (true, false, 1 or 0), found identifier "yes""#,
    );
    check_body(
        "  ROOT c = (f32[], s32[]) constant((1))",
        "4:38: expected ',' between tuple elements, found ')'",
    );
}

#[test]
fn lexical() {
    check(
        "HloModule m\n/* never closed\nENTRY e {}",
        "2:1: unterminated comment",
    );
    check_body(
        "  ROOT c = f32[] custom-call(), custom_call_target=\"abc",
        "4:52: unterminated string",
    );
    check_body(
        "  ROOT c = f32[] constant($)",
        "4:27: unexpected character '$'",
    );
    check_body(
        "  ROOT c = f32[] constant(nan(0x))",
        "4:27: malformed NaN payload: expected nan(0x<hex digits>)",
    );
}

#[test]
fn structure() {
    check("", "1:1: expected a computation, found end of input");
    check(
        "HloModule m\nENTRY e {\n}",
        "3:1: a computation needs at least one instruction",
    );
    check_body(
        "  p = f32[] parameter(0)\n  p = f32[] parameter(1)",
        "5:3: instruction p is already defined in this computation",
    );
    check_body(
        "  p = f32[] parameter(0)\n  q = f32[] parameter(0)",
        "5:23: parameter number 0 is used twice",
    );
    check_body(
        "  ROOT p = f32[] parameter(0)\n  ROOT q = f32[] negate(p)",
        "5:3: a computation can have only one ROOT instruction",
    );
    check_body(
        "  p f32[] parameter(0)",
        "4:5: expected '=' after the instruction name, found identifier \"f32\"",
    );
    check(
        "HloModule m\nENTRY a {\n  ROOT p = f32[] parameter(0)\n}\nENTRY b {\n  ROOT p = f32[] parameter(0)\n}",
        "5:1: a module can have only one ENTRY computation",
    );
    check(
        "HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), to_apply=callee\n}\ncallee {\n  ROOT p = f32[] parameter(0)\n}",
        "4:36: computation callee is not defined (callees must be defined before their callers)",
    );
    check(
        "HloModule m\nc {\n  ROOT p = f32[] parameter(0)\n}\nc {\n  ROOT p = f32[] parameter(0)\n}",
        "5:1: computation c is already defined",
    );
    check(
        "HloModule m\nENTRY e (p: f32[]) -> s32[] {\n  ROOT p = f32[] parameter(0)\n}",
        "2:23: computation e declares result s32[], but its root has shape f32[]",
    );
    check(
        "HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}, execution_thread=\"host\"",
        "4:21: execution thread \"host\" is not supported (only \"main\")",
    );
}

#[test]
fn module_header() {
    check(
        "HloModule m, entry_computation_layout={(f32[2])->f32[2]}\nENTRY e {\n  ROOT p = f32[3] parameter(0)\n}",
        "1:39: entry_computation_layout (f32[2]) -> f32[2] does not match the entry computation's signature (f32[3]) -> f32[3]",
    );
    check(
        "HloModule m, colour=blue\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}",
        "1:14: unknown module attribute colour",
    );
    check(
        "HloModule m, replica_count=2, replica_count=2\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}",
        "1:31: duplicate module attribute replica_count",
    );
}

#[test]
fn verification_errors_name_the_instruction() {
    let text = module("  p = f32[2] parameter(0)\n  ROOT r = f32[3] negate(p)");
    let err = parse_module(&text).unwrap_err();
    assert!(matches!(err, TextError::Verify(_)));
    assert_eq!(
        err.to_string(),
        "the module does not verify:\nin e, instruction r: declared shape f32[3] differs from the inferred shape f32[2]"
    );
}

#[test]
fn nesting_is_bounded() {
    // Nested anonymous instructions, 300 deep.
    let mut expr = "p".to_string();
    for _ in 0..300 {
        expr = format!("negate({expr})");
    }
    let err = parse_module_unverified(&module(&format!(
        "  p = f32[] parameter(0)\n  ROOT r = f32[] {expr}"
    )))
    .unwrap_err();
    assert_eq!(err.message, "nesting is too deep (more than 256 levels)");
    // Literal braces deeper than the shape's rank are caught by the rank.
    let shape = Shape::array(PrimitiveType::F32, [1]).unwrap();
    assert_eq!(
        parse_literal("{{1}}", &shape).unwrap_err().to_string(),
        "1:2: expected a value of type f32, found '{'"
    );
    // Rank 300 literal: the brace levels count against the bound.
    let dims = vec![1i64; 300];
    let shape = Shape::array(PrimitiveType::F32, dims).unwrap();
    let text = format!("{}1{}", "{".repeat(300), "}".repeat(300));
    assert_eq!(
        parse_literal(&text, &shape).unwrap_err().to_string(),
        "1:257: nesting is too deep (more than 256 levels)"
    );
}
