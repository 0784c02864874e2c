//! Requests against chunks made in memory: what each gets back, without
//! root or a kernel.
use std::sync::Arc;

use profiler_common::sample::ThreadState;

use super::*;
use crate::{
    config::Symbols,
    output::pprof::proto,
    sample::Stack,
    testing::{self, row},
};

fn chunk(samples: u64, off_cpu_ns: u64) -> RawWindow {
    let state = if off_cpu_ns > 0 {
        ThreadState::Sleeping
    } else {
        ThreadState::Running
    };
    RawWindow::of_samples(vec![crate::sample::RawSample {
        user_stack: Stack::Frames(Arc::from([0x40_1000])),
        ..row(1, state, samples, off_cpu_ns)
    }])
}

fn request(view: View, duration: Duration) -> (ProfileRequest, oneshot::Receiver<Reply>) {
    let (reply, answer) = oneshot::channel();
    let request = ProfileRequest {
        view,
        duration,
        reply,
    };
    (request, answer)
}

fn decode(reply: Reply) -> proto::Profile {
    testing::decode(&reply.unwrap())
}

/// A CPU request gets the on-CPU rows of the chunks from its start to the
/// first drain after it is due, nothing from before it; an off-CPU one
/// started later gets only what came after its start.
#[tokio::test]
async fn each_request_gets_the_chunks_of_its_own_time() {
    let (assembler, _) = Assembler::start(&Symbols::default(), None).unwrap();
    let mut on_demand = OnDemand::new(assembler, 10_000_000);
    on_demand.add_chunk(&chunk(100, 0), 1_000);

    let (cpu, cpu_answer) = request(View::Cpu, Duration::ZERO);
    on_demand.start(cpu, 1_000);
    let (off, off_answer) = request(View::OffCpu, Duration::from_hours(1));
    on_demand.start(off, 1_000);
    assert!(on_demand.next_due().is_some());

    on_demand.add_chunk(&chunk(3, 7_000_000), 2_000_000_000);
    let cpu = decode(cpu_answer.await.unwrap());
    assert_eq!(cpu.sample.len(), 1, "the on-CPU row only");
    assert_eq!(cpu.sample[0].value[0], 3, "nothing from before the start");
    assert_eq!(cpu.duration_nanos, 1_999_999_000);

    // Not due yet: the off-CPU request waits, and a client that left is
    // dropped at the next chunk.
    assert_eq!(on_demand.active.len(), 1);
    drop(off_answer);
    on_demand.add_chunk(&chunk(1, 0), 3_000_000_000);
    assert!(on_demand.active.is_empty());
    assert_eq!(on_demand.next_due(), None);
}
