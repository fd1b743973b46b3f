#![allow(clippy::unwrap_used)]
use regorus::{Engine, Value};
use std::time::Instant;

const HIPAA: &str = r#"package steward.policies.hipaa

import rego.v1

phi_actions := {"read_phi", "write_phi", "export_phi"}

permitted_purposes := {"treatment", "payment", "operations"}

phi if input.context.phi == true

phi if input.action in phi_actions

permitted if input.context.purpose in permitted_purposes

permitted if input.context.authorization == true

deny contains "HIPAA: PHI may be used only" if {
	phi
	not permitted
}

deny contains "HIPAA: PHI exports must be encrypted" if {
	input.action == "export_phi"
	not input.context.encrypted == true
}

notin if not input.context.purpose in permitted_purposes
notidx if not permitted_purposes[input.context.purpose]
posidx if permitted_purposes[input.context.purpose]

default allow := false

allow if count(deny) == 0

severity := "high"
"#;

const WRAP: &str = r#"package steward_internal
import rego.v1
decision := {
  "allow": [v | v := data.steward.policies.hipaa.allow],
  "deny": [v | v := data.steward.policies.hipaa.deny],
  "require_approval": [v | v := data.steward.policies.hipaa.require_approval],
  "severity": [v | v := data.steward.policies.hipaa.severity],
}
"#;

#[test]
fn scratch() {
    let mut e = Engine::new();
    e.add_policy("hipaa.rego".into(), HIPAA.into()).unwrap();
    e.add_policy("wrap.rego".into(), WRAP.into()).unwrap();
    let inputs = [
        r#"{"action":"read_phi","resource":"x","context":{}}"#,
        r#"{"action":"read_phi","resource":"x","context":{"purpose":"treatment"}}"#,
        r#"{"action":"read_data","resource":"x","context":{"purpose":"marketing"}}"#,
    ];
    for i in inputs {
        e.set_input(Value::from_json_str(i).unwrap());
        for r in ["decision"] {
            let v = e.eval_rule(format!("data.steward_internal.{r}")).unwrap();
            println!("{i} {r} = {}", v.to_json_str().unwrap());
        }
        for r in ["notin", "notidx", "posidx", "permitted"] {
            let v = e
                .eval_rule(format!("data.steward.policies.hipaa.{r}"))
                .unwrap();
            println!("{i} {r} = {}", v.to_json_str().unwrap());
        }
    }
    let input = Value::from_json_str(inputs[1]).unwrap();
    // approach 1: compiled policy
    let cp = e
        .compile_with_entrypoint(&"data.steward_internal.decision".into())
        .unwrap();
    let n = 20000;
    let t = Instant::now();
    for _ in 0..n {
        let v = cp.eval_with_input(input.clone()).unwrap();
        assert!(v != Value::Undefined);
    }
    println!("compiled: {:?}/eval", t.elapsed() / n);
    // approach 2: cloned prepared engine
    let t = Instant::now();
    for _ in 0..n {
        let mut c = e.clone();
        c.set_input(input.clone());
        let v = c
            .eval_rule("data.steward_internal.decision".into())
            .unwrap();
        assert!(v != Value::Undefined);
    }
    println!("clone+wrapper: {:?}/eval", t.elapsed() / n);
    let t = Instant::now();
    for _ in 0..0 {
        let mut c = e.clone();
        c.set_input(input.clone());
        for r in ["allow", "deny", "require_approval", "severity"] {
            let _ = c
                .eval_rule(format!("data.steward.policies.hipaa.{r}"))
                .unwrap();
        }
    }
    println!("clone+4 rules: {:?}/eval", t.elapsed() / n);
    let t = Instant::now();
    for _ in 0..n {
        e.set_input(input.clone());
        let v = e
            .eval_rule("data.steward_internal.decision".into())
            .unwrap();
        assert!(v != Value::Undefined);
    }
    println!("reuse engine: {:?}/eval", t.elapsed() / n);
    {
        use regorus::languages::rego::compiler::Compiler;
        use regorus::rvm::RegoVM;
        let prog = Compiler::compile_from_policy(&cp, &["data.steward_internal.decision"]).unwrap();
        let mut vm = RegoVM::new();
        vm.load_program(prog.clone());
        vm.set_input(input.clone());
        println!("vm: {}", vm.execute().unwrap().to_json_str().unwrap());
        let t = Instant::now();
        for _ in 0..n {
            vm.set_input(input.clone());
            let v = vm.execute().unwrap();
            assert!(v != Value::Undefined);
        }
        println!("rvm reuse: {:?}/eval", t.elapsed() / n);
        let t = Instant::now();
        for _ in 0..n {
            let mut vm = RegoVM::new();
            vm.load_program(prog.clone());
            vm.set_input(input.clone());
            let v = vm.execute().unwrap();
            assert!(v != Value::Undefined);
        }
        println!("rvm new: {:?}/eval", t.elapsed() / n);
        fn is_send<T: Send>() {}
        is_send::<RegoVM>();
    }
    fn is_send<T: Send>() {}
    fn is_sync<T: Sync>() {}
    is_send::<Engine>();
    is_send::<regorus::CompiledPolicy>();
    is_sync::<regorus::CompiledPolicy>();
}
