//! `--wakers`' critical path: for each thread's blocked time, what it
//! ultimately waited for (the `critical_path` sample type), and which
//! threads and stacks the window's blocked time waits on most (comments).
//!
//! A waits on B (B woke it); what B did while A waited is taken to be
//! what B did over the window, in proportion: its on-CPU stacks, its own
//! waits (followed the same way, to [`MAX_HOPS`] threads), its waits for
//! a CPU. The window's rows carry no timeline, so this is the model, as
//! in wPerf's wait-for graph weighted by time: exact when B's work has
//! one shape all window (a pipeline's stage), an average when it varies.
//! A wait ends at an on-CPU stack, an interrupt (`[woken by disk]`), or a
//! marker: `[waiting for a CPU]`, `[still blocked]` (no waker named yet),
//! `[woken by unknown]`, `[not profiled]` (a waker outside the targets),
//! `[cycle]` (a thread met again on the chain) or `[chain too deep]`.
//!
//! With `--goroutine-wakers` goroutines are followed the same way: a
//! goroutine's wait names the goroutine that ended it, whose time is its
//! on-CPU samples (the kernel records the goroutine a Go thread runs),
//! its `runnable` rows (`[waiting for a CPU]`), its `syscall` rows (ends
//! of their own) and its waits.
//!
//! A row's stack, leaf first: the end's stack, a `[woken by …]` frame per
//! thread on the chain from the end back, then the blocked stack: in a
//! flame graph the blocked thread at the bottom, its chain above, and the
//! code that held everything up on top.
use std::collections::HashMap;

pub(super) use times::{ThreadTime, ThreadTimes, Unit, Waits, thread_times};

use super::wakers::WaitedOn;
use crate::profile::{Location, Sample};

mod times;

/// Threads (or goroutines) followed from a blocked one, the first waker
/// included.
const MAX_HOPS: usize = 4;

/// Ends of a thread's time kept apart, the largest; the rest go under one
/// `[other]` end (a busy thread has hundreds of on-CPU stacks, and a
/// blocked row gets a row per end).
const MAX_ENDS: usize = 256;

/// How a chain names the thread or goroutine `by` names: `name:tid`,
/// `goroutine N`.
fn who(by: &WaitedOn) -> String {
    match by {
        WaitedOn::Thread { tid, name, .. } => format!("{name}:{tid}"),
        WaitedOn::Goroutine(goid) => format!("goroutine {goid}"),
        other => other.joint(),
    }
}

/// Where a share of a wait ends.
#[derive(Clone)]
enum Terminal {
    /// The on-CPU row at this index.
    Cpu(usize),
    Marker(String),
}

/// One end of a thread's time: the threads waited on from it to the end,
/// first first ([`who`]), and the share of its time.
#[derive(Clone)]
struct End {
    hops: Vec<String>,
    terminal: Terminal,
    share: f64,
}

/// The critical path's rows and what the window's blocked time waits on.
#[derive(Default)]
pub struct Chains {
    pub rows: Vec<Sample>,
    /// Blocked time by where it ends: a thread's code (`name:tid`), a
    /// goroutine's (`goroutine N`) or a marker.
    pub by_end: HashMap<String, u64>,
    /// Chains cut at a thread met again (`[cycle]`).
    pub cycles: u64,
    /// Chains cut at [`MAX_HOPS`] threads (`[chain too deep]`).
    pub too_deep: u64,
}

/// The critical path of every wait of `samples` that names what ended it
/// (`waits`), through the threads' and goroutines' `times`
/// ([`thread_times`] of the same rows).
#[must_use]
pub(super) fn critical_path(samples: &[Sample], waits: &Waits, times: &ThreadTimes) -> Chains {
    let mut chains = Chains::default();
    let mut memo: HashMap<(Unit, Unit), Vec<End>> = HashMap::new();
    for (row, by) in waits.iter(samples) {
        let from = Unit::blocked(row);
        let ends = match from.waker(by) {
            Some(next) => {
                let ends = memo.entry((from, next)).or_insert_with(|| {
                    let mut path = vec![from];
                    let ends = ends_of(times, next, &mut path, &mut chains);
                    ends.into_iter().map(|e| e.after(who(by))).collect()
                });
                ends.clone()
            }
            None => vec![End {
                hops: Vec::new(),
                terminal: Terminal::Marker(by.joint()),
                share: 1.0,
            }],
        };
        for end in ends {
            let on_path = end.row(samples, row);
            *chains.by_end.entry(end.name(samples)).or_default() += on_path.critical_ns;
            chains.rows.push(on_path);
        }
    }
    chains
}

impl End {
    /// Where it ends, for the comments: the thread or goroutine whose code
    /// it is ([`who`]; a goroutine's with its process, `goroutine N of
    /// PID`), or its marker.
    fn name(&self, samples: &[Sample]) -> String {
        match (&self.terminal, self.hops.last()) {
            (Terminal::Cpu(index), Some(who)) if who.starts_with("goroutine ") => {
                format!("{who} of {}", samples[*index].pid)
            }
            (Terminal::Cpu(_), Some(who)) => who.clone(),
            (Terminal::Cpu(_), None) => "[own code]".to_owned(),
            (Terminal::Marker(marker), _) => marker.clone(),
        }
    }

    /// This end, reached through `who` first.
    fn after(mut self, who: String) -> Self {
        self.hops.insert(0, who);
        self
    }

    /// The critical-path row of `blocked` for this end.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "a share of nanoseconds"
    )]
    fn row(&self, samples: &[Sample], blocked: &Sample) -> Sample {
        let mut stack = match &self.terminal {
            Terminal::Cpu(index) => samples[*index].stack.clone(),
            Terminal::Marker(name) => vec![Location::marker(name.clone())],
        };
        stack.extend(
            self.hops
                .iter()
                .rev()
                .map(|who| Location::marker(format!("[woken by {who}]"))),
        );
        stack.extend(blocked.stack.iter().cloned());
        // A goroutine's wait weighs its goroutine time.
        let blocked_ns = blocked.runtime_ns.max(blocked.off_cpu_ns);
        Sample {
            stack,
            samples: 0,
            off_cpu_ns: 0,
            off_cpu_count: 0,
            runtime_ns: 0,
            waker_ns: 0,
            goroutine_waker_ns: 0,
            critical_ns: (blocked_ns as f64 * self.share) as u64,
            ..blocked.clone()
        }
    }
}

/// What `thread`'s time in the window ends at, reached through `path`
/// (the threads before it, which a chain does not go back to).
#[expect(clippy::cast_precision_loss, reason = "shares of nanoseconds")]
fn ends_of(
    times: &ThreadTimes,
    thread: Unit,
    path: &mut Vec<Unit>,
    chains: &mut Chains,
) -> Vec<End> {
    let marker = |name: &str, share: f64| End {
        hops: Vec::new(),
        terminal: Terminal::Marker(name.to_owned()),
        share,
    };
    let Some(time) = times.get(&thread).filter(|t| t.total_ns() != 0) else {
        return vec![marker("[not profiled]", 1.0)];
    };
    let total = time.total_ns() as f64;
    let mut ends: Vec<End> = time
        .cpu
        .iter()
        .map(|&(index, ns)| End {
            hops: Vec::new(),
            terminal: Terminal::Cpu(index),
            share: ns as f64 / total,
        })
        .collect();
    ends.push(marker(
        "[waiting for a CPU]",
        time.runqueue_ns as f64 / total,
    ));
    ends.push(marker("[still blocked]", time.unresolved_ns as f64 / total));
    for (by, &ns) in &time.blocked_by {
        let share = ns as f64 / total;
        let Some(next) = thread.waker(by) else {
            ends.push(marker(&by.joint(), share));
            continue;
        };
        if path.contains(&next) || next == thread {
            chains.cycles += 1;
            ends.push(marker("[cycle]", share));
        } else if path.len() + 1 >= MAX_HOPS {
            chains.too_deep += 1;
            ends.push(marker("[chain too deep]", share));
        } else {
            path.push(thread);
            for end in ends_of(times, next, path, chains) {
                ends.push(End {
                    share: share * end.share,
                    ..end.after(who(by))
                });
            }
            path.pop();
        }
    }
    gather_small(ends)
}

/// `ends` without the empty ones, and past the [`MAX_ENDS`] largest as one.
fn gather_small(mut ends: Vec<End>) -> Vec<End> {
    ends.retain(|e| e.share > 0.0);
    ends.sort_by(|a, b| b.share.total_cmp(&a.share));
    let small = ends.split_off(ends.len().min(MAX_ENDS));
    let rest: f64 = small.iter().map(|e| e.share).sum();
    let mut kept = ends;
    if rest > 0.0 {
        kept.push(End {
            hops: Vec::new(),
            terminal: Terminal::Marker("[other]".to_owned()),
            share: rest,
        });
    }
    kept
}

/// The five ends the most blocked time waits on, from `by_end`, the
/// largest first: (end, ns).
#[must_use]
pub fn top(by_end: &HashMap<String, u64>) -> Vec<(&str, u64)> {
    let mut ends: Vec<(&str, u64)> = by_end.iter().map(|(e, &ns)| (e.as_str(), ns)).collect();
    ends.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    ends.truncate(5);
    ends
}

/// [`top`] as `critical_path_top_N=END NS` lines.
#[must_use]
pub fn top_ends(by_end: &HashMap<String, u64>) -> Vec<String> {
    top(by_end)
        .iter()
        .enumerate()
        .map(|(i, (end, ns))| format!("critical_path_top_{}={end} {ns}", i + 1))
        .collect()
}

#[cfg(test)]
mod tests;
