//! One backend's loop: spool each new request body at once, send the
//! spool's oldest, and on a failure wait (exponential backoff with jitter)
//! and try again, in order. A body the server refuses (4xx) is logged once
//! and dropped. At shutdown it sends what it can before the deadline and
//! leaves the rest in the spool.
use std::{sync::Arc, time::Duration};

use tokio::{
    sync::{mpsc, watch},
    time::{Instant, sleep_until, timeout_at},
};

use super::{
    client::{Cause, Client, Outcome},
    spool::Spool,
};
use crate::output::metrics::PushMetrics;

/// First wait after a failure; it doubles with each failure in a row.
const BACKOFF_START: Duration = Duration::from_millis(500);
/// Longest wait between tries.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How often the spool's gauges are refreshed while idle.
const GAUGE_REFRESH: Duration = Duration::from_secs(1);

/// The wait before try `attempt + 1` (`attempt` failures so far): half
/// the exponential step plus a random part of the other half, so that
/// many daemons that lost the same backend do not come back in step.
#[must_use]
pub fn backoff(attempt: u32, random: f64) -> Duration {
    let step = BACKOFF_START
        .saturating_mul(1 << attempt.min(16))
        .min(BACKOFF_MAX);
    step / 2 + step.mul_f64(random.clamp(0.0, 1.0) / 2.0)
}

/// A uniform number in [0, 1) from the clock's low bits: enough to spread
/// retries, no cryptography.
fn jitter() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    f64::from(nanos % 1_000_000) / 1_000_000.0
}

pub struct Endpoint {
    /// The `--push` URL as given, for logs and metric labels.
    pub name: String,
    pub client: Client,
    pub spool: Spool,
    pub metrics: Arc<PushMetrics>,
    /// New request bodies; closed when the daemon stops pushing.
    pub bodies: mpsc::UnboundedReceiver<Arc<Vec<u8>>>,
    /// Set when the daemon stops: send until then, then leave the rest.
    pub deadline: watch::Receiver<Option<Instant>>,
    closed: bool,
    /// The daemon's side is gone without a deadline: stop at once.
    orphaned: bool,
}

impl Endpoint {
    pub fn new(
        name: String,
        client: Client,
        spool: Spool,
        metrics: Arc<PushMetrics>,
        bodies: mpsc::UnboundedReceiver<Arc<Vec<u8>>>,
        deadline: watch::Receiver<Option<Instant>>,
    ) -> Self {
        Self {
            name,
            client,
            spool,
            metrics,
            bodies,
            deadline,
            closed: false,
            orphaned: false,
        }
    }

    /// Sends until the daemon stops and the spool is empty or the deadline
    /// has passed.
    pub async fn run(mut self) {
        if !self.spool.is_empty() {
            tracing::info!(
                endpoint = %self.name,
                pushes = self.spool.len(),
                bytes = self.spool.bytes(),
                "sending pushes spooled by an earlier run"
            );
        }
        let mut failures = 0u32;
        loop {
            self.take_new();
            self.update_gauges();
            let deadline = *self.deadline.borrow();
            if self.orphaned
                || deadline.is_some_and(|d| Instant::now() >= d)
                || (self.closed && self.spool.is_empty())
            {
                break;
            }
            if self.spool.is_empty() {
                self.wait(Instant::now() + GAUGE_REFRESH).await;
                continue;
            }
            match self.send_oldest(deadline).await {
                None => failures = 0,
                Some(cause) => {
                    if deadline.is_some() {
                        break;
                    }
                    if failures == 0 {
                        tracing::warn!(
                            endpoint = %self.name,
                            waiting = self.spool.len(),
                            "push failed ({}); retrying with backoff",
                            cause.1
                        );
                    } else {
                        tracing::debug!(endpoint = %self.name, "push failed again: {}", cause.1);
                    }
                    let wait = backoff(failures, jitter());
                    failures = failures.saturating_add(1);
                    self.wait(Instant::now() + wait).await;
                }
            }
        }
        self.take_new();
        self.update_gauges();
        if !self.spool.is_empty() {
            tracing::info!(
                endpoint = %self.name,
                pushes = self.spool.len(),
                "pushes left in the spool for the next start"
            );
        }
    }

    /// Sends the spool's oldest body: `None` when it is done with (sent,
    /// or refused and dropped), else why to try again.
    async fn send_oldest(&mut self, deadline: Option<Instant>) -> Option<(Cause, String)> {
        let body = match self.spool.front()? {
            Ok(body) => body,
            Err(e) => {
                tracing::error!(endpoint = %self.name, "dropping an unreadable spooled push: {e}");
                self.metrics.failed(&self.name, "spool_io");
                self.pop();
                return None;
            }
        };
        let bytes = body.len() as u64;
        let sending = self.client.send(body);
        let outcome = match deadline {
            Some(deadline) => timeout_at(deadline, sending)
                .await
                .unwrap_or_else(|_| Outcome::Retry(Cause::Timeout, "shutting down".to_owned())),
            None => sending.await,
        };
        match outcome {
            Outcome::Sent => {
                self.metrics.sent(&self.name, bytes);
                self.pop();
                None
            }
            Outcome::Rejected(status, message) => {
                tracing::error!(
                    endpoint = %self.name,
                    status,
                    "the backend refused a push, dropping it: {message}"
                );
                self.metrics.failed(&self.name, "rejected");
                self.pop();
                None
            }
            Outcome::Retry(cause, message) => {
                self.metrics.failed(&self.name, cause.label());
                Some((cause, message))
            }
        }
    }

    fn pop(&mut self) {
        if let Err(e) = self.spool.pop() {
            tracing::warn!(endpoint = %self.name, "removing a sent push from the spool: {e}");
        }
    }

    /// Spools what has arrived.
    fn take_new(&mut self) {
        while let Ok(body) = self.bodies.try_recv() {
            self.spool_body(&body);
        }
        if !self.closed && self.bodies.is_closed() && self.bodies.is_empty() {
            self.closed = true;
        }
    }

    fn spool_body(&mut self, body: &[u8]) {
        match self.spool.push(body) {
            Ok(0) => {}
            Ok(dropped) => {
                tracing::warn!(
                    endpoint = %self.name,
                    dropped,
                    "push spool full: dropped the oldest pushes"
                );
                for _ in 0..dropped {
                    self.metrics.failed(&self.name, "spool_full");
                }
            }
            Err(e) => {
                tracing::error!(endpoint = %self.name, "spooling a push failed, dropping it: {e}");
                self.metrics.failed(&self.name, "spool_io");
            }
        }
    }

    /// Waits until `until`, spooling new bodies as they come, or until the
    /// daemon stops.
    async fn wait(&mut self, until: Instant) {
        loop {
            tokio::select! {
                () = sleep_until(until) => return,
                body = self.bodies.recv(), if !self.closed => {
                    let Some(body) = body else {
                        self.closed = true;
                        return;
                    };
                    self.spool_body(&body);
                    self.update_gauges();
                }
                changed = self.deadline.changed() => {
                    self.orphaned = changed.is_err();
                    if self.orphaned || self.deadline.borrow().is_some() {
                        return;
                    }
                }
            }
        }
    }

    fn update_gauges(&self) {
        self.metrics.spool(
            &self.name,
            self.spool.len(),
            self.spool.bytes(),
            self.spool.oldest_age(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_up_to_its_cap() {
        assert_eq!(backoff(0, 0.0), Duration::from_millis(250));
        assert_eq!(backoff(0, 1.0), Duration::from_millis(500));
        assert_eq!(backoff(3, 0.5), Duration::from_secs(3));
        assert_eq!(backoff(40, 1.0), BACKOFF_MAX);
        assert_eq!(backoff(40, 0.0), BACKOFF_MAX / 2);
    }
}
