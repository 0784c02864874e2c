//! The offsets of the runtime's goroutine fields from a Go binary's own
//! DWARF, for binaries built without `-ldflags=-w`.
use std::{borrow::Cow, collections::HashMap};

use gimli::{AttributeValue, EndianSlice, LittleEndian};
use object::{Object as _, ObjectSection as _};

use super::layout::Layout;

type Reader<'a> = EndianSlice<'a, LittleEndian>;

/// The members' offsets of the structures `wanted` names, from DWARF's
/// `DW_TAG_structure_type` entries; a structure that appears in more
/// than one unit keeps its first.
fn struct_members(
    file: &object::File<'_>,
    wanted: &[&str],
) -> Result<HashMap<String, HashMap<String, u64>>, gimli::Error> {
    // Every section the units refer to (their line programs too).
    let load = |id: gimli::SectionId| -> Result<Cow<'_, [u8]>, gimli::Error> {
        Ok(file
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or(Cow::Borrowed(&[])))
    };
    let sections = gimli::DwarfSections::load(load)?;
    let dwarf = sections.borrow(|data| EndianSlice::new(data.as_ref(), LittleEndian));
    let mut found: HashMap<String, HashMap<String, u64>> = HashMap::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = dwarf.unit(header)?;
        let mut entries = unit.entries();
        let mut current: Option<(String, isize)> = None;
        while let Some(entry) = entries.next_dfs()? {
            let depth = entry.depth();
            if current.as_ref().is_some_and(|(_, d)| depth <= *d) {
                current = None;
            }
            if entry.tag() == gimli::DW_TAG_structure_type {
                let name = name_of(&dwarf, &unit, entry)?;
                if let Some(name) =
                    name.filter(|n| wanted.contains(&n.as_str()) && !found.contains_key(n))
                {
                    found.insert(name.clone(), HashMap::new());
                    current = Some((name, depth));
                }
            } else if entry.tag() == gimli::DW_TAG_member
                && let Some((structure, _)) = &current
                && let (Some(member), Some(AttributeValue::Udata(offset))) = (
                    name_of(&dwarf, &unit, entry)?,
                    entry.attr_value(gimli::DW_AT_data_member_location),
                )
                && let Some(members) = found.get_mut(structure)
            {
                members.insert(member, offset);
            }
        }
        if wanted.iter().all(|w| found.contains_key(*w)) {
            break;
        }
    }
    Ok(found)
}

fn name_of(
    dwarf: &gimli::Dwarf<Reader<'_>>,
    unit: &gimli::Unit<Reader<'_>>,
    entry: &gimli::DebuggingInformationEntry<Reader<'_>>,
) -> Result<Option<String>, gimli::Error> {
    let Some(value) = entry.attr_value(gimli::DW_AT_name) else {
        return Ok(None);
    };
    let name = dwarf.attr_string(unit, value)?;
    Ok(Some(String::from_utf8_lossy(name.slice()).into_owned()))
}

/// The goroutine layout the binary's DWARF describes; `None` when it has
/// no DWARF or lacks one of the fields.
///
/// # Errors
/// When the DWARF is malformed.
pub fn layout(file: &object::File<'_>) -> Result<Option<Layout>, gimli::Error> {
    let found = struct_members(file, &["runtime.g", "runtime.gobuf", "runtime.stack"])?;
    let field = |s: &str, m: &str| found.get(s).and_then(|f| f.get(m)).copied();
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
        })
    })())
}
