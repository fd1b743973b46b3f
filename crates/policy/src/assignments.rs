//! Whether every assignment of a module is checked for definedness by what follows it.
//!
//! In Rego, `x := <expr>` whose value is undefined (a missing member, an index out of range, a
//! built-in error) makes its body undefined, whether `x` is used again or not. regorus 0.14's
//! register VM compiles an assignment without asserting its value: the undefined value only
//! stops the body when a later condition reads it, so `allow if { t := input.context.ticket }`
//! was true without a ticket (probe H-1), and a `deny` rule written so produced a message Rego
//! does not. The interpreter decides these as OPA does. A module runs on the VM only when every
//! variable an assignment binds is read by something that asserts it — a later condition of
//! the same body (not under `not`), a later `some … in` over it, a later assignment whose own
//! variables are so read, or the rule's head (its value, key or the term of a comprehension) —
//! and on the interpreter otherwise.

use std::collections::BTreeSet;

use regorus::unstable::{Expr, Literal, Module, Query, Rule, RuleHead};

/// True when every assignment of the module is asserted by what follows it (see above).
pub(crate) fn assignments_checked(module: &Module) -> bool {
    module.policy.iter().all(|rule| rule_checked(rule))
}

fn rule_checked(rule: &Rule) -> bool {
    match rule {
        Rule::Spec { head, bodies, .. } => {
            let mut head_vars = BTreeSet::new();
            let mut nested_ok = true;
            match head {
                RuleHead::Compr { refr, assign, .. } => {
                    vars(refr, &mut head_vars);
                    nested_ok &= nested_checked(refr);
                    if let Some(a) = assign {
                        vars(&a.value, &mut head_vars);
                        nested_ok &= nested_checked(&a.value);
                    }
                }
                RuleHead::Set { refr, key, .. } => {
                    vars(refr, &mut head_vars);
                    if let Some(k) = key {
                        vars(k, &mut head_vars);
                        nested_ok &= nested_checked(k);
                    }
                }
                RuleHead::Func { refr, assign, .. } => {
                    vars(refr, &mut head_vars);
                    if let Some(a) = assign {
                        vars(&a.value, &mut head_vars);
                        nested_ok &= nested_checked(&a.value);
                    }
                }
            }
            nested_ok
                && bodies.iter().all(|b| {
                    let mut used = head_vars.clone();
                    if let Some(a) = &b.assign {
                        vars(&a.value, &mut used);
                        if !nested_checked(&a.value) {
                            return false;
                        }
                    }
                    query_checked(&b.query, used)
                })
        }
        Rule::Default { .. } => true,
    }
}

/// Walks a query backwards, keeping the variables that a later statement asserts.
fn query_checked(query: &Query, mut asserted: BTreeSet<String>) -> bool {
    for stmt in query.stmts.iter().rev() {
        match &stmt.literal {
            Literal::Expr { expr, .. } => {
                if let Expr::AssignExpr { lhs, rhs, .. } = expr.as_ref() {
                    let mut bound = BTreeSet::new();
                    vars(lhs, &mut bound);
                    bound.remove("_");
                    if !bound.iter().all(|v| asserted.contains(v)) {
                        return false;
                    }
                    vars(rhs, &mut asserted);
                    // A pattern on the left (`[a, 1] := x`) is a condition on its own terms.
                    vars(lhs, &mut asserted);
                } else {
                    vars(expr, &mut asserted);
                }
                if !nested_checked(expr) {
                    return false;
                }
            }
            Literal::SomeIn {
                key,
                value,
                collection,
                ..
            } => {
                vars(collection, &mut asserted);
                for e in key.iter().chain(std::iter::once(value)) {
                    if !nested_checked(e) {
                        return false;
                    }
                }
                if !nested_checked(collection) {
                    return false;
                }
            }
            Literal::NotExpr { expr, .. } => {
                if !nested_checked(expr) {
                    return false;
                }
            }
            Literal::Every { domain, query, .. } => {
                if !nested_checked(domain) || !query_checked(query, BTreeSet::new()) {
                    return false;
                }
            }
            Literal::SomeVars { .. } => {}
        }
        for w in &stmt.with_mods {
            if !nested_checked(&w.r#as) {
                return false;
            }
        }
    }
    true
}

/// The comprehensions inside an expression, each checked with its term as its head.
fn nested_checked(expr: &Expr) -> bool {
    match expr {
        Expr::ArrayCompr { term, query, .. } | Expr::SetCompr { term, query, .. } => {
            let mut used = BTreeSet::new();
            vars(term, &mut used);
            nested_checked(term) && query_checked(query, used)
        }
        Expr::ObjectCompr {
            key, value, query, ..
        } => {
            let mut used = BTreeSet::new();
            vars(key, &mut used);
            vars(value, &mut used);
            nested_checked(key) && nested_checked(value) && query_checked(query, used)
        }
        Expr::Array { items, .. } | Expr::Set { items, .. } => {
            items.iter().all(|i| nested_checked(i))
        }
        Expr::Object { fields, .. } => fields
            .iter()
            .all(|(_, k, v)| nested_checked(k) && nested_checked(v)),
        Expr::Call { fcn, params, .. } => {
            nested_checked(fcn) && params.iter().all(|p| nested_checked(p))
        }
        Expr::UnaryExpr { expr, .. } => nested_checked(expr),
        Expr::RefDot { refr, .. } => nested_checked(refr),
        Expr::RefBrack { refr, index, .. } => nested_checked(refr) && nested_checked(index),
        Expr::ArithExpr { lhs, rhs, .. }
        | Expr::BinExpr { lhs, rhs, .. }
        | Expr::BoolExpr { lhs, rhs, .. }
        | Expr::AssignExpr { lhs, rhs, .. } => nested_checked(lhs) && nested_checked(rhs),
        Expr::Membership {
            key,
            value,
            collection,
            ..
        } => {
            key.as_ref().is_none_or(|k| nested_checked(k))
                && nested_checked(value)
                && nested_checked(collection)
        }
        _ => true,
    }
}

/// The variable names an expression mentions (comprehension bodies included).
fn vars(expr: &Expr, out: &mut BTreeSet<String>) {
    match expr {
        Expr::Var { span, .. } => {
            out.insert(span.text().to_owned());
        }
        Expr::RefDot { refr, .. } => vars(refr, out),
        Expr::RefBrack { refr, index, .. } => {
            vars(refr, out);
            vars(index, out);
        }
        Expr::Array { items, .. } | Expr::Set { items, .. } => {
            for i in items {
                vars(i, out);
            }
        }
        Expr::Object { fields, .. } => {
            for (_, k, v) in fields {
                vars(k, out);
                vars(v, out);
            }
        }
        Expr::ArrayCompr { term, query, .. } | Expr::SetCompr { term, query, .. } => {
            vars(term, out);
            query_vars(query, out);
        }
        Expr::ObjectCompr {
            key, value, query, ..
        } => {
            vars(key, out);
            vars(value, out);
            query_vars(query, out);
        }
        Expr::Call { fcn, params, .. } => {
            vars(fcn, out);
            for p in params {
                vars(p, out);
            }
        }
        Expr::UnaryExpr { expr, .. } => vars(expr, out),
        Expr::ArithExpr { lhs, rhs, .. }
        | Expr::BinExpr { lhs, rhs, .. }
        | Expr::BoolExpr { lhs, rhs, .. }
        | Expr::AssignExpr { lhs, rhs, .. } => {
            vars(lhs, out);
            vars(rhs, out);
        }
        Expr::Membership {
            key,
            value,
            collection,
            ..
        } => {
            if let Some(k) = key {
                vars(k, out);
            }
            vars(value, out);
            vars(collection, out);
        }
        _ => {}
    }
}

fn query_vars(query: &Query, out: &mut BTreeSet<String>) {
    for stmt in &query.stmts {
        match &stmt.literal {
            Literal::Expr { expr, .. } | Literal::NotExpr { expr, .. } => vars(expr, out),
            Literal::SomeIn {
                key,
                value,
                collection,
                ..
            } => {
                if let Some(k) = key {
                    vars(k, out);
                }
                vars(value, out);
                vars(collection, out);
            }
            Literal::Every { domain, query, .. } => {
                vars(domain, out);
                query_vars(query, out);
            }
            Literal::SomeVars { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(body: &str) -> bool {
        let src = format!("package steward.policies.t\nimport rego.v1\n{body}\n");
        let mut engine = regorus::Engine::new();
        if let Err(e) = engine.add_policy("t.rego".to_owned(), src) {
            panic!("{e}");
        }
        let modules = engine.get_modules();
        match modules.first() {
            Some(m) => assignments_checked(m),
            None => panic!("no module"),
        }
    }

    #[test]
    fn unread_assignments_are_found() {
        assert!(!checked("allow if {\n\tt := input.context.ticket\n}"));
        assert!(!checked("allow if {\n\tx := 1 / 0\n\ttrue\n}"));
        assert!(!checked("allow if {\n\tx := input.a\n\tnot x == 1\n}"));
        assert!(!checked("allow if {\n\tx := input.a\n\ty := x\n}"));
        assert!(!checked("has if {\n\tt := input.t\n}\nallow if has"));
        assert!(!checked(
            "allow if {\n\tc := [1 | y := input.a]\n\tcount(c) > 0\n}"
        ));
        assert!(!checked(
            "allow if {\n\tevery v in [1] {\n\t\tx := input.a\n\t}\n}"
        ));
    }

    #[test]
    fn read_assignments_pass() {
        assert!(checked("allow if {\n\tx := input.a\n\tx == 1\n}"));
        assert!(checked(
            "allow if {\n\tx := input.a\n\ty := x + 1\n\ty > 2\n}"
        ));
        assert!(checked(
            "deny contains msg if {\n\tmsg := sprintf(\"%v\", [input.a])\n}"
        ));
        assert!(checked("v := x if {\n\tx := input.a\n}"));
        assert!(checked(
            "allow if {\n\tsome i in input.items\n\tx := i.a\n\tx\n}"
        ));
        assert!(checked("allow if {\n\t[a, _] := input.pair\n\ta == 1\n}"));
        assert!(checked(
            "allow if {\n\tc := [y | y := input.items[_]]\n\tcount(c) > 0\n}"
        ));
        assert!(checked("default allow := false\nallow if input.a == 1"));
    }
}
