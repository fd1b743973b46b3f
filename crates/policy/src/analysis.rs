//! Static checks on a parsed module that the embedded engine does not make itself, so that a
//! module is refused when it is saved rather than failing (or crashing) when it is evaluated:
//!
//! - the package is `steward.policies.<path>`;
//! - no rule or function depends on itself (regorus has no `rego_recursion_error`: a recursive
//!   function overflows the stack and aborts the process);
//! - every called function is a built-in or a function of the module (regorus reports an
//!   unknown function only when the call is evaluated).
//!
//! The dependency analysis is conservative: a rule depends on every rule of the module whose
//! name it mentions (locals that shadow a rule name count too), and on every rule of the module
//! when it refers to the package (or one of its ancestors) as a whole through `data`.

use std::collections::{BTreeMap, BTreeSet};

use regorus::unstable::{Expr, Literal, Module, Query, Rule, RuleHead, Span, BUILTINS};

/// The file name regorus reports in messages.
pub(crate) const SOURCE_NAME: &str = "policy.rego";

/// The package prefix every policy module must declare.
pub(crate) const PACKAGE_PREFIX: [&str; 2] = ["steward", "policies"];

/// What the analysis learned about a module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ModuleInfo {
    /// Package components, e.g. `["steward", "policies", "gdpr"]`.
    pub package: Vec<String>,
    /// The decision outputs the module defines as rules (not functions).
    pub defines: BTreeSet<&'static str>,
    /// The module does nothing whose cost is out of proportion to the instructions it runs:
    /// no arithmetic (integers are unbounded, so repeated squaring explodes in a few steps)
    /// and no built-in outside `CHEAP_BUILTINS`. Such a module may run inline with a small
    /// instruction budget.
    pub cheap: bool,
    /// Where the source names its own package (the declaration and every `data` reference
    /// to it), so that `relocate` can move the module to another package.
    pub edits: Vec<Edit>,
}

/// A place in the source that names the module's own package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Edit {
    /// Byte range of the package path (`steward.policies.x` in the declaration,
    /// `data.steward.policies.x` in a reference).
    pub start: usize,
    pub end: usize,
    pub kind: EditKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum EditKind {
    /// The `package` declaration's path.
    Declaration,
    /// A `data` reference to the package (or below it).
    Reference,
    /// Text inserted at `start` (= `end`): the explicit alias of an import of the own
    /// package without `as` (relocating changes its implicit alias, the last component).
    Insert(String),
}

impl ModuleInfo {
    /// The source moved to `package` (dotted, e.g. `steward.tenants.t_1.p_2`): the declaration
    /// and every reference to the own package rewritten, nothing else changed. A module may
    /// read nothing under `data` but its own package, so the result reads nothing else either.
    pub fn relocate(&self, rego: &str, package: &str) -> Option<String> {
        let mut edits = self.edits.clone();
        edits.sort_by_key(|e| std::cmp::Reverse(e.start));
        edits.dedup();
        let mut out = rego.to_owned();
        let mut last_start = usize::MAX;
        for e in edits {
            if e.end > last_start || !out.is_char_boundary(e.start) || !out.is_char_boundary(e.end)
            {
                return None;
            }
            let replacement = match &e.kind {
                EditKind::Declaration => package.to_owned(),
                EditKind::Reference => format!("data.{package}"),
                EditKind::Insert(text) => text.clone(),
            };
            out.replace_range(e.start..e.end, &replacement);
            last_start = e.start;
        }
        Some(out)
    }
}

/// Built-ins whose cost is at most linear in their arguments.
pub(crate) const CHEAP_BUILTINS: [&str; 21] = [
    "count",
    "is_string",
    "is_number",
    "is_boolean",
    "is_array",
    "is_object",
    "is_set",
    "is_null",
    "type_name",
    "trim_space",
    "trim",
    "trim_left",
    "trim_right",
    "trim_prefix",
    "trim_suffix",
    "upper",
    "lower",
    "startswith",
    "endswith",
    "contains",
    "object.get",
];

/// The most elements a `numbers.range` / `numbers.range_step` call may produce.
pub(crate) const MAX_RANGE_ELEMENTS: f64 = 100_000.0;

/// The widest field a `sprintf` format may ask for.
pub(crate) const MAX_FORMAT_WIDTH: u64 = 10_000;

/// The value of an integer or number literal (`-` applied to one included).
fn literal_number(expr: &Expr) -> Option<f64> {
    match expr {
        Expr::Number { value, .. } => value.as_number().ok().and_then(|n| n.as_f64()),
        Expr::UnaryExpr { expr, .. } => literal_number(expr).map(|v| -v),
        _ => None,
    }
}

/// Why a call of a built-in whose output can be far larger than its arguments (a single call
/// that no time or instruction limit interrupts) is refused: the engine has no memory limit,
/// and an allocation it cannot make aborts the whole server. `numbers.range(1, 1e10)` asks for
/// hundreds of gigabytes in one call. The size of such outputs must be visible in the source.
fn unbounded_output(name: &str, params: &[regorus::unstable::Ref<Expr>]) -> Option<String> {
    match name {
        "numbers.range" | "numbers.range_step" => {
            let bounds: Vec<Option<f64>> =
                params.iter().take(2).map(|p| literal_number(p)).collect();
            let step = if name == "numbers.range_step" {
                params.get(2).and_then(|p| literal_number(p))
            } else {
                Some(1.0)
            };
            match (bounds.as_slice(), step) {
                ([Some(a), Some(b)], Some(step)) if step >= 1.0 => {
                    let n = ((b - a).abs() / step).floor() + 1.0;
                    (n > MAX_RANGE_ELEMENTS).then(|| {
                        format!(
                            "`{name}` would produce {n} numbers; at most {MAX_RANGE_ELEMENTS} are \
                             allowed"
                        )
                    })
                }
                _ => Some(format!(
                    "`{name}` takes number literals as bounds (and a step of at least 1) here, \
                     at most {MAX_RANGE_ELEMENTS} numbers apart: a range computed at evaluation \
                     time could exhaust the server's memory in one call"
                )),
            }
        }
        "sprintf" => {
            let format = match params.first().map(|p| p.as_ref()) {
                Some(Expr::String { value, .. } | Expr::RawString { value, .. }) => {
                    value.as_string().ok().map(|s| s.to_string())
                }
                _ => None,
            };
            let Some(format) = format else {
                return Some(
                    "`sprintf` takes a string literal as its format here: a format computed at \
                     evaluation time could ask for fields of any width"
                        .to_owned(),
                );
            };
            let mut chars = format.chars().peekable();
            while let Some(c) = chars.next() {
                if c != '%' {
                    continue;
                }
                let mut width: u64 = 0;
                while let Some(d) =
                    chars
                        .peek()
                        .and_then(|c| if *c == '.' { Some(0) } else { c.to_digit(10) })
                {
                    width = width.saturating_mul(10).saturating_add(u64::from(d));
                    chars.next();
                }
                if width > MAX_FORMAT_WIDTH {
                    return Some(format!(
                        "`sprintf` field width {width} is above the maximum of {MAX_FORMAT_WIDTH}"
                    ));
                }
                chars.next();
            }
            None
        }
        _ => None,
    }
}

/// The documents a policy module may define (contract 13.5).
pub(crate) const OUTPUTS: [&str; 4] = ["allow", "deny", "require_approval", "severity"];

/// `file:line:col: message`.
pub(crate) fn at(span: &Span, message: &str) -> String {
    format!("{SOURCE_NAME}:{}:{}: {message}", span.line, span.col)
}

/// A reference as far as it is static: the root variable and the constant components after it.
struct StaticRef<'a> {
    root: Option<&'a str>,
    components: Vec<String>,
    /// Expressions used as dynamic indexes (walked separately).
    dynamic: Vec<&'a Expr>,
    /// True when a dynamic index cut the static part short.
    truncated: bool,
    /// The root when it is not a variable (a call, a literal…).
    other_root: Option<&'a Expr>,
}

fn static_ref(expr: &Expr) -> StaticRef<'_> {
    let mut chain = Vec::new();
    let mut node = expr;
    let mut dynamic = Vec::new();
    let mut other_root = None;
    let root = loop {
        match node {
            Expr::RefDot { refr, field, .. } => {
                chain.push(Some(field.0.text().to_owned()));
                node = refr;
            }
            Expr::RefBrack { refr, index, .. } => {
                match index.as_ref() {
                    Expr::String { value, .. } | Expr::RawString { value, .. } => {
                        chain.push(value.as_string().ok().map(|s| s.to_string()));
                    }
                    other => {
                        dynamic.push(other);
                        chain.push(None);
                    }
                }
                node = refr;
            }
            Expr::Var { span, .. } => break Some(span.text()),
            other => {
                other_root = Some(other);
                break None;
            }
        }
    };
    chain.reverse();
    let mut components = Vec::new();
    let mut truncated = false;
    for c in chain {
        match c {
            Some(c) if !truncated => components.push(c),
            _ => truncated = true,
        }
    }
    StaticRef {
        root,
        components,
        dynamic,
        truncated,
        other_root,
    }
}

/// The span of the part of a reference chain that ends after `n` components past its root
/// (`data.a.b` of `data.a.b.c[x]` for `n` = 2).
fn prefix_span(expr: &Expr, n: usize) -> Option<Span> {
    let mut chain = vec![expr];
    let mut node = expr;
    while let Expr::RefDot { refr, .. } | Expr::RefBrack { refr, .. } = node {
        node = refr;
        chain.push(node);
    }
    let idx = chain.len().checked_sub(1 + n)?;
    chain.get(idx).map(|e| e.span().clone())
}

/// For a `data` reference into the module's own package (or below it), the span of its
/// package part (`data.steward.policies.x`); `None` for any other reference.
fn own_prefix(package: &[String], expr: &Expr, r: &StaticRef<'_>) -> Option<Span> {
    let n = package.len();
    let own = r.components.len() >= n && r.components[..n] == package[..];
    prefix_span(expr, n).filter(|_| own)
}

/// The error for a `data` reference outside the module's own package, at the reference's
/// first character.
fn out_of_reach(package: &[String], expr: &Expr) -> String {
    let mut root = expr;
    while let Expr::RefDot { refr, .. } | Expr::RefBrack { refr, .. } = root {
        root = refr;
    }
    let span = expr.span();
    at(
        root.span(),
        &format!(
            "a policy may read only `input` and its own package (data.{}); `{}` is out of reach",
            package.join("."),
            span.text()
        ),
    )
}

/// The first component of a rule head (`deny` for `deny contains x`, `a` for `a.b := 1`).
fn head_name(refr: &Expr) -> Option<String> {
    let r = static_ref(refr);
    r.root.map(str::to_owned)
}

struct RuleDef<'a> {
    name: String,
    span: Span,
    is_function: bool,
    rule: &'a Rule,
}

fn rule_defs(module: &Module) -> Vec<RuleDef<'_>> {
    let mut out = Vec::new();
    for rule in &module.policy {
        let rule: &Rule = rule;
        let (refr, is_function) = match rule {
            Rule::Spec { head, .. } => match head {
                RuleHead::Compr { refr, .. } | RuleHead::Set { refr, .. } => (refr, false),
                RuleHead::Func { refr, .. } => (refr, true),
            },
            Rule::Default { refr, args, .. } => (refr, !args.is_empty()),
        };
        if let Some(name) = head_name(refr) {
            out.push(RuleDef {
                name,
                span: refr.span().clone(),
                is_function,
                rule,
            });
        }
    }
    out
}

/// Collects, for one rule, the rules of the module it refers to and the problems found.
struct Walker<'m> {
    package: &'m [String],
    rule_names: &'m BTreeSet<String>,
    function_names: &'m BTreeSet<String>,
    /// Import aliases to `data` paths.
    aliases: &'m BTreeMap<String, Vec<String>>,
    refs: BTreeSet<String>,
    errors: Vec<String>,
    cheap: bool,
    edits: Vec<Edit>,
}

/// Where a resolved `data` path points, relative to this module.
enum Target {
    /// A rule of the module.
    Rule(String),
    /// The whole package (or an ancestor of it): every rule.
    All,
    /// Somewhere else.
    Elsewhere,
}

impl<'m> Walker<'m> {
    fn resolve_data(&self, components: &[String]) -> Target {
        // `components` excludes the leading `data`.
        let n = components.len().min(self.package.len());
        if components[..n] != self.package[..n] {
            Target::Elsewhere
        } else if components.len() > self.package.len() {
            Target::Rule(components[self.package.len()].clone())
        } else {
            // The package itself, an ancestor of it, or a dynamic path below one of them.
            Target::All
        }
    }

    /// The rule a static reference designates, if it is one of this module's.
    fn target_of(&self, r: &StaticRef<'_>) -> Option<Target> {
        let root = r.root?;
        if root == "data" {
            return Some(self.resolve_data(&r.components));
        }
        if let Some(path) = self.aliases.get(root) {
            let mut full = path.clone();
            full.extend(r.components.iter().cloned());
            return Some(self.resolve_data(&full));
        }
        if self.rule_names.contains(root) {
            return Some(Target::Rule(root.to_owned()));
        }
        None
    }

    fn add(&mut self, target: Target) {
        match target {
            Target::Rule(name) => {
                if self.rule_names.contains(&name) {
                    self.refs.insert(name);
                }
            }
            Target::All => self.refs.extend(self.rule_names.iter().cloned()),
            Target::Elsewhere => {}
        }
    }

    /// A `data` reference must stay within the module's own package; it is recorded for
    /// relocation.
    fn check_data(&mut self, expr: &Expr, r: &StaticRef<'_>) {
        if r.root != Some("data") {
            return;
        }
        match own_prefix(self.package, expr, r) {
            Some(span) => self.edits.push(Edit {
                start: span.start as usize,
                end: span.end as usize,
                kind: EditKind::Reference,
            }),
            None => self.errors.push(out_of_reach(self.package, expr)),
        }
    }

    fn reference(&mut self, expr: &Expr) {
        let r = static_ref(expr);
        self.check_data(expr, &r);
        if let Some(t) = self.target_of(&r) {
            self.add(t);
        }
        for d in &r.dynamic {
            self.expr(d);
        }
        if let Some(other) = r.other_root {
            self.expr(other);
        }
    }

    fn call(&mut self, fcn: &Expr, params: &[regorus::unstable::Ref<Expr>]) {
        let r = static_ref(fcn);
        self.check_data(fcn, &r);
        let path = match r.root {
            Some(root) if r.dynamic.is_empty() && r.other_root.is_none() => {
                let mut p = vec![root.to_owned()];
                p.extend(r.components.iter().cloned());
                Some(p.join("."))
            }
            _ => None,
        };
        let known = match (&path, self.target_of(&r)) {
            (Some(p), _) if p == "print" || BUILTINS.contains_key(p.as_str()) => {
                if !CHEAP_BUILTINS.contains(&p.as_str()) {
                    self.cheap = false;
                }
                if let Some(problem) = unbounded_output(p, params) {
                    self.errors.push(at(fcn.span(), &problem));
                }
                true
            }
            (_, Some(Target::Rule(name))) => {
                let ok = self.function_names.contains(&name);
                self.add(Target::Rule(name));
                ok
            }
            (_, Some(Target::All)) => {
                self.add(Target::All);
                false
            }
            _ => false,
        };
        if !known {
            let name = path.unwrap_or_else(|| fcn.span().text().to_owned());
            self.errors
                .push(at(fcn.span(), &format!("unknown function `{name}`")));
        }
        for d in &r.dynamic {
            self.expr(d);
        }
        for p in params {
            self.expr(p);
        }
    }

    fn query(&mut self, query: &Query) {
        for stmt in &query.stmts {
            match &stmt.literal {
                Literal::SomeVars { .. } => {}
                Literal::SomeIn {
                    key,
                    value,
                    collection,
                    ..
                } => {
                    if let Some(k) = key {
                        self.expr(k);
                    }
                    self.expr(value);
                    self.expr(collection);
                }
                Literal::Expr { expr, .. } | Literal::NotExpr { expr, .. } => self.expr(expr),
                Literal::Every { domain, query, .. } => {
                    self.expr(domain);
                    self.query(query);
                }
            }
            for w in &stmt.with_mods {
                let target = static_ref(&w.refr);
                self.check_data(&w.refr, &target);
                self.expr(&w.r#as);
            }
        }
    }

    fn expr(&mut self, expr: &Expr) {
        match expr {
            Expr::String { .. }
            | Expr::RawString { .. }
            | Expr::Number { .. }
            | Expr::Bool { .. }
            | Expr::Null { .. } => {}
            Expr::Var { .. } | Expr::RefDot { .. } | Expr::RefBrack { .. } => self.reference(expr),
            Expr::Array { items, .. } | Expr::Set { items, .. } => {
                for i in items {
                    self.expr(i);
                }
            }
            Expr::Object { fields, .. } => {
                for (_, k, v) in fields {
                    self.expr(k);
                    self.expr(v);
                }
            }
            Expr::ArrayCompr { term, query, .. } | Expr::SetCompr { term, query, .. } => {
                self.expr(term);
                self.query(query);
            }
            Expr::ObjectCompr {
                key, value, query, ..
            } => {
                self.expr(key);
                self.expr(value);
                self.query(query);
            }
            Expr::Call { fcn, params, .. } => self.call(fcn, params),
            Expr::UnaryExpr { expr, .. } => self.expr(expr),
            Expr::ArithExpr { lhs, rhs, .. } => {
                self.cheap = false;
                self.expr(lhs);
                self.expr(rhs);
            }
            Expr::BinExpr { lhs, rhs, .. }
            | Expr::BoolExpr { lhs, rhs, .. }
            | Expr::AssignExpr { lhs, rhs, .. } => {
                self.expr(lhs);
                self.expr(rhs);
            }
            Expr::Membership {
                key,
                value,
                collection,
                ..
            } => {
                if let Some(k) = key {
                    self.expr(k);
                }
                self.expr(value);
                self.expr(collection);
            }
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }

    fn rule(&mut self, rule: &Rule) {
        match rule {
            Rule::Spec { head, bodies, .. } => {
                match head {
                    RuleHead::Compr { refr, assign, .. } => {
                        self.head_indexes(refr);
                        if let Some(a) = assign {
                            self.expr(&a.value);
                        }
                    }
                    RuleHead::Set { refr, key, .. } => {
                        self.head_indexes(refr);
                        if let Some(k) = key {
                            self.expr(k);
                        }
                    }
                    RuleHead::Func { assign, .. } => {
                        if let Some(a) = assign {
                            self.expr(&a.value);
                        }
                    }
                }
                for body in bodies {
                    if let Some(a) = &body.assign {
                        self.expr(&a.value);
                    }
                    self.query(&body.query);
                }
            }
            Rule::Default { value, .. } => self.expr(value),
        }
    }

    /// Dynamic indexes of a rule head (`p[x] := …`) are expressions of the rule.
    fn head_indexes(&mut self, refr: &Expr) {
        let r = static_ref(refr);
        for d in &r.dynamic {
            self.expr(d);
        }
    }
}

fn package_components(module: &Module) -> Vec<String> {
    let r = static_ref(&module.package.refr);
    let mut out: Vec<String> = r.root.map(str::to_owned).into_iter().collect();
    out.extend(r.components);
    out
}

/// Checks the package, recursion and function calls of a parsed module.
pub(crate) fn analyze(module: &Module) -> Result<ModuleInfo, String> {
    let package = package_components(module);
    if package.len() < 3 || package[..2] != PACKAGE_PREFIX {
        return Err(at(
            &module.package.span,
            &format!(
                "the package must be steward.policies.<name>, not {}",
                module.package.refr.span().text()
            ),
        ));
    }

    let defs = rule_defs(module);
    let rule_names: BTreeSet<String> = defs.iter().map(|d| d.name.clone()).collect();
    let function_names: BTreeSet<String> = defs
        .iter()
        .filter(|d| d.is_function)
        .map(|d| d.name.clone())
        .collect();
    let package_span = module.package.refr.span();
    let mut edits = vec![Edit {
        start: package_span.start as usize,
        end: package_span.end as usize,
        kind: EditKind::Declaration,
    }];
    let mut aliases = BTreeMap::new();
    for import in &module.imports {
        let r = static_ref(&import.refr);
        if r.root == Some("data") && !r.truncated {
            let alias = match &import.r#as {
                Some(span) => span.text().to_owned(),
                None => match r.components.last() {
                    Some(last) => last.clone(),
                    None => continue,
                },
            };
            match own_prefix(&package, &import.refr, &r) {
                Some(span) => {
                    edits.push(Edit {
                        start: span.start as usize,
                        end: span.end as usize,
                        kind: EditKind::Reference,
                    });
                    if import.r#as.is_none() {
                        let end = import.refr.span().end as usize;
                        edits.push(Edit {
                            start: end,
                            end,
                            kind: EditKind::Insert(format!(" as {alias}")),
                        });
                    }
                }
                None => return Err(out_of_reach(&package, &import.refr)),
            }
            aliases.insert(alias, r.components);
        } else if r.root == Some("data") {
            return Err(out_of_reach(&package, &import.refr));
        }
    }

    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut first_span: BTreeMap<String, Span> = BTreeMap::new();
    let mut errors = Vec::new();
    let mut cheap = true;
    for def in &defs {
        let mut w = Walker {
            package: &package,
            rule_names: &rule_names,
            function_names: &function_names,
            aliases: &aliases,
            refs: BTreeSet::new(),
            errors: Vec::new(),
            cheap: true,
            edits: Vec::new(),
        };
        w.rule(def.rule);
        errors.extend(w.errors);
        edits.extend(w.edits);
        cheap &= w.cheap;
        graph.entry(def.name.clone()).or_default().extend(w.refs);
        first_span
            .entry(def.name.clone())
            .or_insert_with(|| def.span.clone());
    }
    if let Some(first) = errors.into_iter().next() {
        return Err(first);
    }
    if let Some(cycle) = find_cycle(&graph) {
        let start = &cycle[0];
        let message = format!(
            "recursion is not allowed: rule `{start}` depends on itself ({})",
            cycle.join(" -> ")
        );
        return Err(match first_span.get(start) {
            Some(span) => at(span, &message),
            None => format!("{SOURCE_NAME}: {message}"),
        });
    }

    let defines = OUTPUTS
        .into_iter()
        .filter(|o| defs.iter().any(|d| d.name == *o && !d.is_function))
        .collect();
    Ok(ModuleInfo {
        package,
        defines,
        cheap,
        edits,
    })
}

/// A cycle of the graph as a path `a, b, …, a`, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Unseen,
        Open,
        Done,
    }
    let mut mark: BTreeMap<&str, Mark> = graph.keys().map(|k| (k.as_str(), Mark::Unseen)).collect();
    for start in graph.keys() {
        if mark.get(start.as_str()) != Some(&Mark::Unseen) {
            continue;
        }
        // Iterative depth-first search: (node, remaining successors).
        let mut stack: Vec<(&str, Vec<&str>)> = Vec::new();
        let succ = |n: &str| -> Vec<&str> {
            graph
                .get(n)
                .map(|s| s.iter().map(String::as_str).rev().collect())
                .unwrap_or_default()
        };
        mark.insert(start, Mark::Open);
        stack.push((start, succ(start)));
        while let Some(top) = stack.last_mut() {
            let node = top.0;
            match top.1.pop() {
                Some(n) => match mark.get(n).copied().unwrap_or(Mark::Done) {
                    Mark::Open => {
                        let pos = stack.iter().position(|(s, _)| *s == n).unwrap_or(0);
                        let mut cycle: Vec<String> =
                            stack[pos..].iter().map(|(s, _)| (*s).to_owned()).collect();
                        cycle.push(n.to_owned());
                        return Some(cycle);
                    }
                    Mark::Unseen => {
                        mark.insert(n, Mark::Open);
                        stack.push((n, succ(n)));
                    }
                    Mark::Done => {}
                },
                None => {
                    mark.insert(node, Mark::Done);
                    stack.pop();
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analyze_src(src: &str) -> Result<ModuleInfo, String> {
        let mut engine = regorus::Engine::new();
        engine
            .add_policy(SOURCE_NAME.into(), src.into())
            .map_err(|e| e.to_string())?;
        let modules = engine.get_modules();
        analyze(&modules[0])
    }

    fn err(src: &str) -> String {
        match analyze_src(src) {
            Ok(info) => panic!("accepted: {info:?}"),
            Err(e) => e,
        }
    }

    const HEAD: &str = "package steward.policies.t\nimport rego.v1\n";

    #[test]
    fn outputs_without_visible_bounds_are_refused() {
        let ok = |body: &str| analyze_src(&format!("{HEAD}{body}\n"));
        assert!(ok("allow if count(numbers.range(1, 1000)) > 0").is_ok());
        assert!(ok("allow if count(numbers.range(-5, 5)) > 0").is_ok());
        assert!(ok("allow if count(numbers.range_step(1, 1000000, 100)) > 0").is_ok());
        assert!(ok("allow if sprintf(\"%d items, %.2f%%\", [1, 2.5]) != \"\"").is_ok());
        for refused in [
            "allow if count(numbers.range(1, 10000000000)) > 0",
            "allow if count(numbers.range(1, input.context.n)) > 0",
            "allow if count(numbers.range_step(1, 10000000, 1)) > 0",
            "allow if count(numbers.range_step(1, 100, input.step)) > 0",
            "allow if count(numbers.range_step(1, 100, 0.000001)) > 0",
            "allow if sprintf(\"%0999999999d\", [1]) != \"\"",
            "allow if sprintf(input.format, [1]) != \"\"",
        ] {
            let e = err(&format!("{HEAD}{refused}\n"));
            assert!(e.starts_with("policy.rego:3:"), "{refused}: {e}");
        }
    }

    #[test]
    fn package_rules() {
        let ok = analyze_src(&format!("{HEAD}allow := true\n")).unwrap_or_default();
        assert_eq!(ok.package, ["steward", "policies", "t"]);
        let deep = analyze_src("package steward.policies.a.b\nimport rego.v1\nallow := true\n");
        assert!(deep.is_ok());
        let quoted =
            analyze_src("package steward.policies[\"a-b\"]\nimport rego.v1\nallow := true\n");
        assert_eq!(
            quoted.map(|i| i.package),
            Ok(vec!["steward".into(), "policies".into(), "a-b".into()])
        );
        assert!(err("package other.place\nimport rego.v1\nallow := true\n")
            .contains("steward.policies"));
        assert!(
            err("package steward.policies\nimport rego.v1\nallow := true\n").contains("package")
        );
        assert!(
            err("package steward.other.x\nimport rego.v1\nallow := true\n").contains("package")
        );
    }

    #[test]
    fn outputs_defined() {
        let info = analyze_src(&format!(
            "{HEAD}default allow := false\nallow if count(deny) == 0\ndeny contains \"x\" if false\nseverity(x) := x\n"
        ))
        .unwrap_or_default();
        assert_eq!(info.defines, BTreeSet::from(["allow", "deny"]));
    }

    #[test]
    fn templates_pass_and_are_cheap() {
        for t in crate::templates::templates() {
            if t.id == crate::templates::GUARD_TEMPLATE {
                continue;
            }
            let info = analyze_src(t.rego);
            assert!(info.as_ref().is_ok_and(|i| i.cheap), "{}: {info:?}", t.id);
        }
    }

    #[test]
    fn cost_classes() {
        let cheap = |body: &str| analyze_src(&format!("{HEAD}{body}\n")).map(|i| i.cheap);
        assert_eq!(cheap("allow if count(input.x) > 1"), Ok(true));
        assert_eq!(
            cheap("f(x) := upper(x)\nallow if f(\"a\") == \"A\""),
            Ok(true)
        );
        assert_eq!(cheap("allow if input.x * input.x > 1"), Ok(false));
        assert_eq!(cheap("allow if count(numbers.range(1, 9)) > 1"), Ok(false));
        assert_eq!(cheap("allow if regex.match(\"a\", input.x)"), Ok(false));
        assert_eq!(cheap("allow if sprintf(\"%v\", [1]) != \"\""), Ok(false));
    }

    #[test]
    fn recursion_is_refused() {
        // Direct self-reference of a rule.
        assert!(err(&format!("{HEAD}allow if allow\n")).contains("recursion"));
        // Mutual recursion, reported with the path.
        let e = err(&format!("{HEAD}allow if b\nb if c\nc if allow\n"));
        assert!(e.contains("allow -> b -> c -> allow"), "{e}");
        assert!(e.starts_with("policy.rego:3:1"), "{e}");
        // A recursive function (regorus would overflow the stack).
        let e = err(&format!(
            "{HEAD}f(n) := 0 if n <= 0\nf(n) := f(n - 1) + 1 if n > 0\nallow if f(10) == 10\n"
        ));
        assert!(e.contains("`f` depends on itself"), "{e}");
        // Through a partial set and a comprehension.
        assert!(err(&format!(
            "{HEAD}deny contains x if {{ some x in [y | some y in deny] }}\n"
        ))
        .contains("recursion"));
        // Through `data` and through an import of the own package.
        assert!(
            err(&format!("{HEAD}allow if data.steward.policies.t.allow\n")).contains("recursion")
        );
        assert!(err(&format!(
            "{HEAD}import data.steward.policies.t as me\nallow if me.x\nx if me.allow\n"
        ))
        .contains("recursion"));
        // Referring to the whole package is referring to every rule.
        assert!(err(&format!(
            "{HEAD}allow if count(data.steward.policies.t) > 0\n"
        ))
        .contains("recursion"));
        // Through an else branch and a negation.
        assert!(err(&format!(
            "{HEAD}a := 1 if input.x else := b\nb := 2 if not a\n"
        ))
        .contains("recursion"));
    }

    #[test]
    fn non_recursive_modules_pass() {
        let src = format!(
            "{HEAD}f(n) := n + 1\ng(n) := f(n) * 2\nallow if g(1) == 4\n\
             deny contains msg if {{ some msg in input.x; msg != \"\" }}\n\
             other := data.steward.policies.t.f(1)\n"
        );
        assert!(analyze_src(&src).is_ok());
    }

    #[test]
    fn only_the_own_package_is_in_reach() {
        for (src, at) in [
            ("other := data.steward.policies.other.allow\n", "3:10"),
            ("allow if count(data.steward.policies) > 0\n", "3:16"),
            ("everything := data\n", "3:15"),
            ("allow if data[input.x]\n", "3:10"),
            ("import data.elsewhere\n", "3:8"),
            ("allow if input.x with data.q as 1\n", "3:23"),
            ("allow if data.steward.f(1)\n", "3:10"),
        ] {
            let e = err(&format!("{HEAD}{src}"));
            assert!(e.contains("out of reach"), "{src}: {e}");
            assert!(e.starts_with(&format!("policy.rego:{at}")), "{src}: {e}");
        }
    }

    #[test]
    fn relocation_moves_the_module_and_its_own_references() {
        let src = format!(
            "{HEAD}import data.steward.policies.t\nimport data.steward.policies.t as me\n\
             import data.steward.policies.t.k as kk\n\
             k := 2\nf(n) := n + 1\n\
             allow if {{ data.steward.policies.t.f(1) == 2; kk == 2; \
             data[\"steward\"].policies[\"t\"].k == 2; input.x == 1 }}\n\
             other if {{ me.k == 2; t.k == 2 }}\n"
        );
        let info = analyze_src(&src).unwrap();
        let moved = info.relocate(&src, "steward.tenants.t_1.p_2").unwrap();
        assert!(!moved.contains("steward.policies"), "{moved}");
        assert!(
            moved.contains("import data.steward.tenants.t_1.p_2 as t\n"),
            "{moved}"
        );
        let mut engine = regorus::Engine::new();
        engine.add_policy("m.rego".into(), moved.clone()).unwrap();
        engine.set_input(regorus::Value::from(serde_json::json!({"x": 1})));
        let v = engine
            .eval_rule("data.steward.tenants.t_1.p_2.allow".into())
            .unwrap();
        assert_eq!(v, regorus::Value::from(true), "{moved}");
    }

    #[test]
    fn unknown_functions_are_refused() {
        let e = err(&format!("{HEAD}allow if foo(1)\n"));
        assert!(
            e.contains("unknown function `foo`") && e.starts_with("policy.rego:3:10"),
            "{e}"
        );
        // Outside the own package, functions are out of reach before being unknown.
        assert!(err(&format!("{HEAD}allow if data.x.f(1)\n")).contains("out of reach"));
        assert!(err(&format!("{HEAD}allow if strings.nope(\"a\")\n")).contains("strings.nope"));
        let ok = format!(
            "{HEAD}f(x) := x\nallow if {{ f(1) == 1; count([1]) == 1; startswith(\"ab\", \"a\"); \
             regex.match(\"a\", \"a\"); print(\"x\"); data.steward.policies.t.f(2) == 2 }}\n"
        );
        assert!(analyze_src(&ok).is_ok(), "{:?}", analyze_src(&ok));
    }
}
