//! The fake backend's HTTP/1.1 server: a thread per connection, one
//! request per connection (`Connection: close`), every request recorded.
use std::{
    collections::BTreeMap,
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::{SocketAddr, TcpListener, TcpStream},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use super::{
    decode::decode,
    received::{Protocol, Received},
};

/// How the backend answers from now on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// 200 for what the real server would take, 400 for the rest.
    Accept,
    /// This status (a 5xx: the server is unwell), whatever the request.
    Fail(u16),
    /// 400 with a message, whatever the request.
    Refuse,
    /// Read the request and never answer (until the behaviour changes).
    Hang,
}

/// One request as the backend saw it.
#[derive(Clone, Debug)]
pub struct Request {
    pub at: Instant,
    pub path: String,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    /// The profiles, or why the real server would refuse them.
    pub decoded: Result<Vec<Received>, String>,
    /// The status answered (0: none, the backend hung).
    pub status: u16,
}

struct State {
    behaviour: Behaviour,
    requests: Vec<Request>,
}

/// A running fake backend.
pub struct Backend {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

impl Backend {
    /// Starts one on a free loopback port.
    ///
    /// # Panics
    /// When no port can be bound.
    #[must_use]
    pub fn start(protocol: Protocol) -> Self {
        Self::start_on(protocol, 0)
    }

    /// Starts one on `port` of loopback (0: any free one).
    ///
    /// # Panics
    /// When the port cannot be bound.
    #[must_use]
    pub fn start_on(protocol: Protocol, port: u16) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind the fake backend");
        let addr = listener.local_addr().expect("local address");
        let state = Arc::new(Mutex::new(State {
            behaviour: Behaviour::Accept,
            requests: Vec::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (shared, stopping) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let state = shared.clone();
                std::thread::spawn(move || serve(protocol, stream, &state));
            }
        });
        Self { addr, state, stop }
    }

    /// The URL to give `--push`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    #[must_use]
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn set(&self, behaviour: Behaviour) {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .behaviour = behaviour;
    }

    /// Every request so far, in arrival order.
    #[must_use]
    pub fn requests(&self) -> Vec<Request> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .requests
            .clone()
    }

    /// The profiles of every request answered 200, in arrival order.
    #[must_use]
    pub fn accepted(&self) -> Vec<Received> {
        self.requests()
            .into_iter()
            .filter(|r| r.status == 200)
            .filter_map(|r| r.decoded.ok())
            .flatten()
            .collect()
    }

    /// Waits up to `timeout` for `done` to hold of the requests so far.
    pub fn wait_until(&self, timeout: Duration, done: impl Fn(&[Request]) -> bool) -> bool {
        let started = Instant::now();
        while started.elapsed() < timeout {
            if done(
                &self
                    .state
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .requests,
            ) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        done(&self.requests())
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag and closes the port.
        let _ = TcpStream::connect(self.addr);
    }
}

/// The content type each server takes.
fn content_type(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::Pyroscope => "application/proto",
        Protocol::Parca => "application/json",
        Protocol::Otlp => "application/x-protobuf",
    }
}

fn serve(protocol: Protocol, stream: TcpStream, state: &Mutex<State>) {
    let Ok(mut reader) = stream.try_clone().map(BufReader::new) else {
        return;
    };
    let Some((path, headers, body)) = read_request(&mut reader) else {
        return;
    };
    let behaviour = state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .behaviour;
    let decoded = if path != protocol.path() {
        Err(format!("no route {path}"))
    } else if headers.get("content-type").map(String::as_str) != Some(content_type(protocol)) {
        Err(format!("content type {:?}", headers.get("content-type")))
    } else {
        decode(protocol, &body)
    };
    let (status, message) = match (behaviour, &decoded) {
        (Behaviour::Hang, _) => (0, String::new()),
        (Behaviour::Fail(code), _) => (code, "the backend is unwell".to_owned()),
        (Behaviour::Refuse, _) => (400, "refused by the test".to_owned()),
        (Behaviour::Accept, Ok(_)) => (200, String::new()),
        (Behaviour::Accept, Err(e)) => (400, e.clone()),
    };
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .requests
        .push(Request {
            at: Instant::now(),
            path,
            headers,
            decoded,
            status,
        });
    let mut stream = stream;
    if status == 0 {
        // Hang until told otherwise, then drop the connection unanswered.
        let started = Instant::now();
        while state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .behaviour
            == Behaviour::Hang
            && started.elapsed() < Duration::from_mins(2)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        return;
    }
    let response = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{message}",
        message.len()
    );
    let _ = stream.write_all(response.as_bytes());
}

/// The path, headers and body of one request.
fn read_request(
    reader: &mut BufReader<TcpStream>,
) -> Option<(String, BTreeMap<String, String>, Vec<u8>)> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_owned();
    let mut headers = BTreeMap::new();
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
    }
    let length: usize = headers.get("content-length")?.parse().ok()?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((path, headers, body))
}
