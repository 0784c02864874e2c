//! Reading one value out of the daemon's `/metrics` text, with a parser
//! that checks the OpenMetrics format strictly (types, names, `# EOF`).
//! Shared by the metrics unit tests, the real-kernel tests and the bench.
use openmetrics_parser::{OpenMetricsValue, openmetrics::parse_openmetrics};

/// One sample of a metric family.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// A counter's or a gauge's value.
    Number(f64),
    /// A histogram's count of observations and their sum.
    Histogram { count: f64, sum: f64 },
}

impl Value {
    /// A counter's or gauge's value; a histogram's count.
    #[must_use]
    pub fn number(self) -> f64 {
        match self {
            Self::Number(n) => n,
            Self::Histogram { count, .. } => count,
        }
    }
}

/// The sample of `family` whose one label is `label` (name, value), or
/// with `None` its first sample.
///
/// # Errors
/// When the text is not valid OpenMetrics, or has no such family, label
/// name or sample, or the sample is of another type.
pub fn value(text: &str, family: &str, label: Option<(&str, &str)>) -> Result<Value, String> {
    let exposition = parse_openmetrics(text).map_err(|e| format!("{e:?}"))?;
    let samples = exposition
        .families
        .get(family)
        .ok_or_else(|| format!("no family {family}"))?;
    let sample = match label {
        Some((name, value)) => {
            if samples.get_label_names() != [name] {
                return Err(format!(
                    "{family} is labelled {:?}, not [{name}]",
                    samples.get_label_names()
                ));
            }
            samples.get_sample_by_label_values(&[value.to_owned()])
        }
        None => samples.iter_samples().next(),
    }
    .ok_or_else(|| format!("no sample {label:?} of {family}"))?;
    #[expect(clippy::cast_precision_loss, reason = "counts far below 2^53")]
    match &sample.value {
        OpenMetricsValue::Counter(c) => Ok(Value::Number(c.value.as_f64())),
        OpenMetricsValue::Gauge(g) => Ok(Value::Number(g.as_f64())),
        OpenMetricsValue::Histogram(h) => Ok(Value::Histogram {
            count: h.count.unwrap_or_default() as f64,
            sum: h
                .sum
                .as_ref()
                .map_or(0.0, openmetrics_parser::MetricNumber::as_f64),
        }),
        other => Err(format!("{family} has an unexpected type: {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# TYPE a counter\n\
        a_total{counter=\"x\"} 3\n\
        a_total{counter=\"y\"} 4\n\
        # TYPE h histogram\n\
        h_sum{step=\"s\"} 1.5\n\
        h_count{step=\"s\"} 2\n\
        h_bucket{step=\"s\",le=\"1.0\"} 1\n\
        h_bucket{step=\"s\",le=\"+Inf\"} 2\n\
        # TYPE g gauge\n\
        g 0.25\n\
        # EOF\n";

    #[test]
    fn finds_counters_gauges_and_histograms() {
        assert_eq!(
            value(TEXT, "a", Some(("counter", "y"))),
            Ok(Value::Number(4.0))
        );
        assert_eq!(value(TEXT, "g", None), Ok(Value::Number(0.25)));
        let h = value(TEXT, "h", Some(("step", "s"))).unwrap();
        assert_eq!(
            h,
            Value::Histogram {
                count: 2.0,
                sum: 1.5
            }
        );
        assert!((h.number() - 2.0).abs() < f64::EPSILON);
    }

    #[test]
    fn says_what_is_missing() {
        assert!(
            value(TEXT, "nope", None)
                .unwrap_err()
                .contains("no family nope")
        );
        assert!(
            value(TEXT, "a", Some(("step", "x")))
                .unwrap_err()
                .contains("labelled")
        );
        assert!(
            value(TEXT, "a", Some(("counter", "z")))
                .unwrap_err()
                .contains("no sample")
        );
        assert!(value("a 1\n", "a", None).is_err(), "no # EOF");
    }
}
