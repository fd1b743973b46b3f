#![allow(clippy::unwrap_used)]
use regorus::languages::rego::compiler::Compiler;
use regorus::rvm::RegoVM;
use regorus::{Engine, Value};
use std::time::Instant;

fn try_src(name: &str, src: &str) {
    let mut e = Engine::new();
    match e.add_policy("policy.rego".into(), src.into()) {
        Err(err) => {
            println!("[{name}] parse error: {err:#}");
            return;
        }
        Ok(p) => println!("[{name}] package {p}"),
    }
    println!(
        "[{name}] comps {:?}",
        e.get_policy_package_components()
            .map(|c| c.into_iter().map(|x| x.components).collect::<Vec<_>>())
    );
    let t = Instant::now();
    match e.compile_with_entrypoint(&"data.steward.policies.x.allow".into()) {
        Err(err) => println!("[{name}] compile error: {err:#}"),
        Ok(cp) => {
            println!("[{name}] compiled in {:?}", t.elapsed());
            match Compiler::compile_from_policy(&cp, &["data.steward.policies.x.allow"]) {
                Err(err) => println!("[{name}] rvm compile error: {err}"),
                Ok(prog) => {
                    let mut vm = RegoVM::new();
                    vm.load_program(prog);
                    vm.set_max_instructions(10_000_000);
                    vm.set_execution_timer_config(Some(
                        regorus::utils::limits::ExecutionTimerConfig {
                            limit: std::time::Duration::from_millis(1000),
                            check_interval: std::num::NonZeroU32::new(100).unwrap(),
                        },
                    ));
                    vm.set_input(Value::from_json_str(r#"{"action":"a","context":{}}"#).unwrap());
                    let t = Instant::now();
                    let r = vm.execute();
                    println!(
                        "[{name}] rvm result {:?} in {:?}",
                        r.map(|v| v.to_json_str().unwrap()),
                        t.elapsed()
                    );
                }
            }
            let mut e2 = e.clone();
            e2.set_execution_timer_config(regorus::utils::limits::ExecutionTimerConfig {
                limit: std::time::Duration::from_millis(1000),
                check_interval: std::num::NonZeroU32::new(100).unwrap(),
            });
            e2.set_input(Value::from_json_str(r#"{"action":"a","context":{}}"#).unwrap());
            let t = Instant::now();
            let r = e2.eval_rule("data.steward.policies.x.allow".into());
            println!(
                "[{name}] interp result {:?} in {:?}",
                r.map(|v| v.to_json_str().unwrap()),
                t.elapsed()
            );
        }
    }
}

#[test]
fn scratch() {
    for n in [100usize, 300, 1000, 3000, 10000] {
        let h = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let nest = format!(
                    "package steward.policies.x\nimport rego.v1\nallow if {{ {}1{} == 1 }}\n",
                    "(".repeat(n),
                    ")".repeat(n)
                );
                let mut e = Engine::new();
                let r = e.add_policy("p.rego".into(), nest).map(|_| ());
                println!("nest {n}: parse {:?}", r.is_ok());
                let nest = format!(
                    "package steward.policies.x\nimport rego.v1\nallow if {{ x := {}1{} }}\n",
                    "[".repeat(n),
                    "]".repeat(n)
                );
                let mut e = Engine::new();
                let r = e.add_policy("p.rego".into(), nest).map(|_| ());
                println!("nest {n}: parse arr {:?}", r.is_ok());
                let nest = format!(
                    "package steward.policies.x\nimport rego.v1\nallow if {{ x := 1{} }}\n",
                    " + 1".repeat(n)
                );
                let mut e = Engine::new();
                let r = e.add_policy("p.rego".into(), nest).map(|_| ());
                println!("nest {n}: parse chain {:?}", r.is_ok());
                let _ = e.compile_with_entrypoint(&"data.steward.policies.x.allow".into());
                println!("nest {n}: compiled");
            })
            .unwrap();
        let _ = h.join();
    }
}
