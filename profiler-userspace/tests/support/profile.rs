//! Reading back the pprof files the profiler wrote: decoding, lookups by
//! name, and sums over samples.
use std::{
    fs,
    io::Read as _,
    path::{Path, PathBuf},
    process::Command,
};

use profiler_userspace::output::pprof::proto;
use prost::Message as _;

/// The mapping kernel frames are in.
const KERNEL_MAPPING: &str = "[kernel.kallsyms]";

/// How many finished profile files `dir` holds.
pub(super) fn finished_profiles(dir: &Path) -> usize {
    fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| is_profile_name(&e.file_name().to_string_lossy()))
            .count()
    })
}

/// A finished profile's name: `profile-<time>.pb.gz` (the sink writes
/// `.profile-<time>.pb.gz.tmp` first, then renames it).
fn is_profile_name(name: &str) -> bool {
    name.starts_with("profile-") && name.ends_with(".pb.gz")
}

/// The profile files in `dir`, oldest first, decoded.
pub fn profiles(dir: &Path) -> Vec<(PathBuf, Profile)> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .expect("output dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            assert!(
                is_profile_name(&name),
                "unexpected file {name} in the output dir"
            );
            let profile = read_profile(&path);
            (path, profile)
        })
        .collect()
}

/// Decodes one gzip'd pprof file (ours, or one Go's runtime/pprof wrote).
pub fn read_profile(path: &Path) -> Profile {
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(fs::File::open(path).unwrap())
        .read_to_end(&mut bytes)
        .expect("gzip");
    Profile(proto::Profile::decode(&bytes[..]).expect("pprof protobuf"))
}

/// A decoded pprof with lookups by name.
pub struct Profile(pub proto::Profile);

impl Profile {
    pub fn string(&self, index: i64) -> &str {
        &self.0.string_table[usize::try_from(index).unwrap()]
    }

    /// (type, unit) of each sample value.
    pub fn sample_types(&self) -> Vec<(&str, &str)> {
        self.0
            .sample_type
            .iter()
            .map(|t| (self.string(t.r#type), self.string(t.unit)))
            .collect()
    }

    /// Index of the sample value named `ty`.
    pub fn value_index(&self, ty: &str) -> usize {
        self.0
            .sample_type
            .iter()
            .position(|t| self.string(t.r#type) == ty)
            .unwrap_or_else(|| panic!("no sample type {ty}"))
    }

    /// The value named `ty` of `sample`.
    pub fn value(&self, sample: &proto::Sample, ty: &str) -> i64 {
        sample.value[self.value_index(ty)]
    }

    /// The numeric label `key` of `sample`.
    pub fn num_label(&self, sample: &proto::Sample, key: &str) -> Option<i64> {
        sample
            .label
            .iter()
            .find(|l| self.string(l.key) == key)
            .map(|l| l.num)
    }

    /// The string label `key` of `sample`.
    pub fn str_label(&self, sample: &proto::Sample, key: &str) -> Option<&str> {
        sample
            .label
            .iter()
            .find(|l| self.string(l.key) == key)
            .map(|l| self.string(l.str))
    }

    /// Function names of `sample`'s stack, leaf first, inlined frames included.
    pub fn functions(&self, sample: &proto::Sample) -> Vec<&str> {
        let mut names = Vec::new();
        for &id in &sample.location_id {
            let location = &self.0.location[usize::try_from(id - 1).unwrap()];
            assert_eq!(location.id, id, "location ids are dense and ordered");
            for line in &location.line {
                let function = &self.0.function[usize::try_from(line.function_id - 1).unwrap()];
                names.push(self.string(function.name));
            }
        }
        names
    }

    /// Whether `sample` has a Python frame: a location with neither
    /// mapping nor address, named by a function (not a `[marker]`) with a
    /// file (`<string>` for `python -c`).
    pub fn has_python_frame(&self, sample: &proto::Sample) -> bool {
        sample.location_id.iter().any(|&id| {
            let location = &self.0.location[usize::try_from(id - 1).unwrap()];
            location.mapping_id == 0
                && location.address == 0
                && location.line.iter().any(|line| {
                    let function = &self.0.function[usize::try_from(line.function_id - 1).unwrap()];
                    !self.string(function.name).starts_with('[')
                        && !self.string(function.filename).is_empty()
                })
        })
    }

    /// The file of `location`'s mapping; empty without one.
    fn mapping_file(&self, location: &proto::Location) -> &str {
        self.0
            .mapping
            .iter()
            .find(|m| m.id == location.mapping_id)
            .map_or("", |m| self.string(m.filename))
    }

    /// `sample`'s innermost location that is not the kernel's.
    pub fn user_leaf(&self, sample: &proto::Sample) -> Option<&proto::Location> {
        sample
            .location_id
            .iter()
            .map(|&id| &self.0.location[usize::try_from(id - 1).unwrap()])
            .find(|location| self.mapping_file(location) != KERNEL_MAPPING)
    }

    /// `sample`'s user frames, leaf first: (function, mapping file) for
    /// each frame, inlined frames included, kernel frames left out.
    pub fn user_frames(&self, sample: &proto::Sample) -> Vec<(&str, &str)> {
        let mut frames = Vec::new();
        for &id in &sample.location_id {
            let location = &self.0.location[usize::try_from(id - 1).unwrap()];
            let file = self.mapping_file(location);
            if file == KERNEL_MAPPING {
                continue;
            }
            for line in &location.line {
                let function = &self.0.function[usize::try_from(line.function_id - 1).unwrap()];
                frames.push((self.string(function.name), file));
            }
        }
        frames
    }

    /// Whether `sample`'s stack is its kernel part (addresses in the
    /// kernel's half, or markers, in the kernel mapping) followed by its user part
    /// (user addresses only), leaf first.
    pub fn kernel_then_user(&self, sample: &proto::Sample) -> bool {
        const KERNEL_HALF: u64 = 0xffff_8000_0000_0000;
        let mut in_user_part = false;
        for &id in &sample.location_id {
            let location = &self.0.location[usize::try_from(id - 1).unwrap()];
            let in_kernel = self.mapping_file(location) == KERNEL_MAPPING;
            // A kernel-side marker (a lost stack, names from /proc) has
            // no address.
            let kernel_address =
                location.address >= KERNEL_HALF || (in_kernel && location.address == 0);
            if kernel_address != in_kernel || (in_kernel && in_user_part) {
                return false;
            }
            in_user_part |= !in_kernel;
        }
        true
    }

    /// Whether `sample` is thread `tid`'s.
    pub fn is_thread(&self, sample: &proto::Sample, tid: u32) -> bool {
        self.num_label(sample, "tid") == Some(i64::from(tid))
    }

    /// Samples whose `pid` label is `pid`.
    pub fn samples_of(&self, pid: u32) -> impl Iterator<Item = &proto::Sample> {
        self.0
            .sample
            .iter()
            .filter(move |s| self.num_label(s, "pid") == Some(i64::from(pid)))
    }

    /// The accounting comments, as text.
    pub fn comments(&self) -> Vec<&str> {
        self.0.comment.iter().map(|&c| self.string(c)).collect()
    }

    /// Comment `name=value`, as a number; panics when there is none.
    pub fn comment_value(&self, name: &str) -> u64 {
        self.comments()
            .iter()
            .find_map(|c| c.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no comment {name}"))
    }
}

/// Sum of value `ty` over the samples of all `profiles` that `keep` accepts.
pub fn sum(
    profiles: &[(PathBuf, Profile)],
    ty: &str,
    keep: impl Fn(&Profile, &proto::Sample) -> bool,
) -> i64 {
    profiles
        .iter()
        .flat_map(|(_, p)| p.0.sample.iter().map(move |s| (p, s)))
        .filter(|(p, s)| keep(p, s))
        .map(|(p, s)| p.value(s, ty))
        .sum()
}

/// Runs `go tool pprof -raw` on `path`: it must accept the file.
pub fn go_pprof_raw(path: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof", "-raw"])
        .arg(path)
        .output()
        .expect("`go` not found: install Debian's golang-go (.ci/run does)");
    assert!(
        out.status.success(),
        "go tool pprof -raw {} failed: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `a` as a percentage of `a + b`.
#[expect(clippy::cast_precision_loss, reason = "a percentage")]
pub fn share(a: i64, b: i64) -> f64 {
    a as f64 / (a + b) as f64 * 100.0
}

/// Sum of value `ty` over the `samples` of `p` with `function` on their
/// stack.
pub fn weight_under(p: &Profile, samples: &[&proto::Sample], function: &str, ty: &str) -> i64 {
    samples
        .iter()
        .filter(|s| p.functions(s).contains(&function))
        .map(|s| p.value(s, ty))
        .sum()
}

/// Each of `keys`' share (%) of their total in `counts`.
pub fn shares<K: std::hash::Hash + Eq + Copy>(
    counts: &std::collections::HashMap<K, u64>,
    keys: &[K],
) -> Vec<f64> {
    let total: u64 = keys
        .iter()
        .map(|k| counts.get(k).copied().unwrap_or(0))
        .sum();
    assert!(total > 0, "no samples in any unit");
    #[expect(clippy::cast_precision_loss, reason = "a percentage")]
    keys.iter()
        .map(|k| counts.get(k).copied().unwrap_or(0) as f64 / total as f64 * 100.0)
        .collect()
}

/// The one profile a run wrote to `dir` (read by `go tool pprof` too);
/// `log` is the profiler's, for the message.
pub fn the_one_profile(dir: &Path, log: &str) -> Profile {
    let mut files = profiles(dir);
    assert_eq!(files.len(), 1, "one window: {log}");
    go_pprof_raw(&files[0].0);
    files.remove(0).1
}

/// Fails with every failure, each prefixed by its run's label, and the
/// profiler's `log`.
pub fn assert_all_hold(failures: impl IntoIterator<Item = (String, Vec<String>)>, log: &str) {
    let failures: Vec<String> = failures
        .into_iter()
        .flat_map(|(label, f)| f.into_iter().map(move |f| format!("{label}: {f}")))
        .collect();
    assert!(
        failures.is_empty(),
        "{}\n\nprofiler log:\n{log}",
        failures.join("\n")
    );
}
