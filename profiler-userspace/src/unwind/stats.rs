//! The unwinder's counters, which each window reports as profile comments.
use std::time::Duration;

/// Counters since the daemon started; the window reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnwindStats {
    pub tables_built: u64,
    pub table_build_time: Duration,
    /// Binaries whose table did not fit the budget (walked by frame pointer).
    pub tables_over_budget: u64,
    /// Binaries with no usable CFI.
    pub binaries_without_table: u64,
    /// Binaries whose mapping was gone before the file could be opened
    /// through it: not kept, built when a process maps them next.
    pub binaries_unreadable: u64,
    pub rows_in_use: u64,
    /// Mappings of a process written to the kernel (at first sight and
    /// after every change: mmap, dlopen, exec).
    pub mapping_publishes: u64,
    /// Publishes that left mappings out: more executable mappings than
    /// `MAX_MAPPINGS` (their PCs are walked by frame pointer).
    pub publishes_over_mapping_limit: u64,
    /// Processes whose mappings the kernel map refused (it was full).
    pub publish_failures: u64,
    /// Binaries dropped, unused, to make room for rows or past their
    /// bound.
    pub binaries_evicted: u64,
    /// Files whose table the kernel's map of files refused (it was full):
    /// their new processes' first samples are walked by frame pointer.
    pub file_tables_refused: u64,
    /// Processes whose first request waited (`waiting.rs`), and those of
    /// them read once due (the others were gone).
    pub requests_waited: u64,
    pub waited_then_read: u64,
    /// Requests of processes that exited before they were read (nothing
    /// was read for them).
    pub exited_unread: u64,
}

impl UnwindStats {
    /// The profile comments that report these (totals since start).
    #[must_use]
    pub fn comments(&self) -> Vec<String> {
        vec![
            format!("unwind_tables_built_total={}", self.tables_built),
            format!(
                "unwind_table_build_ms_total={}",
                self.table_build_time.as_millis()
            ),
            format!(
                "unwind_tables_over_budget_total={}",
                self.tables_over_budget
            ),
            format!(
                "unwind_binaries_without_table_total={}",
                self.binaries_without_table
            ),
            format!(
                "unwind_binaries_unreadable_total={}",
                self.binaries_unreadable
            ),
            format!("unwind_table_rows_in_use={}", self.rows_in_use),
            format!("unwind_mapping_publishes_total={}", self.mapping_publishes),
            format!(
                "unwind_publishes_over_mapping_limit_total={}",
                self.publishes_over_mapping_limit
            ),
            format!("unwind_publish_failures_total={}", self.publish_failures),
            format!("unwind_binaries_evicted_total={}", self.binaries_evicted),
            format!(
                "unwind_file_tables_refused_total={}",
                self.file_tables_refused
            ),
            format!("unwind_requests_waited_total={}", self.requests_waited),
            format!("unwind_waited_then_read_total={}", self.waited_then_read),
            format!("unwind_exited_unread_total={}", self.exited_unread),
        ]
    }
}
