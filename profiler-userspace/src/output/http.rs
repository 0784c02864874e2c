//! The HTTP endpoints of `--listen`: profiles on demand, as Go's
//! net/http/pprof serves them, and `/metrics`. axum on a thread and
//! runtime of its own, so a slow client or a window being symbolized never
//! holds up the other. Profile requests go to the window loop (see
//! `on_demand`); the answer comes back on a oneshot channel.
use std::{
    net::{SocketAddr, TcpListener},
    sync::Arc,
    thread,
    time::Duration,
};

use axum::{
    Router,
    extract::{RawQuery, State},
    http::{StatusCode, Uri, header},
    response::{IntoResponse, Response},
    routing::get,
};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::{
    config::Modes, output::metrics::Metrics, output::on_demand::ProfileRequest, profile::View,
};

/// `seconds` when the query has none, as in net/http/pprof.
pub const DEFAULT_SECONDS: u64 = 30;
/// The longest profile one request may ask for.
pub const MAX_SECONDS: u64 = 600;
/// Profiles under way at once; more get 503.
pub const MAX_UNDER_WAY: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("listening on {addr}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("starting the HTTP thread")]
    Thread(#[source] std::io::Error),
}

#[derive(Clone)]
struct AppState {
    requests: mpsc::Sender<ProfileRequest>,
    metrics: Arc<Metrics>,
    modes: Modes,
    under_way: Arc<Semaphore>,
}

/// Binds `addr` now (so a taken port fails before anything starts) and
/// serves on a thread of its own. Returns the profile requests for the
/// window loop.
///
/// # Errors
/// When the address cannot be bound or the thread started.
pub fn start(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    modes: Modes,
) -> Result<mpsc::Receiver<ProfileRequest>, HttpError> {
    let listen_err = |source| HttpError::Listen { addr, source };
    let listener = TcpListener::bind(addr).map_err(listen_err)?;
    listener.set_nonblocking(true).map_err(listen_err)?;
    let (requests, received) = mpsc::channel(MAX_UNDER_WAY);
    let state = AppState {
        requests,
        metrics,
        modes,
        under_way: Arc::new(Semaphore::new(MAX_UNDER_WAY)),
    };
    thread::Builder::new()
        .name("http".to_owned())
        .spawn(move || serve(listener, state))
        .map_err(HttpError::Thread)?;
    Ok(received)
}

fn serve(listener: TcpListener, state: AppState) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let result = runtime.and_then(|runtime| {
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            axum::serve(listener, router(state)).await
        })
    });
    if let Err(e) = result {
        tracing::error!("HTTP server stopped: {e}");
    }
}

fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/debug/pprof/profile",
            get(|s, q| profile(s, q, Endpoint::Profile)),
        )
        .route(
            "/debug/pprof/offcpu",
            get(|s, q| profile(s, q, Endpoint::OffCpu)),
        )
        .route(
            "/debug/pprof/wall",
            get(|s, q| profile(s, q, Endpoint::Wall)),
        )
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(state)
}

#[derive(Clone, Copy)]
enum Endpoint {
    Profile,
    OffCpu,
    Wall,
}

impl Endpoint {
    fn name(self) -> &'static str {
        match self {
            Self::Profile => "profile",
            Self::OffCpu => "offcpu",
            Self::Wall => "wall",
        }
    }

    fn view(self) -> View {
        match self {
            Self::Profile => View::Cpu,
            Self::OffCpu => View::OffCpu,
            Self::Wall => View::Wall,
        }
    }

    /// Why this daemon cannot serve the endpoint, if it cannot.
    fn unavailable(self, modes: Modes) -> Option<&'static str> {
        match self {
            Self::Profile if !modes.on_cpu() => Some("on-CPU sampling is off (--no-on-cpu)"),
            Self::OffCpu if modes.off_cpu().is_none() => {
                Some("off-CPU tracking is off (--no-off-cpu)")
            }
            _ => None,
        }
    }
}

fn text(status: StatusCode, message: impl Into<String>) -> Response {
    let mut message = message.into();
    message.push('\n');
    (status, message).into_response()
}

async fn profile(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    endpoint: Endpoint,
) -> Response {
    if let Some(why) = endpoint.unavailable(state.modes) {
        return text(StatusCode::NOT_FOUND, why);
    }
    let duration = match parse_seconds(query.as_deref()) {
        Ok(duration) => duration,
        Err(message) => return text(StatusCode::BAD_REQUEST, message),
    };
    let Ok(_permit) = state.under_way.clone().try_acquire_owned() else {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{MAX_UNDER_WAY} profiles are under way already; try again later"),
        );
    };
    let (reply, answer) = oneshot::channel();
    let request = ProfileRequest {
        view: endpoint.view(),
        duration,
        reply,
    };
    let stopping = || text(StatusCode::SERVICE_UNAVAILABLE, "the profiler is stopping");
    if state.requests.send(request).await.is_err() {
        return stopping();
    }
    match answer.await {
        Ok(Ok(bytes)) => {
            state.metrics.http_profile(endpoint.name());
            (
                [
                    (header::CONTENT_TYPE, "application/octet-stream"),
                    (
                        header::CONTENT_DISPOSITION,
                        "attachment; filename=\"profile.pb.gz\"",
                    ),
                ],
                bytes,
            )
                .into_response()
        }
        Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, crate::error_chain(&e)),
        Err(_) => stopping(),
    }
}

/// `seconds=N` (the only parameter), 1 to [`MAX_SECONDS`], default
/// [`DEFAULT_SECONDS`].
fn parse_seconds(query: Option<&str>) -> Result<Duration, String> {
    let mut seconds = DEFAULT_SECONDS;
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        if key != "seconds" {
            return Err(format!(
                "unknown query parameter {key:?}: the only one is seconds"
            ));
        }
        seconds = value
            .parse()
            .map_err(|_| format!("seconds={value:?} is not a whole number of seconds"))?;
    }
    if !(1..=MAX_SECONDS).contains(&seconds) {
        return Err(format!(
            "seconds={seconds} is out of range: 1 to {MAX_SECONDS}"
        ));
    }
    Ok(Duration::from_secs(seconds))
}

async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

async fn not_found(uri: Uri) -> Response {
    text(
        StatusCode::NOT_FOUND,
        format!(
            "no such endpoint: {}; there are /debug/pprof/profile, /debug/pprof/offcpu, \
             /debug/pprof/wall (?seconds=N) and /metrics",
            uri.path()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_default_parse_and_range() {
        assert_eq!(parse_seconds(None), Ok(Duration::from_secs(30)));
        assert_eq!(parse_seconds(Some("seconds=2")), Ok(Duration::from_secs(2)));
        for bad in [
            "seconds=0",
            "seconds=601",
            "seconds=two",
            "seconds=-1",
            "sec=2",
        ] {
            let err = parse_seconds(Some(bad)).unwrap_err();
            assert!(
                err.contains("seconds"),
                "{bad}: the message names the parameter: {err}"
            );
        }
    }
}
