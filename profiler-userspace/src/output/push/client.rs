//! One backend's HTTP client: where a push goes, with which headers, and
//! what the answer means (sent, retry later, or refused for good).
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderValue};

use crate::config::PushProtocol;

/// Why a push is to be tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// No connection (refused, unreachable, DNS, TLS handshake).
    Connect,
    /// No answer within `--push-timeout`.
    Timeout,
    /// 5xx, 429 or 408: the server may take it later.
    ServerError,
    /// The request or the answer broke off.
    Transport,
}

impl Cause {
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::Timeout => "timeout",
            Self::ServerError => "server_error",
            Self::Transport => "transport",
        }
    }
}

/// What became of one request.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Sent,
    /// Keep it and try again later.
    Retry(Cause, String),
    /// A 4xx other than 408/429: the server will never take it.
    Rejected(u16, String),
}

/// The path each protocol's request goes to, below the `--push` URL.
fn path(protocol: PushProtocol) -> &'static str {
    match protocol {
        PushProtocol::Pyroscope => "/push.v1.PusherService/Push",
        PushProtocol::Parca => "/profiles/writeraw",
        PushProtocol::Otlp => "/v1development/profiles",
    }
}

/// `base` with the protocol's path appended to its own.
#[must_use]
pub fn endpoint_url(base: &url::Url, protocol: PushProtocol) -> url::Url {
    let mut url = base.clone();
    let joined = format!("{}{}", base.path().trim_end_matches('/'), path(protocol));
    url.set_path(&joined);
    url
}

/// How one backend is reached.
pub struct Client {
    http: reqwest::Client,
    url: url::Url,
    headers: HeaderMap,
}

/// What every client of a run shares.
pub struct Settings {
    pub protocol: PushProtocol,
    pub timeout: Duration,
    /// Extra roots, besides the system's.
    pub roots: Vec<reqwest::Certificate>,
    pub authorization: Option<HeaderValue>,
    pub tenant: Option<String>,
}

impl Client {
    /// A client for the backend at `base`.
    ///
    /// # Errors
    /// When the TLS setup fails (reqwest's error).
    pub fn new(base: &url::Url, settings: &Settings) -> Result<Self, reqwest::Error> {
        let mut builder = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .user_agent(concat!("profiler/", env!("CARGO_PKG_VERSION")));
        for root in &settings.roots {
            builder = builder.add_root_certificate(root.clone());
        }
        let mut headers = HeaderMap::new();
        let content_type = match settings.protocol {
            PushProtocol::Pyroscope => {
                headers.insert("connect-protocol-version", HeaderValue::from_static("1"));
                "application/proto"
            }
            PushProtocol::Parca => "application/json",
            PushProtocol::Otlp => {
                headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                "application/x-protobuf"
            }
        };
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        if let Some(auth) = &settings.authorization {
            headers.insert(AUTHORIZATION, auth.clone());
        }
        if let Some(tenant) = &settings.tenant
            && settings.protocol != PushProtocol::Parca
            && let Ok(value) = HeaderValue::from_str(tenant)
        {
            headers.insert("x-scope-orgid", value);
        }
        Ok(Self {
            http: builder.build()?,
            url: endpoint_url(base, settings.protocol),
            headers,
        })
    }

    /// Sends one request body.
    pub async fn send(&self, body: Vec<u8>) -> Outcome {
        let response = self
            .http
            .post(self.url.clone())
            .headers(self.headers.clone())
            .body(body)
            .send()
            .await;
        let response = match response {
            Ok(response) => response,
            Err(e) => return Outcome::Retry(cause_of(&e), crate::error_chain(&e)),
        };
        let status = response.status();
        if status.is_success() {
            return Outcome::Sent;
        }
        let text = match response.text().await {
            Ok(text) => text.chars().take(500).collect::<String>(),
            Err(e) => crate::error_chain(&e),
        };
        let message = format!("{status}: {}", text.trim());
        match status.as_u16() {
            408 | 429 | 500..=599 => Outcome::Retry(Cause::ServerError, message),
            code => Outcome::Rejected(code, message),
        }
    }
}

fn cause_of(e: &reqwest::Error) -> Cause {
    if e.is_timeout() {
        Cause::Timeout
    } else if e.is_connect() {
        Cause::Connect
    } else {
        Cause::Transport
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocol_path_goes_below_the_url_path() {
        let url = |base: &str, protocol| {
            endpoint_url(&url::Url::parse(base).unwrap(), protocol).to_string()
        };
        assert_eq!(
            url("http://pyroscope:4040", PushProtocol::Pyroscope),
            "http://pyroscope:4040/push.v1.PusherService/Push"
        );
        assert_eq!(
            url("https://gw.example/parca/", PushProtocol::Parca),
            "https://gw.example/parca/profiles/writeraw"
        );
        assert_eq!(
            url("http://collector:4318", PushProtocol::Otlp),
            "http://collector:4318/v1development/profiles"
        );
    }
}
