//! `--goroutine-wakers`: the probe on a Go target's `runtime.ready` (see
//! `profiler_common::go_wake`). It notes which goroutine the current one
//! makes runnable, and the waker's stack, walked by its frame pointers
//! from where `systemstack` saved them.
use aya_ebpf::{
    EbpfContext as _,
    helpers::{
        bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user,
        generated::bpf_get_attach_cookie,
    },
    programs::ProbeContext,
};
use profiler_common::{
    go_wake::{GO_WAKE_FRAMES, GoWakeKey},
    stats::Stat,
};

use crate::{maps, target, tls};

/// `runtime.ready(gp *g, traceskip int, next bool)`: `gp` is being made
/// runnable by the goroutine the current thread runs.
#[inline(always)]
pub fn on_ready(ctx: &ProbeContext) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let pid = (pid_tgid >> 32) as u32;
    // Every process of the binary hits the probe: the others stop here.
    if !target::is(pid) {
        return;
    }
    // SAFETY: the helper reads the cookie of the probe that runs.
    let index = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let Some(process) = maps::go_binary(u32::try_from(index).unwrap_or(u32::MAX)) else {
        return;
    };
    if process.g_goid == 0 {
        return;
    }
    // SAFETY: `regs` is the probe's context (the user registers at the
    // breakpoint), readable for this run. Go's register ABI passes the
    // first argument in AX.
    let woken = unsafe { (*ctx.regs).rax };
    let Some(goid) = read(woken + u64::from(process.g_goid)) else {
        return;
    };
    let key = GoWakeKey {
        pid,
        reserved: 0,
        goid,
    };
    let Some(wake) = maps::go_wake(&key) else {
        return;
    };
    #[expect(clippy::cast_possible_truncation, reason = "the low half is the tid")]
    let tid = pid_tgid as u32;
    let waker = waker_goroutine(process);
    // SAFETY: `wake` points at a map value, valid for this run; written
    // field by field, in place. The daemon may read it meanwhile: its time
    // is zero until the rest is written (a record the reader takes only
    // once its time is past the wait it ends).
    unsafe {
        (*wake).time_ns = 0;
        (*wake).tid = tid;
        (*wake).waker_goid = 0;
        (*wake).frames_len = 0;
        if let Some(g) = waker {
            (*wake).waker_goid = read(g + u64::from(process.g_goid)).unwrap_or(0);
            (*wake).frames_len = walk(g, process.g_sched_bp, &mut (*wake).frames);
        }
        (*wake).time_ns = bpf_ktime_get_ns();
    }
    maps::count(Stat::GoWakesNoted, 1);
}

/// The user goroutine the current thread runs (`g.m.curg` from the
/// thread's `g`, which is its system stack's here); `None` when it runs
/// none (the scheduler's own work).
#[inline(always)]
fn waker_goroutine(process: &profiler_common::go::GoProcess) -> Option<u64> {
    let g = read(tls::fsbase()?.wrapping_add_signed(process.tls_g))?;
    let m = read(g + u64::from(process.g_m))?;
    let curg = read(m + u64::from(process.m_curg))?;
    (curg != 0).then_some(curg)
}

/// The stack of goroutine `g` where `systemstack` left it: the frame
/// pointer chain from `sched.bp`, the frame that called `systemstack` (its
/// ABI wrapper's where one stands between: Go 1.21 and later), each
/// record's return address a frame, the first as the byte before it (the
/// call, its leaf). Without a wrapper the function that called
/// `systemstack` is left out (Go 1.19's `goready`: the leaf is its caller,
/// `runtime.send`). Returns how many frames it wrote.
#[inline(always)]
fn walk(g: u64, sched_bp: u32, frames: &mut [u64; GO_WAKE_FRAMES]) -> u32 {
    let Some(mut bp) = read(g + u64::from(sched_bp)) else {
        return 0;
    };
    let mut len = 0;
    for slot in frames.iter_mut() {
        if bp == 0 {
            break;
        }
        // The frame record: the caller's frame pointer, then the return
        // address, in one read.
        // SAFETY: reads user memory through the fault-tolerant helper.
        let Ok([next, ret]) = (unsafe { bpf_probe_read_user(bp as *const [u64; 2]) }) else {
            break;
        };
        if ret == 0 {
            break;
        }
        *slot = if len == 0 { ret - 1 } else { ret };
        len += 1;
        // A frame's caller is higher on the stack: a chain that does not
        // climb ends (the goroutine's first frame has none) or is torn.
        if next <= bp {
            break;
        }
        bp = next;
    }
    len
}

#[inline(always)]
fn read(at: u64) -> Option<u64> {
    // SAFETY: reads user memory through the fault-tolerant helper.
    unsafe { bpf_probe_read_user(at as *const u64).ok() }
}
