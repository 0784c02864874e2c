//! `--wakers`: the `off_cpu_wakers` rows. Each blocked row that names its
//! waker gets a twin whose stack is the blocked one with the waker's above
//! it, joined by a frame that names the waker, as bcc's `offwaketime`
//! draws its merged flame graphs: leaf first, the waker's stack from its
//! root down to where it woke the thread, `[woken by …]`, then the blocked
//! stack from its leaf.
//!
//! A wakeup in an interrupt runs on whatever task it interrupted, which
//! did not wake anyone: its kernel stack names the interrupt instead
//! ([`Interrupt`]), and the interrupted task's user stack is left out.
//!
//! `--goroutine-wakers`: a goroutine's wait whose waker the reader found
//! comes as a row of its own ([`is_goroutine_wait`]), whose twin (in
//! `goroutine_wakers`) is all it adds: its time is in the `goroutine`
//! rows already.
use std::{collections::HashSet, sync::Arc};

use crate::{
    profile::{Location, Sample},
    sample::{GoroutineWaker, RawSample, Stack, Waker, WokenBy},
    symbolize::Symbolizer,
};

/// What woke a thread from an interrupt, by the kernel functions on the
/// wakeup's stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Interrupt {
    /// A timer expired (`nanosleep`, a timeout, a timerfd).
    Timer,
    /// A block request completed.
    Disk,
    /// A packet was received (or looped back in a softirq).
    Network,
    /// Some other interrupt.
    Other,
}

impl Interrupt {
    /// The interrupt `functions` (a kernel stack's, leaf first) ran in,
    /// if they are an interrupt's.
    #[must_use]
    pub fn of<'a>(functions: impl IntoIterator<Item = &'a str> + Clone) -> Option<Self> {
        let any = |names: &[&str]| functions.clone().into_iter().any(|f| names.contains(&f));
        if any(&[
            "hrtimer_wakeup",
            "process_timeout",
            "call_timer_fn",
            "__run_timers",
            "hrtimer_run_softirq",
        ]) {
            Some(Self::Timer)
        } else if any(&[
            "blk_mq_end_request",
            "blk_update_request",
            "bio_endio",
            "blk_complete_reqs",
            "blk_mq_complete_request",
        ]) {
            Some(Self::Disk)
        } else if any(&["net_rx_action", "__napi_poll", "process_backlog"]) {
            Some(Self::Network)
        } else if functions.into_iter().any(|f| {
            f.starts_with("asm_sysvec_")
                || f.starts_with("asm_common_interrupt")
                || f == "handle_softirqs"
                || f == "__do_softirq"
                || f == "irq_exit_rcu"
        }) {
            Some(Self::Other)
        } else {
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Timer => "timer",
            Self::Disk => "disk",
            Self::Network => "network",
            Self::Other => "interrupt",
        }
    }
}

/// What a blocked thread waited on: who woke it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum WaitedOn {
    Thread {
        pid: u32,
        tid: u32,
        name: String,
    },
    Interrupt(Interrupt),
    /// A goroutine (its id; 0: the Go runtime's scheduler).
    Goroutine(u64),
    /// Go's network poller.
    GoPoller,
    Unknown,
}

impl WaitedOn {
    /// The context of a wakeup whose kernel stack names `interrupt`.
    fn of(waker: &Waker, interrupt: Option<Interrupt>) -> Self {
        match interrupt {
            Some(interrupt) => Self::Interrupt(interrupt),
            // The idle task: an interrupt the stack did not name.
            None if waker.tid == 0 => Self::Interrupt(Interrupt::Other),
            None => Self::Thread {
                pid: waker.pid,
                tid: waker.tid,
                name: waker.thread.clone(),
            },
        }
    }

    /// The frame that joins a blocked stack to its waker's.
    #[must_use]
    pub fn joint(&self) -> String {
        match self {
            Self::Unknown => "[woken by unknown]".to_owned(),
            Self::Interrupt(interrupt) => format!("[woken by {}]", interrupt.name()),
            Self::Thread { tid, name, .. } => format!("[woken by {name}:{tid}]"),
            Self::Goroutine(0) => "[woken by the Go runtime]".to_owned(),
            Self::Goroutine(goid) => format!("[woken by goroutine {goid}]"),
            Self::GoPoller => "[woken by the network poller]".to_owned(),
        }
    }
}

/// Whether `raw` is a goroutine's wait that names its waker: its twin is
/// all it adds.
#[must_use]
pub fn is_goroutine_wait(raw: &RawSample) -> bool {
    raw.runtime_ns != 0 && raw.woken_by.is_some()
}

/// One weightless row per distinct waker the window's rows name, so that
/// its stacks are symbolized with the rest.
#[must_use]
pub fn waker_rows(samples: &[RawSample]) -> Vec<RawSample> {
    let mut seen: HashSet<*const ()> = HashSet::new();
    samples
        .iter()
        .filter_map(|s| match &s.woken_by {
            Some(WokenBy::Waker(waker)) if seen.insert(Arc::as_ptr(waker).cast()) => Some((
                waker.pid,
                waker.tid,
                waker.thread.clone(),
                waker.user_stack.clone(),
                waker.kernel_stack.clone(),
            )),
            Some(WokenBy::Goroutine(waker)) if seen.insert(Arc::as_ptr(waker).cast()) => Some((
                waker.pid,
                0,
                String::new(),
                waker.stack.clone(),
                Stack::Absent,
            )),
            _ => None,
        })
        .map(|(pid, tid, thread, user_stack, kernel_stack)| RawSample {
            pid,
            tid,
            thread,
            state: profiler_common::sample::ThreadState::Running,
            user_stack,
            kernel_stack,
            samples: 0,
            off_cpu_ns: 0,
            off_cpu_count: 0,
            labels: None,
            runtime_ns: 0,
            label_set: None,
            thread_attrs: None,
            woken_by: None,
        })
        .collect()
}

/// The `off_cpu_wakers` twin of `row`, the assembled blocked row of
/// `raw`, if `raw` was woken, and what it waited on; for a goroutine's
/// wait, the `goroutine_wakers` twin.
#[must_use]
pub fn twin(symbolizer: &Symbolizer, raw: &RawSample, row: &Sample) -> Option<(Sample, WaitedOn)> {
    let woken_by = raw.woken_by.as_ref()?;
    let goroutine = is_goroutine_wait(raw);
    if row.off_cpu_ns == 0 && !goroutine {
        return None;
    }
    let mut stack: Vec<Location> = Vec::new();
    let waited_on = match woken_by {
        WokenBy::Unknown => WaitedOn::Unknown,
        WokenBy::GoPoller => WaitedOn::GoPoller,
        WokenBy::Goroutine(waker) => {
            stack = goroutine_above(symbolizer, waker);
            WaitedOn::Goroutine(waker.goid)
        }
        WokenBy::Waker(waker) => {
            let kernel = below_the_hook(symbolizer.kernel_locations(&waker.kernel_stack));
            let interrupt = Interrupt::of(
                kernel
                    .iter()
                    .flat_map(|l| l.lines.iter().map(|line| line.function.as_str())),
            );
            let mut above = kernel;
            if interrupt.is_none() {
                above.extend(symbolizer.user_locations(waker.pid, &waker.user_stack));
            }
            above.reverse();
            stack = above;
            WaitedOn::of(waker, interrupt)
        }
    };
    stack.push(Location::marker(waited_on.joint()));
    stack.extend(row.stack.iter().cloned());
    let (waker_ns, goroutine_waker_ns) = if goroutine {
        (0, row.runtime_ns)
    } else {
        (row.off_cpu_ns, 0)
    };
    let twin = Sample {
        stack,
        samples: 0,
        off_cpu_ns: 0,
        off_cpu_count: 0,
        runtime_ns: 0,
        waker_ns,
        goroutine_waker_ns,
        ..row.clone()
    };
    Some((twin, waited_on))
}

/// A waking goroutine's stack, from its root down to its wakeup.
fn goroutine_above(symbolizer: &Symbolizer, waker: &GoroutineWaker) -> Vec<Location> {
    let mut above = symbolizer.user_locations(waker.pid, &waker.stack);
    above.reverse();
    above
}

/// `kernel`, a wakeup's stack, without the frames of the program that
/// took it (`bpf_prog_…`, `bpf_trace_run…`): from the wakeup down.
fn below_the_hook(mut kernel: Vec<Location>) -> Vec<Location> {
    let ours = |l: &Location| {
        l.lines.last().is_some_and(|line| {
            line.function.starts_with("bpf_prog_")
                || line.function.starts_with("bpf_trace_run")
                || line.function.starts_with("__bpf_trace_")
        })
    };
    let hook = kernel.iter().take_while(|l| ours(l)).count();
    kernel.drain(..hook);
    kernel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupts_are_named_by_their_stacks() {
        let timer = [
            "try_to_wake_up",
            "hrtimer_wakeup",
            "__hrtimer_run_queues",
            "hrtimer_interrupt",
            "asm_sysvec_apic_timer_interrupt",
        ];
        assert_eq!(Interrupt::of(timer), Some(Interrupt::Timer));
        let disk = [
            "try_to_wake_up",
            "blkdev_bio_end_io",
            "blk_update_request",
            "blk_mq_end_request",
            "virtblk_done",
            "asm_common_interrupt",
        ];
        assert_eq!(Interrupt::of(disk), Some(Interrupt::Disk));
        let other = ["try_to_wake_up", "handle_softirqs", "irq_exit_rcu"];
        assert_eq!(Interrupt::of(other), Some(Interrupt::Other));
        let task = ["try_to_wake_up", "pipe_write", "vfs_write", "ksys_write"];
        assert_eq!(Interrupt::of(task), None);
    }

    #[test]
    fn the_hook_s_own_frames_are_left_out() {
        let stack = [
            "bpf_prog_0844af1f42f207b4_note",
            "bpf_prog_428ddd9007b592c2_sched_waking",
            "bpf_trace_run1",
            "try_to_wake_up",
            "anon_pipe_write",
        ]
        .map(|f| Location::marker(f.to_owned()));
        let left: Vec<_> = below_the_hook(stack.to_vec())
            .iter()
            .map(|l| l.lines[0].function.clone())
            .collect();
        assert_eq!(left, ["try_to_wake_up", "anon_pipe_write"]);
    }

    #[test]
    fn the_joint_names_the_waker() {
        let waker = Waker {
            pid: 10,
            tid: 12,
            thread: "producer".to_owned(),
            user_stack: Stack::Absent,
            kernel_stack: Stack::Absent,
        };
        let joint = |interrupt| WaitedOn::of(&waker, interrupt).joint();
        assert_eq!(joint(None), "[woken by producer:12]");
        assert_eq!(joint(Some(Interrupt::Timer)), "[woken by timer]");
        assert_eq!(WaitedOn::Unknown.joint(), "[woken by unknown]");
        let idle = Waker { tid: 0, ..waker };
        assert_eq!(WaitedOn::of(&idle, None).joint(), "[woken by interrupt]");
    }
}
