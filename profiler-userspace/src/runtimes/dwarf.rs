//! Structure layouts from a binary's own DWARF: the runtimes read their
//! field offsets this way where a binary has DWARF, and the tests check
//! the tables of known versions against it.
use std::{borrow::Cow, collections::HashMap};

use gimli::{AttributeValue, EndianSlice, LittleEndian, UnitOffset};
use object::{Object as _, ObjectSection as _};

type Reader<'a> = EndianSlice<'a, LittleEndian>;

/// One structure: its size and its members' offsets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Structure {
    pub size: u64,
    pub members: HashMap<String, u64>,
}

impl Structure {
    /// Member `name`'s offset.
    #[must_use]
    pub fn member(&self, name: &str) -> Option<u64> {
        self.members.get(name).copied()
    }
}

/// The structures `wanted` names, from DWARF's `DW_TAG_structure_type`
/// entries of that name or typedefs of that name to one (C's
/// `typedef struct { ... } Name;`); a structure that appears in more than
/// one unit keeps its first.
///
/// # Errors
/// When the DWARF is malformed.
pub fn structures(
    file: &object::File<'_>,
    wanted: &[&str],
) -> Result<HashMap<String, Structure>, gimli::Error> {
    // Every section the units refer to (their line programs too).
    let load = |id: gimli::SectionId| -> Result<Cow<'_, [u8]>, gimli::Error> {
        Ok(file
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or(Cow::Borrowed(&[])))
    };
    let sections = gimli::DwarfSections::load(load)?;
    let dwarf = sections.borrow(|data| EndianSlice::new(data.as_ref(), LittleEndian));
    let mut found: HashMap<String, Structure> = HashMap::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let unit = dwarf.unit(header)?;
        let typedefs = read_unit(&dwarf, &unit, wanted, &HashMap::new(), &mut found)?;
        if !typedefs.is_empty() {
            read_unit(&dwarf, &unit, wanted, &typedefs, &mut found)?;
        }
        if wanted.iter().all(|w| found.contains_key(*w)) {
            break;
        }
    }
    Ok(found)
}

/// One pass over `unit`: the wanted structures by name, and those at the
/// offsets of `typedefs` (their names); returns the wanted typedefs of
/// structures not found yet, by the structure's offset.
fn read_unit(
    dwarf: &gimli::Dwarf<Reader<'_>>,
    unit: &gimli::Unit<Reader<'_>>,
    wanted: &[&str],
    typedefs: &HashMap<UnitOffset, String>,
    found: &mut HashMap<String, Structure>,
) -> Result<HashMap<UnitOffset, String>, gimli::Error> {
    let mut new_typedefs = HashMap::new();
    let mut entries = unit.entries();
    let mut current: Option<(String, isize)> = None;
    while let Some(entry) = entries.next_dfs()? {
        let depth = entry.depth();
        if current.as_ref().is_some_and(|(_, d)| depth <= *d) {
            current = None;
        }
        match entry.tag() {
            // A declaration (`struct _frame;`) has no members: the
            // definition is elsewhere.
            gimli::DW_TAG_structure_type
                if entry.attr_value(gimli::DW_AT_declaration).is_none() =>
            {
                let name = name_of(dwarf, unit, entry)?
                    .filter(|n| wanted.contains(&n.as_str()))
                    .or_else(|| typedefs.get(&entry.offset()).cloned());
                if let Some(name) = name.filter(|n| !found.contains_key(n)) {
                    let size = entry
                        .attr_value(gimli::DW_AT_byte_size)
                        .and_then(|v| v.udata_value())
                        .unwrap_or(0);
                    found.insert(
                        name.clone(),
                        Structure {
                            size,
                            ..Structure::default()
                        },
                    );
                    current = Some((name, depth));
                }
            }
            gimli::DW_TAG_typedef => {
                if let (Some(name), Some(AttributeValue::UnitRef(target))) = (
                    name_of(dwarf, unit, entry)?,
                    entry.attr_value(gimli::DW_AT_type),
                ) && wanted.contains(&name.as_str())
                    && !found.contains_key(&name)
                {
                    new_typedefs.insert(target, name);
                }
            }
            gimli::DW_TAG_member => {
                if let Some((structure, _)) = &current
                    && let (Some(member), Some(offset)) = (
                        name_of(dwarf, unit, entry)?,
                        entry
                            .attr_value(gimli::DW_AT_data_member_location)
                            .and_then(|v| v.udata_value()),
                    )
                    && let Some(found) = found.get_mut(structure)
                {
                    found.members.insert(member, offset);
                }
            }
            _ => {}
        }
    }
    Ok(new_typedefs)
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
