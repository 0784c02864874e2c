//! What a fake backend received: the protocol it speaks, and each
//! profile decoded into rows.
use std::collections::BTreeMap;

/// Which server is imitated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Pyroscope,
    Parca,
    Otlp,
}

impl Protocol {
    /// The path the server takes pushes on.
    #[must_use]
    pub fn path(self) -> &'static str {
        match self {
            Self::Pyroscope => "/push.v1.PusherService/Push",
            Self::Parca => "/profiles/writeraw",
            Self::Otlp => "/v1development/profiles",
        }
    }
}

/// One profile as a server files it: its series labels, and its samples
/// as function names (leaf first) with one value per sample type.
#[derive(Clone, Debug, Default)]
pub struct Received {
    pub labels: BTreeMap<String, String>,
    /// When the profile's period began (pprof `time_nanos`).
    pub time_nanos: i64,
    pub types: Vec<(String, String)>,
    pub samples: Vec<ReceivedSample>,
}

#[derive(Clone, Debug, Default)]
pub struct ReceivedSample {
    pub functions: Vec<String>,
    pub values: Vec<i64>,
    /// Sample labels (pprof) or attributes (OTLP), as text.
    pub labels: BTreeMap<String, String>,
}

impl Received {
    /// The sample type names, in order.
    #[must_use]
    pub fn types(&self) -> Vec<String> {
        self.types.iter().map(|(t, _)| t.clone()).collect()
    }

    /// Sum of value `ty` over the samples with `function` on their stack;
    /// 0 without that type.
    #[must_use]
    pub fn total(&self, ty: &str, function: &str) -> i64 {
        let Some(i) = self.types.iter().position(|(t, _)| t == ty) else {
            return 0;
        };
        self.samples
            .iter()
            .filter(|s| s.functions.iter().any(|f| f == function))
            .map(|s| s.values[i])
            .sum()
    }
}
