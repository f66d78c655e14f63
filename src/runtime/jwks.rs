//! The JWKS refresh loops: one task per `identity.jwt.issuers[]` entry of the current snapshot,
//! fetching its key set at start, again when `Cache-Control: max-age` (clamped to `refresh`)
//! says, and at once when a token names an unknown `kid` (asked through
//! [`IssuerKeys::want_refetch`]). Fetches are HTTPS (plain HTTP only on loopback), bounded in
//! time and size, and follow redirects only within the same host.

use crate::config::{idp_url, JwksSource, JwtIssuerSettings};
use crate::identity::issuers::IssuerKeys;
use crate::identity::jwks::{
    discovery_jwks_uri, discovery_url, parse_jwks, refresh_after, JwksKey, MAX_JWKS_BYTES,
};
use crate::observe::metrics::METRICS;
use crate::snapshot::App;
use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// How often the service looks for new or removed issuers and updates the age gauges.
const TICK: Duration = Duration::from_millis(200);
/// Longest wait before retrying a failed fetch (sooner when `refresh.min` is shorter).
const MAX_RETRY: Duration = Duration::from_secs(30);
/// Redirects followed per fetch (same host only).
const MAX_REDIRECTS: usize = 5;

/// A redirect the fetch does not follow (another host, not https, too many).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct RedirectRefused(String);

/// Background service: keeps one refresh task per issuer of the current snapshot.
pub struct JwksRefresh {
    pub app: Arc<App>,
}

/// A running refresh task and the refetch counts already exported.
struct Running {
    issuer: Arc<IssuerKeys>,
    task: JoinHandle<()>,
    triggered: u64,
    throttled: u64,
}

#[async_trait]
impl BackgroundService for JwksRefresh {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut running: HashMap<usize, Running> = HashMap::new();
        loop {
            let snap = self.app.snapshot.load_full();
            let issuers = snap.auth.issuers();
            let live: Vec<usize> = issuers.iter().map(|i| Arc::as_ptr(i) as usize).collect();
            running.retain(|id, r| {
                let keep = live.contains(id);
                if !keep {
                    r.task.abort();
                    let name = r.issuer.settings.issuer.as_str();
                    if !issuers.iter().any(|i| i.settings.issuer == name) {
                        forget(name);
                    }
                }
                keep
            });
            for issuer in issuers {
                running
                    .entry(Arc::as_ptr(issuer) as usize)
                    .or_insert_with(|| Running {
                        issuer: issuer.clone(),
                        task: tokio::spawn(refresh_loop(issuer.clone())),
                        triggered: 0,
                        throttled: 0,
                    });
            }
            for r in running.values_mut() {
                export(r);
            }
            tokio::select! {
                _ = tokio::time::sleep(TICK) => {}
                _ = shutdown.changed() => if *shutdown.borrow() {
                    running.values().for_each(|r| r.task.abort());
                    return;
                },
            }
        }
    }
}

/// Removes the gauges of an issuer no longer configured, so that `/metrics` does not go on
/// showing its last key count and a frozen age. Its counters stay (they only ever grow, and a
/// scrape that saw them must not see them go back).
fn forget(issuer: &str) {
    let _ = METRICS.jwks_keys.remove_label_values(&[issuer]);
    let _ = METRICS.jwks_age.remove_label_values(&[issuer]);
}

/// Updates the gauges of one issuer and adds its new refetch counts.
fn export(r: &mut Running) {
    let name = r.issuer.settings.issuer.as_str();
    let last = r.issuer.last();
    METRICS
        .jwks_keys
        .with_label_values(&[name])
        .set(last.as_ref().map_or(0, |s| s.keys.len() as i64));
    METRICS.jwks_age.with_label_values(&[name]).set(
        last.as_ref()
            .map_or(-1, |s| s.fetched_at.elapsed().as_secs() as i64),
    );
    let counts = &r.issuer.refetches;
    for (result, seen, now) in [
        (
            "triggered",
            &mut r.triggered,
            counts.triggered.load(Ordering::Relaxed),
        ),
        (
            "throttled",
            &mut r.throttled,
            counts.throttled.load(Ordering::Relaxed),
        ),
    ] {
        if now > *seen {
            METRICS
                .jwks_unknown_kid_refetches
                .with_label_values(&[name, result])
                .inc_by(now - *seen);
            *seen = now;
        }
    }
}

/// Fetches one issuer's key set for as long as the task lives.
async fn refresh_loop(issuer: Arc<IssuerKeys>) {
    let settings = &issuer.settings;
    let name = settings.issuer.as_str();
    let client = match client(settings) {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::error!(issuer = name, error = %e, "JWKS client cannot be built; the issuer stays without keys");
            None
        }
    };
    let mut jwks_uri: Option<String> = None;
    loop {
        issuer.fetch_started();
        let outcome = match &client {
            Some(c) => fetch(c, settings, &mut jwks_uri).await,
            None => Err(("tls", "no HTTPS client".to_string())),
        };
        let next = match outcome {
            Ok((keys, cache_control)) => {
                METRICS.jwks_fetches.with_label_values(&[name, "ok"]).inc();
                let next = refresh_after(
                    cache_control.as_deref(),
                    settings.refresh_min,
                    settings.refresh_max,
                );
                tracing::debug!(
                    issuer = name,
                    keys = keys.len(),
                    refresh_in_s = next.as_secs(),
                    "JWKS fetched"
                );
                issuer.fetch_ended(Some(keys), Instant::now());
                next
            }
            Err((label, why)) => {
                METRICS.jwks_fetches.with_label_values(&[name, label]).inc();
                let stale = issuer.current(Instant::now()).is_some();
                tracing::warn!(issuer = name, result = label, error = %why, serving_last_good_set = stale, "JWKS fetch failed");
                // Discovery is redone after a failure: the IdP may have moved its JWKS.
                jwks_uri = None;
                issuer.fetch_ended(None, Instant::now());
                settings.refresh_min.min(MAX_RETRY)
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(next) => {}
            _ = issuer.wake.notified() => {}
        }
    }
}

/// The HTTP client of one issuer: the fetch timeout over the whole exchange, the CA file (or
/// the system roots), redirects only to the same host and only by the URL rules.
fn client(settings: &JwtIssuerSettings) -> Result<reqwest::Client, String> {
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt
            .previous()
            .first()
            .and_then(|u| u.host_str().map(str::to_string));
        let refuse = |why: String| RedirectRefused(why);
        if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(refuse("too many redirects".into()))
        } else if attempt.url().host_str().map(str::to_string) != first {
            let to = attempt.url().host_str().unwrap_or("").to_string();
            attempt.error(refuse(format!("redirect to another host ({to})")))
        } else if let Err(e) = idp_url(attempt.url().as_str()) {
            attempt.error(refuse(format!("redirect to {e}")))
        } else {
            attempt.follow()
        }
    });
    let mut builder = reqwest::Client::builder()
        .timeout(settings.fetch_timeout)
        .connect_timeout(settings.fetch_timeout)
        .redirect(policy)
        // Fetches are minutes apart: a kept connection would mostly be one the IdP already closed.
        .pool_max_idle_per_host(0)
        .user_agent(concat!("tollgate/", env!("CARGO_PKG_VERSION")));
    if let Some(file) = &settings.ca_file {
        let pem = std::fs::read(file).map_err(|e| format!("cannot read \"{file}\": {e}"))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| format!("\"{file}\" is not a PEM CA bundle: {e}"))?;
        builder = builder.tls_built_in_root_certs(false);
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder.build().map_err(|e| e.to_string())
}

/// One fetch: discovery when needed, then the JWKS. Ok: the usable keys (at least one) and the
/// `Cache-Control` of the JWKS response; Err: a metric label and the reason.
async fn fetch(
    client: &reqwest::Client,
    settings: &JwtIssuerSettings,
    jwks_uri: &mut Option<String>,
) -> Result<(Vec<JwksKey>, Option<String>), (&'static str, String)> {
    let url = match (&settings.source, jwks_uri.as_ref()) {
        (JwksSource::Url(url), _) => url.clone(),
        (JwksSource::Discovery, Some(uri)) => uri.clone(),
        (JwksSource::Discovery, None) => {
            let (body, _) = get(client, &discovery_url(&settings.issuer)).await?;
            let uri = discovery_jwks_uri(&body, &settings.issuer).map_err(|e| ("discovery", e))?;
            idp_url(&uri).map_err(|e| ("discovery", format!("jwks_uri {e}")))?;
            *jwks_uri = Some(uri.clone());
            uri
        }
    };
    let (body, cache_control) = get(client, &url).await?;
    let parsed = parse_jwks(&body).map_err(|e| (e.label(), e.to_string()))?;
    let name = settings.issuer.as_str();
    for r in &parsed.rejected {
        METRICS
            .jwks_keys_rejected
            .with_label_values(&[name, r.reason])
            .inc();
        tracing::warn!(
            issuer = name,
            kid = r.kid.as_deref().unwrap_or("-"),
            reason = r.reason,
            "JWKS key skipped"
        );
    }
    if parsed.keys.is_empty() {
        return Err(("invalid", "the JWKS holds no usable key".into()));
    }
    Ok((parsed.keys, cache_control))
}

/// GET `url`: a 2xx body of at most [`MAX_JWKS_BYTES`], and its `Cache-Control`.
async fn get(
    client: &reqwest::Client,
    url: &str,
) -> Result<(Vec<u8>, Option<String>), (&'static str, String)> {
    let failed = |e: reqwest::Error| {
        // The whole chain: reqwest's own text hides the cause (TLS, refused, redirect).
        let mut why = format!("{url}: {e}");
        let mut redirect = false;
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            redirect |= cause.is::<RedirectRefused>();
            why += &format!(": {cause}");
            source = cause.source();
        }
        let label = if e.is_timeout() {
            "timeout"
        } else if redirect || e.is_redirect() {
            "redirect"
        } else {
            "connect"
        };
        (label, why)
    };
    let mut resp = client
        .get(url)
        .header(http::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(failed)?;
    if !resp.status().is_success() {
        return Err(("status", format!("{url}: HTTP {}", resp.status())));
    }
    let too_large = || {
        (
            "too_large",
            format!("{url}: larger than {MAX_JWKS_BYTES} bytes"),
        )
    };
    if resp
        .content_length()
        .is_some_and(|n| n > MAX_JWKS_BYTES as u64)
    {
        return Err(too_large());
    }
    let cache_control = resp
        .headers()
        .get(http::header::CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(failed)? {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, cache_control))
}
