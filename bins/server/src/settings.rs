//! Configuration: every variable of contract 1.1, parsed once into typed, validated settings.
//!
//! A bad value stops the start with a message naming the variable (every bad variable is
//! listed, not only the first). Secrets are redacted in `Debug`.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::str::FromStr;

use steward_core::Role;
use steward_store::DbTarget;

pub const DEV_SECRET_KEY: &str = "dev-secret-key-change-me";
pub const DEV_ADMIN_API_KEY: &str = "dev-admin-key-change-me";
pub const DEV_WEBHOOK_SECRET: &str = "dev-webhook-secret-change-me";
pub const DEV_SUPER_ADMIN_PASSWORD: &str = "change-me-now";

/// A secret string: `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Environment {
    Development,
    Test,
    Staging,
    Production,
}

impl Environment {
    pub fn as_str(&self) -> &'static str {
        match self {
            Environment::Development => "development",
            Environment::Test => "test",
            Environment::Staging => "staging",
            Environment::Production => "production",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Info,
    Warning,
    Error,
}

impl LogLevel {
    pub fn filter(&self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warning => "warn",
            LogLevel::Error => "error",
        }
    }
}

#[derive(Clone, Debug)]
pub struct AnomalySettings {
    pub model_backend: String,
    /// `ANOMALY_SUPERVISED_MODEL`: `logistic` (contract 15.3) or `forest` (the tree option).
    pub supervised_model: String,
    pub ml_timeout_seconds: f64,
    pub onnx_model_path: PathBuf,
    pub external_enabled: bool,
    pub external_url: Option<String>,
    pub risk_ml_weight: f64,
    pub auto_retrain_events: u64,
    pub threshold: f64,
    pub contamination: f64,
    pub min_training_samples: u64,
    pub training_max_bytes: usize,
}

#[derive(Clone, Debug)]
pub struct GuardSettings {
    pub enabled: bool,
    pub enable_ml: bool,
    pub enable_rules: bool,
    pub enable_policy_engine: bool,
    pub ml_threshold: f64,
    pub rule_threshold: f64,
    pub threshold_block: f64,
    pub threshold_warn: f64,
    pub rule_weight: f64,
    pub ml_weight: f64,
    pub policy_engine_weight: f64,
    pub cache_ttl_seconds: u64,
    pub model_path: PathBuf,
    pub model_backend: String,
    pub min_training_samples: u64,
    pub external_enabled: bool,
    pub external_url: Option<String>,
    pub max_prompt_chars: usize,
}

#[derive(Clone, Debug)]
pub struct SsoSettings {
    /// `SSO_PROVIDERS_JSON`, checked (section 7.2).
    pub providers: Vec<steward_identity::sso::ProviderConfig>,
    pub callback_url: String,
    pub auto_provision: bool,
    pub role_mapping: BTreeMap<String, Role>,
    pub state_ttl_seconds: u64,
}

#[derive(Clone, Debug)]
pub struct SiemSettings {
    pub enabled: bool,
    pub format: String,
    pub transport: String,
    pub host: String,
    pub port: u16,
    pub tls: bool,
    /// `SIEM_TLS_CA_FILE`: PEM CA(s) trusted for syslog TLS and HTTPS receivers.
    pub tls_ca_file: Option<String>,
    pub batch_size: usize,
    pub batch_timeout_seconds: u64,
    pub max_retries: u32,
    pub connect_timeout_seconds: u64,
    pub splunk_hec_url: Option<String>,
    pub splunk_hec_token: Option<Secret>,
    pub splunk_hec_sourcetype: String,
    pub elk_url: Option<String>,
    pub elk_index: String,
    pub elk_username: Option<String>,
    pub elk_password: Option<Secret>,
}

/// The whole configuration of one server process.
#[derive(Clone, Debug)]
pub struct Settings {
    pub host: IpAddr,
    pub port: u16,
    pub database: DbTarget,
    pub redis_url: Option<Secret>,
    /// `CACHE_MEMORY_MB`: the memory budget of the in-process cache's volatile entries (result
    /// caches), in bytes; unused with Redis.
    pub cache_memory_bytes: u64,
    pub opa_url: Option<String>,
    pub policy_engine_enabled: bool,
    pub secret_key: Secret,
    pub access_token_expire_minutes: u64,
    pub admin_api_key: Secret,
    pub webhook_secret: Secret,
    pub super_admin_email: String,
    pub super_admin_password: Secret,
    pub environment: Environment,
    pub frontend_url: String,
    pub agent_inactivity_seconds: u64,
    pub hitl_risk_threshold: f64,
    /// `HITL_REQUIRE_APPROVAL_ID`: only a valid `approval_id` approves a check.
    pub hitl_require_approval_id: bool,
    /// `HITL_APPROVAL_TTL_SECONDS`: how long an approval may be used (unset = no limit).
    pub hitl_approval_ttl_seconds: Option<u64>,
    pub audit_signing_enabled: bool,
    pub audit_signing_key: Secret,
    pub audit_retention_days: u64,
    pub export_storage_path: PathBuf,
    /// `EXPORT_RETENTION_HOURS`: finished asynchronous exports (files and jobs) are deleted
    /// this long after they were written.
    pub export_retention_hours: u64,
    /// `JOB_LEASE_SECONDS`: the lease of all claimed background work (unset = each worker's
    /// default: exports and clustering 30 s, training 10 s, the SIEM sender 15 s).
    pub job_lease_seconds: Option<u64>,
    pub max_request_body_bytes: usize,
    /// `REQUEST_BODY_TIMEOUT_SECONDS`: how long a request body may take to arrive (408 after).
    pub request_body_timeout_seconds: u64,
    pub log_level: LogLevel,
    pub log_json: bool,
    pub model_storage_path: PathBuf,
    pub anomaly: AnomalySettings,
    pub guard: GuardSettings,
    pub sso: SsoSettings,
    pub siem: SiemSettings,
    pub integration_agent_framework_enabled: bool,
    pub integration_model_provider_enabled: bool,
    /// `WS_SEND_QUEUE`, `WS_IDLE_TIMEOUT_SECONDS`, `WS_PING_INTERVAL_SECONDS`,
    /// `WS_MAX_CONNECTIONS`, `WS_MAX_CONNECTIONS_PER_TENANT`, `WS_MAX_CONNECTIONS_PER_USER`.
    pub ws: crate::ws::WsSettings,
}

/// The configuration errors, one line per variable.
#[derive(Debug)]
pub struct ConfigError(pub Vec<String>);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "invalid configuration:")?;
        for line in &self.0 {
            writeln!(f, "  - {line}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Reads variables and records every problem.
struct Reader<F: Fn(&str) -> Option<String>> {
    get: F,
    errors: Vec<String>,
}

impl<F: Fn(&str) -> Option<String>> Reader<F> {
    /// The value, with empty strings treated as unset.
    fn raw(&self, name: &str) -> Option<String> {
        (self.get)(name).filter(|v| !v.trim().is_empty())
    }

    fn fail(&mut self, name: &str, value: &str, why: impl fmt::Display) {
        self.errors.push(format!("{name}={value:?}: {why}"));
    }

    fn string(&mut self, name: &str, default: &str) -> String {
        self.raw(name).unwrap_or_else(|| default.to_owned())
    }

    fn optional(&mut self, name: &str) -> Option<String> {
        self.raw(name)
    }

    /// A path to a file that must be readable now (refused at start-up, not at first use).
    fn readable_file(&mut self, name: &str) -> Option<String> {
        let path = self.raw(name)?;
        match std::fs::File::open(&path) {
            Ok(_) => Some(path),
            Err(e) => {
                self.fail(name, &path, format!("cannot read the file: {e}"));
                None
            }
        }
    }

    fn parse<T: FromStr>(&mut self, name: &str, default: T, what: &str) -> T {
        match self.raw(name) {
            None => default,
            Some(v) => match v.trim().parse() {
                Ok(x) => x,
                Err(_) => {
                    self.fail(name, &v, format!("expected {what}"));
                    default
                }
            },
        }
    }

    fn bool(&mut self, name: &str, default: bool) -> bool {
        match self.raw(name) {
            None => default,
            Some(v) => match steward_core::validate::parse_bool(&v) {
                Some(b) => b,
                None => {
                    self.fail(name, &v, "expected true, false, 1 or 0");
                    default
                }
            },
        }
    }

    fn float(&mut self, name: &str, default: f64, min: f64, max: f64) -> f64 {
        let v: f64 = self.parse(name, default, "a number");
        if !(min..=max).contains(&v) || v.is_nan() {
            self.fail(
                name,
                &v.to_string(),
                format!("must be between {min} and {max}"),
            );
            return default;
        }
        v
    }

    fn positive(&mut self, name: &str, default: u64) -> u64 {
        let v: u64 = self.parse(name, default, "a non-negative integer");
        if v == 0 {
            self.fail(name, "0", "must be at least 1");
            return default;
        }
        v
    }

    fn one_of(&mut self, name: &str, default: &str, allowed: &[&str]) -> String {
        let v = self.string(name, default).to_ascii_lowercase();
        if allowed.contains(&v.as_str()) {
            v
        } else {
            self.fail(name, &v, format!("must be one of {}", allowed.join(", ")));
            default.to_owned()
        }
    }

    fn url(&mut self, name: &str) -> Option<String> {
        let v = self.optional(name)?;
        match url::Url::parse(&v) {
            Ok(u) if u.scheme() == "http" || u.scheme() == "https" => Some(v),
            _ => {
                // The value may hold credentials: show it redacted.
                let shown = steward_store::pool::redact_url(&v);
                self.errors.push(format!(
                    "{name}={shown:?}: expected an http:// or https:// URL"
                ));
                None
            }
        }
    }
}

impl Settings {
    /// Reads the process environment.
    pub fn from_env() -> Result<Settings, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads settings through `get` (tests pass a map).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Settings, ConfigError> {
        let mut r = Reader {
            get,
            errors: Vec::new(),
        };

        let host = r.parse::<IpAddr>("HOST", IpAddr::from([0, 0, 0, 0]), "an IP address");
        let port = r.parse::<u16>("PORT", 8080, "a port number (0-65535)");
        let database_raw = r.string("DATABASE_URL", "sqlite://./data/steward.db");
        let database = match DbTarget::parse(&database_raw) {
            Ok(t) => t,
            Err(why) => {
                r.errors.push(format!("DATABASE_URL: {why}"));
                DbTarget::Sqlite(PathBuf::from("./data/steward.db"))
            }
        };
        let redis_url = r.optional("REDIS_URL");
        if let Some(u) = &redis_url {
            if !(u.starts_with("redis://")
                || u.starts_with("rediss://")
                || u.starts_with("unix://"))
            {
                r.errors
                    .push("REDIS_URL: expected a redis://, rediss:// or unix:// URL".to_owned());
            }
        }
        let cache_memory_mb = r.positive("CACHE_MEMORY_MB", 128);
        if cache_memory_mb > 1_048_576 {
            r.fail(
                "CACHE_MEMORY_MB",
                &cache_memory_mb.to_string(),
                "must be between 1 and 1048576",
            );
        }
        let opa_url = r.url("OPA_URL");
        let policy_engine_enabled = r.bool("POLICY_ENGINE_ENABLED", true);
        let secret_key = r.string("SECRET_KEY", DEV_SECRET_KEY);
        let access_token_expire_minutes = r.positive("ACCESS_TOKEN_EXPIRE_MINUTES", 60);
        let admin_api_key = r.string("ADMIN_API_KEY", DEV_ADMIN_API_KEY);
        let webhook_secret = r.string("WEBHOOK_SECRET", DEV_WEBHOOK_SECRET);
        let super_admin_email = r
            .string("SUPER_ADMIN_EMAIL", "admin@steward.local")
            .to_lowercase();
        if !super_admin_email.contains('@') {
            r.errors.push(format!(
                "SUPER_ADMIN_EMAIL={super_admin_email:?}: expected an email address"
            ));
        }
        let super_admin_password = r.string("SUPER_ADMIN_PASSWORD", DEV_SUPER_ADMIN_PASSWORD);
        let environment = match r
            .one_of(
                "ENVIRONMENT",
                "development",
                &["development", "test", "staging", "production"],
            )
            .as_str()
        {
            "test" => Environment::Test,
            "staging" => Environment::Staging,
            "production" => Environment::Production,
            _ => Environment::Development,
        };
        let frontend_url = r
            .string("FRONTEND_URL", "")
            .trim_end_matches('/')
            .to_owned();
        if !frontend_url.is_empty() {
            // Records an error when it is not an http(s) URL.
            let _ = r.url("FRONTEND_URL");
        }
        let agent_inactivity_seconds = r.positive("AGENT_INACTIVITY_SECONDS", 300);
        let hitl_risk_threshold = r.float("HITL_RISK_THRESHOLD", 0.8, 0.0, 1.0);
        let hitl_require_approval_id = r.bool("HITL_REQUIRE_APPROVAL_ID", false);
        let ws = crate::ws::WsSettings {
            queue: r.positive("WS_SEND_QUEUE", 1024) as usize,
            idle_timeout: std::time::Duration::from_secs(
                r.positive("WS_IDLE_TIMEOUT_SECONDS", 120),
            ),
            ping_interval: std::time::Duration::from_secs(
                r.positive("WS_PING_INTERVAL_SECONDS", 30),
            ),
            max_connections: r.positive("WS_MAX_CONNECTIONS", 10_000) as usize,
            max_per_tenant: r.positive("WS_MAX_CONNECTIONS_PER_TENANT", 2_000) as usize,
            max_per_user: r.positive("WS_MAX_CONNECTIONS_PER_USER", 2_000) as usize,
        };
        let hitl_approval_ttl_seconds = r
            .raw("HITL_APPROVAL_TTL_SECONDS")
            .map(|_| r.positive("HITL_APPROVAL_TTL_SECONDS", 1));
        let audit_signing_enabled = r.bool("AUDIT_SIGNING_ENABLED", true);
        let audit_signing_key = r
            .optional("AUDIT_SIGNING_KEY")
            .unwrap_or_else(|| secret_key.clone());
        let audit_retention_days = r.positive("AUDIT_RETENTION_DAYS", 90);
        let export_storage_path =
            PathBuf::from(r.string("EXPORT_STORAGE_PATH", "./storage/exports"));
        let export_retention_hours = r.positive("EXPORT_RETENTION_HOURS", 168);
        let job_lease_seconds = r.raw("JOB_LEASE_SECONDS").map(|v| {
            let n = r.positive("JOB_LEASE_SECONDS", 30);
            if !(3..=3600).contains(&n) {
                r.fail("JOB_LEASE_SECONDS", &v, "must be between 3 and 3600");
                return 30;
            }
            n
        });
        let max_request_body_bytes =
            r.parse::<usize>("MAX_REQUEST_BODY_BYTES", 1_048_576, "a byte count");
        if max_request_body_bytes < 1024 {
            r.errors
                .push("MAX_REQUEST_BODY_BYTES: must be at least 1024".to_owned());
        }
        let request_body_timeout_seconds = r.positive("REQUEST_BODY_TIMEOUT_SECONDS", 30);
        let log_level = match r
            .one_of(
                "LOG_LEVEL",
                "info",
                &["debug", "info", "warning", "warn", "error"],
            )
            .as_str()
        {
            "debug" => LogLevel::Debug,
            "warning" | "warn" => LogLevel::Warning,
            "error" => LogLevel::Error,
            _ => LogLevel::Info,
        };
        let log_json = r.bool("LOG_JSON_FORMAT", false);
        let model_storage_path = PathBuf::from(r.string("MODEL_STORAGE_PATH", "./models"));

        let backends = ["sklearn", "onnx", "hybrid"];
        let anomaly = AnomalySettings {
            model_backend: r.one_of("ANOMALY_MODEL_BACKEND", "hybrid", &backends),
            supervised_model: r.one_of(
                "ANOMALY_SUPERVISED_MODEL",
                "logistic",
                &["logistic", "forest"],
            ),
            ml_timeout_seconds: r.float("ANOMALY_ML_TIMEOUT_SECONDS", 0.3, 0.001, 60.0),
            onnx_model_path: PathBuf::from(r.string(
                "ANOMALY_ONNX_MODEL_PATH",
                "./models/anomaly/anomaly_model.onnx",
            )),
            external_enabled: r.bool("ANOMALY_EXTERNAL_ENABLED", false),
            external_url: r.url("ANOMALY_EXTERNAL_URL"),
            risk_ml_weight: r.float("ANOMALY_RISK_ML_WEIGHT", 0.4, 0.0, 1.0),
            auto_retrain_events: r.parse(
                "ANOMALY_AUTO_RETRAIN_EVENTS",
                100,
                "a non-negative integer",
            ),
            threshold: r.float("ANOMALY_THRESHOLD", 0.6, 0.0, 1.0),
            contamination: r.float("ANOMALY_CONTAMINATION", 0.1, 0.0001, 0.5),
            min_training_samples: r.positive("ANOMALY_MIN_TRAINING_SAMPLES", 50),
            training_max_bytes: usize::try_from(r.positive(
                "ANOMALY_TRAINING_MAX_BYTES",
                steward_anomaly::service::MAX_TRAINING_BYTES as u64,
            ))
            .unwrap_or(usize::MAX),
        };

        let guard = GuardSettings {
            enabled: r.bool("ENABLE_GUARD", true),
            enable_ml: r.bool("GUARD_ENABLE_ML", true),
            enable_rules: r.bool("GUARD_ENABLE_RULES", true),
            enable_policy_engine: r.bool("GUARD_ENABLE_POLICY_ENGINE", true),
            ml_threshold: r.float("GUARD_ML_THRESHOLD", 0.7, 0.0, 1.0),
            rule_threshold: r.float("GUARD_RULE_THRESHOLD", 0.8, 0.0, 1.0),
            threshold_block: r.float("GUARD_THRESHOLD_BLOCK", 0.7, 0.0, 1.0),
            threshold_warn: r.float("GUARD_THRESHOLD_WARN", 0.4, 0.0, 1.0),
            rule_weight: r.float("GUARD_RULE_WEIGHT", 0.3, 0.0, 1.0),
            ml_weight: r.float("GUARD_ML_WEIGHT", 0.5, 0.0, 1.0),
            policy_engine_weight: r.float("GUARD_POLICY_ENGINE_WEIGHT", 0.2, 0.0, 1.0),
            cache_ttl_seconds: r.parse("GUARD_CACHE_TTL_SECONDS", 300, "a number of seconds"),
            model_path: PathBuf::from(
                r.string("GUARD_MODEL_PATH", "./models/guard/guard_model.pkl"),
            ),
            model_backend: r.one_of("GUARD_MODEL_BACKEND", "hybrid", &backends),
            min_training_samples: r.positive("GUARD_MIN_TRAINING_SAMPLES", 100),
            external_enabled: r.bool("GUARD_EXTERNAL_ENABLED", false),
            external_url: r.url("GUARD_EXTERNAL_URL"),
            max_prompt_chars: r.positive("GUARD_MAX_PROMPT_CHARS", 32_768) as usize,
        };
        if guard.threshold_warn > guard.threshold_block {
            r.errors
                .push("GUARD_THRESHOLD_WARN: must not be above GUARD_THRESHOLD_BLOCK".to_owned());
        }

        let providers_raw = r.string("SSO_PROVIDERS_JSON", "[]");
        let providers = match serde_json::from_str::<serde_json::Value>(&providers_raw) {
            Ok(serde_json::Value::Array(items)) if items.iter().all(|i| i.is_object()) => {
                match steward_identity::sso::ProviderConfig::parse_all(&items) {
                    Ok(p) => p,
                    Err(errors) => {
                        r.errors.extend(errors);
                        Vec::new()
                    }
                }
            }
            _ => {
                r.errors.push(
                    "SSO_PROVIDERS_JSON: expected a JSON array of provider objects".to_owned(),
                );
                Vec::new()
            }
        };
        let mapping_raw = r.string("SSO_ROLE_MAPPING_JSON", "{}");
        let role_mapping = match serde_json::from_str::<BTreeMap<String, String>>(&mapping_raw) {
            Ok(map) => {
                let mut out = BTreeMap::new();
                for (group, role) in map {
                    match role.parse::<Role>() {
                        Ok(role) => {
                            out.insert(group, role);
                        }
                        Err(e) => r
                            .errors
                            .push(format!("SSO_ROLE_MAPPING_JSON: group {group:?}: role {e}")),
                    }
                }
                out
            }
            Err(_) => {
                r.errors.push(
                    "SSO_ROLE_MAPPING_JSON: expected a JSON object of group name to role"
                        .to_owned(),
                );
                BTreeMap::new()
            }
        };
        let sso = SsoSettings {
            providers,
            callback_url: r
                .url("SSO_CALLBACK_URL")
                .unwrap_or_else(|| "http://localhost:8080/api/v1/auth/sso/callback".to_owned()),
            auto_provision: r.bool("SSO_AUTO_PROVISION", true),
            role_mapping,
            state_ttl_seconds: r.positive("SSO_STATE_TTL_SECONDS", 600),
        };

        let siem = SiemSettings {
            enabled: r.bool("SIEM_ENABLED", false),
            format: r.one_of("SIEM_FORMAT", "syslog", &["syslog", "cef", "leef", "jsonl"]),
            transport: r.one_of(
                "SIEM_TRANSPORT",
                "auto",
                &["auto", "syslog", "splunk", "elk"],
            ),
            host: r.string("SIEM_HOST", "localhost"),
            port: r.parse("SIEM_PORT", 514, "a port number (0-65535)"),
            tls: r.bool("SIEM_TLS", false),
            tls_ca_file: r.readable_file("SIEM_TLS_CA_FILE"),
            batch_size: r.positive("SIEM_BATCH_SIZE", 100) as usize,
            batch_timeout_seconds: r.positive("SIEM_BATCH_TIMEOUT", 5),
            max_retries: r.parse("SIEM_MAX_RETRIES", 3, "a non-negative integer"),
            connect_timeout_seconds: r.positive("SIEM_CONNECT_TIMEOUT", 5),
            splunk_hec_url: r.url("SPLUNK_HEC_URL"),
            splunk_hec_token: r.optional("SPLUNK_HEC_TOKEN").map(Secret),
            splunk_hec_sourcetype: r.string("SPLUNK_HEC_SOURCETYPE", "steward"),
            elk_url: r.url("ELK_URL"),
            elk_index: r.string("ELK_INDEX", "steward-events"),
            elk_username: r.optional("ELK_USERNAME"),
            elk_password: r.optional("ELK_PASSWORD").map(Secret),
        };

        let integration_agent_framework_enabled =
            r.bool("INTEGRATION_AGENT_FRAMEWORK_ENABLED", true);
        let integration_model_provider_enabled = r.bool("INTEGRATION_MODEL_PROVIDER_ENABLED", true);

        if environment == Environment::Production {
            for (name, value, default) in [
                ("SECRET_KEY", &secret_key, DEV_SECRET_KEY),
                ("ADMIN_API_KEY", &admin_api_key, DEV_ADMIN_API_KEY),
                ("WEBHOOK_SECRET", &webhook_secret, DEV_WEBHOOK_SECRET),
                (
                    "SUPER_ADMIN_PASSWORD",
                    &super_admin_password,
                    DEV_SUPER_ADMIN_PASSWORD,
                ),
            ] {
                // A default padded with spaces is the default all the same.
                if r.raw(name).is_none() || value.trim() == default {
                    r.errors.push(format!(
                        "{name}: must be set to a non-default value when ENVIRONMENT=production"
                    ));
                }
            }
            if secret_key.chars().count() < 32 {
                r.errors.push(
                    "SECRET_KEY: must be at least 32 characters when ENVIRONMENT=production"
                        .to_owned(),
                );
            }
        }

        if !r.errors.is_empty() {
            return Err(ConfigError(r.errors));
        }
        Ok(Settings {
            host,
            port,
            database,
            redis_url: redis_url.map(Secret),
            cache_memory_bytes: cache_memory_mb.min(1_048_576) * 1024 * 1024,
            opa_url,
            policy_engine_enabled,
            secret_key: Secret(secret_key),
            access_token_expire_minutes,
            admin_api_key: Secret(admin_api_key),
            webhook_secret: Secret(webhook_secret),
            super_admin_email,
            super_admin_password: Secret(super_admin_password),
            environment,
            frontend_url,
            agent_inactivity_seconds,
            hitl_risk_threshold,
            hitl_require_approval_id,
            hitl_approval_ttl_seconds,
            audit_signing_enabled,
            audit_signing_key: Secret(audit_signing_key),
            audit_retention_days,
            export_storage_path,
            export_retention_hours,
            job_lease_seconds,
            max_request_body_bytes,
            request_body_timeout_seconds,
            log_level,
            log_json,
            model_storage_path,
            anomaly,
            guard,
            sso,
            siem,
            integration_agent_framework_enabled,
            integration_model_provider_enabled,
            ws,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        let map: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn defaults_are_the_contract_defaults() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.port, 8080);
        assert_eq!(
            s.database,
            DbTarget::Sqlite(PathBuf::from("./data/steward.db"))
        );
        assert_eq!(s.access_token_expire_minutes, 60);
        assert_eq!(s.max_request_body_bytes, 1_048_576);
        assert_eq!(s.environment, Environment::Development);
        assert_eq!(s.audit_signing_key, s.secret_key);
        assert!((s.guard.threshold_block - 0.7).abs() < 1e-9);
        assert_eq!(s.siem.port, 514);
        assert!(s.redis_url.is_none());
    }

    #[test]
    fn bad_values_name_every_variable() {
        let err = settings(&[
            ("PORT", "abc"),
            ("LOG_JSON_FORMAT", "maybe"),
            ("DATABASE_URL", "mysql://x"),
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("PORT"), "{err}");
        assert!(err.contains("LOG_JSON_FORMAT"), "{err}");
        assert!(err.contains("DATABASE_URL"), "{err}");
    }

    #[test]
    fn job_lease_is_optional_and_bounded() {
        assert_eq!(settings(&[]).unwrap().job_lease_seconds, None);
        let s = settings(&[("JOB_LEASE_SECONDS", "4")]).unwrap();
        assert_eq!(s.job_lease_seconds, Some(4));
        for bad in ["0", "2", "3601", "soon"] {
            let err = settings(&[("JOB_LEASE_SECONDS", bad)])
                .unwrap_err()
                .to_string();
            assert!(err.contains("JOB_LEASE_SECONDS"), "{bad}: {err}");
        }
    }

    #[test]
    fn production_refuses_development_secrets() {
        let err = settings(&[("ENVIRONMENT", "production")])
            .unwrap_err()
            .to_string();
        for name in [
            "SECRET_KEY",
            "ADMIN_API_KEY",
            "WEBHOOK_SECRET",
            "SUPER_ADMIN_PASSWORD",
        ] {
            assert!(err.contains(name), "{name} missing from {err}");
        }
        let short = settings(&[
            ("ENVIRONMENT", "production"),
            ("SECRET_KEY", "short-but-not-default"),
            ("ADMIN_API_KEY", "a"),
            ("WEBHOOK_SECRET", "b"),
            ("SUPER_ADMIN_PASSWORD", "c"),
        ])
        .unwrap_err()
        .to_string();
        assert!(short.contains("at least 32"), "{short}");
        let padded = settings(&[
            ("ENVIRONMENT", "production"),
            ("SECRET_KEY", "0123456789abcdef0123456789abcdef-prod"),
            ("ADMIN_API_KEY", " dev-admin-key-change-me "),
            ("WEBHOOK_SECRET", "b"),
            ("SUPER_ADMIN_PASSWORD", " change-me-now "),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            padded.contains("ADMIN_API_KEY") && padded.contains("SUPER_ADMIN_PASSWORD"),
            "{padded}"
        );
        assert!(settings(&[
            ("ENVIRONMENT", "production"),
            ("SECRET_KEY", "0123456789abcdef0123456789abcdef-prod"),
            ("ADMIN_API_KEY", "a"),
            ("WEBHOOK_SECRET", "b"),
            ("SUPER_ADMIN_PASSWORD", "c"),
        ])
        .is_ok());
    }

    #[test]
    fn secrets_are_redacted_in_debug() {
        let s = settings(&[("SECRET_KEY", "super-secret-value")]).unwrap();
        assert!(!format!("{s:?}").contains("super-secret-value"));
    }

    #[test]
    fn urls_are_checked_and_redacted() {
        let err = settings(&[
            ("OPA_URL", "ftp://user:hunter2@opa"),
            ("FRONTEND_URL", "nope"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("OPA_URL") && err.contains("FRONTEND_URL"),
            "{err}"
        );
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn a_missing_siem_ca_file_is_refused_at_start_up() {
        let err = settings(&[("SIEM_TLS_CA_FILE", "/nonexistent/ca.pem")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("SIEM_TLS_CA_FILE"), "{err}");
    }

    #[test]
    fn role_mapping_is_checked() {
        assert!(settings(&[("SSO_ROLE_MAPPING_JSON", r#"{"g": "root"}"#)]).is_err());
        let s = settings(&[("SSO_ROLE_MAPPING_JSON", r#"{"g": "developer"}"#)]).unwrap();
        assert_eq!(s.sso.role_mapping.get("g"), Some(&Role::Developer));
    }
}
