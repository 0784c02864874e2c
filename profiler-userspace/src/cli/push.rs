//! The `--push` flags → [`Push`]. A child of `cli`, the only module that
//! sees clap.
use std::{path::PathBuf, time::Duration};

use clap::Args;

use super::values::{parse_duration, parse_size};
use crate::config::{Push, PushProtocol};

/// Pushing profiles to Pyroscope, Parca or an OpenTelemetry backend.
#[derive(Debug, Args)]
pub(super) struct PushArgs {
    /// Push profiles to this backend too (repeatable), e.g.
    /// http://pyroscope:4040 (Pyroscope or Alloy), http://parca:7070,
    /// http://otel-collector:4318 (OTLP). The protocol's path is appended.
    #[arg(long = "push", value_name = "URL")]
    urls: Vec<String>,

    /// How pushes are sent: `pyroscope` (push.v1.PusherService/Push),
    /// `parca` (ProfileStoreService/WriteRaw over its HTTP gateway) or
    /// `otlp` (OTLP profiles, POST /v1development/profiles).
    #[arg(
        long,
        value_name = "PROTOCOL",
        default_value = "pyroscope",
        requires = "urls"
    )]
    push_protocol: ProtocolFlag,

    /// How often profiles are pushed, independent of --interval.
    #[arg(long, value_name = "DUR", default_value = "15s", value_parser = parse_duration, requires = "urls")]
    push_interval: Duration,

    /// Where pushes wait while a backend is unreachable (one directory per
    /// backend); kept across restarts.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "/var/lib/profiler/push-spool",
        requires = "urls"
    )]
    push_spool_dir: PathBuf,

    /// Most disk one backend's waiting pushes take, e.g. 64M, 1G; past it
    /// the oldest are dropped (and counted).
    #[arg(long, value_name = "BYTES", default_value = "256M", value_parser = parse_size, requires = "urls")]
    push_spool_max: u64,

    /// Give up on one push request after this long (then retry later).
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = parse_duration, requires = "urls")]
    push_timeout: Duration,

    /// Trust the certificates in this PEM file too, besides the system's.
    #[arg(long, value_name = "FILE", requires = "urls")]
    push_ca: Option<PathBuf>,

    /// Authenticate with the credentials in this file (mode 0600 or 0400,
    /// owned by root): one line, `Bearer TOKEN` or `Basic USER:PASSWORD`.
    #[arg(long, value_name = "FILE", requires = "urls")]
    push_auth_file: Option<PathBuf>,

    /// Tenant of a multi-tenant server: Pyroscope's `X-Scope-OrgID`, Parca's
    /// tenant.
    #[arg(long, value_name = "ID", requires = "urls")]
    push_tenant: Option<String>,
}

/// `--push-protocol`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ProtocolFlag {
    Pyroscope,
    Parca,
    Otlp,
}

impl PushArgs {
    /// The validated push settings; `None` without `--push`.
    pub(super) fn config(&self) -> Result<Option<Push>, String> {
        if self.urls.is_empty() {
            return Ok(None);
        }
        let mut endpoints = Vec::with_capacity(self.urls.len());
        for raw in &self.urls {
            let url = url::Url::parse(raw)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
                .ok_or_else(|| {
                    format!(
                        "--push {raw:?} is not an http or https URL (e.g. http://pyroscope:4040)"
                    )
                })?;
            if !url.username().is_empty() || url.password().is_some() {
                return Err(format!(
                    "--push {raw:?}: credentials do not belong in the URL (visible in `ps` and logs); use --push-auth-file"
                ));
            }
            if endpoints.contains(&url) {
                return Err(format!("--push {raw:?} is given twice"));
            }
            endpoints.push(url);
        }
        if self.push_interval < Duration::from_secs(1) {
            return Err("--push-interval must be at least 1s".into());
        }
        if self.push_timeout.is_zero() {
            return Err("--push-timeout must be longer than 0".into());
        }
        if self.push_spool_max < 64 << 10 {
            return Err("--push-spool-max must be at least 64K".into());
        }
        if let Some(tenant) = &self.push_tenant
            && (tenant.is_empty() || tenant.chars().any(char::is_control))
        {
            return Err("--push-tenant must be a non-empty name without control characters".into());
        }
        Ok(Some(Push {
            endpoints,
            protocol: match self.push_protocol {
                ProtocolFlag::Pyroscope => PushProtocol::Pyroscope,
                ProtocolFlag::Parca => PushProtocol::Parca,
                ProtocolFlag::Otlp => PushProtocol::Otlp,
            },
            interval: self.push_interval,
            spool_dir: self.push_spool_dir.clone(),
            spool_max_bytes: self.push_spool_max,
            timeout: self.push_timeout,
            ca_file: self.push_ca.clone(),
            auth_file: self.push_auth_file.clone(),
            tenant: self.push_tenant.clone(),
        }))
    }
}
