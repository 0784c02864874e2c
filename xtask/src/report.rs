//! BENCHMARKS.md is written by two commands: `cargo xtask bench` writes
//! the whole file but keeps the soak section, which only `cargo xtask
//! soak` writes, between these markers.

pub const BEGIN: &str = "<!-- soak: written by cargo xtask soak -->";
pub const END: &str = "<!-- /soak -->";

/// `text` with its soak section replaced by `section` (appended if absent).
#[must_use]
pub fn replace_section(text: &str, section: &str) -> String {
    match (text.find(BEGIN), text.find(END)) {
        (Some(begin), Some(end)) if begin < end => {
            format!(
                "{}{}{}",
                &text[..begin],
                section,
                &text[end + END.len()..].trim_start_matches('\n')
            )
        }
        _ => format!("{}\n\n{section}", text.trim_end()),
    }
}

/// The soak section of `text`, if any.
#[must_use]
pub fn section(text: &str) -> Option<&str> {
    let begin = text.find(BEGIN)?;
    let end = text.find(END)? + END.len();
    (begin < end).then(|| &text[begin..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_is_replaced_or_appended() {
        let new = format!("{BEGIN}\nnew\n{END}\n");
        let appended = replace_section("# Benchmarks\n", &new);
        assert_eq!(appended, format!("# Benchmarks\n\n{new}"));
        let replaced = replace_section(&format!("# B\n{BEGIN}\nold\n{END}\ntail\n"), &new);
        assert_eq!(replaced, format!("# B\n{new}tail\n"));
        assert_eq!(section(&replaced), Some(&new[..new.len() - 1]));
    }
}
