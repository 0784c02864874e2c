//! Pushing profiles to fleet backends (Pyroscope, Parca, OpenTelemetry).
//!
//! The pipeline hands each push period's symbolized profile to
//! [`Pusher::submit`] and goes on at once. A thread of its own splits it
//! into one series per program (`series`), encodes the protocol's request
//! bodies (`wire`, `otlp`) and gives them to one task per backend
//! (`endpoint`), which spools each body on disk (`spool`) before sending
//! it (`client`), in order, with retries. So pushing never delays a
//! window or a file, and a backend that is down loses nothing that fits
//! the spool, across restarts too.
mod auth;
pub mod client;
mod endpoint;
pub mod otlp;
pub mod series;
mod spool;
pub mod wire;

use std::{
    path::{Path, PathBuf},
    sync::{Arc, mpsc as std_mpsc},
    time::Duration,
};

use tokio::{
    sync::{mpsc, watch},
    time::Instant,
};

pub use auth::AuthError;

use crate::{
    config::{Push, PushProtocol},
    output::metrics::PushMetrics,
    profile::Profile,
};

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("reading --push-auth-file")]
    Auth(#[source] AuthError),
    #[error("reading --push-ca {0}")]
    ReadCa(PathBuf, #[source] std::io::Error),
    #[error("--push-ca {0} holds no PEM certificate")]
    ParseCa(PathBuf, #[source] reqwest::Error),
    #[error("setting up the HTTP client for {0}")]
    Client(String, #[source] reqwest::Error),
    #[error("opening the push spool {0}")]
    Spool(PathBuf, #[source] std::io::Error),
    #[error("starting the push thread")]
    Thread(#[source] std::io::Error),
}

/// The pushing side of the daemon: a handle on the push thread.
pub struct Pusher {
    profiles: mpsc::UnboundedSender<Profile>,
    deadline: watch::Sender<Option<Instant>>,
    done: std_mpsc::Receiver<()>,
}

/// The spool directory of one backend: the protocol and the URL, made a
/// file name.
fn spool_dir(root: &Path, protocol: PushProtocol, url: &url::Url) -> PathBuf {
    let protocol = match protocol {
        PushProtocol::Pyroscope => "pyroscope",
        PushProtocol::Parca => "parca",
        PushProtocol::Otlp => "otlp",
    };
    let url: String = url
        .as_str()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    root.join(format!("{protocol}-{url}"))
}

fn read_roots(path: &Path) -> Result<Vec<reqwest::Certificate>, PushError> {
    let pem = std::fs::read(path).map_err(|e| PushError::ReadCa(path.to_owned(), e))?;
    let roots = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| PushError::ParseCa(path.to_owned(), e))?;
    if roots.is_empty() {
        return Err(PushError::ReadCa(
            path.to_owned(),
            std::io::Error::other("no certificate in the file"),
        ));
    }
    Ok(roots)
}

/// The client settings of every backend: the credentials and extra
/// roots, read from their files.
fn settings(config: &Push) -> Result<client::Settings, PushError> {
    Ok(client::Settings {
        protocol: config.protocol,
        timeout: config.timeout,
        roots: config
            .ca_file
            .as_deref()
            .map(read_roots)
            .transpose()?
            .unwrap_or_default(),
        authorization: config
            .auth_file
            .as_deref()
            .map(auth::read)
            .transpose()
            .map_err(PushError::Auth)?,
        tenant: config.tenant.clone(),
    })
}

/// Checks the credentials file and the certificates, without writing
/// anything: for the preflight.
///
/// # Errors
/// See [`PushError`].
pub fn check(config: &Push) -> Result<(), PushError> {
    settings(config).map(drop)
}

impl Pusher {
    /// Reads the credentials and certificates, opens every backend's spool
    /// and starts the push thread. Everything that can be wrong with the
    /// flags is found here, before the daemon writes anything.
    ///
    /// # Errors
    /// See [`PushError`].
    pub fn start(config: &Push, metrics: &Arc<PushMetrics>) -> Result<Self, PushError> {
        let settings = settings(config)?;
        let (deadline, deadline_rx) = watch::channel(None);
        let mut endpoints = Vec::new();
        let mut inboxes = Vec::new();
        for url in &config.endpoints {
            let name = url.as_str().trim_end_matches('/').to_owned();
            let client = client::Client::new(url, &settings)
                .map_err(|e| PushError::Client(name.clone(), e))?;
            let dir = spool_dir(&config.spool_dir, config.protocol, url);
            let spool = spool::Spool::open(&dir, config.spool_max_bytes)
                .map_err(|e| PushError::Spool(dir.clone(), e))?;
            let (inbox, bodies) = mpsc::unbounded_channel();
            inboxes.push(inbox);
            endpoints.push(endpoint::Endpoint::new(
                name,
                client,
                spool,
                metrics.clone(),
                bodies,
                deadline_rx.clone(),
            ));
        }
        let (profiles, incoming) = mpsc::unbounded_channel();
        let (finished, done) = std_mpsc::channel();
        let encoder = Encoder {
            protocol: config.protocol,
            tenant: config.tenant.clone(),
            hostname: series::hostname(),
            inboxes,
        };
        std::thread::Builder::new()
            .name("push".to_owned())
            .spawn(move || {
                run_thread(encoder, incoming, endpoints);
                let _ = finished.send(());
            })
            .map_err(PushError::Thread)?;
        Ok(Self {
            profiles,
            deadline,
            done,
        })
    }

    /// Queues one push period's profile; returns at once.
    pub fn submit(&self, profile: Profile) {
        if self.profiles.send(profile).is_err() {
            tracing::error!("the push thread has stopped: a push is lost");
        }
    }

    /// Sends what is queued and spooled for up to `grace`, then leaves the
    /// rest in the spools and returns.
    pub fn shut_down(self, grace: Duration) {
        let _ = self.deadline.send(Some(Instant::now() + grace));
        drop(self.profiles);
        if self
            .done
            .recv_timeout(grace + Duration::from_secs(1))
            .is_err()
        {
            tracing::warn!("the push thread did not stop in time; spooled pushes are kept");
        }
    }
}

/// Turns profiles into request bodies for every backend.
struct Encoder {
    protocol: PushProtocol,
    tenant: Option<String>,
    hostname: String,
    inboxes: Vec<mpsc::UnboundedSender<Arc<Vec<u8>>>>,
}

impl Encoder {
    async fn run(self, mut incoming: mpsc::UnboundedReceiver<Profile>) {
        while let Some(profile) = incoming.recv().await {
            let series = series::split(profile, &self.hostname);
            for body in wire::bodies(self.protocol, &series, self.tenant.as_deref()) {
                let body = Arc::new(body);
                for inbox in &self.inboxes {
                    let _ = inbox.send(body.clone());
                }
            }
            // Let the backends' tasks spool the bodies before the next.
            tokio::task::yield_now().await;
        }
    }
}

/// The push thread: the encoder and one task per backend, on a runtime of
/// their own.
fn run_thread(
    encoder: Encoder,
    incoming: mpsc::UnboundedReceiver<Profile>,
    endpoints: Vec<endpoint::Endpoint>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!("starting the push thread's runtime: {e}; nothing will be pushed");
            return;
        }
    };
    runtime.block_on(async move {
        let tasks: Vec<_> = endpoints
            .into_iter()
            .map(|e| tokio::spawn(e.run()))
            .collect();
        encoder.run(incoming).await;
        for task in tasks {
            let _ = task.await;
        }
    });
}
