use std::fmt::Write as _;

use blazesym::{
    MaybeDefault,
    symbolize::{Input, Symbolized, Symbolizer, source},
};

use super::*;

fn names(table: &mut Kallsyms, addrs: &[u64]) -> Vec<Option<String>> {
    table
        .lines(addrs)
        .iter()
        .map(|lines| lines.first().map(|l| l.function.clone()))
        .collect()
}

#[test]
fn text_symbols_name_the_addresses_up_to_the_next_one() {
    // Out of address order (modules follow the kernel), with a module
    // suffix, data and hidden (zero) symbols, and more than a block.
    let mut text = String::from(
        "ffffffffc0001000 t mod_fn\t[some_mod]\n\
         ffffffff81000000 T _stext\n\
         ffffffff81000100 D some_data\n\
         0000000000000000 T hidden\n\
         ffffffff81000200 W weak_fn\n",
    );
    for i in 0..300u64 {
        let _ = writeln!(text, "{:x} t f{i}", 0xffff_ffff_8200_0000 + i * 0x10);
    }
    let mut table = Kallsyms::parse(text.as_bytes()).unwrap();
    assert_eq!(table.len(), 303);
    let got = names(
        &mut table,
        &[
            0xffff_ffff_8100_0000,
            0xffff_ffff_8100_0150, // past the data symbol: still _stext
            0xffff_ffff_8100_0200,
            0xffff_ffff_c000_1234,
            0xffff_ffff_8200_0000 + 299 * 0x10 + 4,
            0xffff_ffff_8200_0000 + 130 * 0x10,
            0xffff_ffff_8000_0000, // below every symbol
        ],
    );
    let want = [
        Some("_stext"),
        Some("_stext"),
        Some("weak_fn"),
        Some("mod_fn"),
        Some("f299"),
        Some("f130"),
        None,
    ];
    assert_eq!(got, want.map(|n| n.map(str::to_owned)));
}

#[test]
fn of_aliases_the_first_in_the_file_names_the_address() {
    let text = "ffffffff81000000 T second_sorted\nffffffff80000000 T low\n\
                ffffffff81000000 T alias\n";
    let mut table = Kallsyms::parse(text.as_bytes()).unwrap();
    assert_eq!(
        names(&mut table, &[0xffff_ffff_8100_0010]),
        [Some("second_sorted".to_owned())]
    );
}

/// The running kernel's table names addresses as blazesym's own kallsyms
/// resolver does (the reference), for symbols all over the table.
#[test]
fn the_kernel_table_names_addresses_as_blazesym_does() {
    let mut table = Kallsyms::read().unwrap();
    assert!(
        table.len() > 10_000,
        "{} symbols: are the tests run as root?",
        table.len()
    );
    // Each text symbol with an address of its own, and 1 byte past it if
    // no symbol of any type starts there.
    let all = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let mut every: Vec<(u64, bool)> = all
        .lines()
        .filter_map(|l| {
            let mut f = l.split_ascii_whitespace();
            let addr = u64::from_str_radix(f.next()?, 16).ok()?;
            let text = matches!(f.next()?, "t" | "T" | "w" | "W");
            (addr != 0).then_some((addr, text))
        })
        .collect();
    every.sort_unstable();
    let mut addrs = Vec::new();
    for w in every.windows(3).step_by(37) {
        let [(before, _), (addr, text), (next, _)] = *w else {
            unreachable!()
        };
        if text && before < addr && addr + 1 < next {
            addrs.extend([addr, addr + 1]);
        }
    }
    assert!(addrs.len() > 1000, "only {} addresses", addrs.len());

    let blaze = Symbolizer::new();
    let kernel = source::Source::Kernel(source::Kernel {
        vmlinux: MaybeDefault::None,
        ..source::Kernel::default()
    });
    let reference: Vec<Option<String>> = blaze
        .symbolize(&kernel, Input::AbsAddr(&addrs))
        .unwrap()
        .into_iter()
        .map(|s| match s {
            Symbolized::Sym(sym) => Some(sym.name.into_owned()),
            Symbolized::Unknown(_) => None,
        })
        .collect();
    let ours = names(&mut table, &addrs);
    let differ: Vec<_> = addrs
        .iter()
        .zip(ours.iter().zip(&reference))
        .filter(|(_, (a, b))| a != b)
        .take(5)
        .collect();
    assert!(
        differ.is_empty(),
        "{} addresses, differing: {differ:x?}",
        addrs.len()
    );
}
