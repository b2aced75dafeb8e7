//! What the pass tests share: a module's entry computation as text lines.

use oxla_hlo::HloModule;

/// The entry computation's instruction lines, normalised.
pub fn entry_lines(module: &HloModule) -> Vec<String> {
    let text = oxla_text::print_module(module);
    let entry = text.split("ENTRY").nth(1).expect("an entry computation");
    entry
        .lines()
        .skip(1)
        .take_while(|l| l.trim() != "}")
        .map(|l| strip_layouts(&l.trim().replace('%', "")))
        .collect()
}

/// Drops the `{1,0}` layout that follows each array shape.
fn strip_layouts(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == ']' && chars.peek() == Some(&'{') {
            let rest: String = chars.clone().take_while(|&c| c != '}').collect();
            if rest[1..].chars().all(|c| c.is_ascii_digit() || c == ',') {
                chars.nth(rest.len());
            }
        }
    }
    out
}
