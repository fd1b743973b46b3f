//! One policy module: validation when it is saved, compilation, and evaluation of its
//! decision documents (`allow`, `deny`, `require_approval`, `severity`, contract 13.5).
//!
//! Each module is compiled on its own (two policies may declare the same package) together
//! with a small generated module, `steward.eval`, whose `decision` collects the four documents
//! in one evaluation: `[x | x := data.<package>.allow]` is `[]` when `allow` is undefined.
//! The compiled module runs on regorus' register VM (RVM), about ten times faster than its
//! tree-walking interpreter; a module the RVM compiler does not support yet (`with`, a few
//! partial-object forms) runs on the interpreter instead. Both stop at the time limit.

use std::num::NonZeroU32;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use regorus::languages::rego::compiler::Compiler;
use regorus::rvm::{Program, RegoVM};
use regorus::utils::limits::ExecutionTimerConfig;
use regorus::{Engine, Value};
use steward_core::{Error, ErrorKind, Result};

use crate::analysis::{analyze, ModuleInfo, SOURCE_NAME};

/// The largest module accepted (bytes of Rego source).
pub const MAX_MODULE_BYTES: usize = 64 * 1024;

/// The deepest nesting of `[`…`]` and `{`…`}` accepted. regorus parses nested array and object
/// literals in time exponential in their depth (a factor of about 4 per level), so a module of
/// deeply nested literals would hold a thread for minutes.
pub const MAX_NESTING: usize = 8;

/// The entry point of the generated module.
const DECISION_RULE: &str = "data.steward.eval.decision";

/// VMs kept per module for reuse.
const IDLE_VMS: usize = 8;

/// Limits of one module evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvalLimits {
    /// Wall-clock budget of one module (checked cooperatively by the engine).
    pub timeout: Duration,
    /// Instruction budget of one module on the VM.
    pub max_instructions: usize,
}

impl Default for EvalLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(1),
            max_instructions: 20_000_000,
        }
    }
}

impl EvalLimits {
    /// The budget of an inline evaluation (see `CompiledModule::inline_safe`): a few
    /// milliseconds at most; a module that needs more runs again on the blocking pool.
    pub const INLINE: EvalLimits = EvalLimits {
        timeout: Duration::from_millis(2),
        max_instructions: 50_000,
    };

    fn timer(&self) -> ExecutionTimerConfig {
        ExecutionTimerConfig {
            limit: self.timeout,
            check_interval: NonZeroU32::MIN.saturating_add(255),
        }
    }
}

/// What one module decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModuleResult {
    /// `allow` is exactly `true`.
    pub allow: bool,
    /// The messages of a non-empty `deny` collection, sorted.
    pub deny: Vec<String>,
    /// `deny` is the boolean `true` (a deny without messages).
    pub deny_flag: bool,
    /// `require_approval` is exactly `true`.
    pub require_approval: bool,
    /// `severity`, when it is one of `low`, `medium`, `high`, `critical` (case-insensitive).
    pub severity: Option<String>,
}

impl ModuleResult {
    /// The module hard-denies: a non-empty `deny`, or `allow` not `true` (contract 13.6 step 3).
    pub fn hard_denies(&self) -> bool {
        !self.deny.is_empty() || self.deny_flag || !self.allow
    }
}

/// Source position-prefixed message from a regorus error (`policy.rego:3:5: message`).
pub(crate) fn engine_message(err: &dyn std::fmt::Display) -> String {
    let text = err.to_string();
    let text = text.trim();
    let location = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("--> "))
        .map(str::trim);
    let message = text
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .map(str::trim);
    match (location, message) {
        (Some(loc), Some(msg)) => format!("{loc}: {msg}"),
        _ => text.lines().map(str::trim).collect::<Vec<_>>().join(" "),
    }
}

/// Checks size and bracket nesting before the source reaches the parser.
fn precheck(rego: &str) -> std::result::Result<(), String> {
    if rego.len() > MAX_MODULE_BYTES {
        return Err(format!(
            "the module is {} bytes long; at most {MAX_MODULE_BYTES} bytes are accepted",
            rego.len()
        ));
    }
    let mut depth = 0usize;
    let (mut line, mut col) = (1usize, 0usize);
    let mut chars = rego.chars();
    #[derive(PartialEq)]
    enum State {
        Code,
        Str,
        Raw,
        Comment,
    }
    let mut state = State::Code;
    while let Some(c) = chars.next() {
        col += 1;
        if c == '\n' {
            line += 1;
            col = 0;
        }
        match state {
            State::Code => match c {
                '"' => state = State::Str,
                '`' => state = State::Raw,
                '#' => state = State::Comment,
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Err(format!(
                            "{SOURCE_NAME}:{line}:{col}: brackets and braces are nested more \
                             than {MAX_NESTING} levels deep"
                        ));
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
            State::Str => match c {
                '\\' => {
                    chars.next();
                    col += 1;
                }
                '"' | '\n' => state = State::Code,
                _ => {}
            },
            State::Raw => {
                if c == '`' {
                    state = State::Code;
                }
            }
            State::Comment => {
                if c == '\n' {
                    state = State::Code;
                }
            }
        }
    }
    Ok(())
}

/// Rego source of a `data` path, every component in brackets.
pub(crate) fn data_path(components: &[String]) -> String {
    let mut out = String::from("data");
    for c in components {
        out.push('[');
        out.push_str(&serde_json::Value::String(c.clone()).to_string());
        out.push(']');
    }
    out
}

/// The generated module collecting the decision documents of `info`'s package.
fn decision_module(info: &ModuleInfo) -> String {
    format!(
        "package steward.eval\n\nimport rego.v1\n\ndecision := {}\n",
        decision_object(info, &data_path(&info.package), &[])
    )
}

/// A Rego object collecting the four decision documents of the module found at `base` (a
/// `data` path in Rego syntax): `[x | x := base.allow]` is `[]` when `allow` is undefined.
/// `extra`: further fields (`\t"name": value,` lines).
pub(crate) fn decision_object(info: &ModuleInfo, base: &str, extra: &[String]) -> String {
    let mut fields = Vec::new();
    for name in crate::analysis::OUTPUTS {
        if info.defines.contains(name) {
            fields.push(format!("\t\"{name}\": [x | x := {base}[\"{name}\"]],"));
        } else {
            fields.push(format!("\t\"{name}\": [],"));
        }
    }
    fields.extend(extra.iter().cloned());
    format!("{{\n{}\n}}", fields.join("\n"))
}

fn invalid(message: String) -> Error {
    Error::unprocessable(ErrorKind::InvalidRego, "rego", message)
}

/// How a compiled entry point runs.
enum Exec {
    Vm {
        program: Arc<Program>,
        idle: Mutex<Vec<RegoVM>>,
    },
    /// A prepared engine, cloned for each evaluation (clones share the compiled policy).
    Interpreter { engine: Box<Engine> },
}

/// One entry point of a set of Rego modules, compiled: on regorus' register VM when its
/// compiler accepts the modules, else on the interpreter. Evaluations may run concurrently;
/// VMs are kept for reuse. Also used by the prompt guard's policy-engine detector.
pub struct CompiledEntry {
    rule: String,
    exec: Exec,
    limits: EvalLimits,
}

impl CompiledEntry {
    /// Compiles `rule` (a `data.…` path) of the engine's modules with the given default limits.
    pub fn compile(
        mut engine: Engine,
        rule: &str,
        limits: EvalLimits,
        evaluator: Evaluator,
    ) -> std::result::Result<CompiledEntry, String> {
        catch_unwind(AssertUnwindSafe(move || {
            engine.set_execution_timer_config(limits.timer());
            // The VM does not assert an assignment's value (`crate::assignments`): modules
            // with an assignment nothing reads afterwards run on the interpreter.
            let evaluator = if evaluator == Evaluator::Vm
                && !engine
                    .get_modules()
                    .iter()
                    .all(|m| crate::assignments::assignments_checked(m))
            {
                tracing::debug!(rule, "entry point runs on the interpreter (unread assignment)");
                Evaluator::Interpreter
            } else {
                evaluator
            };
            let compiled = engine
                .compile_with_entrypoint(&rule.into())
                .map_err(|e| engine_message(&e))?;
            let exec = match evaluator {
                Evaluator::Vm => match Compiler::compile_from_policy(&compiled, &[rule]) {
                    Ok(program) => Exec::Vm {
                        program,
                        idle: Mutex::new(Vec::new()),
                    },
                    Err(e) => {
                        tracing::debug!(error = %engine_message(&e), rule, "entry point runs on the interpreter");
                        Exec::Interpreter {
                            engine: Box::new(engine),
                        }
                    }
                },
                Evaluator::Interpreter => Exec::Interpreter {
                    engine: Box::new(engine),
                },
            };
            Ok(CompiledEntry {
                rule: rule.to_owned(),
                exec,
                limits,
            })
        }))
        .unwrap_or_else(|_| Err("the policy engine failed on this module".to_owned()))
    }

    /// True when the entry point runs on the VM.
    pub fn uses_vm(&self) -> bool {
        matches!(self.exec, Exec::Vm { .. })
    }

    /// The limits given at compilation.
    pub fn limits(&self) -> EvalLimits {
        self.limits
    }

    /// Evaluates the entry point against an input document within the given limits (the
    /// interpreter only knows the time). A panic of the engine is an error, not a crash.
    pub fn evaluate(
        &self,
        input: &Value,
        limits: EvalLimits,
    ) -> std::result::Result<Value, String> {
        catch_unwind(AssertUnwindSafe(|| self.run(input, limits)))
            .unwrap_or_else(|_| Err("the policy engine panicked".to_owned()))
    }

    fn run(&self, input: &Value, limits: EvalLimits) -> std::result::Result<Value, String> {
        match &self.exec {
            Exec::Vm { program, idle } => {
                let pooled = idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
                let mut vm = match pooled {
                    Some(vm) => vm,
                    None => {
                        let mut vm = RegoVM::new();
                        vm.load_program(program.clone());
                        vm
                    }
                };
                vm.set_max_instructions(limits.max_instructions);
                vm.set_execution_timer_config(Some(limits.timer()));
                vm.set_input(input.clone());
                let result = vm.execute().map_err(|e| e.to_string());
                if result.is_ok() {
                    vm.set_input(Value::Null);
                    let mut idle = idle.lock().unwrap_or_else(|p| p.into_inner());
                    if idle.len() < IDLE_VMS {
                        idle.push(vm);
                    }
                }
                result
            }
            Exec::Interpreter { engine } => {
                let mut engine = Engine::clone(engine);
                if limits != self.limits {
                    engine.set_execution_timer_config(limits.timer());
                }
                engine.set_input(input.clone());
                engine
                    .eval_rule(self.rule.clone())
                    .map_err(|e| engine_message(&e))
            }
        }
    }
}

/// A validated and compiled policy module.
pub struct CompiledModule {
    info: ModuleInfo,
    entry: CompiledEntry,
}

impl std::fmt::Debug for CompiledModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledModule")
            .field("package", &self.info.package)
            .field("vm", &self.uses_vm())
            .finish()
    }
}

/// Which evaluator to prefer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Evaluator {
    /// The register VM, falling back to the interpreter when the VM compiler refuses.
    #[default]
    Vm,
    /// The tree-walking interpreter only.
    Interpreter,
}

impl CompiledModule {
    /// Validates and compiles a module. The error is the engine's message, prefixed with the
    /// position (`policy.rego:line:col: …`) when there is one.
    pub fn compile(
        rego: &str,
        limits: EvalLimits,
        evaluator: Evaluator,
    ) -> std::result::Result<CompiledModule, String> {
        precheck(rego)?;
        catch_unwind(AssertUnwindSafe(|| {
            Self::compile_checked(rego, limits, evaluator)
        }))
        .unwrap_or_else(|_| Err("the policy engine failed on this module".to_owned()))
    }

    fn compile_checked(
        rego: &str,
        limits: EvalLimits,
        evaluator: Evaluator,
    ) -> std::result::Result<CompiledModule, String> {
        let mut engine = Engine::new();
        engine
            .add_policy(SOURCE_NAME.to_owned(), rego.to_owned())
            .map_err(|e| engine_message(&e))?;
        let info = {
            let modules = engine.get_modules();
            let module = modules
                .first()
                .ok_or_else(|| "the source declares no module".to_owned())?;
            analyze(module)?
        };
        engine
            .add_policy("steward-eval.rego".to_owned(), decision_module(&info))
            .map_err(|e| engine_message(&e))?;
        let entry = CompiledEntry::compile(engine, DECISION_RULE, limits, evaluator)?;
        Ok(CompiledModule { info, entry })
    }

    /// True when the module runs on the VM.
    pub fn uses_vm(&self) -> bool {
        self.entry.uses_vm()
    }

    /// True when the module may be evaluated inline (on an async worker) with the small
    /// `EvalLimits::INLINE` budget: it runs on the VM, whose instruction budget bounds loops,
    /// and it has no step whose cost the budget does not bound (arithmetic on unbounded
    /// integers, built-ins outside a short list of linear ones).
    pub fn inline_safe(&self) -> bool {
        self.uses_vm() && self.info.cheap
    }

    /// What the analysis learned about the module.
    pub(crate) fn info(&self) -> &ModuleInfo {
        &self.info
    }

    /// The declared package, e.g. `steward.policies.gdpr`.
    pub fn package(&self) -> String {
        self.info.package.join(".")
    }

    /// Evaluates the module against an input document within its limits.
    pub fn evaluate(&self, input: &Value) -> std::result::Result<ModuleResult, String> {
        self.evaluate_with(input, self.entry.limits())
    }

    /// Evaluates the module within the given limits (the interpreter only knows the time).
    pub fn evaluate_with(
        &self,
        input: &Value,
        limits: EvalLimits,
    ) -> std::result::Result<ModuleResult, String> {
        Ok(decode(&self.entry.evaluate(input, limits)?))
    }
}

/// The first element of a generated entry point's `[x | x := …]` collection `name`, if the
/// document was defined (shared with the guard's policy-engine detector).
pub fn defined(decision: &Value, name: &str) -> Option<Value> {
    match &decision[name] {
        Value::Array(items) => items.iter().next().cloned(),
        _ => None,
    }
}

fn message(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string(),
        other => other
            .to_json_str()
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default(),
    }
}

pub const SEVERITIES: [&str; 4] = ["low", "medium", "high", "critical"];

/// Reads the four documents out of the `decision` object.
pub(crate) fn decode(decision: &Value) -> ModuleResult {
    let allow = matches!(defined(decision, "allow"), Some(Value::Bool(true)));
    let require_approval = matches!(
        defined(decision, "require_approval"),
        Some(Value::Bool(true))
    );
    let mut deny_flag = false;
    let mut deny: Vec<String> = match defined(decision, "deny") {
        Some(Value::Set(items)) => items.iter().map(message).collect(),
        Some(Value::Array(items)) => items.iter().map(message).collect(),
        Some(Value::Object(fields)) => fields.iter().map(|(_, v)| message(v)).collect(),
        Some(Value::String(s)) if !s.is_empty() => vec![s.to_string()],
        Some(Value::Bool(true)) => {
            deny_flag = true;
            Vec::new()
        }
        _ => Vec::new(),
    };
    deny.sort();
    deny.dedup();
    let severity = match defined(decision, "severity") {
        Some(Value::String(s)) => {
            let s = s.to_lowercase();
            SEVERITIES.contains(&s.as_str()).then_some(s)
        }
        _ => None,
    };
    ModuleResult {
        allow,
        deny,
        deny_flag,
        require_approval,
        severity,
    }
}

/// Validates a module as `POST`/`PUT /policies` must (contract 13.2): 422 `invalid_rego` on
/// `rego` with the engine's message when it does not compile, declares a package other than
/// `steward.policies.<name>`, recurses, calls an unknown function or is too large.
pub fn validate_module(rego: &str) -> Result<()> {
    CompiledModule::compile(rego, EvalLimits::default(), Evaluator::Vm)
        .map(|_| ())
        .map_err(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::templates::{templates, GUARD_TEMPLATE};

    fn input(json: serde_json::Value) -> Value {
        Value::from(json)
    }

    fn compile(src: &str, evaluator: Evaluator) -> CompiledModule {
        match CompiledModule::compile(src, EvalLimits::default(), evaluator) {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        }
    }

    fn refused(src: &str) -> String {
        match validate_module(src) {
            Ok(()) => panic!("accepted:\n{src}"),
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::InvalidRego);
                assert_eq!(e.errors.len(), 1);
                assert_eq!(e.errors[0].field, "rego");
                e.detail
            }
        }
    }

    /// An assignment whose value is undefined or an error makes its body undefined, as in
    /// OPA, whether the variable is used again or not (probe H-1: the engine took the
    /// statement as true when the variable was not used again).
    #[test]
    fn an_undefined_assignment_makes_its_body_undefined() {
        let bodies = [
            "ticket := input.context.ticket_id",
            "x := input.nope.deeper",
            "x := 1 / 0",
            "x := 1 % 0",
            "x := to_number(\"abc\")",
            "x := [1][5]",
            "n := count(input.context.items)",
            "x := input.context.ticket_id; true",
        ];
        for evaluator in [Evaluator::Interpreter, Evaluator::Vm] {
            for body in bodies {
                let src = format!(
                    "package steward.policies.t\nimport rego.v1\ndefault allow := false\nallow if {{\n\t{body}\n}}\n"
                );
                let m = compile(&src, evaluator);
                let r = m.evaluate(&input(serde_json::json!({"action": "a", "context": {}})));
                // Undefined (not allowed), or a built-in error (the module fails: a deny).
                assert!(
                    matches!(&r, Ok(r) if !r.allow) || r.is_err(),
                    "{evaluator:?}: `{body}` gave {r:?}"
                );
                let deny = format!(
                    "package steward.policies.t\nimport rego.v1\ndefault allow := true\ndeny contains \"spurious\" if {{\n\t{body}\n}}\n"
                );
                let m = compile(&deny, evaluator);
                let r = m.evaluate(&input(serde_json::json!({"action": "a", "context": {}})));
                // No message; a built-in error fails the module (a deny, never an allow).
                assert!(
                    matches!(&r, Ok(r) if r.deny.is_empty() && r.allow) || r.is_err(),
                    "{evaluator:?}: deny `{body}` gave {r:?}"
                );
            }
            // With the member present, the rule holds.
            let m = compile(
                "package steward.policies.t\nimport rego.v1\ndefault allow := false\nallow if {\n\tticket := input.context.ticket_id\n}\n",
                evaluator,
            );
            let r = m.evaluate(&input(serde_json::json!({"context": {"ticket_id": "T-1"}})));
            assert!(matches!(&r, Ok(r) if r.allow), "{evaluator:?}: {r:?}");
        }
    }

    #[test]
    fn templates_run_on_the_vm() {
        for t in templates() {
            if t.id == GUARD_TEMPLATE {
                continue;
            }
            let m = compile(t.rego, Evaluator::Vm);
            assert!(m.uses_vm(), "{} fell back to the interpreter", t.id);
            assert!(m.inline_safe(), "{} is not inline-safe", t.id);
            assert_eq!(m.package(), format!("steward.policies.{}", t.id));
        }
    }

    #[test]
    fn syntax_errors_carry_the_position() {
        let d = refused("package steward.policies.broken\n\nallow if {{{");
        assert!(d.starts_with("policy.rego:3:"), "{d}");
        let d =
            refused("package steward.policies.x\nimport rego.v1\nallow if {\n  input.x ==\n}\n");
        assert!(d.starts_with("policy.rego:5:1:"), "{d}");
        // Rego v0 bodies are refused (the templates and OPA 1.x use v1).
        let d = refused("package steward.policies.x\nallow { true }\n");
        assert!(d.contains("`if` keyword is required"), "{d}");
        // Unsafe variables are a compile error.
        let d = refused("package steward.policies.x\nimport rego.v1\nallow if { y == 1 }\n");
        assert!(
            d.contains("policy.rego:3:12") && d.contains("unsafe"),
            "{d}"
        );
    }

    #[test]
    fn package_and_size_rules() {
        assert!(
            refused("package other.place\n\nimport rego.v1\n\ndefault allow := true\n")
                .contains("steward.policies")
        );
        let two = "package steward.policies.a\npackage steward.policies.b\nallow := true\n";
        assert!(refused(two).contains("policy.rego:2:1"));
        let big = format!(
            "package steward.policies.big\nimport rego.v1\nallow := true\n{}",
            "# padding padding padding padding padding padding padding padding\n".repeat(1100)
        );
        assert!(refused(&big).contains("at most 65536 bytes"));
        let deep = format!(
            "package steward.policies.deep\nimport rego.v1\nx := {}1{}\nallow := true\n",
            "[".repeat(9),
            "]".repeat(9)
        );
        assert!(refused(&deep).contains("nested more than 8"));
        // Brackets inside strings, raw strings and comments do not count.
        let quoted = format!(
            "package steward.policies.q\nimport rego.v1\n# {}\nx := \"{}\\\"\"\ny := `{}`\nallow := true\n",
            "[".repeat(20),
            "{".repeat(20),
            "[".repeat(20)
        );
        assert!(validate_module(&quoted).is_ok());
    }

    #[test]
    fn deep_nesting_is_refused_quickly() {
        let src = format!(
            "package steward.policies.deep\nimport rego.v1\nallow if {{ x := {}1{} }}\n",
            "[".repeat(40),
            "]".repeat(40)
        );
        let started = std::time::Instant::now();
        assert!(refused(&src).contains("nested"));
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn recursion_and_unknown_functions_are_invalid_rego() {
        let d = refused(
            "package steward.policies.r\nimport rego.v1\nf(n) := f(n - 1) if n > 0\nallow if f(3)\n",
        );
        assert!(d.contains("recursion"), "{d}");
        let d = refused("package steward.policies.r\nimport rego.v1\nallow if b\nb if allow\n");
        assert!(d.contains("recursion"), "{d}");
        let d = refused("package steward.policies.u\nimport rego.v1\nallow if foo(1)\n");
        assert!(d.contains("unknown function `foo`"), "{d}");
    }

    #[test]
    fn decision_documents() {
        let src = "package steward.policies.t\nimport rego.v1\n\
                   deny contains \"b\" if input.action == \"x\"\n\
                   deny contains \"a\" if input.action == \"x\"\n\
                   default allow := false\nallow if count(deny) == 0\n\
                   require_approval if input.action == \"y\"\nseverity := \"CRITICAL\"\n";
        for evaluator in [Evaluator::Interpreter, Evaluator::Vm] {
            let m = compile(src, evaluator);
            let r = m.evaluate(&input(serde_json::json!({"action": "x"})));
            assert_eq!(
                r,
                Ok(ModuleResult {
                    allow: false,
                    deny: vec!["a".into(), "b".into()],
                    deny_flag: false,
                    require_approval: false,
                    severity: Some("critical".into()),
                })
            );
            let r = m.evaluate(&input(serde_json::json!({"action": "y"})));
            assert_eq!(
                r.map(|r| (r.allow, r.require_approval, r.hard_denies())),
                Ok((true, true, false))
            );
        }
    }

    #[test]
    fn undefined_documents_and_odd_types() {
        let none = compile(
            "package steward.policies.n\nimport rego.v1\nnote := 1\n",
            Evaluator::Vm,
        );
        let r = none.evaluate(&input(serde_json::json!({})));
        assert_eq!(r, Ok(ModuleResult::default()));
        assert!(r.map(|r| r.hard_denies()).unwrap_or(false));
        let odd = compile(
            "package steward.policies.o\nimport rego.v1\nallow := \"yes\"\ndeny := true\nseverity := \"urgent\"\n",
            Evaluator::Vm,
        );
        let r = odd.evaluate(&input(serde_json::json!({})));
        assert_eq!(
            r.map(|r| (r.allow, r.deny_flag, r.severity)),
            Ok((false, true, None))
        );
        let arr = compile(
            "package steward.policies.a\nimport rego.v1\ndeny := [\"z\", 3]\nallow := true\n",
            Evaluator::Vm,
        );
        assert_eq!(
            arr.evaluate(&input(serde_json::json!({}))).map(|r| r.deny),
            Ok(vec!["3".to_owned(), "z".to_owned()])
        );
    }

    #[test]
    fn with_falls_back_to_the_interpreter() {
        let m = compile(
            "package steward.policies.w\nimport rego.v1\nf := input.action\nallow if { f == \"b\" with input.action as \"b\" }\n",
            Evaluator::Vm,
        );
        assert!(!m.uses_vm());
        assert_eq!(
            m.evaluate(&input(serde_json::json!({"action": "a"})))
                .map(|r| r.allow),
            Ok(true)
        );
    }

    #[test]
    fn same_package_twice_is_fine() {
        let a = compile(
            "package steward.policies.same\nimport rego.v1\nallow := true\n",
            Evaluator::Vm,
        );
        let b = compile(
            "package steward.policies.same\nimport rego.v1\nallow := false\n",
            Evaluator::Vm,
        );
        let i = input(serde_json::json!({}));
        assert_eq!(a.evaluate(&i).map(|r| r.allow), Ok(true));
        assert_eq!(b.evaluate(&i).map(|r| r.allow), Ok(false));
    }

    #[test]
    fn runaway_evaluation_is_stopped() {
        let src = "package steward.policies.slow\nimport rego.v1\n\
                   allow if count([1 | some a in numbers.range(1, 1000); some b in numbers.range(1, 1000); some c in numbers.range(1, 1000)]) > 0\n";
        let limits = EvalLimits {
            timeout: Duration::from_millis(200),
            max_instructions: usize::MAX,
        };
        for evaluator in [Evaluator::Interpreter, Evaluator::Vm] {
            let m = match CompiledModule::compile(src, limits, evaluator) {
                Ok(m) => m,
                Err(e) => panic!("{e}"),
            };
            let started = std::time::Instant::now();
            let r = m.evaluate(&input(serde_json::json!({})));
            assert!(r.is_err(), "{evaluator:?}: {r:?}");
            assert!(started.elapsed() < Duration::from_secs(2), "{evaluator:?}");
        }
        // The instruction budget stops the VM too.
        let limits = EvalLimits {
            timeout: Duration::from_secs(30),
            max_instructions: 100_000,
        };
        let m = CompiledModule::compile(src, limits, Evaluator::Vm);
        assert!(m
            .map(|m| m.evaluate(&input(serde_json::json!({}))).is_err())
            .unwrap_or(false));
    }

    #[test]
    fn inline_budget_is_small() {
        let m = compile(
            "package steward.policies.big\nimport rego.v1\nallow if count([x | some x in input.items; x >= 0]) > 0\n",
            Evaluator::Vm,
        );
        assert!(m.inline_safe());
        let small = input(serde_json::json!({"items": [1, 2, 3]}));
        assert_eq!(
            m.evaluate_with(&small, EvalLimits::INLINE).map(|r| r.allow),
            Ok(true)
        );
        // The largest list a check's context may carry (10,000 values) is over the budget: by
        // its instruction count alone, however fast the machine.
        let items: Vec<u32> = (0..9_997).collect();
        let big = input(serde_json::json!({ "items": items }));
        assert!(m.evaluate_with(&big, EvalLimits::INLINE).is_err());
        let slow_clock = EvalLimits {
            timeout: Duration::from_secs(60),
            ..EvalLimits::INLINE
        };
        assert!(m.evaluate_with(&big, slow_clock).is_err());
        assert_eq!(m.evaluate(&big).map(|r| r.allow), Ok(true));
    }

    #[test]
    fn engine_messages_are_compact() {
        let e = "\n--> policy.rego:3:12\n  |\n3 | allow if { y == 1 }\n  |            ^\nerror: use of undefined variable `y` is unsafe";
        assert_eq!(
            engine_message(&e),
            "policy.rego:3:12: use of undefined variable `y` is unsafe"
        );
        assert_eq!(engine_message(&"plain failure"), "plain failure");
    }
}
