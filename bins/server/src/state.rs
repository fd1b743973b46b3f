//! The state shared by every request: settings, the store, cache and bus, metrics.

use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::PrometheusHandle;
use steward_audit::{AuditService, ChainHasher};
use steward_core::{Cache, ErrorKind, EventBus, MemoryBus, MemoryCache, MemoryPresence, Presence};
use steward_discovery::{Discovery, IntegrationSettings};
use steward_hitl::{Hitl, HitlConfig};
use steward_identity::{Identity, IdentityConfig};
use steward_policy::{EmbeddedEngine, OpaEngine, OpaSettings, PolicyConfig, PolicyService};
use steward_registry::Registry;

use crate::wiring::{
    AuditActivity, DefaultPolicies, HitlApprovals, RefreshAgent, RegistryAgents, RegistryDirectory,
    RegistryStatuses,
};
use steward_store::redis::{RedisBus, RedisCache, RedisHandle, RedisPresence};
use steward_store::{DbPool, DbSettings};

use crate::settings::Settings;

/// Everything a handler may need. Cheap to share (`web::Data` holds it in an `Arc`).
pub struct AppState {
    pub settings: Settings,
    pub db: DbPool,
    pub cache: Arc<dyn Cache>,
    pub bus: Arc<dyn EventBus>,
    pub metrics: Option<PrometheusHandle>,
    pub started: Instant,
    pub identity: Identity,
    /// Single sign-on (OIDC providers, flow state in the shared cache).
    pub sso: steward_identity::sso::Sso,
    pub audit: AuditService,
    pub registry: Registry,
    pub discovery: Discovery,
    pub policy: PolicyService,
    pub hitl: Hitl,
    pub guard: steward_guard::Guard,
    /// This instance's WebSocket connections (events fanned out by tenant).
    pub ws: Arc<crate::ws::WsHub>,
    /// The remote policy engine when `OPA_URL` is set (`policy` evaluates through it).
    pub opa: Option<Arc<OpaEngine>>,
    /// SIEM export (the bus handed to the services queues events for it when enabled).
    pub siem: steward_siem::Siem,
    pub anomaly: steward_anomaly::service::Detector,
}

/// How long one readiness check may take.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Start-up attempts at reaching the database before giving up (about 20 s).
const DB_START_ATTEMPTS: u32 = 10;

impl AppState {
    /// Connects and migrates the store, builds the cache and bus, runs the first-boot
    /// bootstrap. Errors stop the start.
    pub async fn start(settings: Settings) -> anyhow::Result<AppState> {
        let mut attempt = 1;
        let report = loop {
            match steward_store::migrate::run(&settings.database).await {
                Ok(r) => break r,
                Err(e) if e.kind == ErrorKind::Unavailable && attempt < DB_START_ATTEMPTS => {
                    tracing::warn!(attempt, error = %e, "database not reachable yet; retrying");
                    attempt += 1;
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                Err(e) => anyhow::bail!("database migration failed: {e}"),
            }
        };
        for version in &report.applied {
            tracing::info!(version = %version, "migration applied");
        }
        let db = DbPool::new(
            &settings.database,
            &DbSettings {
                max_connections: 32,
                ..DbSettings::default()
            },
        )
        .map_err(|e| anyhow::anyhow!("database pool: {e}"))?;

        let (cache, bus): (Arc<dyn Cache>, Arc<dyn EventBus>) = match &settings.redis_url {
            Some(url) => {
                let handle = RedisHandle::new(url.expose(), "steward:", CHECK_TIMEOUT)
                    .map_err(|e| anyhow::anyhow!("REDIS_URL: {e}"))?;
                (
                    Arc::new(RedisCache(handle.clone())),
                    Arc::new(RedisBus::new(handle)),
                )
            }
            None => (
                Arc::new(MemoryCache::with_volatile_budget(
                    settings.cache_memory_bytes,
                )),
                Arc::new(MemoryBus::new()),
            ),
        };
        if let Err(e) = cache.ping().await {
            // Not fatal: readiness reports it until the cache answers.
            tracing::warn!(error = %e, "the cache does not answer yet");
        }

        let outcome = steward_identity::bootstrap(
            &db,
            &settings.super_admin_email,
            settings.super_admin_password.expose(),
        )
        .await
        .map_err(|e| anyhow::anyhow!("first-boot bootstrap failed: {e}"))?;
        if let steward_identity::BootstrapOutcome::Created { tenant } = &outcome {
            tracing::info!(
                email = %settings.super_admin_email,
                tenant_created = tenant.is_some(),
                "first boot: super admin created"
            );
        }

        let state = AppState::new(settings, db, cache, bus).map_err(|e| anyhow::anyhow!("{e}"))?;
        if let steward_identity::BootstrapOutcome::Created {
            tenant: Some(tenant),
        } = outcome
        {
            state
                .policy
                .provision_defaults(tenant)
                .await
                .map_err(|e| anyhow::anyhow!("default policies of the first tenant: {e}"))?;
        }
        Ok(state)
    }

    /// Assembles the state and the domain services from connected parts (no migration, no
    /// bootstrap).
    pub fn new(
        settings: Settings,
        db: DbPool,
        cache: Arc<dyn Cache>,
        bus: Arc<dyn EventBus>,
    ) -> steward_core::Result<AppState> {
        let siem = steward_siem::Siem::new(db.clone(), crate::routes::siem::config(&settings));
        let bus = siem.wrap_bus(bus);
        let signing_key = settings
            .audit_signing_enabled
            .then(|| settings.audit_signing_key.expose().as_bytes().to_vec());
        let audit = AuditService::new(
            db.clone(),
            bus.clone(),
            ChainHasher::new(signing_key.as_deref()),
        )?;
        let registry = Registry::new(
            db.clone(),
            bus.clone(),
            Arc::new(AuditActivity(audit.clone())),
            Duration::from_secs(settings.agent_inactivity_seconds),
        );
        let audit = audit
            .with_hook(Arc::new(RefreshAgent::new(registry.clone())))
            .with_agents(Arc::new(RegistryDirectory(registry.clone())));
        let discovery = Discovery::new(
            db.clone(),
            bus.clone(),
            registry.clone(),
            IntegrationSettings {
                agent_framework_enabled: settings.integration_agent_framework_enabled,
                model_provider_enabled: settings.integration_model_provider_enabled,
            },
        );
        let anomaly = build_anomaly(&settings, &db, &bus, &registry, &discovery);
        let audit = audit.with_hook(Arc::new(crate::wiring::AfterWriteAll(vec![
            Arc::new(RefreshAgent::new(registry.clone())),
            Arc::new(crate::wiring::AnomalySamples(anomaly.clone())),
        ])));
        let policy_config = PolicyConfig {
            hitl_risk_threshold: settings.hitl_risk_threshold,
            require_approval_id: settings.hitl_require_approval_id,
            ..PolicyConfig::default()
        };
        let g = &settings.guard;
        let guard = steward_guard::Guard::new(
            db.clone(),
            cache.clone(),
            Arc::new(audit.clone()),
            Arc::new(crate::wiring::RegistryResolver(registry.clone())),
            steward_guard::GuardConfig {
                enabled: g.enabled,
                aggregate: steward_guard::AggregateConfig {
                    rules_enabled: g.enable_rules,
                    ml_enabled: g.enable_ml,
                    policy_engine_enabled: g.enable_policy_engine,
                    rule_weight: g.rule_weight,
                    ml_weight: g.ml_weight,
                    policy_engine_weight: g.policy_engine_weight,
                    threshold_block: g.threshold_block,
                    threshold_warn: g.threshold_warn,
                    rule_threshold: g.rule_threshold,
                    ml_threshold: g.ml_threshold,
                },
                cache_ttl: Duration::from_secs(g.cache_ttl_seconds),
                max_prompt_chars: g.max_prompt_chars,
                model_backend: g.model_backend.clone(),
                min_training_samples: g.min_training_samples,
            },
            steward_policy::guard_module(),
            if g.enable_ml {
                steward_guard::bootstrap_model()
            } else {
                None
            },
        )
        .with_external(steward_store::external::ExternalScorer::from_settings(
            "GUARD",
            g.external_enabled,
            g.external_url.as_deref(),
        ))
        // The ONNX artifact when the backend is `onnx`/`hybrid` and GUARD_MODEL_PATH ends in
        // `.onnx` (else, or when it cannot be loaded, the native model serves).
        .with_onnx(if g.enable_ml {
            steward_guard::onnx::load_configured(&g.model_backend, &g.model_path)
        } else {
            None
        });
        let hitl = Hitl::new(
            db.clone(),
            bus.clone(),
            Arc::new(audit.clone()),
            Arc::new(RegistryStatuses(registry.clone())),
            HitlConfig {
                approval_ttl: settings.hitl_approval_ttl_seconds.map(Duration::from_secs),
            },
        );
        let mut policy = PolicyService::new(
            db.clone(),
            bus.clone(),
            Arc::new(audit.clone()),
            Arc::new(RegistryAgents(registry.clone())),
            Arc::new(crate::wiring::DetectorRisk(anomaly.clone())),
            policy_config.clone(),
        )
        .with_approvals(Arc::new(HitlApprovals(hitl.clone())));
        let opa = match &settings.opa_url {
            Some(url) => {
                let embedded = Arc::new(EmbeddedEngine::new(db.clone(), policy_config.engine));
                let opa = Arc::new(OpaEngine::new(
                    db.clone(),
                    embedded,
                    OpaSettings::new(url.clone()),
                )?);
                policy = policy.with_engine(opa.clone());
                Some(opa)
            }
            None => None,
        };
        let sso_providers = settings
            .sso
            .providers
            .iter()
            .map(|p| p.id.clone())
            .collect();
        let identity = Identity::new(
            db.clone(),
            bus.clone(),
            Arc::new(audit.clone()),
            Arc::new(DefaultPolicies(policy.clone())),
            IdentityConfig {
                secret_key: settings.secret_key.expose().to_owned(),
                token_minutes: settings.access_token_expire_minutes,
                admin_api_key: settings.admin_api_key.expose().to_owned(),
                sso_providers,
            },
        )?;
        let sso = steward_identity::sso::Sso::new(
            identity.clone(),
            cache.clone(),
            steward_identity::sso::SsoSettings {
                providers: settings.sso.providers.clone(),
                callback_url: settings.sso.callback_url.clone(),
                frontend_url: settings.frontend_url.clone(),
                auto_provision: settings.sso.auto_provision,
                role_mapping: settings.sso.role_mapping.clone(),
                state_ttl: Duration::from_secs(settings.sso.state_ttl_seconds),
                max_pending_flows: steward_identity::sso::MAX_PENDING_FLOWS,
            },
        )?;
        let presence: Arc<dyn Presence> = match &settings.redis_url {
            Some(url) => Arc::new(RedisPresence::new(RedisHandle::new(
                url.expose(),
                "steward:",
                CHECK_TIMEOUT,
            )?)),
            None => Arc::new(MemoryPresence::new()),
        };
        let ws = Arc::new(crate::ws::WsHub::new(presence, settings.ws));
        Ok(AppState {
            ws,
            settings,
            db,
            cache,
            bus,
            metrics: crate::metrics::install(),
            started: Instant::now(),
            identity,
            sso,
            audit,
            registry,
            discovery,
            policy,
            hitl,
            guard,
            opa,
            siem,
            anomaly,
        })
    }
}

/// The anomaly detector: reports, the in-memory scorer, the model codec, its settings.
fn build_anomaly(
    settings: &Settings,
    db: &DbPool,
    bus: &Arc<dyn EventBus>,
    registry: &Registry,
    discovery: &Discovery,
) -> steward_anomaly::service::Detector {
    use steward_anomaly::scorer::{ScoreConfig, Scorer};
    use steward_store::external::ExternalScorer;
    let a = &settings.anomaly;
    let codec =
        steward_anomaly::codec::AnomalyCodec::new(&a.model_backend, Some(&a.onnx_model_path))
            .with_supervised(steward_anomaly::supervised::SupervisedKind::parse(
                &a.supervised_model,
            ));
    // The backend that serves: `onnx`/`hybrid` only with a loaded artifact.
    let backend = codec.backend_name();
    let scorer = Arc::new(
        Scorer::new(ScoreConfig {
            ml_weight: a.risk_ml_weight,
            threshold: a.threshold,
            ml_timeout: Duration::from_secs_f64(a.ml_timeout_seconds.max(0.001)),
            ml_enabled: a.model_backend != "rules",
            backend,
        })
        .with_external(ExternalScorer::from_settings(
            "ANOMALY",
            a.external_enabled,
            a.external_url.as_deref(),
        )),
    );
    let reports = steward_anomaly::reports::Reports::new(
        db.clone(),
        bus.clone(),
        Arc::new(crate::wiring::AnomalyHooks {
            registry: registry.clone(),
            discovery: discovery.clone(),
            scorer: scorer.clone(),
        }),
    );
    steward_anomaly::service::Detector::new(
        db.clone(),
        bus.clone(),
        reports,
        scorer,
        Arc::new(codec.clone()),
        steward_anomaly::service::DetectorConfig {
            contamination: a.contamination,
            min_training_samples: i64::try_from(a.min_training_samples).unwrap_or(i64::MAX),
            auto_retrain_events: a.auto_retrain_events,
            onnx_loaded: codec.onnx_loaded(),
            training_max_bytes: a.training_max_bytes,
        },
    )
}
