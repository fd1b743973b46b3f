//! Single sign-on through OpenID Connect (contract 7.2–7.3): providers from
//! `SSO_PROVIDERS_JSON`, the authorization-code flow with PKCE (S256), `state` and `nonce`,
//! ID-token validation (signature, issuer, audience, nonce, expiry), claims from the userinfo
//! endpoint, just-in-time users with roles mapped from groups, and the one-time `sso_code`.
//!
//! Flow state and codes live in the shared `Cache` (Redis when configured), so any server
//! instance can finish a flow another one started. Both are single use (`Cache::take`) and
//! stored under a SHA-256 of their value, so a cache dump holds nothing usable.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use openidconnect::core::{
    CoreClient, CoreGenderClaim, CoreJsonWebKeySet, CoreJwsSigningAlgorithm, CoreProviderMetadata,
    CoreResponseType,
};
use openidconnect::{
    AccessToken, AdditionalClaims, AuthUrl, AuthenticationFlow, AuthorizationCode, ClientId,
    ClientSecret, CsrfToken, IssuerUrl, JsonWebKeySetUrl, Nonce, OAuth2TokenResponse,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, TokenResponse, TokenUrl,
    UserInfoClaims, UserInfoUrl,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use steward_core::event::{publish, Event, Severity};
use steward_core::validate::Fields;
use steward_core::{clock, Body, Cache, Error, ErrorKind, Result, Role, TenantId, UserId};
use steward_store::schema::{tenants, users};
use steward_store::{with_conn, DbResultExt, Id, Ts};

use crate::bootstrap::DEFAULT_TENANT;
use crate::rows::UserRow;
use crate::service::{uuid_of, Identity};
use crate::views::LoginResponse;

/// How long a one-time `sso_code` is valid (contract 7.3).
pub const SSO_CODE_TTL: Duration = Duration::from_secs(60);
/// Timeout of each request to a provider (discovery, token, userinfo, keys).
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);
/// Keys are fetched again after a signature failure at most this often per provider.
const JWKS_REFRESH_MIN: time::Duration = time::Duration::seconds(30);

/// One entry of `SSO_PROVIDERS_JSON` (contract 7.2).
#[derive(Clone, Debug, Deserialize)]
pub struct ProviderConfig {
    pub id: String,
    pub name: String,
    pub client_id: String,
    pub client_secret: String,
    #[serde(default)]
    pub issuer: Option<String>,
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    #[serde(default)]
    pub token_endpoint: Option<String>,
    #[serde(default)]
    pub userinfo_endpoint: Option<String>,
    /// Extension: the provider's key set, for explicit endpoints without an issuer to
    /// discover it from.
    #[serde(default)]
    pub jwks_uri: Option<String>,
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    #[serde(default)]
    pub tenant_id: Option<uuid::Uuid>,
    #[serde(default = "enabled_default")]
    pub enabled: bool,
    /// Extension: let a sign-in whose e-mail the provider does not mark verified
    /// (`email_verified` absent) take over a pre-provisioned account with that e-mail. Off by
    /// default; for providers that never send the claim and let no user choose an e-mail.
    #[serde(default)]
    pub trust_unverified_email: bool,
}

fn default_scopes() -> Vec<String> {
    vec!["openid".into(), "email".into(), "profile".into()]
}

fn enabled_default() -> bool {
    true
}

fn http_url(raw: &str) -> bool {
    url::Url::parse(raw).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
}

impl ProviderConfig {
    /// Parses and checks every provider; all problems are reported together.
    pub fn parse_all(items: &[Value]) -> std::result::Result<Vec<ProviderConfig>, Vec<String>> {
        let mut out: Vec<ProviderConfig> = Vec::new();
        let mut errors = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let cfg: ProviderConfig = match serde_json::from_value(item.clone()) {
                Ok(c) => c,
                Err(e) => {
                    errors.push(format!("SSO_PROVIDERS_JSON[{i}]: {e}"));
                    continue;
                }
            };
            let at = format!("SSO_PROVIDERS_JSON[{i}] ({:?})", cfg.id);
            let id_ok = !cfg.id.is_empty()
                && cfg.id.len() <= 64
                && cfg
                    .id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !id_ok {
                errors.push(format!(
                    "{at}: id must be 1-64 characters of letters, digits, '-', '_' or '.'"
                ));
            }
            if out.iter().any(|o| o.id == cfg.id) {
                errors.push(format!("{at}: id is used twice"));
            }
            if cfg.name.trim().is_empty()
                || cfg.client_id.is_empty()
                || cfg.client_secret.is_empty()
            {
                errors.push(format!(
                    "{at}: name, client_id and client_secret must not be empty"
                ));
            }
            let explicit = [
                &cfg.authorization_endpoint,
                &cfg.token_endpoint,
                &cfg.userinfo_endpoint,
            ];
            for (name, value) in [
                ("issuer", &cfg.issuer),
                ("authorization_endpoint", &cfg.authorization_endpoint),
                ("token_endpoint", &cfg.token_endpoint),
                ("userinfo_endpoint", &cfg.userinfo_endpoint),
                ("jwks_uri", &cfg.jwks_uri),
            ] {
                if value.as_deref().is_some_and(|v| !http_url(v)) {
                    errors.push(format!("{at}: {name} is not an http(s) URL"));
                }
            }
            if cfg.issuer.is_none() && explicit.iter().any(|e| e.is_none()) {
                errors.push(format!(
                    "{at}: give issuer, or authorization_endpoint, token_endpoint and userinfo_endpoint"
                ));
            }
            if !cfg.scopes.iter().any(|s| s == "openid") {
                errors.push(format!("{at}: scopes must include \"openid\""));
            }
            out.push(cfg);
        }
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(errors)
        }
    }

    fn explicit(&self) -> bool {
        self.authorization_endpoint.is_some()
            && self.token_endpoint.is_some()
            && self.userinfo_endpoint.is_some()
    }
}

/// Settings of single sign-on.
#[derive(Clone, Debug)]
pub struct SsoSettings {
    pub providers: Vec<ProviderConfig>,
    /// `SSO_CALLBACK_URL`: the `redirect_uri` sent to providers, exactly.
    pub callback_url: String,
    /// `FRONTEND_URL` without a trailing `/` (empty: redirects are relative to this server).
    pub frontend_url: String,
    pub auto_provision: bool,
    pub role_mapping: BTreeMap<String, Role>,
    pub state_ttl: Duration,
    /// Most sign-ins started per `state_ttl` window (each keeps its state in the cache until it
    /// finishes or expires); beyond it `GET /auth/sso/login` answers 503. `/auth/sso/login`
    /// needs no credential, so without a bound anyone could fill the cache's memory.
    pub max_pending_flows: i64,
}

/// `SsoSettings::max_pending_flows` of the server: 10,000 sign-ins started in ten minutes
/// (about 17 a second, sustained) keep at most ~50 MB of state.
pub const MAX_PENDING_FLOWS: i64 = 10_000;

/// The `groups` claim, which the core claim set does not carry.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct GroupClaims {
    #[serde(default)]
    groups: Option<Vec<Value>>,
}

impl AdditionalClaims for GroupClaims {}

/// What a provider resolved to: its endpoints and keys.
struct Endpoints {
    issuer: Option<IssuerUrl>,
    auth: AuthUrl,
    token: TokenUrl,
    userinfo: Option<UserInfoUrl>,
    jwks_uri: Option<JsonWebKeySetUrl>,
    jwks: CoreJsonWebKeySet,
    algs: Option<Vec<CoreJwsSigningAlgorithm>>,
    fetched_at: time::OffsetDateTime,
}

struct Provider {
    cfg: ProviderConfig,
    ready: RwLock<Option<Arc<Endpoints>>>,
    last_error: RwLock<Option<String>>,
}

impl Provider {
    fn endpoints(&self) -> Option<Arc<Endpoints>> {
        self.ready.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, e: Endpoints) {
        *self.ready.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(e));
        *self.last_error.write().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn failed(&self, why: String) {
        *self.last_error.write().unwrap_or_else(|p| p.into_inner()) = Some(why);
    }
}

/// A provider as `GET /auth/sso/providers` lists it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct ProviderView {
    pub id: String,
    pub name: String,
    pub enabled: bool,
}

/// The state of a flow between login and callback.
#[derive(Serialize, Deserialize)]
struct FlowState {
    provider: String,
    nonce: String,
    verifier: String,
    redirect: String,
}

/// The reasons of a failed callback (`sso_error`, contract 7.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SsoFailure {
    InvalidState,
    ProviderError,
    NotProvisioned,
    EmailConflict,
    UserBlocked,
}

impl SsoFailure {
    pub fn as_str(&self) -> &'static str {
        match self {
            SsoFailure::InvalidState => "invalid_state",
            SsoFailure::ProviderError => "provider_error",
            SsoFailure::NotProvisioned => "not_provisioned",
            SsoFailure::EmailConflict => "email_conflict",
            SsoFailure::UserBlocked => "user_blocked",
        }
    }
}

/// A callback that failed for a reason the user is told, or because storage is down.
enum CallbackError {
    Refused(SsoFailure, String),
    Storage(Error),
}

impl From<Error> for CallbackError {
    fn from(e: Error) -> Self {
        CallbackError::Storage(e)
    }
}

fn refused(reason: SsoFailure, why: impl Into<String>) -> CallbackError {
    CallbackError::Refused(reason, why.into())
}

/// Claims of the signed-in person, from the userinfo endpoint (or the ID token).
#[derive(Debug, Clone)]
struct Person {
    subject: String,
    email: String,
    /// The provider's `email_verified` claim (userinfo over ID token), when it sent one.
    email_verified: Option<bool>,
    name: Option<String>,
    groups: Vec<String>,
}

/// What the provider said, checked before any account is found or created by it: a subject
/// (the ID token's `sub`, required by contract 7.3: an empty one would make every sign-in
/// without one the same account) and an e-mail that a local user could have (`POST /users`'s
/// rules: no control or invisible characters), verified unless the provider does not say.
fn checked(mut person: Person) -> std::result::Result<Person, String> {
    if person.subject.trim().is_empty()
        || person.subject.len() > 255
        || person.subject.chars().any(char::is_control)
    {
        return Err("the provider gave no usable subject (sub) claim".to_owned());
    }
    person.email = person.email.trim().to_lowercase();
    if !crate::users::valid_email(&person.email) {
        return Err("the provider gave no usable e-mail claim".to_owned());
    }
    // An e-mail the provider says it has not verified belongs to nobody yet: no account is
    // created or found by it.
    if person.email_verified == Some(false) {
        return Err("the provider marks the e-mail as not verified".to_owned());
    }
    Ok(person)
}

fn group_names(groups: &Option<Vec<Value>>) -> Vec<String> {
    groups
        .iter()
        .flatten()
        .filter_map(|g| g.as_str().map(str::to_owned))
        .collect()
}

fn digest(kind: &str, value: &str) -> String {
    let mut h = Sha256::new();
    h.update(value.as_bytes());
    format!("sso:{kind}:{}", hex::encode(h.finalize()))
}

/// `redirect` of `/auth/sso/login`: a path on the frontend (one leading `/`, no scheme, no
/// host, nothing a browser would read as another origin), of printable ASCII (other characters
/// percent-encoded, so the `Location` header carries them as they are).
pub fn valid_redirect(path: &str) -> bool {
    path.starts_with('/')
        && !path.starts_with("//")
        && path.len() <= 2048
        && path.chars().all(|c| c.is_ascii_graphic() && c != '\\')
}

/// `redirect` with `sso_code` added to its query (contract 7.3: `?`, or `&` when it has a
/// query), before its fragment if it has one, so that the frontend receives the code
/// (`/dashboard#/agents` → `/dashboard?sso_code=C#/agents`).
fn with_code(redirect: &str, code: &str) -> String {
    let (path, fragment) = match redirect.split_once('#') {
        Some((p, f)) => (p, Some(f)),
        None => (redirect, None),
    };
    let sep = if path.contains('?') { '&' } else { '?' };
    match fragment {
        Some(f) => format!("{path}{sep}sso_code={code}#{f}"),
        None => format!("{path}{sep}sso_code={code}"),
    }
}

/// Most bytes read from one answer of an identity provider (discovery document, key set, token
/// and userinfo responses are a few KiB): a provider or a network path that answers without end
/// cannot make the server allocate without bound.
const PROVIDER_MAX_BYTES: usize = 1024 * 1024;

/// The HTTP client of the provider requests: reqwest, with every answer's body read up to
/// `PROVIDER_MAX_BYTES` (beyond it the request fails).
#[derive(Clone)]
struct ProviderHttp(reqwest::Client);

impl<'c> openidconnect::AsyncHttpClient<'c> for ProviderHttp {
    type Error = openidconnect::HttpClientError<reqwest::Error>;
    type Future = std::pin::Pin<
        Box<
            dyn std::future::Future<
                    Output = std::result::Result<openidconnect::HttpResponse, Self::Error>,
                > + Send
                + 'c,
        >,
    >;

    fn call(&'c self, request: openidconnect::HttpRequest) -> Self::Future {
        use openidconnect::HttpClientError;
        Box::pin(async move {
            let request: reqwest::Request = request.try_into().map_err(Box::new)?;
            let mut response = reqwest::Client::execute(&self.0, request)
                .await
                .map_err(Box::new)?;
            let mut builder = openidconnect::http::Response::builder()
                .status(response.status())
                .version(response.version());
            for (name, value) in response.headers() {
                builder = builder.header(name, value);
            }
            if response
                .content_length()
                .is_some_and(|n| n > PROVIDER_MAX_BYTES as u64)
            {
                return Err(HttpClientError::Other(format!(
                    "the answer is larger than {PROVIDER_MAX_BYTES} bytes"
                )));
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(Box::new)? {
                if body.len() + chunk.len() > PROVIDER_MAX_BYTES {
                    return Err(HttpClientError::Other(format!(
                        "the answer is larger than {PROVIDER_MAX_BYTES} bytes"
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            builder.body(body).map_err(HttpClientError::Http)
        })
    }
}

/// The single sign-on service.
#[derive(Clone)]
pub struct Sso {
    identity: Identity,
    cache: Arc<dyn Cache>,
    http: ProviderHttp,
    settings: Arc<SsoSettings>,
    providers: Arc<Vec<Provider>>,
}

impl Sso {
    pub fn new(identity: Identity, cache: Arc<dyn Cache>, settings: SsoSettings) -> Result<Sso> {
        let http = reqwest::Client::builder()
            // Following redirects from a provider would open the server to SSRF.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(PROVIDER_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(Error::internal)?;
        let mut providers = Vec::new();
        for cfg in &settings.providers {
            let p = Provider {
                cfg: cfg.clone(),
                ready: RwLock::new(None),
                last_error: RwLock::new(None),
            };
            if cfg.explicit() {
                p.set(explicit_endpoints(cfg)?);
            }
            providers.push(p);
        }
        Ok(Sso {
            identity,
            cache,
            http: ProviderHttp(http),
            settings: Arc::new(settings),
            providers: Arc::new(providers),
        })
    }

    fn provider(&self, id: &str) -> Option<&Provider> {
        self.providers.iter().find(|p| p.cfg.id == id)
    }

    /// Discovers every provider that needs it, retrying with back-off until each answered;
    /// runs until done (spawn it). A provider not discovered yet is reported disabled.
    pub async fn discover(self) {
        let mut delay = Duration::from_secs(1);
        loop {
            let mut pending = 0;
            for p in self.providers.iter() {
                if !p.cfg.enabled || p.endpoints().is_some() {
                    continue;
                }
                match self.discover_one(&p.cfg).await {
                    Ok(e) => {
                        tracing::info!(provider = %p.cfg.id, "SSO provider discovered");
                        p.set(e);
                    }
                    Err(why) => {
                        pending += 1;
                        tracing::warn!(provider = %p.cfg.id, error = %why, retry_in = ?delay, "SSO provider not discovered; it stays disabled");
                        p.failed(why);
                    }
                }
            }
            if pending == 0 {
                return;
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(60));
        }
    }

    async fn discover_one(&self, cfg: &ProviderConfig) -> std::result::Result<Endpoints, String> {
        let issuer = cfg
            .issuer
            .clone()
            .ok_or_else(|| "no issuer to discover".to_owned())?;
        let issuer = IssuerUrl::new(issuer).map_err(|e| e.to_string())?;
        let meta = CoreProviderMetadata::discover_async(issuer, &self.http)
            .await
            .map_err(|e| error_chain(&e))?;
        let token = meta
            .token_endpoint()
            .cloned()
            .ok_or_else(|| "the provider has no token endpoint".to_owned())?;
        Ok(Endpoints {
            issuer: Some(meta.issuer().clone()),
            auth: meta.authorization_endpoint().clone(),
            token,
            userinfo: meta.userinfo_endpoint().cloned(),
            jwks_uri: Some(meta.jwks_uri().clone()),
            jwks: meta.jwks().clone(),
            algs: Some(meta.id_token_signing_alg_values_supported().clone()),
            fetched_at: clock::now(),
        })
    }

    /// Fetches the provider's keys again (after a signature failure: keys rotate).
    async fn refresh_keys(&self, p: &Provider, current: &Endpoints) -> Option<Arc<Endpoints>> {
        if clock::now() - current.fetched_at < JWKS_REFRESH_MIN {
            return None;
        }
        let jwks_uri = match &current.jwks_uri {
            Some(u) => u.clone(),
            None => {
                // Explicit endpoints: learn the key set's address from discovery.
                let found = self.discover_one(&p.cfg).await.ok()?;
                found.jwks_uri?
            }
        };
        let jwks = CoreJsonWebKeySet::fetch_async(&jwks_uri, &self.http)
            .await
            .map_err(|e| tracing::warn!(provider = %p.cfg.id, error = %error_chain(&e), "SSO keys not fetched"))
            .ok()?;
        let fresh = Endpoints {
            issuer: current.issuer.clone(),
            auth: current.auth.clone(),
            token: current.token.clone(),
            userinfo: current.userinfo.clone(),
            jwks_uri: Some(jwks_uri),
            jwks,
            algs: current.algs.clone(),
            fetched_at: clock::now(),
        };
        p.set(fresh);
        p.endpoints()
    }

    /// `GET /auth/sso/providers`: the enabled (and reachable) providers.
    pub fn providers(&self) -> Vec<ProviderView> {
        self.providers
            .iter()
            .filter(|p| p.cfg.enabled && p.endpoints().is_some())
            .map(|p| ProviderView {
                id: p.cfg.id.clone(),
                name: p.cfg.name.clone(),
                enabled: true,
            })
            .collect()
    }

    /// Every configured provider with its state, for `/status` and logs.
    pub fn provider_states(&self) -> Vec<(String, bool, Option<String>)> {
        self.providers
            .iter()
            .map(|p| {
                let err = p
                    .last_error
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                (
                    p.cfg.id.clone(),
                    p.cfg.enabled && p.endpoints().is_some(),
                    err,
                )
            })
            .collect()
    }

    /// `GET /auth/sso/login?provider=ID&redirect=PATH`: the provider's authorization URL.
    pub async fn login(&self, pairs: &[(String, String)]) -> Result<String> {
        let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let Some(provider_id) = get("provider").filter(|v| !v.is_empty()) else {
            return Err(Error::invalid_field("provider", "is required"));
        };
        let redirect = get("redirect").unwrap_or("/dashboard");
        if !valid_redirect(redirect) {
            return Err(Error::invalid_field(
                "redirect",
                "must be a path on the frontend starting with a single '/'",
            ));
        }
        let not_found = || Error::not_found(format!("no enabled SSO provider {provider_id:?}"));
        let p = self.provider(provider_id).ok_or_else(not_found)?;
        if !p.cfg.enabled {
            return Err(not_found());
        }
        let Some(endpoints) = p.endpoints() else {
            return Err(Error::not_found(format!(
                "SSO provider {provider_id:?} is disabled: its discovery has not succeeded yet"
            )));
        };
        let client = CoreClient::new(
            ClientId::new(p.cfg.client_id.clone()),
            issuer_or_placeholder(&endpoints),
            endpoints.jwks.clone(),
        )
        .set_auth_uri(endpoints.auth.clone())
        .set_redirect_uri(self.redirect_url()?);
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(
                AuthenticationFlow::<CoreResponseType>::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        for scope in p.cfg.scopes.iter().filter(|s| s.as_str() != "openid") {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        // Counted per window of the state's lifetime: a state lives at most two windows.
        let ttl = self.settings.state_ttl.as_secs().max(1) as i64;
        let window = clock::now().unix_timestamp() / ttl;
        let started = self
            .cache
            .incr(
                &format!("sso:flows:{window}"),
                1,
                Some(self.settings.state_ttl * 2),
            )
            .await?;
        if started > self.settings.max_pending_flows {
            return Err(Error::new(
                ErrorKind::Unavailable,
                "too many single sign-on logins were started in the last minutes; try again shortly",
            ));
        }
        let (url, state, nonce) = request.url();
        let flow = FlowState {
            provider: p.cfg.id.clone(),
            nonce: nonce.secret().clone(),
            verifier: verifier.secret().clone(),
            redirect: redirect.to_owned(),
        };
        let value = serde_json::to_vec(&flow).map_err(Error::internal)?;
        self.cache
            .set(
                &digest("state", state.secret()),
                &value,
                Some(self.settings.state_ttl),
            )
            .await?;
        Ok(url.to_string())
    }

    fn redirect_url(&self) -> Result<RedirectUrl> {
        RedirectUrl::new(self.settings.callback_url.clone())
            .map_err(|e| Error::internal_msg(format!("SSO_CALLBACK_URL: {e}")))
    }

    fn failure_location(&self, reason: SsoFailure) -> String {
        format!(
            "{}/login?sso_error={}",
            self.settings.frontend_url,
            reason.as_str()
        )
    }

    /// `GET /auth/sso/callback`: where to send the browser. Every refusal is a redirect with
    /// `sso_error`; only unavailable storage is an error (503).
    pub async fn callback(&self, pairs: &[(String, String)]) -> Result<String> {
        match self.finish(pairs).await {
            Ok(location) => Ok(location),
            Err(CallbackError::Refused(reason, why)) => {
                tracing::info!(reason = reason.as_str(), detail = %why, "SSO callback refused");
                Ok(self.failure_location(reason))
            }
            Err(CallbackError::Storage(e)) => Err(e),
        }
    }

    async fn finish(
        &self,
        pairs: &[(String, String)],
    ) -> std::result::Result<String, CallbackError> {
        let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let state = get("state").filter(|s| !s.is_empty() && s.len() <= 512);
        let Some(state) = state else {
            return Err(refused(SsoFailure::InvalidState, "no state"));
        };
        let Some(raw) = self.cache.take(&digest("state", state)).await? else {
            return Err(refused(
                SsoFailure::InvalidState,
                "unknown, expired or used state",
            ));
        };
        let flow: FlowState = serde_json::from_slice(&raw)
            .map_err(|_| refused(SsoFailure::InvalidState, "unreadable state"))?;
        if let Some(error) = get("error") {
            return Err(refused(
                SsoFailure::ProviderError,
                // The parameter comes from whoever sent the browser here: bounded (and the
                // log escapes its control characters).
                format!(
                    "the provider answered error={:?}",
                    error.chars().take(200).collect::<String>()
                ),
            ));
        }
        let Some(code) = get("code").filter(|c| !c.is_empty()) else {
            return Err(refused(SsoFailure::ProviderError, "no code"));
        };
        let p = self
            .provider(&flow.provider)
            .filter(|p| p.cfg.enabled)
            .ok_or_else(|| refused(SsoFailure::ProviderError, "the provider is gone"))?;
        let person = self
            .authenticate(p, code, &flow)
            .await
            .map_err(|why| refused(SsoFailure::ProviderError, why))?;
        let user = self.resolve_user(p, &person).await?;
        let code = CsrfToken::new_random_len(32).secret().clone();
        self.cache
            .set(
                &digest("code", &code),
                uuid_of(user.id).as_bytes(),
                Some(SSO_CODE_TTL),
            )
            .await?;
        Ok(format!(
            "{}{}",
            self.settings.frontend_url,
            with_code(&flow.redirect, &code)
        ))
    }

    /// Exchanges the code, validates the ID token and reads the userinfo claims.
    async fn authenticate(
        &self,
        p: &Provider,
        code: &str,
        flow: &FlowState,
    ) -> std::result::Result<Person, String> {
        let endpoints = p
            .endpoints()
            .ok_or_else(|| "the provider is not discovered".to_owned())?;
        let redirect = self.redirect_url().map_err(|e| e.to_string())?;
        let client = build_client(&p.cfg, &endpoints).set_redirect_uri(redirect);
        let token = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .set_pkce_verifier(PkceCodeVerifier::new(flow.verifier.clone()))
            .request_async(&self.http)
            .await
            .map_err(|e| format!("code exchange failed: {}", error_chain(&e)))?;
        let id_token = token
            .id_token()
            .ok_or_else(|| "the token response has no ID token".to_owned())?;
        let nonce = Nonce::new(flow.nonce.clone());
        let claims = match id_token.claims(&verifier(&client, &endpoints), &nonce) {
            Ok(c) => c.clone(),
            Err(openidconnect::ClaimsVerificationError::SignatureVerification(first)) => {
                // The provider may have rotated its keys: fetch them once more.
                let fresh = self
                    .refresh_keys(p, &endpoints)
                    .await
                    .ok_or_else(|| format!("ID token signature: {first}"))?;
                let client = build_client(&p.cfg, &fresh);
                let checked = verifier(&client, &fresh);
                let claims = id_token
                    .claims(&checked, &nonce)
                    .map_err(|e| format!("ID token: {e}"))?
                    .clone();
                claims
            }
            Err(e) => return Err(format!("ID token: {e}")),
        };
        let subject = claims.subject().clone();
        let mut person = Person {
            subject: subject.as_str().to_owned(),
            email: claims
                .email()
                .map(|e| e.as_str().to_owned())
                .unwrap_or_default(),
            email_verified: claims.email_verified(),
            name: claims
                .name()
                .and_then(|n| n.get(None))
                .map(|n| n.as_str().to_owned()),
            groups: group_names(&claims.additional_claims().groups),
        };
        if let Some(url) = endpoints.userinfo.clone() {
            let info: UserInfoClaims<GroupClaims, CoreGenderClaim> = client
                .set_user_info_url(url)
                .user_info(
                    AccessToken::new(token.access_token().secret().clone()),
                    Some(subject),
                )
                .request_async(&self.http)
                .await
                .map_err(|e| format!("userinfo failed: {}", error_chain(&e)))?;
            if let Some(email) = info.email() {
                person.email = email.as_str().to_owned();
                person.email_verified = info.email_verified();
            }
            if let Some(name) = info.name().and_then(|n| n.get(None)) {
                person.name = Some(name.as_str().to_owned());
            }
            // The userinfo response decides when it has the claim (contract 7.3).
            if info.additional_claims().groups.is_some() {
                person.groups = group_names(&info.additional_claims().groups);
            }
        }
        checked(person)
    }

    /// The role the groups map to (highest wins; never `super_admin`).
    fn mapped_role(&self, groups: &[String]) -> Option<Role> {
        groups
            .iter()
            .filter_map(|g| self.settings.role_mapping.get(g).copied())
            .map(|r| r.min(Role::Admin))
            .max()
    }

    /// Finds or creates the user (contract 7.3 user resolution) and applies the role mapping.
    async fn resolve_user(
        &self,
        p: &Provider,
        person: &Person,
    ) -> std::result::Result<UserRow, CallbackError> {
        let db = &self.identity.db;
        let provider_id = p.cfg.id.clone();
        let by_subject: Option<UserRow> = with_conn!(db, conn => {
            users::table
                .filter(users::auth_provider.eq(&provider_id))
                .filter(users::external_subject.eq(&person.subject))
                .select(UserRow::as_select())
                .first(conn)
                .await
                .optional()
                .db()
        })?;
        let mapped = self.mapped_role(&person.groups);
        let user = match by_subject {
            Some(u) => u,
            None => {
                let by_email: Option<UserRow> = with_conn!(db, conn => {
                    users::table
                        .filter(users::email.eq(&person.email))
                        .select(UserRow::as_select())
                        .first(conn)
                        .await
                        .optional()
                        .db()
                })?;
                // A pre-provisioned account goes to whoever shows its e-mail first, so the
                // provider must vouch for that e-mail (`email_verified`), unless the operator
                // trusts every e-mail of this provider.
                let vouched = person.email_verified == Some(true) || p.cfg.trust_unverified_email;
                let preprovisioned = |u: &UserRow| {
                    u.auth_provider.as_deref() == Some(provider_id.as_str())
                        && u.external_subject.is_none()
                };
                match by_email {
                    Some(u) if preprovisioned(&u) && vouched => {
                        // A pre-provisioned account: it takes the subject now.
                        let id = u.id;
                        let subject = person.subject.clone();
                        with_conn!(db, conn => {
                            diesel::update(users::table.filter(users::id.eq(id)))
                                .set(users::external_subject.eq(Some(subject)))
                                .execute(conn)
                                .await
                                .db()
                        })?;
                        UserRow {
                            external_subject: Some(person.subject.clone()),
                            ..u
                        }
                    }
                    Some(u) => {
                        let (reason, why) = if preprovisioned(&u) {
                            ("email_not_verified", "a pre-provisioned account has this e-mail, which the provider does not mark verified")
                        } else {
                            ("email_conflict", "another account owns this e-mail")
                        };
                        self.identity
                            .record(
                                u.tenant_id.into_id(),
                                Some(u.id.into_id()),
                                "user.login_failed",
                                format!("user:{}", uuid_of(u.id)),
                                json!({"method": "sso", "provider": provider_id, "reason": reason}),
                            )
                            .await;
                        return Err(refused(SsoFailure::EmailConflict, why));
                    }
                    None if !self.settings.auto_provision => {
                        publish(
                            &self.identity.bus,
                            Event::new(
                                "user.login_failed",
                                TenantId(uuid::Uuid::nil()),
                                Severity::Warning,
                                json!({"email": person.email, "method": "sso", "provider": provider_id, "reason": "not_provisioned"}),
                            ),
                        );
                        return Err(refused(
                            SsoFailure::NotProvisioned,
                            "no account and provisioning is off",
                        ));
                    }
                    None => self.provision(p, person, mapped).await?,
                }
            }
        };
        if !user.is_active {
            self.identity
                .record(
                    user.tenant_id.into_id(),
                    Some(user.id.into_id()),
                    "user.login_failed",
                    format!("user:{}", uuid_of(user.id)),
                    json!({"method": "sso", "provider": provider_id, "reason": "user_blocked"}),
                )
                .await;
            return Err(refused(SsoFailure::UserBlocked, "the user is blocked"));
        }
        let current = crate::service::role_of(&user.role)?;
        // The super admin's role is never changed by a provider's groups.
        let role = match mapped {
            Some(r) if current != Role::SuperAdmin => r,
            _ => current,
        };
        let name = person
            .name
            .clone()
            .filter(|n| !n.is_empty() && n.len() <= 200);
        let name_changed = name.as_ref().is_some_and(|n| *n != user.full_name);
        if role == current && !name_changed {
            return Ok(user);
        }
        let id = user.id;
        let full_name = name.clone().unwrap_or_else(|| user.full_name.clone());
        let role_name = role.as_str().to_owned();
        let now = Ts(clock::now());
        with_conn!(db, conn => {
            diesel::update(users::table.filter(users::id.eq(id)))
                .set((
                    users::role.eq(&role_name),
                    users::full_name.eq(&full_name),
                    users::updated_at.eq(now),
                ))
                .execute(conn)
                .await
                .db()
        })?;
        if role != current {
            self.identity.credentials_changed().await;
            self.identity
                .record(
                    user.tenant_id.into_id(),
                    Some(user.id.into_id()),
                    "user.updated",
                    format!("user:{}", uuid_of(user.id)),
                    json!({"role": {"from": current.as_str(), "to": role.as_str()}, "by": "sso group mapping", "provider": provider_id}),
                )
                .await;
        }
        Ok(UserRow {
            role: role_name,
            full_name,
            updated_at: now,
            ..user
        })
    }

    /// Creates a just-in-time user in the provider's tenant.
    async fn provision(
        &self,
        p: &Provider,
        person: &Person,
        mapped: Option<Role>,
    ) -> std::result::Result<UserRow, CallbackError> {
        let db = &self.identity.db;
        let tenant: Option<Id> = match p.cfg.tenant_id {
            Some(t) => with_conn!(db, conn => {
                tenants::table
                    .filter(tenants::id.eq(Id(t)))
                    .select(tenants::id)
                    .first(conn)
                    .await
                    .optional()
                    .db()
            })?,
            None => with_conn!(db, conn => {
                tenants::table
                    .filter(tenants::name.eq(DEFAULT_TENANT))
                    .select(tenants::id)
                    .first(conn)
                    .await
                    .optional()
                    .db()
            })?,
        };
        let Some(tenant) = tenant else {
            tracing::warn!(provider = %p.cfg.id, "the SSO provider's tenant does not exist; no user provisioned");
            return Err(refused(
                SsoFailure::NotProvisioned,
                "the provider's tenant does not exist",
            ));
        };
        let now = Ts(clock::now());
        let row = UserRow {
            id: Id(uuid::Uuid::now_v7()),
            tenant_id: tenant,
            email: person.email.clone(),
            full_name: person
                .name
                .clone()
                .filter(|n| n.len() <= 200)
                .unwrap_or_default(),
            role: mapped.unwrap_or(Role::Viewer).as_str().to_owned(),
            password_hash: None,
            is_active: true,
            auth_provider: Some(p.cfg.id.clone()),
            external_subject: Some(person.subject.clone()),
            created_at: now,
            updated_at: now,
            last_login_at: None,
        };
        let inserted = with_conn!(db, conn => {
            diesel::insert_into(users::table).values(&row).execute(conn).await.db()
        });
        match inserted {
            Ok(_) => {}
            Err(e) if e.kind == ErrorKind::Conflict => {
                // Another instance provisioned the same person a moment ago, or the e-mail
                // was taken meanwhile.
                let again: Option<UserRow> = with_conn!(db, conn => {
                    users::table
                        .filter(users::auth_provider.eq(&row.auth_provider))
                        .filter(users::external_subject.eq(&row.external_subject))
                        .select(UserRow::as_select())
                        .first(conn)
                        .await
                        .optional()
                        .db()
                })?;
                return again.ok_or_else(|| {
                    refused(SsoFailure::EmailConflict, "the e-mail was taken meanwhile")
                });
            }
            Err(e) => return Err(e.into()),
        }
        let id: UserId = row.id.into_id();
        self.identity
            .record(
                tenant.into_id(),
                Some(id),
                "user.created",
                format!("user:{id}"),
                json!({"email": row.email, "role": row.role, "auth_provider": p.cfg.id, "jit": true}),
            )
            .await;
        Ok(row)
    }

    /// `POST /auth/sso/exchange` body `{code}`: a new session for the code's user.
    pub async fn exchange(&self, body: &Body) -> Result<LoginResponse> {
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let code = f.required_str("code", 1, 512).map(str::to_owned);
        f.finish()?;
        let Some(code) = code else {
            return Err(Error::internal_msg("validated code missing"));
        };
        let invalid = || Error::invalid_credentials("the SSO code is unknown, expired or used");
        let Some(raw) = self.cache.take(&digest("code", &code)).await? else {
            return Err(invalid());
        };
        let user_id: uuid::Uuid = std::str::from_utf8(&raw)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(invalid)?;
        let user: Option<UserRow> = with_conn!(&self.identity.db, conn => {
            users::table
                .filter(users::id.eq(Id(user_id)))
                .select(UserRow::as_select())
                .first(conn)
                .await
                .optional()
                .db()
        })?;
        let Some(user) = user else {
            return Err(invalid());
        };
        if !user.is_active {
            return Err(Error::new(ErrorKind::UserBlocked, "the user is blocked"));
        }
        let response = self.identity.open_session(&user).await?;
        let id: UserId = user.id.into_id();
        self.identity
            .record(
                user.tenant_id.into_id(),
                Some(id),
                "user.sso_login",
                format!("user:{id}"),
                json!({"method": "sso", "provider": user.auth_provider, "role": user.role}),
            )
            .await;
        Ok(response)
    }
}

/// The issuer to verify ID tokens against; without one, issuer matching is turned off.
fn issuer_or_placeholder(e: &Endpoints) -> IssuerUrl {
    e.issuer.clone().unwrap_or_else(|| {
        // `CoreClient` needs an issuer; `verifier` skips the match when none is configured.
        IssuerUrl::from_url(e.auth.url().clone())
    })
}

fn explicit_endpoints(cfg: &ProviderConfig) -> Result<Endpoints> {
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        Error::internal_msg(format!("SSO provider {:?}: {what}: {e}", cfg.id))
    };
    let (Some(auth), Some(token), Some(userinfo)) = (
        cfg.authorization_endpoint.clone(),
        cfg.token_endpoint.clone(),
        cfg.userinfo_endpoint.clone(),
    ) else {
        return Err(Error::internal_msg("explicit endpoints missing"));
    };
    Ok(Endpoints {
        issuer: match &cfg.issuer {
            Some(i) => Some(IssuerUrl::new(i.clone()).map_err(|e| bad("issuer", &e))?),
            None => None,
        },
        auth: AuthUrl::new(auth).map_err(|e| bad("authorization_endpoint", &e))?,
        token: TokenUrl::new(token).map_err(|e| bad("token_endpoint", &e))?,
        userinfo: Some(UserInfoUrl::new(userinfo).map_err(|e| bad("userinfo_endpoint", &e))?),
        jwks_uri: match &cfg.jwks_uri {
            Some(u) => Some(JsonWebKeySetUrl::new(u.clone()).map_err(|e| bad("jwks_uri", &e))?),
            None => None,
        },
        // Keys are fetched on first use (a shared-secret HS256 token needs none).
        jwks: CoreJsonWebKeySet::new(Vec::new()),
        algs: None,
        // Long ago, so the first signature failure fetches the keys at once.
        fetched_at: time::OffsetDateTime::UNIX_EPOCH,
    })
}

/// The token response, with the `groups` claim read from the ID token too (some providers,
/// Entra ID among them, put groups in the ID token and not in the userinfo response).
type GroupTokenResponse = openidconnect::StandardTokenResponse<
    openidconnect::IdTokenFields<
        GroupClaims,
        openidconnect::EmptyExtraTokenFields,
        CoreGenderClaim,
        openidconnect::core::CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm,
    >,
    openidconnect::core::CoreTokenType,
>;

type GroupClient<
    HasAuthUrl = openidconnect::EndpointNotSet,
    HasTokenUrl = openidconnect::EndpointNotSet,
> = openidconnect::Client<
    GroupClaims,
    openidconnect::core::CoreAuthDisplay,
    CoreGenderClaim,
    openidconnect::core::CoreJweContentEncryptionAlgorithm,
    openidconnect::core::CoreJsonWebKey,
    openidconnect::core::CoreAuthPrompt,
    openidconnect::StandardErrorResponse<openidconnect::core::CoreErrorResponseType>,
    GroupTokenResponse,
    openidconnect::core::CoreTokenIntrospectionResponse,
    openidconnect::core::CoreRevocableToken,
    openidconnect::core::CoreRevocationErrorResponse,
    HasAuthUrl,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointNotSet,
    HasTokenUrl,
    openidconnect::EndpointNotSet,
>;

type ExchangeClient = GroupClient<openidconnect::EndpointSet, openidconnect::EndpointSet>;

fn build_client(cfg: &ProviderConfig, e: &Endpoints) -> ExchangeClient {
    GroupClient::new(
        ClientId::new(cfg.client_id.clone()),
        issuer_or_placeholder(e),
        e.jwks.clone(),
    )
    .set_client_secret(ClientSecret::new(cfg.client_secret.clone()))
    .set_auth_uri(e.auth.clone())
    .set_token_uri(e.token.clone())
}

/// The ID-token verifier: signature (provider keys, or the client secret for HS*), issuer,
/// audience, expiry; the nonce is checked by the caller's `claims` call.
fn verifier<'a>(
    client: &'a ExchangeClient,
    e: &Endpoints,
) -> openidconnect::IdTokenVerifier<'a, openidconnect::core::CoreJsonWebKey> {
    let v = client.id_token_verifier();
    let v = match &e.algs {
        Some(algs) => v.set_allowed_algs(
            algs.iter()
                .filter(|a| **a != CoreJwsSigningAlgorithm::None)
                .cloned(),
        ),
        None => v.set_allowed_algs([
            CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
            CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384,
            CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512,
            CoreJwsSigningAlgorithm::RsaSsaPssSha256,
            CoreJwsSigningAlgorithm::RsaSsaPssSha384,
            CoreJwsSigningAlgorithm::RsaSsaPssSha512,
            CoreJwsSigningAlgorithm::EcdsaP256Sha256,
            CoreJwsSigningAlgorithm::EcdsaP384Sha384,
            CoreJwsSigningAlgorithm::EdDsa,
            CoreJwsSigningAlgorithm::HmacSha256,
            CoreJwsSigningAlgorithm::HmacSha384,
            CoreJwsSigningAlgorithm::HmacSha512,
        ]),
    };
    v.require_issuer_match(e.issuer.is_some())
}

/// An error with its causes, for logs (never shown to the browser).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_must_stay_on_the_frontend() {
        for ok in ["/dashboard", "/agents?tab=shadow", "/a/b#c"] {
            assert!(valid_redirect(ok), "{ok}");
        }
        for bad in [
            "https://evil.example/x",
            "//evil.example/x",
            "dashboard",
            "/\\evil.example",
            "/a b",
            "/a\nb",
            "/caf\u{e9}",
            "/a\u{200b}b",
            "",
        ] {
            assert!(!valid_redirect(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_code_goes_into_the_query_before_a_fragment() {
        assert_eq!(with_code("/dashboard", "C"), "/dashboard?sso_code=C");
        assert_eq!(with_code("/agents?tab=x", "C"), "/agents?tab=x&sso_code=C");
        assert_eq!(
            with_code("/dashboard#/agents", "C"),
            "/dashboard?sso_code=C#/agents"
        );
        assert_eq!(with_code("/d?a=1#/x?y", "C"), "/d?a=1&sso_code=C#/x?y");
    }

    async fn service(
        providers: Vec<ProviderConfig>,
        max_pending_flows: i64,
    ) -> (Sso, steward_store::testing::TestDb) {
        struct NoAudit;
        #[async_trait::async_trait]
        impl steward_core::AuditWriter for NoAudit {
            async fn append(&self, _: steward_core::AuditRecord) -> Result<steward_core::AuditId> {
                Ok(steward_core::AuditId::new())
            }
        }
        let db = steward_store::testing::TestDb::sqlite().await.unwrap();
        let identity = Identity::new(
            db.pool.clone(),
            Arc::new(steward_core::MemoryBus::new()),
            Arc::new(NoAudit),
            Arc::new(crate::service::NoProvisioning),
            crate::service::IdentityConfig {
                secret_key: "k".repeat(32),
                token_minutes: 15,
                admin_api_key: "admin-key-for-tests".into(),
                sso_providers: providers.iter().map(|p| p.id.clone()).collect(),
            },
        )
        .unwrap();
        let settings = SsoSettings {
            providers,
            callback_url: "http://127.0.0.1:9/api/v1/auth/sso/callback".into(),
            frontend_url: String::new(),
            auto_provision: true,
            role_mapping: BTreeMap::new(),
            state_ttl: Duration::from_secs(600),
            max_pending_flows,
        };
        let sso = Sso::new(
            identity,
            Arc::new(steward_core::MemoryCache::new()),
            settings,
        )
        .unwrap();
        (sso, db)
    }

    // `/auth/sso/login` needs no credential and stores a state per call: bounded.
    #[tokio::test]
    async fn started_sign_ins_are_bounded() {
        let (sso, _db) = service(vec![explicit_provider()], 3).await;
        let start = [("provider".to_owned(), "t".to_owned())];
        for _ in 0..3 {
            sso.login(&start).await.unwrap();
        }
        let refused = sso.login(&start).await.unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Unavailable, "{refused:?}");
    }

    // A provider answering without end is cut off at PROVIDER_MAX_BYTES.
    #[tokio::test]
    async fn provider_answers_are_bounded() {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut head = [0u8; 2048];
                    let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut head).await;
                    let _ = socket
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{\"issuer\": \"")
                        .await;
                    let chunk = vec![b'a'; 64 * 1024];
                    for _ in 0..64 {
                        if socket.write_all(&chunk).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let cfg: ProviderConfig = serde_json::from_value(json!({
            "id": "big", "name": "Big", "client_id": "c", "client_secret": "s", "issuer": issuer}))
        .unwrap();
        let (sso, _db) = service(vec![cfg.clone()], 10).await;
        let Err(why) = sso.discover_one(&cfg).await else {
            panic!("a 4 MiB discovery document was read");
        };
        assert!(why.contains("larger than"), "{why}");
    }

    fn explicit_provider() -> ProviderConfig {
        serde_json::from_value(json!({
            "id": "t", "name": "T", "client_id": "steward", "client_secret": "shared-secret",
            "issuer": "https://idp.example",
            "authorization_endpoint": "https://idp.example/auth",
            "token_endpoint": "https://idp.example/token",
            "userinfo_endpoint": "https://idp.example/me"}))
        .unwrap()
    }

    fn id_token(
        claims: Value,
        secret: &str,
    ) -> openidconnect::IdToken<
        GroupClaims,
        CoreGenderClaim,
        openidconnect::core::CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm,
    > {
        let raw = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap();
        raw.parse().unwrap()
    }

    /// The ID-token checks: signature, issuer, audience, expiry and nonce each refuse.
    #[test]
    fn id_tokens_are_validated() {
        let cfg = explicit_provider();
        let endpoints = explicit_endpoints(&cfg).unwrap();
        let client = build_client(&cfg, &endpoints);
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let good = json!({"iss": "https://idp.example", "aud": "steward", "sub": "u1",
                          "iat": now, "exp": now + 300, "nonce": "n-1"});
        let nonce = Nonce::new("n-1".into());
        let check = |claims: Value, secret: &str| {
            let token = id_token(claims, secret);
            token
                .claims(&verifier(&client, &endpoints), &nonce)
                .map(|c| c.subject().as_str().to_owned())
                .map_err(|e| e.to_string())
        };
        assert_eq!(check(good.clone(), "shared-secret"), Ok("u1".to_owned()));
        let groups = id_token(
            json!({"iss": "https://idp.example", "aud": "steward", "sub": "u1", "iat": now,
                   "exp": now + 300, "nonce": "n-1", "groups": ["g1", 7, "g2"]}),
            "shared-secret",
        );
        let claims = groups
            .claims(&verifier(&client, &endpoints), &nonce)
            .unwrap();
        assert_eq!(
            group_names(&claims.additional_claims().groups),
            ["g1", "g2"]
        );
        let with = |k: &str, v: Value| {
            let mut c = good.clone();
            c[k] = v;
            c
        };
        assert!(check(good.clone(), "another-secret").is_err(), "signature");
        assert!(check(with("aud", json!("another-client")), "shared-secret")
            .unwrap_err()
            .contains("audience"));
        assert!(
            check(with("iss", json!("https://evil.example")), "shared-secret")
                .unwrap_err()
                .contains("issuer")
        );
        assert!(check(with("exp", json!(now - 10)), "shared-secret")
            .unwrap_err()
            .contains("Expired"));
        assert!(check(with("nonce", json!("n-2")), "shared-secret")
            .unwrap_err()
            .contains("nonce"));
    }

    #[test]
    fn a_person_needs_a_subject_and_a_local_users_email() {
        let person = |subject: &str, email: &str| Person {
            subject: subject.to_owned(),
            email: email.to_owned(),
            email_verified: None,
            name: None,
            groups: Vec::new(),
        };
        let ok = checked(person("u1", " Ana@Example.COM ")).unwrap();
        assert_eq!(ok.email, "ana@example.com");
        for (subject, email) in [
            ("", "ana@example.com"),
            ("  ", "ana@example.com"),
            ("u\u{0}1", "ana@example.com"),
            ("u1", ""),
            ("u1", "a\u{0}b@corp.com"),
            ("u1", "u42@corp.com\nX-Injected: 1"),
            ("u1", "ana\u{200B}@example.com"),
            ("u1", "no-at-sign"),
        ] {
            assert!(
                checked(person(subject, email)).is_err(),
                "{subject:?} {email:?}"
            );
        }
        let mut unverified = person("u1", "ana@example.com");
        unverified.email_verified = Some(false);
        assert!(checked(unverified).is_err());
    }

    #[test]
    fn provider_config_is_checked() {
        let good = json!({"id": "okta", "name": "Okta", "client_id": "c", "client_secret": "s",
                          "issuer": "https://example.okta.com"});
        let parsed = ProviderConfig::parse_all(std::slice::from_ref(&good)).unwrap();
        assert_eq!(parsed[0].scopes, default_scopes());
        assert!(parsed[0].enabled && !parsed[0].explicit());
        let errs = ProviderConfig::parse_all(&[
            good.clone(),
            good,
            json!({"id": "x y", "name": "X", "client_id": "c", "client_secret": "s",
                   "authorization_endpoint": "https://x/a"}),
            json!({"id": "z", "name": "Z", "client_id": "c", "client_secret": "s",
                   "issuer": "ftp://x", "scopes": ["email"]}),
            json!({"id": "w"}),
        ])
        .unwrap_err();
        let all = errs.join("\n");
        for needle in [
            "used twice",
            "1-64 characters",
            "give issuer",
            "issuer is not an http(s) URL",
            "must include \"openid\"",
            "missing field",
        ] {
            assert!(all.contains(needle), "{needle} not in {all}");
        }
    }
}
