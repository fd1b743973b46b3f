//! Single sign-on against a real OpenID provider (`oidc-provider` 9.13.3 from npm, started by
//! `.ci/peers/oidc.sh` from `fixtures/oidc-provider/`). The test is the browser: reqwest with a
//! cookie store and no automatic redirects walks login → provider login form → callback →
//! exchange → `GET /auth/me`.
//!
//! Needs `TEST_OIDC_ISSUER` (and `TEST_OIDC_CLIENT_ID`, `TEST_OIDC_CLIENT_SECRET`); skipped
//! otherwise. With `TEST_DATABASE_URL` and `TEST_REDIS_URL` as well, one flow is started on
//! one server instance and finished on another.

mod common;

use std::time::Duration;

use common::TestApp;
use reqwest::header::LOCATION;
use reqwest::{StatusCode, Url};
use serde_json::{json, Value};
use steward_server::AppState;

struct Provider {
    issuer: String,
    client_id: String,
    client_secret: String,
}

fn provider() -> Option<Provider> {
    let issuer = std::env::var("TEST_OIDC_ISSUER").ok()?;
    Some(Provider {
        issuer,
        client_id: std::env::var("TEST_OIDC_CLIENT_ID").unwrap_or_else(|_| "steward".into()),
        client_secret: std::env::var("TEST_OIDC_CLIENT_SECRET")
            .unwrap_or_else(|_| "steward-oidc-secret".into()),
    })
}

const MAPPING: &str = r#"{"steward-analysts": "security_analyst", "steward-developers": "developer", "steward-root": "super_admin"}"#;

/// A server instance on a real loopback port.
struct Server {
    base: String,
    app: TestApp,
}

/// Reserves a port, then starts the application with `SSO_CALLBACK_URL` on it.
async fn serve(
    p: &Provider,
    db: Option<steward_store::testing::TestDb>,
    shared: Option<steward_store::DbTarget>,
    extra: &[(&str, &str)],
) -> Server {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let base = format!("http://127.0.0.1:{port}");
    let providers = json!([{
        "id": "oidc", "name": "Test OpenID provider", "issuer": p.issuer,
        "client_id": p.client_id, "client_secret": p.client_secret,
        "scopes": ["openid", "email", "profile", "groups"],
    }])
    .to_string();
    let callback = format!("{base}/api/v1/auth/sso/callback");
    let mut vars: Vec<(&str, &str)> = vec![
        ("SSO_PROVIDERS_JSON", &providers),
        ("SSO_CALLBACK_URL", &callback),
        ("SSO_ROLE_MAPPING_JSON", MAPPING),
    ];
    vars.extend_from_slice(extra);
    let app = match (db, shared) {
        (Some(db), _) => TestApp::on(db, &vars).await,
        (None, Some(shared)) => {
            // A second instance over the same database (and cache, through `REDIS_URL`).
            let mut settings = common::test_settings(&vars);
            settings.database = shared;
            let state = AppState::start(settings)
                .await
                .unwrap_or_else(|e| panic!("start: {e:#}"));
            TestApp::with_state(state)
        }
        (None, None) => panic!("a database is needed"),
    };
    actix_web::rt::spawn(app.state.sso.clone().discover());
    let state = app.state.clone();
    let server = actix_web::HttpServer::new(move || steward_server::build_app(state.clone()))
        .workers(1)
        .listen(listener)
        .unwrap_or_else(|e| panic!("listen: {e}"))
        .run();
    actix_web::rt::spawn(server);
    let browser = browser();
    // Discovery runs in the background (retrying after 1, 2, 4 s): wait until the provider
    // is listed.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if let Ok(r) = browser
            .get(format!("{base}/api/v1/auth/sso/providers"))
            .send()
            .await
        {
            let body: Value = r.json().await.unwrap_or_default();
            if body["providers"]
                .as_array()
                .is_some_and(|a| a.iter().any(|p| p["id"] == "oidc"))
            {
                return Server { base, app };
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the provider at {} was never discovered", p.issuer);
}

/// A browser: cookies kept, redirects not followed.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn location(base: &Url, r: &reqwest::Response) -> Url {
    let raw = r
        .headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("{} without Location from {}", r.status(), r.url()));
    base.join(raw).unwrap_or_else(|e| panic!("{raw}: {e}"))
}

/// The first form of an HTML page: its action and its fields with their values.
fn form(html: &str) -> Option<(String, Vec<(String, String)>)> {
    let form_re = regex::Regex::new(r#"(?is)<form[^>]*action="([^"]*)"[^>]*>(.*?)</form>"#).ok()?;
    let input_re = regex::Regex::new(r#"(?is)<input([^>]*)>"#).ok()?;
    let attr = |tag: &str, name: &str| {
        regex::Regex::new(&format!(r#"(?i)\b{name}="([^"]*)""#))
            .ok()?
            .captures(tag)
            .map(|c| c[1].to_owned())
    };
    let caps = form_re.captures(html)?;
    let fields = input_re
        .captures_iter(&caps[2])
        .filter_map(|c| {
            let tag = c[1].to_owned();
            Some((attr(&tag, "name")?, attr(&tag, "value").unwrap_or_default()))
        })
        .collect();
    Some((caps[1].replace("&amp;", "&"), fields))
}

/// What the browser ends with after the provider sent it back to Steward's callback.
struct Landing {
    /// Where Steward's callback redirected the browser.
    location: Url,
}

impl Landing {
    fn param(&self, name: &str) -> Option<String> {
        self.location
            .query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }
}

/// Starts on `start` (a Steward server), signs in at the provider as `login`, and lands on
/// `finish`'s callback (another instance may finish the flow). `pause` waits before the
/// callback is called.
async fn sign_in(start: &Server, finish: &Server, login: &str, pause: Duration) -> Landing {
    let browser = browser();
    let r = browser
        .get(format!("{}/api/v1/auth/sso/login", start.base))
        .query(&[("provider", "oidc"), ("redirect", "/agents?tab=shadow")])
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        r.status(),
        StatusCode::FOUND,
        "login starts with a redirect"
    );
    let start_base = Url::parse(&start.base).unwrap_or_else(|e| panic!("{e}"));
    let mut url = location(&start_base, &r);
    let auth: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    let q = |k: &str| auth.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(
        q("code_challenge_method").as_deref(),
        Some("S256"),
        "PKCE S256"
    );
    assert!(q("nonce").is_some_and(|n| n.len() >= 16), "a nonce is sent");
    assert!(q("state").is_some_and(|s| s.len() >= 16), "a state is sent");
    // The provider's pages, until it redirects to the callback.
    let mut submitted = false;
    for _ in 0..20 {
        let r = browser
            .get(url.clone())
            .send()
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        let mut r = r;
        if r.status().is_success() {
            let page_url = r.url().clone();
            let html = r.text().await.unwrap_or_default();
            let (action, mut fields) =
                form(&html).unwrap_or_else(|| panic!("no form at {page_url}: {html:.400}"));
            for (name, value) in fields.iter_mut() {
                match name.as_str() {
                    "login" => *value = login.to_owned(),
                    "password" => *value = "any-password".to_owned(),
                    _ => {}
                }
            }
            submitted = true;
            let target = page_url.join(&action).unwrap_or_else(|e| panic!("{e}"));
            r = browser
                .post(target)
                .form(&fields)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        if !r.status().is_redirection() {
            let (status, at) = (r.status(), r.url().clone());
            panic!(
                "the provider answered {status} at {at}: {}",
                r.text().await.unwrap_or_default()
            );
        }
        let next = location(r.url(), &r);
        if next.path() == "/api/v1/auth/sso/callback" {
            assert!(submitted, "the provider showed its login form");
            tokio::time::sleep(pause).await;
            // The browser arrives at the callback (of whichever instance `finish` is).
            let mut at = Url::parse(&finish.base).unwrap_or_else(|e| panic!("{e}"));
            at.set_path(next.path());
            at.set_query(next.query());
            let r = browser
                .get(at.clone())
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(r.status(), StatusCode::FOUND, "the callback redirects");
            return Landing {
                location: location(&at, &r),
            };
        }
        url = next;
    }
    panic!("the provider never redirected to the callback");
}

async fn exchange(server: &Server, code: &str) -> reqwest::Response {
    browser()
        .post(format!("{}/api/v1/auth/sso/exchange", server.base))
        .json(&json!({"code": code}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn me(server: &Server, token: &str) -> Value {
    let r = browser()
        .get(format!("{}/api/v1/auth/me", server.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.status(), StatusCode::OK);
    r.json().await.unwrap_or_default()
}

/// Signs in and exchanges the code: the login response.
async fn session(server: &Server, login: &str) -> Value {
    let landing = sign_in(server, server, login, Duration::ZERO).await;
    assert_eq!(landing.param("sso_error"), None, "{}", landing.location);
    assert_eq!(
        landing.location.path(),
        "/agents",
        "the redirect path is kept"
    );
    assert_eq!(landing.param("tab").as_deref(), Some("shadow"));
    let code = landing
        .param("sso_code")
        .unwrap_or_else(|| panic!("no sso_code in {}", landing.location));
    let r = exchange(server, &code).await;
    assert_eq!(r.status(), StatusCode::OK);
    r.json().await.unwrap_or_default()
}

/// The super admin's login answer.
async fn super_login(server: &Server) -> Value {
    server
        .app
        .call(
            "POST",
            "/api/v1/auth/login",
            &common::Cred::None,
            Some(json!({"email": common::SUPER_EMAIL, "password": common::SUPER_PASSWORD})),
        )
        .await
        .json()
}

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

async fn sqlite() -> steward_store::testing::TestDb {
    steward_store::testing::TestDb::sqlite()
        .await
        .unwrap_or_else(|e| panic!("sqlite: {e}"))
}

#[actix_web::test]
async fn jit_user_mapped_role_group_change_and_single_use_code() {
    let Some(p) = provider() else {
        eprintln!("skipped: TEST_OIDC_ISSUER is not set (start .ci/peers/oidc.sh)");
        return;
    };
    let server = serve(&p, Some(sqlite().await), None, &[]).await;
    let name = unique("alice");

    // A new person: created just in time, role from the mapped group.
    let landing = sign_in(
        &server,
        &server,
        &format!("{name}+steward-analysts+unrelated"),
        Duration::ZERO,
    )
    .await;
    let code = landing
        .param("sso_code")
        .unwrap_or_else(|| panic!("no sso_code in {}", landing.location));
    let first = exchange(&server, &code).await;
    assert_eq!(first.status(), StatusCode::OK);
    let first: Value = first.json().await.unwrap_or_default();
    assert_eq!(first["user"]["role"], "security_analyst");
    let token = first["access_token"].as_str().unwrap_or_default();
    let profile = me(&server, token).await;
    assert_eq!(profile["role"], "security_analyst");
    assert_eq!(profile["auth_provider"], "oidc");
    assert_eq!(profile["external_subject"], name.as_str());
    assert_eq!(profile["email"], format!("{name}@example.test"));

    // The code is single use.
    let replay = exchange(&server, &code).await;
    assert_eq!(replay.status(), StatusCode::UNAUTHORIZED);
    let problem: Value = replay.json().await.unwrap_or_default();
    assert_eq!(problem["code"], "invalid_credentials");

    // The same person with another group: the same account, its role updated.
    let again = session(&server, &format!("{name}+steward-developers")).await;
    assert_eq!(again["user"]["id"], first["user"]["id"]);
    assert_eq!(again["user"]["role"], "developer");
    let token = again["access_token"].as_str().unwrap_or_default();
    assert_eq!(me(&server, token).await["role"], "developer");

    // A mapping to super_admin grants admin at most.
    let root = session(&server, &format!("{}+steward-root", unique("root"))).await;
    assert_eq!(root["user"]["role"], "admin");

    // No mapped group: a returning user keeps the role.
    let keep = session(&server, &name).await;
    assert_eq!(keep["user"]["role"], "developer");

    // The logins are audited.
    let super_login = super_login(&server).await;
    let key = super_login["api_key"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let audit = server
        .app
        .call(
            "GET",
            "/api/v1/audit?action=user.sso_login&limit=100",
            &common::Cred::Key(key),
            None,
        )
        .await
        .json();
    let mine = audit["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|e| e["user_id"] == first["user"]["id"])
                .count()
        })
        .unwrap_or(0);
    assert_eq!(mine, 3, "every SSO login of the person is audited: {audit}");
}

// A pre-provisioned account goes to whoever first shows its e-mail, so the provider must mark
// that e-mail verified; an e-mail marked not verified signs nobody in.
#[actix_web::test]
async fn a_preprovisioned_account_needs_a_verified_email() {
    let Some(p) = provider() else {
        eprintln!("skipped: TEST_OIDC_ISSUER is not set (start .ci/peers/oidc.sh)");
        return;
    };
    let server = serve(&p, Some(sqlite().await), None, &[]).await;
    let super_login = super_login(&server).await;
    let key = common::Cred::Jwt(
        super_login["access_token"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    );
    let name = unique("cfo");
    let created = server
        .app
        .call(
            "POST",
            "/api/v1/users",
            &key,
            Some(json!({"email": format!("{name}@example.test"), "role": "admin", "auth_provider": "oidc"})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let account = created.json()["id"].clone();

    // Without `email_verified`, and with it false: refused, the account left unclaimed.
    for (flag, reason) in [
        ("email-unverified", "email_conflict"),
        ("email-refuted", "provider_error"),
    ] {
        let landing = sign_in(&server, &server, &format!("{name}+{flag}"), Duration::ZERO).await;
        assert_eq!(landing.location.path(), "/login", "{flag}");
        assert_eq!(
            landing.param("sso_error").as_deref(),
            Some(reason),
            "{flag}"
        );
        assert_eq!(landing.param("sso_code"), None, "{flag}");
    }
    let user = server
        .app
        .call(
            "GET",
            &format!("/api/v1/users/{}", account.as_str().unwrap_or_default()),
            &key,
            None,
        )
        .await
        .json();
    assert_eq!(user["external_subject"], Value::Null, "{user}");

    // Verified: the person takes the pre-provisioned account (and its role).
    let signed_in = session(&server, &name).await;
    assert_eq!(signed_in["user"]["id"], account);
    assert_eq!(signed_in["user"]["role"], "admin");
}

#[actix_web::test]
async fn provisioning_off_refuses_unknown_people() {
    let Some(p) = provider() else {
        eprintln!("skipped: TEST_OIDC_ISSUER is not set (start .ci/peers/oidc.sh)");
        return;
    };
    let server = serve(
        &p,
        Some(sqlite().await),
        None,
        &[("SSO_AUTO_PROVISION", "false")],
    )
    .await;
    let landing = sign_in(
        &server,
        &server,
        &format!("{}+steward-analysts", unique("bob")),
        Duration::ZERO,
    )
    .await;
    assert_eq!(landing.location.path(), "/login");
    assert_eq!(
        landing.param("sso_error").as_deref(),
        Some("not_provisioned")
    );
    assert_eq!(landing.param("sso_code"), None);
}

#[actix_web::test]
async fn an_expired_state_is_refused() {
    let Some(p) = provider() else {
        eprintln!("skipped: TEST_OIDC_ISSUER is not set (start .ci/peers/oidc.sh)");
        return;
    };
    let server = serve(
        &p,
        Some(sqlite().await),
        None,
        &[("SSO_STATE_TTL_SECONDS", "1")],
    )
    .await;
    let landing = sign_in(
        &server,
        &server,
        &unique("carol"),
        Duration::from_millis(2500),
    )
    .await;
    assert_eq!(landing.location.path(), "/login");
    assert_eq!(landing.param("sso_error").as_deref(), Some("invalid_state"));
}

#[actix_web::test]
async fn a_flow_started_on_one_instance_finishes_on_another() {
    let Some(p) = provider() else {
        eprintln!("skipped: TEST_OIDC_ISSUER is not set (start .ci/peers/oidc.sh)");
        return;
    };
    let (Ok(redis), Some(db)) = (
        std::env::var("TEST_REDIS_URL"),
        steward_store::testing::TestDb::postgres().await,
    ) else {
        eprintln!("skipped: TEST_DATABASE_URL and TEST_REDIS_URL are needed for two instances");
        return;
    };
    let db = db.unwrap_or_else(|e| panic!("postgres: {e}"));
    let target = db.target.clone();
    let a = serve(&p, Some(db), None, &[("REDIS_URL", &redis)]).await;
    // Behind one load balancer every instance has the same public callback URL.
    let callback = format!("{}/api/v1/auth/sso/callback", a.base);
    let b = serve(
        &p,
        None,
        Some(target),
        &[("REDIS_URL", &redis), ("SSO_CALLBACK_URL", &callback)],
    )
    .await;
    let name = unique("dave");
    let landing = sign_in(
        &a,
        &b,
        &format!("{name}+steward-developers"),
        Duration::ZERO,
    )
    .await;
    let code = landing
        .param("sso_code")
        .unwrap_or_else(|| panic!("no sso_code in {}", landing.location));
    // The code made by instance b is redeemed on instance a.
    let r = exchange(&a, &code).await;
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap_or_default();
    assert_eq!(body["user"]["role"], "developer");
    assert_eq!(exchange(&b, &code).await.status(), StatusCode::UNAUTHORIZED);
}
