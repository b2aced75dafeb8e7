//! One test per feature of the HLO text grammar. Expected printer output
//! was checked against XLA's own printer (jaxlib 0.10.2,
//! `HloModule.to_string()` with `print_large_constants`), except where a
//! comment names a deliberate difference.

use oxla_hlo::half::{bf16, f16};
use oxla_hlo::ir::{ComparisonType, Opcode};
use oxla_hlo::num_complex::{Complex32, Complex64};
use oxla_hlo::{HloInstruction, HloModule, Layout, Literal, PrimitiveType, Shape};
use oxla_text::{parse_literal, parse_module, parse_shape, print_module};

/// Parses (verified), prints, and checks that the print reads back equal
/// and prints identically. Returns the module and its printing.
#[track_caller]
fn round_trip(text: &str) -> (HloModule, String) {
    let module = parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let printed = print_module(&module);
    let again = parse_module(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_eq!(again, module, "{printed}");
    assert_eq!(print_module(&again), printed);
    (module, printed)
}

/// The printed line defining `%name`, without indentation.
#[track_caller]
fn line<'a>(printed: &'a str, name: &str) -> &'a str {
    let needle = format!("%{name} = ");
    printed
        .lines()
        .map(|l| l.trim_start().trim_start_matches("ROOT "))
        .find(|l| l.starts_with(&needle))
        .unwrap_or_else(|| panic!("no %{name} in\n{printed}"))
}

#[track_caller]
fn instr<'m>(m: &'m HloModule, name: &str) -> &'m HloInstruction {
    let c = m.entry();
    let id = c.find(name).unwrap_or_else(|| panic!("no {name}"));
    c.instruction(id)
}

fn entry(body: &str) -> String {
    format!("HloModule m\n\nENTRY e {{\n{body}\n}}\n")
}

#[test]
fn prints_xla_default_style() {
    let text = "HloModule main, entry_computation_layout={(f32[4]{0})->f32[]}

add_c {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

ENTRY e {
  p = f32[4]{0} parameter(0)
  z = f32[] constant(0)
  ROOT s = f32[] reduce(p, z), dimensions={0}, to_apply=add_c
}
";
    let (_, printed) = round_trip(text);
    assert_eq!(
        printed,
        "HloModule main, entry_computation_layout={(f32[4]{0})->f32[]}

%add_c (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = f32[] add(%a, %b)
}

ENTRY %e (p: f32[4]) -> f32[] {
  %p = f32[4]{0} parameter(0)
  %z = f32[] constant(0)
  ROOT %s = f32[] reduce(%p, %z), dimensions={0}, to_apply=%add_c
}

"
    );
}

#[test]
fn layouts_keep_minor_to_major_and_drop_tiles() {
    let s = parse_shape("f32[4,3]{0,1:T(2,128)(2,1)S(1)E(16)}").unwrap();
    let layout = s.as_array().unwrap().layout().unwrap();
    assert_eq!(
        layout,
        &Layout {
            minor_to_major: vec![0, 1]
        }
    );
    // The default layout is stored as absent, written or not.
    assert_eq!(
        parse_shape("f32[4,3]{1,0:T(8,128)}").unwrap(),
        parse_shape("f32[4,3]").unwrap()
    );
    assert_eq!(
        parse_shape("f32[]{:T(256)}").unwrap(),
        Shape::scalar(PrimitiveType::F32)
    );
    let (m, printed) = round_trip(&entry("  ROOT p = f32[4,3]{0,1:T(2,128)S(1)} parameter(0)"));
    assert_eq!(line(&printed, "p"), "%p = f32[4,3]{0,1} parameter(0)");
    assert!(
        printed
            .starts_with("HloModule m, entry_computation_layout={(f32[4,3]{0,1})->f32[4,3]{0,1}}")
    );
    assert_eq!(instr(&m, "p").shape, parse_shape("f32[4,3]{0,1}").unwrap());
}

#[test]
fn shapes_of_every_kind() {
    let s = parse_shape("(f32[], (s32[2]{0}, ()), token[], pred[0,3])").unwrap();
    assert_eq!(s.to_string(), "(f32[], (s32[2], ()), token[], pred[0,3])");
    assert_eq!(s.tuple_depth(), 3);
    for ty in PrimitiveType::ALL {
        let text = format!("{ty}[2,1]");
        assert_eq!(parse_shape(&text).unwrap().element_type(), Some(ty));
    }
}

#[test]
fn index_comments_are_ignored_and_printed() {
    let body = "  z = f32[] parameter(0)
  ROOT c = (f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[], f32[]) tuple(z, z, z, z, z, /*index=5*/ z, z)";
    let (_, printed) = round_trip(&entry(body));
    assert_eq!(
        line(&printed, "c"),
        "%c = (f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[], f32[]) tuple(%z, %z, %z, %z, %z, /*index=5*/%z, %z)"
    );
    // The entry layout's parameter list gets markers too; signatures' parameter lists do not.
    let params: Vec<String> = (0..6)
        .map(|i| format!("  p{i} = f32[] parameter({i})"))
        .collect();
    let (_, printed) = round_trip(&entry(&format!(
        "{}\n  ROOT r = f32[] add(p0, p5)",
        params.join("\n")
    )));
    assert!(printed.contains(
        "entry_computation_layout={(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[])->f32[]}"
    ));
    assert!(printed.contains(
        "ENTRY %e (p0: f32[], p1: f32[], p2: f32[], p3: f32[], p4: f32[], p5: f32[]) -> f32[] {"
    ));
}

#[test]
fn comments_anywhere() {
    let text = "// produced by a test
/* header */ HloModule m // trailing
ENTRY e { /* in the body */
  p = f32[2] /* between */ parameter(0) // after
  ROOT n = f32[2] negate(p)
}";
    let (m, _) = round_trip(text);
    assert_eq!(m.entry().instructions().len(), 2);
}

#[test]
fn shape_prefixed_operands() {
    let body = "  x = f32[2] parameter(0)
  y = f32[2]{0} parameter(1)
  ROOT r = f32[2]{0} add(f32[2]{0} %x, f32[2] y)";
    let (m, printed) = round_trip(&entry(body));
    assert_eq!(line(&printed, "r"), "%r = f32[2]{0} add(%x, %y)");
    assert_eq!(instr(&m, "r").operands.len(), 2);
}

#[test]
fn nested_anonymous_instructions() {
    let body = "  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(f32[] multiply(a, b), f32[] constant(2))";
    let (m, printed) = round_trip(&entry(body));
    let names: Vec<&str> = m
        .entry()
        .instructions()
        .iter()
        .map(|i| i.name.as_str())
        .collect();
    assert_eq!(names, ["a", "b", "multiply.anon", "constant.anon", "r"]);
    assert_eq!(
        line(&printed, "multiply.anon"),
        "%multiply.anon = f32[] multiply(%a, %b)"
    );
    assert_eq!(
        line(&printed, "r"),
        "%r = f32[] add(%multiply.anon, %constant.anon)"
    );
    // Without shapes, oxla infers them; repeated opcodes get unique names.
    let body = "  a = f32[3] parameter(0)
  ROOT r = add(negate(a), negate(a))";
    let (m, _) = round_trip(&entry(body));
    let names: Vec<&str> = m
        .entry()
        .instructions()
        .iter()
        .map(|i| i.name.as_str())
        .collect();
    assert_eq!(names, ["a", "negate.anon", "negate.anon.1", "r"]);
    assert_eq!(
        instr(&m, "r").shape,
        Shape::array(PrimitiveType::F32, [3]).unwrap()
    );
}

#[test]
fn iota_replica_groups_expand_to_lists() {
    let text = "HloModule m

add_c {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

ENTRY e {
  v = f32[4] parameter(0)
  x = f32[4] all-reduce(v), channel_id=1, replica_groups=[2,2]<=[2,2]T(1,0), use_global_device_ids=true, to_apply=add_c
  y = f32[4] all-reduce(x), replica_groups=[1,4]<=[4], to_apply=add_c
  ROOT z = f32[4] all-reduce(y), to_apply=add_c
}";
    let (m, printed) = round_trip(text);
    assert_eq!(
        instr(&m, "x").attrs.replica_groups,
        Some(vec![vec![0, 2], vec![1, 3]])
    );
    assert_eq!(
        instr(&m, "y").attrs.replica_groups,
        Some(vec![vec![0, 1, 2, 3]])
    );
    // XLA prints the iota form back as it was given; oxla prints the list.
    assert_eq!(
        line(&printed, "x"),
        "%x = f32[4]{0} all-reduce(%v), channel_id=1, replica_groups={{0,2},{1,3}}, use_global_device_ids=true, to_apply=%add_c"
    );
    assert_eq!(
        line(&printed, "z"),
        "%z = f32[4]{0} all-reduce(%y), replica_groups={}, to_apply=%add_c"
    );
}

#[test]
fn nan_payloads_are_bit_exact() {
    let f32s = Shape::array(PrimitiveType::F32, [4]).unwrap();
    let l = parse_literal("{nan, -nan, nan(0x1), nan(0x7fffff)}", &f32s).unwrap();
    let bits: Vec<u32> = l
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect();
    assert_eq!(bits, [0x7fc0_0000, 0xffc0_0000, 0x7f80_0001, 0x7fff_ffff]);
    let bf = parse_literal(
        "{nan(0x7f), -nan(0x1)}",
        &Shape::array(PrimitiveType::BF16, [2]).unwrap(),
    )
    .unwrap();
    let bits: Vec<u16> = bf
        .to_vec::<bf16>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect();
    assert_eq!(bits, [0x7fff, 0xff81]);
    let h = parse_literal("-nan(0x3ff)", &Shape::scalar(PrimitiveType::F16)).unwrap();
    assert_eq!(h.to_scalar::<f16>().unwrap().to_bits(), 0xffff);
    let d = parse_literal("nan(0xfffffffffffff)", &Shape::scalar(PrimitiveType::F64)).unwrap();
    assert_eq!(
        d.to_scalar::<f64>().unwrap().to_bits(),
        0x7fff_ffff_ffff_ffff
    );
    let body = "  a = f32[4] constant({nan, -nan, nan(0x1), nan(0x7fffff)})
  b = bf16[2] constant({nan(0x7f), -nan(0x1)})
  ROOT t = (f32[4], bf16[2]) tuple(a, b)";
    let (_, printed) = round_trip(&entry(body));
    assert_eq!(
        line(&printed, "a"),
        "%a = f32[4]{0} constant({nan, -nan, nan(0x1), nan(0x7fffff)})"
    );
    assert_eq!(
        line(&printed, "b"),
        "%b = bf16[2]{0} constant({nan(0x7f), -nan(0x1)})"
    );
}

#[test]
fn negative_zero_keeps_its_sign() {
    // A deliberate departure from XLA, which reads `-0` as +0.
    let body = "  a = f32[3] constant({-0, 0, -0.0})
  b = f64[] constant(-0)
  ROOT c = c64[] constant((-0, 0))";
    let (m, printed) = round_trip(&entry(body));
    let a = instr(&m, "a")
        .attrs
        .literal
        .as_ref()
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(
        a.iter().map(|x| x.is_sign_negative()).collect::<Vec<_>>(),
        [true, false, true]
    );
    let b = instr(&m, "b")
        .attrs
        .literal
        .as_ref()
        .unwrap()
        .to_scalar::<f64>()
        .unwrap();
    assert!(b == 0.0 && b.is_sign_negative());
    assert_eq!(line(&printed, "a"), "%a = f32[3]{0} constant({-0, 0, -0})");
    assert_eq!(line(&printed, "b"), "%b = f64[] constant(-0)");
    assert_eq!(line(&printed, "c"), "%c = c64[] constant((-0, 0))");
}

#[test]
fn complex_literals() {
    let body = "  f = c64[2] constant({(1, 2), (-0.5, inf)})
  ROOT g = c128[] constant((1e+300, -2))";
    let (m, printed) = round_trip(&entry(body));
    let f = instr(&m, "f")
        .attrs
        .literal
        .as_ref()
        .unwrap()
        .to_vec::<Complex32>()
        .unwrap();
    assert_eq!(
        f,
        [
            Complex32::new(1.0, 2.0),
            Complex32::new(-0.5, f32::INFINITY)
        ]
    );
    let g = instr(&m, "g")
        .attrs
        .literal
        .as_ref()
        .unwrap()
        .to_scalar::<Complex64>()
        .unwrap();
    assert_eq!(g, Complex64::new(1e300, -2.0));
    assert_eq!(
        line(&printed, "f"),
        "%f = c64[2]{0} constant({(1, 2), (-0.5, inf)})"
    );
    assert_eq!(line(&printed, "g"), "%g = c128[] constant((1e+300, -2))");
}

#[test]
fn pred_literals() {
    let l = parse_literal(
        "{true, false, 1, 0}",
        &Shape::array(PrimitiveType::Pred, [4]).unwrap(),
    )
    .unwrap();
    assert_eq!(l.to_vec::<bool>().unwrap(), [true, false, true, false]);
    let body = "  h = pred[4] constant({true, false, 1, 0})
  i = pred[] constant(true)
  j = pred[2,2] constant({{1, 0}, {0, 1}})
  ROOT t = (pred[], pred[1]) constant((false, {true}))";
    let (_, printed) = round_trip(&entry(body));
    // Arrays of pred print as 1/0, scalars as true/false.
    assert_eq!(
        line(&printed, "h"),
        "%h = pred[4]{0} constant({1, 0, 1, 0})"
    );
    assert_eq!(line(&printed, "i"), "%i = pred[] constant(true)");
    assert_eq!(
        line(&printed, "j"),
        "%j = pred[2,2]{1,0} constant({ { 1, 0 }, { 0, 1 } })"
    );
    assert_eq!(
        line(&printed, "t"),
        "%t = (pred[], pred[1]{0}) constant(( false, {1} ))"
    );
}

#[test]
fn integer_extremes() {
    let body = "  k = u64[2] constant({18446744073709551615, 0})
  l = s64[2] constant({-9223372036854775808, 9223372036854775807})
  m8 = s8[2] constant({-128, 127})
  ROOT n = u8[2] constant({255, 0})";
    let (m, printed) = round_trip(&entry(body));
    let k = instr(&m, "k")
        .attrs
        .literal
        .as_ref()
        .unwrap()
        .to_vec::<u64>()
        .unwrap();
    assert_eq!(k, [u64::MAX, 0]);
    let l = instr(&m, "l")
        .attrs
        .literal
        .as_ref()
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    assert_eq!(l, [i64::MIN, i64::MAX]);
    assert_eq!(
        line(&printed, "k"),
        "%k = u64[2]{0} constant({18446744073709551615, 0})"
    );
    assert_eq!(
        line(&printed, "l"),
        "%l = s64[2]{0} constant({-9223372036854775808, 9223372036854775807})"
    );
    assert_eq!(line(&printed, "m8"), "%m8 = s8[2]{0} constant({-128, 127})");
}

#[test]
fn float_formatting_matches_xla() {
    let body = "  n = f32[5] constant({0.1, 0.333333343, 1e+10, 1e-07, 3.40282347e+38})
  o = f64[2] constant({0.1, 3.1415926535897931})
  c = f16[3] constant({0.1, 3.14, 5.96e-08})
  ROOT b = bf16[3] constant({0.1, 1e10, 9.2e-41})";
    let (_, printed) = round_trip(&entry(body));
    assert_eq!(
        line(&printed, "n"),
        "%n = f32[5]{0} constant({0.1, 0.333333343, 1e+10, 1e-07, 3.40282347e+38})"
    );
    assert_eq!(
        line(&printed, "o"),
        "%o = f64[2]{0} constant({0.1, 3.1415926535897931})"
    );
    // f16 and bf16 always use max_digits10 (5 and 4) digits.
    assert_eq!(
        line(&printed, "c"),
        "%c = f16[3]{0} constant({0.099976, 3.1406, 5.9605e-08})"
    );
    assert_eq!(
        line(&printed, "b"),
        "%b = bf16[3]{0} constant({0.1001, 9.999e+09, 9.184e-41})"
    );
}

#[test]
fn literal_brace_layout() {
    let body = "  a = f32[2,2,2] constant({{{1,2},{3,4}},{{5,6},{7,8}}})
  p = f32[2,1,2,2] constant({{{{1,2},{3,4}}},{{{5,6},{7,8}}}})
  q = f32[0,2] constant({})
  r = f32[2,0] constant({{},{}})
  f = f32[2,0,3] constant({{},{}})
  s = f32[1,1] constant({{1}})
  t = (f32[], (s32[2], pred[])) constant((1, ({2, 3}, true)))
  ROOT u = () constant(())";
    let (_, printed) = round_trip(&entry(body));
    assert_eq!(
        line(&printed, "a"),
        "%a = f32[2,2,2]{2,1,0} constant({ { { 1, 2 }, { 3, 4 } }, { { 5, 6 }, { 7, 8 } } })"
    );
    assert_eq!(
        line(&printed, "p"),
        "%p = f32[2,1,2,2]{3,2,1,0} constant({ { /*i0=0*/ { /*i1=0*/ { 1, 2 }, { 3, 4 } } }, { /*i0=1*/ { /*i1=0*/ { 5, 6 }, { 7, 8 } } } })"
    );
    assert_eq!(line(&printed, "q"), "%q = f32[0,2]{1,0} constant({  })");
    assert_eq!(
        line(&printed, "r"),
        "%r = f32[2,0]{1,0} constant({ {}, {} })"
    );
    assert_eq!(
        line(&printed, "f"),
        "%f = f32[2,0,3]{2,1,0} constant({ {  }, {  } })"
    );
    assert_eq!(line(&printed, "s"), "%s = f32[1,1]{1,0} constant({ {1} })");
    assert_eq!(
        line(&printed, "t"),
        "%t = (f32[], (s32[2]{0}, pred[])) constant(( 1, ( {2, 3}, true ) ))"
    );
    assert_eq!(line(&printed, "u"), "%u = () constant((  ))");
    // Commas between entries are optional, as in XLA.
    let l = parse_literal(
        "{{1 2} {3, 4}}",
        &Shape::array(PrimitiveType::S32, [2, 2]).unwrap(),
    )
    .unwrap();
    assert_eq!(l, Literal::from_nested([[1, 2], [3, 4]]).unwrap());
}

#[test]
fn strings_with_escapes() {
    let body = r#"  v = f32[4] parameter(0)
  ROOT c = f32[4] custom-call(v), custom_call_target="a\"b\\c\n\t\303\251\x41\u00e9 'q'""#;
    let (m, printed) = round_trip(&entry(body));
    assert_eq!(
        instr(&m, "c").attrs.custom_call_target.as_deref(),
        Some("a\"b\\c\n\té\u{41}é 'q'")
    );
    assert_eq!(
        line(&printed, "c"),
        r#"%c = f32[4]{0} custom-call(%v), custom_call_target="a\"b\\c\n\t\303\251A\303\251 \'q\'""#
    );
    // Single-quoted strings read too.
    let (m, _) = round_trip(&entry(
        "  v = f32[4] parameter(0)\n  ROOT c = f32[4] custom-call(v), custom_call_target='x\"y'",
    ));
    assert_eq!(
        instr(&m, "c").attrs.custom_call_target.as_deref(),
        Some("x\"y")
    );
}

#[test]
fn backend_config_raw_or_quoted() {
    let body = r#"  v = f32[4] parameter(0)
  a = f32[4] custom-call(v), custom_call_target="t", backend_config={"a": {"b": "}"}}
  b = f32[4] custom-call(a), custom_call_target="t", backend_config="{\"k\":\"v\"}"
  ROOT c = f32[4] custom-call(b), custom_call_target="t", backend_config="not json""#;
    let (m, printed) = round_trip(&entry(body));
    assert_eq!(
        instr(&m, "a").attrs.backend_config.as_deref(),
        Some(r#"{"a": {"b": "}"}}"#)
    );
    assert_eq!(
        instr(&m, "b").attrs.backend_config.as_deref(),
        Some(r#"{"k":"v"}"#)
    );
    assert!(line(&printed, "a").ends_with(r#"backend_config={"a": {"b": "}"}}"#));
    // A quoted string that is one JSON block prints raw, as in XLA.
    assert!(line(&printed, "b").ends_with(r#"backend_config={"k":"v"}"#));
    assert!(line(&printed, "c").ends_with(r#"backend_config="not json""#));
}

#[test]
fn passthrough_attributes_are_verbatim_in_xla_order() {
    let body = r#"  p = f32[2] parameter(0), sharding={replicated}, parameter_replication={false}
  d = f32[] dot(p, p), metadata={op_name="jit(f)/dot" source_line=3}, algorithm=dot_f32_f32_f32, lhs_contracting_dims={0}, rhs_contracting_dims={0}, operand_precision={highest,default}
  ROOT c = f32[] call(d), frontend_attributes={b="2",a={"x":1}}, is_composite=true, to_apply=%callee"#;
    let text = format!(
        "HloModule m\n\ncallee {{\n  ROOT x = f32[] parameter(0)\n}}\n\nENTRY e {{\n{body}\n}}\n"
    );
    let (m, printed) = round_trip(&text);
    assert_eq!(
        instr(&m, "d").attrs.passthrough,
        [
            (
                "operand_precision".to_string(),
                "{highest,default}".to_string()
            ),
            ("algorithm".to_string(), "dot_f32_f32_f32".to_string()),
            (
                "metadata".to_string(),
                r#"{op_name="jit(f)/dot" source_line=3}"#.to_string()
            ),
        ]
    );
    assert_eq!(
        line(&printed, "p"),
        "%p = f32[2]{0} parameter(0), parameter_replication={false}, sharding={replicated}"
    );
    assert_eq!(
        line(&printed, "d"),
        r#"%d = f32[] dot(%p, %p), lhs_contracting_dims={0}, rhs_contracting_dims={0}, operand_precision={highest,default}, algorithm=dot_f32_f32_f32, metadata={op_name="jit(f)/dot" source_line=3}"#
    );
    assert_eq!(
        line(&printed, "c"),
        r#"%c = f32[] call(%d), to_apply=%callee, is_composite=true, frontend_attributes={b="2",a={"x":1}}"#
    );
}

#[test]
fn header_attributes_are_kept_and_the_layout_regenerated() {
    let text = "HloModule m, replica_count=2, is_scheduled=true, entry_computation_layout={(f32[2]{0})->f32[2]{0}}, frontend_attributes={k=\"v\"}

ENTRY e {
  ROOT p = f32[2] parameter(0)
}";
    let (m, printed) = round_trip(text);
    assert_eq!(
        m.header_attributes,
        [
            ("is_scheduled".to_string(), "true".to_string()),
            ("replica_count".to_string(), "2".to_string()),
            ("frontend_attributes".to_string(), "{k=\"v\"}".to_string()),
        ]
    );
    assert!(printed.starts_with(
        "HloModule m, is_scheduled=true, entry_computation_layout={(f32[2]{0})->f32[2]{0}}, replica_count=2, frontend_attributes={k=\"v\"}\n\n"
    ));
}

#[test]
fn headerless_modules_and_computations_without_signatures() {
    let text = "callee {
  ROOT x = f32[] parameter(0)
}
main {
  p = f32[] parameter(0)
  ROOT c = f32[] call(p), to_apply=callee
}";
    let (m, printed) = round_trip(text);
    assert_eq!(m.name, "module_main");
    // Without ENTRY, the last computation is the entry.
    assert_eq!(m.entry().name, "main");
    assert!(printed.contains("ENTRY %main (p: f32[]) -> f32[] {"));
}

#[test]
fn the_entry_is_printed_last() {
    let text = "HloModule m
ENTRY e {
  ROOT p = f32[] parameter(0)
}
unused {
  ROOT q = s32[] parameter(0)
}";
    let (m, printed) = round_trip(text);
    let names: Vec<&str> = m.computations().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["unused", "e"]);
    assert_eq!(m.entry().name, "e");
    assert!(printed.find("%unused").unwrap() < printed.find("ENTRY %e").unwrap());
}

#[test]
fn inline_computations() {
    let body = "  v = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT s = f32[] reduce(v, z), dimensions={0}, to_apply={ a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT r = f32[] add(a, b) }";
    let (m, printed) = round_trip(&entry(body));
    let names: Vec<&str> = m.computations().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["_", "e"]);
    assert!(printed.contains("%_ (a: f32[], b: f32[]) -> f32[] {"));
    assert_eq!(
        line(&printed, "s"),
        "%s = f32[] reduce(%v, %z), dimensions={0}, to_apply=%_"
    );
}

#[test]
fn omitted_result_shapes_are_inferred() {
    let body = "  a = f32[2,3] parameter(0)
  b = f32[3,4] parameter(1)
  d = dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = compare(d, d), direction=LT
  ROOT t = tuple(d, c)";
    let (m, printed) = round_trip(&entry(body));
    assert_eq!(instr(&m, "d").shape, parse_shape("f32[2,4]").unwrap());
    assert_eq!(
        line(&printed, "c"),
        "%c = pred[2,4]{1,0} compare(%d, %d), direction=LT"
    );
    assert_eq!(
        line(&printed, "t"),
        "%t = (f32[2,4]{1,0}, pred[2,4]{1,0}) tuple(%d, %c)"
    );
}

#[test]
fn control_predecessors() {
    let body = "  a = f32[] parameter(0)
  b = f32[] negate(a)
  ROOT c = f32[] exponential(a), control-predecessors={b}";
    let (m, printed) = round_trip(&entry(body));
    assert_eq!(
        instr(&m, "c").control_predecessors,
        [m.entry().find("b").unwrap()]
    );
    assert_eq!(
        line(&printed, "c"),
        "%c = f32[] exponential(%a), control-predecessors={%b}"
    );
}

#[test]
fn stack_frame_tables_are_skipped() {
    let text = "HloModule m
FileNames
1 \"a.py\"
FunctionNames
1 \"f\"
FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}
StackFrames
1 {file_location_id=1 parent_frame_id=1}

ENTRY e {
  ROOT p = f32[] parameter(0), metadata={op_name=\"x\" stack_frame_id=1}
}";
    let (_, printed) = round_trip(text);
    assert_eq!(
        line(&printed, "p"),
        "%p = f32[] parameter(0), metadata={op_name=\"x\" stack_frame_id=1}"
    );
}

#[test]
fn defaults_are_omitted_as_xla_omits_them() {
    let text = "HloModule m

ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GE, type=FLOAT
}

add_s {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

ENTRY e {
  x = f32[4,4] parameter(0)
  s = s32[] constant(1)
  c1 = pred[] compare(s, s), direction=LT, type=SIGNED
  f = f32[] constant(1)
  c2 = pred[] compare(f, f), direction=LT, type=TOTALORDER
  srt = f32[4,4] sort(x), dimensions={1}, is_stable=false, to_apply=ge
  tk = (f32[4,2], s32[4,2]) topk(x), k=2
  bc = f32[2,3] broadcast(f32[] constant(1))
  k = f32[1,2,2,1] parameter(1)
  conv = f32[1,2,2,1] convolution(k, f32[1,1,1,1] constant({{{{2}}}})), window={size=1x1 stride=1x1}, dim_labels=b01f_01io->b01f, feature_group_count=1, batch_group_count=1
  rw = f32[] reduce-window(f, f), to_apply=add_s
  ROOT t = (f32[4,4], pred[], pred[]) tuple(srt, c1, c2)
}";
    let (m, printed) = round_trip(text);
    let ge = &m.computations()[0];
    assert_eq!(ge.root_instruction().attrs.comparison_type, None);
    assert_eq!(
        instr(&m, "c2").attrs.comparison_type,
        Some(ComparisonType::TotalOrder)
    );
    assert!(printed.contains("ROOT %r = pred[] compare(%a, %b), direction=GE\n"));
    assert_eq!(
        line(&printed, "c1"),
        "%c1 = pred[] compare(%s, %s), direction=LT"
    );
    assert_eq!(
        line(&printed, "c2"),
        "%c2 = pred[] compare(%f, %f), direction=LT, type=TOTALORDER"
    );
    assert_eq!(
        line(&printed, "srt"),
        "%srt = f32[4,4]{1,0} sort(%x), dimensions={1}, to_apply=%ge"
    );
    assert_eq!(
        line(&printed, "tk"),
        "%tk = (f32[4,2]{1,0}, s32[4,2]{1,0}) topk(%x), k=2, largest=true"
    );
    assert_eq!(
        line(&printed, "bc"),
        "%bc = f32[2,3]{1,0} broadcast(%constant.anon), dimensions={}"
    );
    assert_eq!(
        line(&printed, "conv"),
        "%conv = f32[1,2,2,1]{3,2,1,0} convolution(%k, %constant.anon.1), window={size=1x1}, dim_labels=b01f_01io->b01f"
    );
    // A window with no dimensions is not printed, and reads back as one.
    assert_eq!(
        line(&printed, "rw"),
        "%rw = f32[] reduce-window(%f, %f), to_apply=%add_s"
    );
    assert_eq!(instr(&m, "rw").attrs.window, Some(Default::default()));
}

#[test]
fn windows_padding_and_slices() {
    let text = "HloModule m

add_c {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

ENTRY e {
  img = f32[1,5,5,2] parameter(0)
  ker = f32[3,3,2,4] parameter(1)
  conv = f32[1,3,3,4] convolution(img, ker), window={size=3x3 stride=2x2 pad=1_1x1_1 rhs_dilate=1x1}, dim_labels=b01f_01io->b01f
  x = f32[4,4] parameter(2)
  z = f32[] constant(0)
  rw = f32[4,4] reduce-window(x, z), window={size=3x1 pad=1_1x0_0 lhs_dilate=1x1 rhs_reversal=1x0}, to_apply=add_c
  p1 = f32[7,8] pad(x, z), padding=1_2x0_1_1
  p2 = f32[5,7] pad(x, z), padding=0_1x1_2
  s1 = f32[2,4] slice(x), slice={[0:4:2], [0:4]}
  ROOT s2 = f32[2,2] slice(x), slice={[1:3:1], [0:2:1]}
}";
    let (m, printed) = round_trip(text);
    assert_eq!(
        line(&printed, "conv"),
        "%conv = f32[1,3,3,4]{3,2,1,0} convolution(%img, %ker), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"
    );
    assert_eq!(
        line(&printed, "rw"),
        "%rw = f32[4,4]{1,0} reduce-window(%x, %z), window={size=3x1 pad=1_1x0_0 rhs_reversal=1x0}, to_apply=%add_c"
    );
    assert!(instr(&m, "rw").attrs.window.as_ref().unwrap().dims[0].window_reversal);
    // One dimension with interior padding switches every dimension to the 3-number form.
    assert_eq!(
        line(&printed, "p1"),
        "%p1 = f32[7,8]{1,0} pad(%x, %z), padding=1_2_0x0_1_1"
    );
    assert_eq!(
        line(&printed, "p2"),
        "%p2 = f32[5,7]{1,0} pad(%x, %z), padding=0_1x1_2"
    );
    // Strides are written for all dimensions or, when all are 1, for none.
    assert_eq!(
        line(&printed, "s1"),
        "%s1 = f32[2,4]{1,0} slice(%x), slice={[0:4:2], [0:4:1]}"
    );
    assert_eq!(
        line(&printed, "s2"),
        "%s2 = f32[2,2]{1,0} slice(%x), slice={[1:3], [0:2]}"
    );
}

#[test]
fn control_flow_and_called_computations() {
    let text = "HloModule m

neg {
  x = f32[4] parameter(0)
  ROOT n = f32[4] negate(x)
}

id {
  x = f32[4] parameter(0)
  ROOT c = f32[4] copy(x)
}

ENTRY e {
  v = f32[4] parameter(0)
  p = pred[] parameter(1)
  i = s32[] parameter(2)
  a = f32[4] conditional(p, v, v), true_computation=neg, false_computation=id
  b = f32[4] conditional(i, a, a, a), branch_computations={neg, id, neg}
  ROOT cc = f32[4] custom-call(b), custom_call_target=\"t\", to_apply=neg
}";
    let (m, printed) = round_trip(text);
    assert_eq!(instr(&m, "a").called.branches.len(), 2);
    assert_eq!(
        line(&printed, "a"),
        "%a = f32[4]{0} conditional(%p, %v, %v), true_computation=%neg, false_computation=%id"
    );
    assert_eq!(
        line(&printed, "b"),
        "%b = f32[4]{0} conditional(%i, %a, %a, %a), branch_computations={%neg, %id, %neg}"
    );
    // XLA prints a custom-call's to_apply as called_computations.
    assert_eq!(
        line(&printed, "cc"),
        "%cc = f32[4]{0} custom-call(%b), custom_call_target=\"t\", called_computations={%neg}"
    );
    assert_eq!(instr(&m, "cc").opcode, Opcode::CustomCall);
}

#[test]
fn parse_literal_and_parse_shape() {
    let s = parse_shape("s32[2,2]{0,1}").unwrap();
    let l = parse_literal("{{1, 2}, {3, 4}}", &s).unwrap();
    // Values are row-major whatever the layout says.
    assert_eq!(l.to_vec::<i32>().unwrap(), [1, 2, 3, 4]);
    let t = parse_shape("(f32[], token[])").unwrap();
    assert_eq!(
        t,
        Shape::tuple(vec![Shape::scalar(PrimitiveType::F32), Shape::Token])
    );
    assert_eq!(
        parse_literal("inf", &Shape::scalar(PrimitiveType::F16)).unwrap(),
        Literal::scalar(f16::INFINITY)
    );
}

#[test]
fn deepest_nesting_fits_a_default_thread_stack() {
    // 256 levels of nested instructions and of inline computations parse on
    // a thread with Rust's default 2 MiB stack.
    let handle = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let mut expr = "p".to_string();
            // `r` and 256 anonymous instructions nested inside it.
            for _ in 0..257 {
                expr = format!("negate({expr})");
            }
            let text = entry(&format!(
                "  p = f32[] parameter(0)\n  ROOT r = f32[] {expr}"
            ));
            assert_eq!(
                parse_module(&text).unwrap().entry().instructions().len(),
                258
            );
            let mut body = "ROOT p = f32[] parameter(0)".to_string();
            for _ in 0..256 {
                body = format!(
                    "p = f32[] parameter(0)\n ROOT c = f32[] call(p), to_apply={{ {body} }}"
                );
            }
            assert_eq!(
                parse_module(&entry(&body)).unwrap().computations().len(),
                257
            );
        })
        .unwrap();
    handle.join().unwrap();
}

/// Found by `round_trip_properties`: a rank-0 pad printed as `padding=`
/// (XLA's printing of an empty configuration) did not parse back.
#[test]
fn a_rank_0_pad_prints_an_empty_padding_that_reads_back() {
    let (m, printed) = round_trip(&entry(
        "  p = f32[] parameter(0)\n  q = f32[] pad(p, p), padding=\n  ROOT r = f32[] pad(q, p), padding=, metadata={op_name=\"x\"}",
    ));
    assert_eq!(line(&printed, "q"), "%q = f32[] pad(%p, %p), padding=");
    assert_eq!(instr(&m, "r").attrs.padding.as_deref(), Some(&[][..]));
    // Anything else after `padding=` is still an error.
    let bad = entry(
        "  p = f32[2] parameter(0)\n  z = f32[] constant(0)\n  ROOT q = f32[2] pad(p, z), padding=foo",
    );
    assert_eq!(
        parse_module(&bad).unwrap_err().to_string(),
        "6:38: expected padding such as 0_0x1_1_0, found identifier \"foo\""
    );
}

/// Found by the `builder_calls` fuzz target: a constant with no elements
/// but a 2^40-long leading dimension printed as 2^40 empty rows (the
/// printer ran out of memory). Large empty arrays print as `{}`, which
/// reads back as any array with no elements; small ones keep XLA's form.
#[test]
fn huge_empty_constants_print_compactly() {
    let (m, printed) = round_trip(&entry(
        "  a = f32[1099511627776,0] constant({})\n  b = f32[2,0] constant({})\n  ROOT t = (f32[1099511627776,0], f32[2,0]) tuple(a, b)",
    ));
    assert_eq!(
        line(&printed, "a"),
        "%a = f32[1099511627776,0]{1,0} constant({})"
    );
    assert_eq!(
        line(&printed, "b"),
        "%b = f32[2,0]{1,0} constant({ {}, {} })"
    );
    let a = instr(&m, "a").attrs.literal.as_ref().unwrap();
    assert_eq!(a.to_string(), "f32[1099511627776,0] {}");
    // At the threshold the nested form is kept.
    let (_, printed) = round_trip(&entry("  ROOT c = pred[1024,0] constant({})"));
    assert!(line(&printed, "c").starts_with("%c = pred[1024,0]{1,0} constant({ {}, {}, "));
}
