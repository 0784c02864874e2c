//! A JVM's flags as it runs (`-XX:` options and their defaults), read from
//! its flag table (`JVMFlag::flags`), by name.
use super::{layout::FlagsLayout, vm_structs::read_c_string};
use crate::process::memory::{Memory, u64_at};

/// The most flags a table may have before it is taken as not one.
const MAX_FLAGS: u64 = 4096;

/// The value of the `bool` flag `name` in process `memory`, whose
/// `libjvm.so` is loaded with `bias`; `None` when the table cannot be
/// read or has no such flag.
#[must_use]
pub fn bool_flag(memory: Memory, layout: &FlagsLayout, bias: u64, name: &str) -> Option<bool> {
    let word = |at: u64| {
        let mut bytes = [0u8; 8];
        memory.read(at, &mut bytes).ok()?;
        Some(u64::from_le_bytes(bytes))
    };
    let (table, count) = (
        word(layout.flags.wrapping_add(bias))?,
        word(layout.count.wrapping_add(bias))?,
    );
    if table == 0 || count == 0 || count > MAX_FLAGS {
        return None;
    }
    let mut entries = vec![0u8; usize::try_from(count * layout.size).ok()?];
    memory.read(table, &mut entries).ok()?;
    let size = usize::try_from(layout.size).ok()?;
    let address = entries.chunks_exact(size).find_map(|entry| {
        let at = u64_at(entry, layout.name)?;
        (at != 0 && read_c_string(memory, at)? == name).then(|| u64_at(entry, layout.address))?
    })?;
    let mut value = [0u8; 1];
    memory.read(address, &mut value).ok()?;
    Some(value[0] != 0)
}
