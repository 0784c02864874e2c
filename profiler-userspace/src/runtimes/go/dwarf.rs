//! The offsets of the runtime's goroutine fields from a Go binary's own
//! DWARF, for binaries built without `-ldflags=-w`.
use super::layout::Layout;
use crate::runtimes::dwarf::structures;

/// The goroutine layout the binary's DWARF describes; `None` when it has
/// no DWARF or lacks one of the fields.
///
/// # Errors
/// When the DWARF is malformed.
pub fn layout(file: &object::File<'_>) -> Result<Option<Layout>, gimli::Error> {
    let found = structures(
        file,
        &["runtime.g", "runtime.gobuf", "runtime.stack", "runtime.m"],
    )?;
    let field = |s: &str, m: &str| found.get(s).and_then(|f| f.member(m));
    let Some(sched) = field("runtime.g", "sched") else {
        return Ok(None);
    };
    Ok((|| {
        Some(Layout {
            stack_lo: field("runtime.g", "stack")? + field("runtime.stack", "lo")?,
            stack_hi: field("runtime.g", "stack")? + field("runtime.stack", "hi")?,
            sched_sp: sched + field("runtime.gobuf", "sp")?,
            sched_pc: sched + field("runtime.gobuf", "pc")?,
            sched_bp: sched + field("runtime.gobuf", "bp")?,
            atomicstatus: field("runtime.g", "atomicstatus")?,
            goid: field("runtime.g", "goid")?,
            waitreason: field("runtime.g", "waitreason")?,
            gopc: field("runtime.g", "gopc")?,
            startpc: field("runtime.g", "startpc")?,
            labels: field("runtime.g", "labels")?,
            m: field("runtime.g", "m")?,
            m_curg: field("runtime.m", "curg")?,
        })
    })())
}
