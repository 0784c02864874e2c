//! Which files are CPython interpreters, and what the walk needs of each:
//! a file that exports `_PyEval_EvalFrameDefault` and `_PyRuntime` (the
//! `python3.X` executable with the interpreter linked in, as Debian
//! ships it, or `libpython3.X.so`), its version and its layout.
use object::{Object as _, ObjectSection as _, ObjectSegment as _, ObjectSymbol as _};

use super::{
    debug_offsets,
    layout::{self, Layout, Version},
};
use crate::runtimes::segments::Segments;

/// What a file is to the Python walk.
#[derive(Debug)]
pub enum Recognised {
    /// Not a CPython interpreter.
    NotPython,
    Python(Interpreter),
    /// A CPython interpreter whose frames are not read: `why`.
    Unsupported {
        why: String,
    },
}

/// A CPython interpreter binary: addresses are the file's own (ELF
/// virtual addresses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interpreter {
    pub version: Version,
    pub layout: Layout,
    /// `_PyEval_EvalFrameDefault`'s code.
    pub eval: (u64, u64),
    /// `_PyRuntime`.
    pub runtime: u64,
    /// `PyCode_Type`: a code object's `ob_type`.
    pub code_type: u64,
    segments: Segments,
    /// The file addresses its loadable segments span: an object there is
    /// static data of the file (see `frozen.rs`).
    image: (u64, u64),
}

impl Interpreter {
    /// An interpreter of `version` laid out as `layout`, whose code objects'
    /// type is at `code_type`, loaded at its file's addresses.
    #[cfg(test)]
    pub(super) fn for_tests(version: Version, layout: Layout, code_type: u64) -> Self {
        Self {
            version,
            layout,
            eval: (0, 0),
            runtime: 0,
            code_type,
            segments: Segments::identity(),
            image: (0, 0),
        }
    }

    /// As [`Interpreter::for_tests`], with the addresses `image` as its
    /// file's.
    #[cfg(test)]
    pub(super) fn with_image(mut self, image: (u64, u64)) -> Self {
        self.image = image;
        self
    }

    /// Whether file address `address` is in the file's own image (static
    /// data, the same in every process that maps it).
    #[must_use]
    pub fn holds(&self, address: u64) -> bool {
        (self.image.0..self.image.1).contains(&address)
    }

    /// What to add to the file's addresses in a process that maps its
    /// file offset `offset` at `start`.
    #[must_use]
    pub fn bias(&self, offset: u64, start: u64) -> Option<u64> {
        self.segments.bias(offset, start)
    }
}

/// Looks at the ELF file `data` (named `path`).
#[must_use]
pub fn recognise(data: &[u8], path: &str) -> Recognised {
    let Ok(file) = object::File::parse(data) else {
        return Recognised::NotPython;
    };
    // Every symbol read is part of CPython's API, so exported.
    let symbol = |name: &str| {
        file.dynamic_symbols()
            .find(|s| s.name() == Ok(name) && s.address() != 0)
            .map(|s| (s.address(), s.size()))
    };
    let (Some(eval), Some(runtime)) = (symbol("_PyEval_EvalFrameDefault"), symbol("_PyRuntime"))
    else {
        return Recognised::NotPython;
    };
    let runtime_bytes = bytes_at(&file, runtime.0, runtime.1.min(4096));
    let version = symbol("Py_Version")
        .and_then(|(at, _)| bytes_at(&file, at, 4))
        .and_then(|b| Some(u32::from_le_bytes(b.try_into().ok()?)))
        .map(u64::from)
        .or_else(|| runtime_bytes.and_then(debug_offsets::version_hex))
        .map(version_of_hex)
        .or_else(|| version_in_name(path));
    let Some(version) = version else {
        return Recognised::Unsupported {
            why: "its version could not be read".to_owned(),
        };
    };
    let layout = match layout::known(version) {
        Some(layout) => layout,
        None if version
            == (Version {
                major: 3,
                minor: 13,
            }) =>
        {
            match runtime_bytes.map(debug_offsets::layout) {
                Some(Ok(layout)) => layout,
                Some(Err(e)) => return Recognised::Unsupported { why: e.to_string() },
                None => {
                    return Recognised::Unsupported {
                        why: "_PyRuntime's bytes are not in the file".to_owned(),
                    };
                }
            }
        }
        None => {
            return Recognised::Unsupported {
                why: format!("CPython {version} is not supported (3.8 to 3.13 are)"),
            };
        }
    };
    let Some((code_type, _)) = symbol("PyCode_Type") else {
        return Recognised::Unsupported {
            why: "it exports no PyCode_Type".to_owned(),
        };
    };
    let segments = Segments::of(&file);
    let image = file
        .segments()
        .filter(|s| s.size() > 0)
        .fold((u64::MAX, 0), |(low, high), s| {
            (low.min(s.address()), high.max(s.address() + s.size()))
        });
    Recognised::Python(Interpreter {
        version,
        layout,
        eval: (eval.0, eval.0 + eval.1.max(1)),
        runtime: runtime.0,
        code_type,
        segments,
        image,
    })
}

/// `PY_VERSION_HEX`'s major and minor.
fn version_of_hex(hex: u64) -> Version {
    #[expect(clippy::cast_possible_truncation, reason = "one byte each")]
    Version {
        major: (hex >> 24) as u8,
        minor: (hex >> 16) as u8,
    }
}

/// The version in a file name such as `libpython3.9.so.1.0` or
/// `python3.10`.
fn version_in_name(path: &str) -> Option<Version> {
    let name = path.rsplit('/').next()?;
    let rest = &name[name.find("python")? + "python".len()..];
    let (major, rest) = rest.split_once('.')?;
    let minor: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some(Version {
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
    })
}

/// `len` bytes of the file's initialised data at address `at`.
fn bytes_at<'a>(file: &object::File<'a>, at: u64, len: u64) -> Option<&'a [u8]> {
    file.sections()
        .find(|s| s.address() <= at && at < s.address() + s.size())
        .and_then(|s| s.data_range(at, len).ok().flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_file_names() {
        let v = |major, minor| Some(Version { major, minor });
        assert_eq!(version_in_name("/usr/lib/libpython3.9.so.1.0"), v(3, 9));
        assert_eq!(
            version_in_name("/root/.pyenv/versions/3.10.13/bin/python3.10"),
            v(3, 10)
        );
        assert_eq!(version_in_name("/usr/bin/python"), None);
    }

    #[test]
    fn the_version_hex_gives_major_and_minor() {
        assert_eq!(
            version_of_hex(0x030b_07f0),
            Version {
                major: 3,
                minor: 11
            }
        );
    }
}
