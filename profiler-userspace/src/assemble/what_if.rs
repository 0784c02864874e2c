//! `--what-if FUNCTION:PERCENT`: how much faster each thread would make
//! progress if FUNCTION took PERCENT less time, estimated from the
//! window's wait graph (who woke whom, `--wakers`) and each thread's time,
//! without slowing anything down (Coz measures the same by inserting
//! delays; this reads it off one window). With `--goroutine-wakers` the
//! same for goroutines, whose wait graph the goroutine wakers give (a
//! goroutine's time: `critical_path::Unit`); "thread" below stands for
//! either.
//!
//! The model is the operational laws of queueing networks. A thread P's
//! progress depends on the threads it waits on, transitively: its chain
//! (a thread joins when a thread already in it spent at least
//! [`STRONG_WAIT`] of its time woken by it, or when it woke one of the
//! chain at all and waits on the chain itself: a loop's members all
//! count). Per thread T of the chain,
//! as shares of T's time: `u` on a CPU, `f` on a CPU in FUNCTION, `z`
//! waiting on anything but the chain (timers, disks, threads outside it).
//! FUNCTION faster by `s` leaves `u' = u - s f`. Time waiting for a CPU
//! is neither: a thread woken in a loop waits for a CPU while its waker
//! finishes (the kernel's schedstat shows such threads' CPU times adding
//! up to the wall time and their run delays on top), so it is taken to
//! shrink with the work, as on a machine with CPUs to spare.
//! Relative to today's time per unit of progress, tomorrow's is at least
//! - `max u'` (no thread can be busier than all the time), and
//! - where a thread of the chain waits on none of the others (less than
//!   [`STRONG_WAIT`] of its time: it sets the pace, as a pipeline's
//!   slowest stage or a source does), its own `(u' + z) / (u + z)`;
//! - else (every thread waits on another: requests passed round a loop)
//!   `Σ(u' + z) / Σ(u + z)`: the work in flight, `Σ(u + z)` by Little's
//!   law, stays the same, so each unit's round through the loop shrinks by
//!   the time taken out of it.
//!
//! The estimate is the largest of those. It assumes the window is one
//! steady state, the same work per unit of progress, and that the threads
//! found waiting on each other keep doing so; time on a CPU is taken from
//! samples, so it has their error. It cannot see waits that no wakeup
//! names (spinning, polling) nor a CPU that becomes the bottleneck.
use std::collections::HashMap;

use super::critical_path::{ThreadTime, ThreadTimes, Unit};
use crate::{config::WhatIf, profile::Sample};

/// The share of a thread's time, woken by another thread, that makes the
/// other part of its chain.
const STRONG_WAIT: f64 = 0.1;

/// Threads whose estimates are comments, the largest first.
const MAX_LINES: usize = 16;

/// One thread's time as the model reads it, shares of its own time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Shares {
    /// On a CPU.
    busy: f64,
    /// On a CPU in the function.
    in_function: f64,
    /// Waiting for a CPU.
    runqueue: f64,
}

/// Comment lines: `what_if_faster=FUNCTION PERCENT%`, then
/// `what_if_N=NAME:TID +X.X%` for each thread whose chain runs the
/// function, the largest first. None when no thread's does.
#[must_use]
pub(super) fn estimates(samples: &[Sample], times: &ThreadTimes, what_if: &WhatIf) -> Vec<String> {
    let in_function = |index: usize| {
        samples[index].stack.iter().any(|location| {
            location
                .lines
                .iter()
                .any(|line| what_if.matches(&line.function))
        })
    };
    let shares: HashMap<Unit, Shares> = times
        .iter()
        .filter(|(_, t)| t.total_ns() != 0)
        .map(|(&key, t)| (key, shares_of(t, &in_function)))
        .collect();
    let cut = f64::from(what_if.faster_pct) / 100.0;
    let names = thread_names(samples);
    let mut found: Vec<(f64, String)> = shares
        .keys()
        .filter_map(|&progress| {
            let chain = chain(times, progress);
            if chain.iter().all(|t| shares[t].in_function == 0.0) {
                return None;
            }
            let speedup = 1.0 / time_ratio(times, &shares, &chain, cut) - 1.0;
            let name = match progress {
                Unit::Thread(_, tid) => format!("{}:{tid}", names[&progress]),
                Unit::Goroutine(pid, goid) => format!("goroutine {goid} of {pid}"),
            };
            Some((speedup, name))
        })
        .collect();
    if found.is_empty() {
        return Vec::new();
    }
    // Largest first, as printed (to 0.1%), then by name.
    let printed = |speedup: f64| (speedup * 1000.0).round();
    found.sort_by(|a, b| {
        printed(b.0)
            .total_cmp(&printed(a.0))
            .then_with(|| a.1.cmp(&b.1))
    });
    let mut lines = vec![format!(
        "what_if_faster={} {}%",
        what_if.function, what_if.faster_pct
    )];
    lines.extend(
        found
            .iter()
            .take(MAX_LINES)
            .enumerate()
            .map(|(i, (speedup, thread))| {
                format!("what_if_{}={thread} {:+.1}%", i + 1, speedup * 100.0)
            }),
    );
    lines
}

/// Each thread's name: the one most of its rows carry. A thread that
/// names itself in its first lines (`pthread_setname_np`) carries the name
/// it was created with in the rows before; whichever row came last named
/// it before, so a run could print `whatif:TID` for thread `a`.
fn thread_names(samples: &[Sample]) -> HashMap<Unit, &str> {
    let mut rows: HashMap<(Unit, &str), usize> = HashMap::new();
    for s in samples {
        *rows
            .entry((Unit::Thread(s.pid, s.tid), s.thread.as_str()))
            .or_default() += 1;
    }
    let mut names: HashMap<Unit, (usize, &str)> = HashMap::new();
    for ((unit, name), count) in rows {
        let best = names.entry(unit).or_insert((count, name));
        // More rows first, then the name first in order: the same name
        // whatever the map's order.
        if (count, std::cmp::Reverse(name)) > (best.0, std::cmp::Reverse(best.1)) {
            *best = (count, name);
        }
    }
    names
        .into_iter()
        .map(|(unit, (_, name))| (unit, name))
        .collect()
}

/// `time`'s shares.
#[expect(clippy::cast_precision_loss, reason = "shares of nanoseconds")]
fn shares_of(time: &ThreadTime, in_function: &impl Fn(usize) -> bool) -> Shares {
    let total = time.total_ns() as f64;
    let cpu: u64 = time.cpu.iter().map(|&(_, ns)| ns).sum();
    let function: u64 = time
        .cpu
        .iter()
        .filter(|&&(index, _)| in_function(index))
        .map(|&(_, ns)| ns)
        .sum();
    Shares {
        busy: cpu as f64 / total,
        in_function: function as f64 / total,
        runqueue: time.runqueue_ns as f64 / total,
    }
}

/// The share of `unit`'s `time` woken by the threads of `among`.
#[expect(clippy::cast_precision_loss, reason = "shares of nanoseconds")]
fn waiting_on(unit: Unit, time: &ThreadTime, among: &impl Fn(Unit) -> bool) -> f64 {
    let ns: u64 = time
        .blocked_by
        .iter()
        .filter(|(by, _)| unit.waker(by).is_some_and(among))
        .map(|(_, &ns)| ns)
        .sum();
    ns as f64 / time.total_ns() as f64
}

/// `progress` and the threads it waits on, transitively (each woke a
/// thread already in the chain for [`STRONG_WAIT`] of its time or more),
/// and the threads in a loop with them: a thread that woke one of the
/// chain for less than that, but itself waits on the chain (a request's
/// sender, woken by the reply, wakes the server only for the short time
/// the server waits for the next request: still a member of the loop).
fn chain(times: &ThreadTimes, progress: Unit) -> Vec<Unit> {
    let mut chain = vec![progress];
    let mut joined = 0;
    loop {
        strong_closure(times, &mut chain, joined);
        joined = chain.len();
        let looped = weak_wakers(times, &chain).find(|&waker| {
            let mut of_waker = vec![waker];
            strong_closure(times, &mut of_waker, 0);
            of_waker.iter().any(|t| chain.contains(t))
        });
        match looped {
            Some(waker) => chain.push(waker),
            None => return chain,
        }
    }
}

/// Adds to `chain` the threads that woke one of it, from index `from` on,
/// for [`STRONG_WAIT`] of its time or more, transitively.
fn strong_closure(times: &ThreadTimes, chain: &mut Vec<Unit>, from: usize) {
    let mut next = from;
    while let Some(&thread) = chain.get(next) {
        next += 1;
        let time = &times[&thread];
        for waker in thread_wakers(thread, time) {
            let strong = waiting_on(thread, time, &|t| t == waker) >= STRONG_WAIT;
            if strong && profiled(times, waker) && !chain.contains(&waker) {
                chain.push(waker);
            }
        }
    }
}

/// The profiled threads not in `chain` that woke one of it: for less than
/// [`STRONG_WAIT`] of its time (the others joined it already).
fn weak_wakers<'a>(times: &'a ThreadTimes, chain: &'a [Unit]) -> impl Iterator<Item = Unit> + 'a {
    chain.iter().flat_map(move |thread| {
        thread_wakers(*thread, &times[thread])
            .filter(move |&waker| profiled(times, waker) && !chain.contains(&waker))
    })
}

/// The threads that woke `unit`, whose time is `time`.
fn thread_wakers(unit: Unit, time: &ThreadTime) -> impl Iterator<Item = Unit> + '_ {
    time.blocked_by.keys().filter_map(move |by| unit.waker(by))
}

/// Whether `thread` has time of its own in the window.
fn profiled(times: &ThreadTimes, thread: Unit) -> bool {
    times.get(&thread).is_some_and(|t| t.total_ns() != 0)
}

/// One thread of a chain, as [`time_ratio`] weighs it: shares of its time.
struct Member {
    /// On a CPU today (`u`).
    busy: f64,
    /// On a CPU tomorrow (`u'`).
    busy_after: f64,
    /// Waiting on anything but the chain (`z`).
    elsewhere: f64,
    /// Whether it waits on the others ([`STRONG_WAIT`] of its time or
    /// more): if not, it sets the pace.
    paced: bool,
}

/// Tomorrow's time per unit of progress over today's, for the threads of
/// `chain` with the function's time cut by `cut` (the module's model).
fn time_ratio(
    times: &ThreadTimes,
    shares: &HashMap<Unit, Shares>,
    chain: &[Unit],
    cut: f64,
) -> f64 {
    let in_chain = |t: Unit| chain.contains(&t);
    let members: Vec<Member> = chain
        .iter()
        .map(|t| {
            let Shares {
                busy,
                in_function,
                runqueue,
            } = shares[t];
            let on_chain = waiting_on(*t, &times[t], &in_chain);
            Member {
                busy,
                busy_after: busy - cut * in_function,
                elsewhere: (1.0 - busy - runqueue - on_chain).max(0.0),
                paced: on_chain >= STRONG_WAIT,
            }
        })
        .collect();
    let busiest = members.iter().map(|m| m.busy_after).fold(0.0, f64::max);
    let pacers: Vec<f64> = members
        .iter()
        .filter(|m| !m.paced)
        .map(|m| (m.busy_after + m.elsewhere) / (m.busy + m.elsewhere))
        .collect();
    let paced = if pacers.is_empty() {
        let today: f64 = members.iter().map(|m| m.busy + m.elsewhere).sum();
        let tomorrow: f64 = members.iter().map(|m| m.busy_after + m.elsewhere).sum();
        tomorrow / today
    } else {
        pacers.into_iter().fold(0.0, f64::max)
    };
    busiest.max(paced).max(f64::EPSILON)
}

#[cfg(test)]
mod tests;
