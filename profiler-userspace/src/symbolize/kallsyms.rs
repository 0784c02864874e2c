//! Kernel function names from `/proc/kallsyms`, held compactly.
//!
//! blazesym's kallsyms resolver keeps every symbol as its own allocation:
//! with 122,000 symbols, about 8 MB of the daemon's heap for its whole life
//! (heaptrack), the largest single item of an `--all` daemon's peak. Here
//! the text symbols' addresses are one sorted array (12 bytes a symbol)
//! and their names are deflated in blocks of [`BLOCK`], a block inflated
//! only to name an address of it not seen before: about 2.4 MB in all.
//! The fastest level compresses them (0.9 MB): reading the table then
//! costs about what blazesym's did, where the default level (0.6 MB) took
//! 40-60 ms more, once.
//! Like blazesym's (reloads off), the table is read once, and kallsyms
//! has no sizes: an address in a module loaded later takes the name of the
//! symbol below it. BPF programs loaded later are named by the kernel's
//! records first (`kernel_symbols.rs`).
use std::{
    collections::HashMap,
    io::{self, BufRead},
    sync::Arc,
};

use flate2::{
    Compress as Deflate, Compression, Decompress as Inflate, FlushCompress, FlushDecompress, Status,
};

use crate::profile::Line;

/// Names per compressed block: larger blocks compress better and cost
/// more to inflate for one name.
const BLOCK: usize = 128;

#[derive(Default)]
pub(super) struct Kallsyms {
    /// Text symbols' addresses, ascending.
    addrs: Vec<u64>,
    /// For each entry of `addrs`, its symbol's index in `blocks`' order.
    order: Vec<u32>,
    /// Names in file order, NUL-terminated, [`BLOCK`] to a deflated block.
    blocks: Vec<Box<[u8]>>,
    /// Frames already made, by symbol, shared by its addresses.
    named: HashMap<u32, Arc<[Line]>>,
}

impl Kallsyms {
    /// Reads `/proc/kallsyms`.
    ///
    /// # Errors
    /// When it cannot be read.
    pub fn read() -> io::Result<Self> {
        let file = std::fs::File::open("/proc/kallsyms")?;
        Self::parse(io::BufReader::new(file))
    }

    /// Parses kallsyms lines (`ADDRESS TYPE NAME [MODULE]`), keeping text
    /// symbols (`t`, `T`, weak `w`, `W`) with an address: zero addresses
    /// are what a reader without `CAP_SYSLOG` sees.
    fn parse(mut reader: impl BufRead) -> io::Result<Self> {
        let mut table = Self::default();
        let mut by_address: Vec<(u64, u32)> = Vec::new();
        // One compressor for every block: making one allocates and clears
        // its window and tables, hundreds of KiB (for 955 blocks, that took
        // longer than reading the table).
        let mut deflate = Deflate::new(Compression::fast(), false);
        let mut block = Vec::new();
        let mut line = String::new();
        while {
            line.clear();
            reader.read_line(&mut line)? > 0
        } {
            let mut fields = line.split_ascii_whitespace();
            let (Some(addr), Some(kind), Some(name)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 || !matches!(kind, "t" | "T" | "w" | "W") {
                continue;
            }
            let index = u32::try_from(by_address.len()).map_err(io::Error::other)?;
            by_address.push((addr, index));
            block.extend_from_slice(name.as_bytes());
            block.push(0);
            if by_address.len().is_multiple_of(BLOCK) {
                table.blocks.push(deflated(&mut deflate, &block)?);
                block.clear();
            }
        }
        if !block.is_empty() {
            table.blocks.push(deflated(&mut deflate, &block)?);
        }
        by_address.sort_unstable();
        (table.addrs, table.order) = by_address.into_iter().unzip();
        Ok(table)
    }

    /// How many symbols it holds.
    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    /// The frames of each of `addrs`: the function at or below it, empty
    /// below the first. Each block is inflated once for all of them.
    pub fn lines(&mut self, addrs: &[u64]) -> Vec<Arc<[Line]>> {
        let symbols: Vec<Option<u32>> = addrs.iter().map(|&a| self.symbol_of(a)).collect();
        let mut wanted: Vec<u32> = symbols
            .iter()
            .flatten()
            .copied()
            .filter(|s| !self.named.contains_key(s))
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        for (symbol, name) in self.names(&wanted) {
            let line = Line {
                function: name,
                file: String::new(),
                line: 0,
            };
            self.named.insert(symbol, Arc::new([line]));
        }
        symbols
            .into_iter()
            .map(|s| {
                s.and_then(|s| self.named.get(&s).cloned())
                    .unwrap_or_else(|| Arc::new([]))
            })
            .collect()
    }

    /// The symbol (its index in file order) at or below `addr`: of
    /// aliases at one address, the first in the file, as blazesym and
    /// perf name them.
    fn symbol_of(&self, addr: u64) -> Option<u32> {
        let below = self.addrs.partition_point(|&a| a <= addr).checked_sub(1)?;
        let first = self.addrs.partition_point(|&a| a < self.addrs[below]);
        Some(self.order[first])
    }

    /// The names of `symbols`, ascending (so those of a block are
    /// adjacent).
    fn names(&self, symbols: &[u32]) -> Vec<(u32, String)> {
        let mut names = Vec::with_capacity(symbols.len());
        let mut inflate = Inflate::new(false);
        let mut inflated: Option<(usize, Vec<u8>)> = None;
        for &symbol in symbols {
            let (block, slot) = (symbol as usize / BLOCK, symbol as usize % BLOCK);
            if inflated.as_ref().is_none_or(|(b, _)| *b != block) {
                let Some(bytes) = self
                    .blocks
                    .get(block)
                    .and_then(|deflated| inflate_block(&mut inflate, deflated))
                else {
                    continue;
                };
                inflated = Some((block, bytes));
            }
            let Some((_, bytes)) = &inflated else {
                continue;
            };
            if let Some(name) = bytes.split(|&b| b == 0).nth(slot) {
                names.push((symbol, String::from_utf8_lossy(name).into_owned()));
            }
        }
        names
    }
}

/// `raw` deflated, with `deflate` reset for the next block.
fn deflated(deflate: &mut Deflate, raw: &[u8]) -> io::Result<Box<[u8]>> {
    let mut out = Vec::with_capacity(raw.len() / 2 + 64);
    loop {
        let consumed = usize::try_from(deflate.total_in()).map_err(io::Error::other)?;
        let status = deflate
            .compress_vec(&raw[consumed..], &mut out, FlushCompress::Finish)
            .map_err(io::Error::other)?;
        if status == Status::StreamEnd {
            break;
        }
        out.reserve(out.capacity().max(64));
    }
    deflate.reset();
    Ok(out.into_boxed_slice())
}

/// A block of names inflated (`None`: not a block this table made), with
/// `inflate` reset for the next.
fn inflate_block(inflate: &mut Inflate, deflated: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(deflated.len() * 4 + 64);
    let result = loop {
        let rest = usize::try_from(inflate.total_in())
            .ok()
            .and_then(|consumed| deflated.get(consumed..));
        let Some(rest) = rest else { break None };
        match inflate.decompress_vec(rest, &mut out, FlushDecompress::Finish) {
            Ok(Status::StreamEnd) => break Some(out),
            Ok(_) if out.len() == out.capacity() => out.reserve(out.capacity()),
            Ok(_) | Err(_) => break None,
        }
    };
    inflate.reset(false);
    result
}

#[cfg(test)]
mod tests;
