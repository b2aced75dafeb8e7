//! The module level: the `HloModule name, attr=value...` header (optional),
//! JAX's stack-frame tables (read and dropped), and the computations, each
//! `[ENTRY] name [(p: shape, ...) -> shape] { ... }`. Callees come before
//! their callers; without `ENTRY`, the last computation is the entry.
//! `entry_computation_layout` is checked against the entry computation and
//! then dropped, since the printer derives it.

use oxla_hlo::{ComputationId, HloComputation, HloModule, ProgramShape};

use super::Parser;
use crate::attr_table::MODULE_ATTRIBUTES;
use crate::error::PResult;
use crate::lexer::Tok;

const STACK_FRAME_SECTIONS: [&str; 4] =
    ["FileNames", "FunctionNames", "FileLocations", "StackFrames"];

impl<'a> Parser<'a> {
    pub(crate) fn module(&mut self) -> PResult<HloModule> {
        let mut name = None;
        let mut header_attributes: Vec<(String, String)> = Vec::new();
        let mut layout: Option<(ProgramShape, usize)> = None;
        if self.at_ident("HloModule")? {
            self.next()?;
            name = Some(self.name("a module name")?.0);
            while self.eat(&Tok::Comma)? {
                let t = self.next()?;
                let Tok::Ident(attr) = t.tok else {
                    return Err(self.expected("a module attribute name", &t));
                };
                self.expect(&Tok::Equal, &format!("'=' after module attribute {attr}"))?;
                let duplicate = header_attributes.iter().any(|(n, _)| n == attr)
                    || (attr == "entry_computation_layout" && layout.is_some());
                if duplicate {
                    return Err(self.error(t.start, format!("duplicate module attribute {attr}")));
                }
                if attr == "entry_computation_layout" {
                    let open =
                        self.expect(&Tok::LBrace, "'{' to start the entry computation layout")?;
                    let shape = self.program_shape()?;
                    self.expect(&Tok::RBrace, "'}' to end the entry computation layout")?;
                    layout = Some((shape, open.start));
                } else if MODULE_ATTRIBUTES.contains(&attr) {
                    header_attributes.push((attr.to_string(), self.raw_value()?));
                } else {
                    return Err(self.error(t.start, format!("unknown module attribute {attr}")));
                }
            }
        }
        self.skip_stack_frames()?;
        let mut entry: Option<ComputationId> = None;
        while self.peek_tok()? != &Tok::Eof {
            let start = self.peek()?.start;
            let (id, is_entry) = self.computation()?;
            if is_entry {
                if entry.is_some() {
                    return Err(self.error(start, "a module can have only one ENTRY computation"));
                }
                entry = Some(id);
            }
        }
        let Some(last) = self.computations.len().checked_sub(1) else {
            let t = self.next()?;
            return Err(self.expected("a computation", &t));
        };
        let entry = entry.unwrap_or(ComputationId::new(last));
        let mut computations = std::mem::take(&mut self.computations);
        let entry = move_entry_last(&mut computations, entry);
        let entry_shape = computations
            .get(entry.index())
            .map(HloComputation::program_shape);
        if let (Some((written, at)), Some(actual)) = (layout, entry_shape) {
            let fits = written.parameters.len() == actual.parameters.len()
                && written
                    .parameters
                    .iter()
                    .zip(&actual.parameters)
                    .all(|(w, a)| w.compatible(a))
                && written.result.compatible(&actual.result);
            if !fits {
                return Err(self.error(
                    at,
                    format!(
                        "entry_computation_layout {written} does not match the entry computation's signature {actual}"
                    ),
                ));
            }
        }
        header_attributes.sort_by_key(|(n, _)| MODULE_ATTRIBUTES.iter().position(|m| m == n));
        let name = match name {
            Some(n) => n,
            None => format!(
                "module_{}",
                computations
                    .get(entry.index())
                    .map_or("", |c| c.name.as_str())
            ),
        };
        let mut module = HloModule::new(name, computations, entry);
        module.header_attributes = header_attributes;
        Ok(module)
    }

    /// `FileNames 1 "a.py" FunctionNames ... StackFrames 1 {...}`: only
    /// `metadata` refers to these, and oxla keeps metadata as text.
    fn skip_stack_frames(&mut self) -> PResult<()> {
        while let Tok::Ident(word) = self.peek_tok()? {
            if !STACK_FRAME_SECTIONS.contains(word) {
                break;
            }
            self.next()?;
            while matches!(self.peek_tok()?, Tok::Int(_)) {
                self.next()?;
                match self.peek_tok()? {
                    Tok::LBrace => {
                        self.raw_group()?;
                    }
                    Tok::Str(_) => {
                        self.next()?;
                    }
                    _ => {
                        let t = self.next()?;
                        return Err(self.expected("a string or '{' in the stack frame tables", &t));
                    }
                }
            }
        }
        Ok(())
    }

    /// One computation; returns its id and whether it is marked `ENTRY`.
    fn computation(&mut self) -> PResult<(ComputationId, bool)> {
        let is_entry = self.at_ident("ENTRY")?;
        if is_entry {
            self.next()?;
        }
        let (name, name_at) = self.name("a computation name")?;
        if self.computation_names.contains_key(&name) {
            return Err(self.error(name_at, format!("computation {name} is already defined")));
        }
        // The signature's parameters are ignored, as in XLA; its result must
        // match the root.
        let mut signature_result = None;
        if self.eat(&Tok::LParen)? {
            if !self.eat(&Tok::RParen)? {
                loop {
                    self.name("a parameter name")?;
                    self.expect(&Tok::Colon, "':' after the parameter name")?;
                    self.shape()?;
                    let t = self.next()?;
                    match t.tok {
                        Tok::Comma => {}
                        Tok::RParen => break,
                        _ => return Err(self.expected("',' or ')' after a parameter", &t)),
                    }
                }
            }
            self.expect(&Tok::Arrow, "'->' before the result shape")?;
            let at = self.peek()?.start;
            signature_result = Some((self.shape()?, at));
        }
        let (instructions, root) = self.computation_body()?;
        if let Some((result, at)) = signature_result {
            let root_shape = instructions.get(root.index()).map(|i| &i.shape);
            if let Some(root_shape) = root_shape.filter(|s| !s.compatible(&result)) {
                return Err(self.error(
                    at,
                    format!("computation {name} declares result {result}, but its root has shape {root_shape}"),
                ));
            }
        }
        if self.peek_tok()? == &Tok::Comma
            && self.peek_nth(1)?.tok == Tok::Ident("execution_thread")
        {
            self.next()?;
            self.next()?;
            self.expect(&Tok::Equal, "'=' after execution_thread")?;
            let at = self.peek()?.start;
            let t = self.next()?;
            match t.tok {
                Tok::Str(thread) if thread == "main" => {}
                Tok::Str(thread) => {
                    return Err(self.error(
                        at,
                        format!("execution thread \"{thread}\" is not supported (only \"main\")"),
                    ));
                }
                _ => return Err(self.expected("a string", &t)),
            }
        }
        let id = self.add_computation(HloComputation::new(name, instructions, root));
        Ok((id, is_entry))
    }

    pub(super) fn add_computation(&mut self, computation: HloComputation) -> ComputationId {
        let id = ComputationId::new(self.computations.len());
        self.computation_names.insert(computation.name.clone(), id);
        self.computations.push(computation);
        id
    }
}

/// XLA prints the entry last. If the entry is elsewhere and nothing calls it,
/// moving it last keeps callees before callers and lets a printed module
/// read back equal. Returns the entry's new id.
fn move_entry_last(computations: &mut [HloComputation], entry: ComputationId) -> ComputationId {
    let n = computations.len();
    let called = computations.iter().any(|c| {
        c.instructions()
            .iter()
            .any(|i| i.called.all().contains(&entry))
    });
    if called || entry.index() + 1 >= n {
        return entry;
    }
    computations[entry.index()..].rotate_left(1);
    let e = entry.index();
    let remap = |id: ComputationId| match id.index() {
        i if i == e => ComputationId::new(n - 1),
        i if i > e => ComputationId::new(i - 1),
        _ => id,
    };
    for c in computations.iter_mut() {
        for instr in c.instructions_mut() {
            instr.called.remap(remap);
        }
    }
    ComputationId::new(n - 1)
}
