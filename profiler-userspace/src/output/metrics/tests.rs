use profiler_fixtures::openmetrics;

use super::*;

fn value(text: &str, family: &str, label: Option<(&str, &str)>) -> f64 {
    openmetrics::value(text, family, label).unwrap().number()
}

#[test]
#[expect(clippy::float_cmp, reason = "small integers and 1/4 are exact")]
fn window_counters_add_up_across_windows_and_levels_are_set() {
    let metrics = Metrics::new();
    let accounting = |lost, pending| Accounting {
        counters: vec![("lost_samples", lost), ("debuginfod_fetched", 1)],
        gauges: vec![("debuginfod_pending", pending)],
        ..Accounting::default()
    };
    metrics.add_window(&accounting(3, 2));
    metrics.add_window(&accounting(4, 0));
    metrics.step(Step::Symbolize, Duration::from_millis(20));
    metrics.window_written(true, 0);
    metrics.window_written(false, 1);
    metrics.set_map_fill(FilledMap::Samples, 0.25);

    let text = metrics.render();
    let events = "profiler_window_events";
    assert_eq!(value(&text, events, Some(("counter", "lost_samples"))), 7.0);
    let fetched = ("counter", "debuginfod_fetched");
    assert_eq!(value(&text, events, Some(fetched)), 2.0);
    let pending = ("gauge", "debuginfod_pending");
    assert_eq!(value(&text, "profiler_window_level", Some(pending)), 0.0);
    let samples = ("map", "samples");
    assert_eq!(value(&text, "profiler_map_fill_ratio", Some(samples)), 0.25);
    assert_eq!(value(&text, "profiler_windows_written", None), 1.0);
    assert_eq!(value(&text, "profiler_window_write_failures", None), 1.0);
    assert_eq!(value(&text, "profiler_windows_waiting", None), 1.0);
    let symbolize = Some(("step", "symbolize"));
    assert_eq!(value(&text, "profiler_window_step_seconds", symbolize), 1.0);
}

#[test]
#[expect(clippy::float_cmp, reason = "quarter seconds are exact")]
fn the_critical_paths_top_ends_are_the_last_windows() {
    let metrics = Metrics::new();
    let window = |ends: &[(&str, u64)]| Accounting {
        critical_ends: ends.iter().map(|&(e, ns)| (e.to_owned(), ns)).collect(),
        ..Accounting::default()
    };
    metrics.add_window(&window(&[
        ("c:12", 750_000_000),
        ("[woken by disk]", 250_000_000),
    ]));
    metrics.add_window(&window(&[("b:11", 500_000_000)]));
    let text = metrics.render();
    let family = "profiler_critical_path_top_seconds";
    assert_eq!(value(&text, family, Some(("end", "b:11"))), 0.5);
    let gone = openmetrics::value(&text, family, Some(("end", "c:12")));
    assert!(gone.is_err_and(|e| e.starts_with("no sample")), "{text}");
}
