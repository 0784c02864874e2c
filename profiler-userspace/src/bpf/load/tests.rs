//! The verifier's words on a refused load, as `Kernel::load` reads them.
use aya::programs::ProgramError;
use aya_obj::VerifierLog;

use super::{refuses_task_work, verifier_reason};

/// A load the verifier refused with `log`.
fn refused(log: &str) -> ProgramError {
    ProgramError::LoadError {
        io_error: std::io::Error::from_raw_os_error(libc::EINVAL),
        verifier_log: VerifierLog::new(log.to_owned()),
    }
}

/// 6.18.44's refusal of the task work from `sched_switch` (its log's tail).
const TASK_WORK_REFUSED: &str = "\
1234: (85) call bpf_task_work_schedule_resume_impl#65377
sleepable callback in a program that is not sleepable
kfunc bpf_task_work_schedule_resume_impl#65377 failed callback verification
verification time 2101 usec
stack depth 64+0
processed 80211 insns (limit 1000000) max_states_per_insn 4 total_states 3120
";

/// The same program refused for its size, its log naming the kfunc's call
/// on the way.
const TOO_LARGE: &str = "\
1234: (85) call bpf_task_work_schedule_resume_impl#65377
BPF program is too large. Processed 1000001 insn
verification time 9000000 usec
processed 1000001 insns (limit 1000000) max_states_per_insn 38 total_states 42700
";

#[test]
fn the_verifiers_last_words_are_the_lines_before_its_statistics() {
    assert_eq!(
        verifier_reason(&refused(TASK_WORK_REFUSED)),
        "sleepable callback in a program that is not sleepable; kfunc \
         bpf_task_work_schedule_resume_impl#65377 failed callback verification"
    );
    assert!(verifier_reason(&refused("")).contains("Invalid argument"));
}

#[test]
fn only_a_refusal_of_the_task_work_is_taken_for_one() {
    assert!(refuses_task_work(&refused(TASK_WORK_REFUSED)));
    assert!(!refuses_task_work(&refused(TOO_LARGE)));
    assert!(!refuses_task_work(&ProgramError::NotLoaded));
}
