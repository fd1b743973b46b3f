//! The shipped Rego templates (contract 13.3), embedded in the binary.

use serde::Serialize;

/// A template as `GET /policies/templates` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Template {
    pub id: &'static str,
    pub file: &'static str,
    pub name: &'static str,
    pub description: &'static str,
    pub rego: &'static str,
}

/// The template whose module is the prompt guard's `guard.main`: listed, never a policy.
pub const GUARD_TEMPLATE: &str = "guard";

/// The templates in the contract's fixed order.
pub const TEMPLATES: [Template; 6] = [
    Template {
        id: "gdpr",
        file: "gdpr.rego",
        name: "GDPR",
        description: "Personal data (context.personal_data) needs the data subject's consent \
                      (context.consent) and a stated processing purpose (context.purpose).",
        rego: include_str!("../../../policies/gdpr.rego"),
    },
    Template {
        id: "hipaa",
        file: "hipaa.rego",
        name: "HIPAA",
        description: "Protected health information only for treatment, payment or operations, \
                      or with the patient's authorization; PHI exports must be encrypted.",
        rego: include_str!("../../../policies/hipaa.rego"),
    },
    Template {
        id: "fz152",
        file: "fz152.rego",
        name: "FZ-152",
        description: "Personal data of Russian citizens needs consent, a stated purpose and \
                      storage in Russia.",
        rego: include_str!("../../../policies/fz152.rego"),
    },
    Template {
        id: "hitl",
        file: "hitl.rego",
        name: "Human approval",
        description: "Critical actions, bulk exports over 1,000 records and cross-tenant \
                      operations require a human approval.",
        rego: include_str!("../../../policies/hitl.rego"),
    },
    Template {
        id: "custom",
        file: "custom.rego",
        name: "Custom",
        description: "A skeleton that allows everything: add your own deny rules.",
        rego: include_str!("../../../policies/custom.rego"),
    },
    Template {
        id: GUARD_TEMPLATE,
        file: "guard.rego",
        name: "Prompt guard",
        description: "The prompt guard's policy module guard.main (for reference; it cannot be \
                      used as a policy).",
        rego: include_str!("../../../policies/guard.rego"),
    },
];

/// The templates installed in every new tenant (contract 13.4), in creation order.
pub const DEFAULT_POLICIES: [&str; 3] = ["gdpr", "hipaa", "fz152"];

/// Looks a template up by id, accepting the id with a `.rego` suffix.
pub fn template(id: &str) -> Option<&'static Template> {
    let id = id.strip_suffix(".rego").unwrap_or(id);
    TEMPLATES.iter().find(|t| t.id == id)
}

/// All templates in the contract's order.
pub fn templates() -> &'static [Template] {
    &TEMPLATES
}

/// The source of the prompt guard's `guard.main` module (for the guard crate).
pub fn guard_module() -> &'static str {
    TEMPLATES[5].rego
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_order_and_files() {
        let ids: Vec<_> = templates().iter().map(|t| t.id).collect();
        assert_eq!(ids, ["gdpr", "hipaa", "fz152", "hitl", "custom", "guard"]);
        for t in templates() {
            assert_eq!(t.file, format!("{}.rego", t.id));
            if t.id == GUARD_TEMPLATE {
                assert!(t.rego.contains("package guard.main"));
            } else {
                assert!(t
                    .rego
                    .contains(&format!("package steward.policies.{}", t.id)));
            }
        }
        assert!(guard_module().contains("package guard.main"));
    }

    #[test]
    fn lookup_accepts_suffix() {
        assert_eq!(template("custom.rego").map(|t| t.id), Some("custom"));
        assert_eq!(template("hitl").map(|t| t.id), Some("hitl"));
        assert!(template("nope").is_none());
        assert!(template("custom.rego.rego").is_none());
    }

    /// Runs the Rego unit tests of `policies/tests/<id>_test.rego` against each template:
    /// every `test_` rule must be true.
    #[test]
    fn rego_unit_tests_pass() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/tests");
        let mut ran = 0;
        for t in templates() {
            let path = dir.join(format!("{}_test.rego", t.id));
            let tests = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut engine = regorus::Engine::new();
            if let Err(e) = engine.add_policy(t.file.to_owned(), t.rego.to_owned()) {
                panic!("{}: {e}", t.file);
            }
            let package = match engine.add_policy(path.display().to_string(), tests.clone()) {
                Ok(p) => p,
                Err(e) => panic!("{}: {e}", path.display()),
            };
            let names: Vec<&str> = tests
                .lines()
                .filter(|l| l.starts_with("test_"))
                .filter_map(|l| l.split(|c: char| !(c.is_alphanumeric() || c == '_')).next())
                .collect();
            assert!(names.len() >= 2, "{}: too few tests", path.display());
            for name in names {
                let rule = format!("{package}.{name}");
                match engine.eval_rule(rule.clone()) {
                    Ok(regorus::Value::Bool(true)) => ran += 1,
                    Ok(other) => panic!("{rule} is {other:?}, not true"),
                    Err(e) => panic!("{rule}: {e}"),
                }
            }
        }
        assert!(ran >= 40, "only {ran} Rego tests ran");
    }
}
