//! Where an executable's thread-local variables are: its TLS block is the
//! first in a thread's static TLS, which on x86-64 ends at the thread
//! pointer (`fsbase`), so a variable at `value` in the block (its symbol's
//! value) is at the thread pointer less the block's size rounded up to
//! its alignment, plus `value`.

/// The offset from the thread pointer of the variable at `value` in the
/// TLS block of executable `file`; `None` when it has no TLS block.
#[must_use]
pub fn static_tls_offset(file: &object::File<'_>, value: u64) -> Option<i64> {
    use object::{Object as _, ObjectSection as _};
    let tls: Vec<(u64, u64, u64)> = file
        .sections()
        .filter(|s| {
            matches!(s.flags(), object::SectionFlags::Elf { sh_flags }
                if sh_flags & u64::from(object::elf::SHF_TLS) != 0)
        })
        .map(|s| (s.address(), s.address() + s.size(), s.align().max(1)))
        .collect();
    let start = tls.iter().map(|t| t.0).min()?;
    let end = tls.iter().map(|t| t.1).max()?;
    let align = tls.iter().map(|t| t.2).max().unwrap_or(1);
    let size = (end - start).next_multiple_of(align);
    Some(i64::try_from(value).ok()? - i64::try_from(size).ok()?)
}
