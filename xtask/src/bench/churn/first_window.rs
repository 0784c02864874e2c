//! Section 15's cold start (issue 61): how the shell loop's first window
//! names its user frames against the later windows, from the daemon's log
//! line for each profile it writes.
use std::fmt::Write as _;

use anyhow::bail;

/// Reports how well the shell loop's windows named their user frames
/// (issue 61's cold start: the first window names as much as the later
/// ones); returns the first's share of frames unnamed over the later
/// ones' mean share.
pub(super) fn first_window(report: &mut String, windows: &[Window]) -> anyhow::Result<f64> {
    let [first, later @ ..] = windows else {
        bail!("the shell loop's daemon wrote no window");
    };
    if later.is_empty() {
        bail!("the shell loop's daemon wrote one window");
    }
    #[expect(clippy::cast_precision_loss, reason = "a count")]
    let mean = later.iter().map(Window::unnamed).sum::<f64>() / later.len() as f64;
    let ratio = first.unnamed() / mean.max(f64::EPSILON);
    let failures: Vec<u64> = windows.iter().map(|w| w.failures).collect();
    writeln!(
        report,
        "How the shell loop's windows named their user frames (the daemon's log, its cold \
         start included: the loop begins 2 s into the first window): the first left {:.1}% \
         of its {} user frames unnamed, the {} later ones {:.1}% on average ({ratio:.2}x). \
         Most unnamed frames are in binaries without symbols for them (Debian's stripped \
         `xz` and `python3.11` name their exported functions only), in every window alike. The `symbolization_failures` counter counts \
         each address when it is first looked up (results are cached, failures too), so the \
         first window counts most: {failures:?}.\n",
        first.unnamed() * 100.0,
        first.user_frames,
        later.len(),
        mean * 100.0,
    )?;
    Ok(ratio)
}

/// What the daemon's log says of one window it wrote.
pub(super) struct Window {
    failures: u64,
    user_frames: u64,
    resolved: u64,
}

impl Window {
    /// The share of its user frames left unnamed.
    fn unnamed(&self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "counts")]
        let share =
            self.user_frames.saturating_sub(self.resolved) as f64 / self.user_frames.max(1) as f64;
        share
    }
}

/// Each window the daemon wrote, in order, from its log lines.
pub(super) fn windows(log: &str) -> Vec<Window> {
    let field = |line: &str, name: &str| -> Option<u64> {
        let rest = line.split(&format!(" {name}=")).nth(1)?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    log.lines()
        .filter(|line| line.contains("wrote profile"))
        .filter_map(|line| {
            Some(Window {
                failures: field(line, "symbolization_failures")?,
                user_frames: field(line, "user_frames")?,
                resolved: field(line, "user_frames_resolved")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_written_window_is_read_from_its_log_line() {
        let log = "\
2026-11-29T22:02:43Z  INFO profiler_userspace::pipeline::outlets: wrote profile path=/o/a.pb.gz \
entries=565 samples=392 symbolization_failures=1171 user_frames=2543 user_frames_resolved=976 \
frames_by_table=6869
2026-11-29T22:02:44Z  INFO profiler_userspace: profiling
2026-11-29T22:02:48Z  INFO profiler_userspace::pipeline::outlets: wrote profile path=/o/b.pb.gz \
entries=646 samples=443 symbolization_failures=105 user_frames=2000 user_frames_resolved=1000
";
        let read = windows(log);
        let fields: Vec<_> = read
            .iter()
            .map(|w| (w.failures, w.user_frames, w.resolved))
            .collect();
        assert_eq!(fields, [(1171, 2543, 976), (105, 2000, 1000)]);
        let mut report = String::new();
        let ratio = first_window(&mut report, &read).unwrap();
        assert!((ratio - (1567.0 / 2543.0) / 0.5).abs() < 1e-9, "{ratio}");
        assert!(first_window(&mut report, &read[..1]).is_err());
    }
}
