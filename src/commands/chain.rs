//! A log file and its rotated predecessors read as one stream of bytes, oldest
//! first, each byte once, while the supervisor goes on writing and rotating them
//! (docs/design.md §3, "Rotation"): `events`, and `logs` of servers and the
//! gateway, read through it.
//!
//! ```text
//!  NAME.n … NAME.2  NAME.1  NAME     one stream, oldest first
//!  follow: read NAME to its end through the open descriptor; when NAME is
//!  another file (inode), read the old one to its end, then every file newer
//!  than it, and go on with the new NAME
//! ```
//!
//! The writer rotates by renames alone (`state/rotation.rs`), so the files
//! present at one instant, by number from the highest down to `NAME`, hold each
//! line once and in order. A reader takes such an instant by opening them all
//! and checking that the names still lead to the files it opened (else it takes
//! them again): it needs no lock and never stops the writer. An open descriptor
//! still reads its file after a rename, which is how nothing written before a
//! rotation is missed. Reading is read-only and never follows a symlink.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A file's identity: device and inode.
type Id = (u64, u64);

/// How many times a reader takes the files again when a rotation came in between.
const ATTEMPTS: usize = 20;

/// One file of the chain, open.
struct Part {
    file: File,
    id: Id,
}

/// The highest rotated number looked at: far beyond any `keep`.
const MAX_NUMBER: u32 = 1000;

/// Reads a log file and its rotated files as one stream.
pub(crate) struct Chain {
    path: PathBuf,
    /// The newest file read so far, and how far.
    current: Option<(Part, u64)>,
    /// Set when rotations went past a file before all of it was read.
    missed: bool,
}

impl Chain {
    pub(crate) fn new(path: PathBuf) -> Chain {
        Chain {
            path,
            current: None,
            missed: false,
        }
    }

    /// Hands the files as they are now to `out`, oldest first, from `window`
    /// bytes before the end of the whole chain (`None`: from its start). Returns
    /// whether the window left something out (the first bytes handed on may then
    /// be the rest of a line). From here, [`Chain::read_new`] goes on.
    pub(crate) fn read_existing(
        &mut self,
        window: Option<u64>,
        out: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<bool> {
        let parts = snapshot(&self.path);
        let sizes: Vec<u64> = parts
            .iter()
            .map(|p| p.file.metadata().map_or(0, |m| m.len()))
            .collect();
        let total: u64 = sizes.iter().sum();
        let mut skip = window.map_or(0, |w| total.saturating_sub(w));
        let cut = skip > 0;
        for (part, size) in parts.into_iter().zip(sizes) {
            if skip > 0 && skip >= size {
                skip -= size;
                continue;
            }
            let end = read_from(&part.file, skip, out)?;
            skip = 0;
            self.current = Some((part, end));
        }
        Ok(cut)
    }

    /// Hands what was written since the last read to `out`, across any
    /// rotations since.
    pub(crate) fn read_new(&mut self, out: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        let Some((part, offset)) = &mut self.current else {
            // Nothing was there to read before: all of it is new.
            return self.read_existing(None, out).map(drop);
        };
        // A file cut shorter in place (not a rotation) is read again from its start.
        if part.file.metadata().is_ok_and(|m| m.len() < *offset) {
            *offset = 0;
        }
        *offset = read_from(&part.file, *offset, out)?;
        match identity(&self.path) {
            Some(id) if id != part.id => {}
            // The same file, or none at this instant (a rotation between its
            // rename and its new file): nothing more yet.
            _ => return Ok(()),
        }
        // Rotated: the old file may have got more lines before its rename.
        *offset = read_from(&part.file, *offset, out)?;
        let old = part.id;
        let parts = snapshot(&self.path);
        let newer = match parts.iter().position(|p| p.id == old) {
            Some(i) => i + 1,
            None => {
                // More rotations than files kept came between two reads.
                self.missed = true;
                0
            }
        };
        for part in parts.into_iter().skip(newer) {
            let end = read_from(&part.file, 0, out)?;
            self.current = Some((part, end));
        }
        Ok(())
    }

    /// Whether rotations removed a file before it was read to its end (once:
    /// the flag is cleared).
    pub(crate) fn take_missed(&mut self) -> bool {
        std::mem::take(&mut self.missed)
    }
}

/// Reads `file` from `offset` to its end, chunk by chunk; returns where it ended.
fn read_from(
    mut file: &File,
    offset: u64,
    out: &mut dyn FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<u64> {
    file.seek(SeekFrom::Start(offset))?;
    let mut at = offset;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => return Ok(at),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        at += n as u64;
        out(&buf[..n])?;
    }
}

/// The files of the chain of `path` at one instant, open, oldest first.
fn snapshot(path: &Path) -> Vec<Part> {
    let mut parts = Vec::new();
    for _ in 0..ATTEMPTS {
        parts.clear();
        let names = names(path);
        let mut complete = true;
        for (_, name) in &names {
            match open(name) {
                Ok(part) => parts.push(part),
                // Renamed away since it was listed.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    complete = false;
                    break;
                }
                // Not a file this reader may read (a symlink, a directory): not
                // part of the chain.
                Err(_) => {}
            }
        }
        if !complete {
            continue;
        }
        let opened: Vec<Id> = parts.iter().map(|p| p.id).collect();
        let now: Vec<Id> = names
            .iter()
            .filter_map(|(_, name)| identity(name))
            .collect();
        if opened == now {
            return parts;
        }
    }
    // The writer rotated at every attempt: go with the last one.
    parts
}

/// The names of the chain that exist: `NAME.n`, highest `n` first, then `NAME`.
fn names(path: &Path) -> Vec<(Option<u32>, PathBuf)> {
    let (Some(dir), Some(base)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let mut prefix = base.to_owned();
    prefix.push(".");
    let prefix = prefix.as_encoded_bytes();
    let mut found: Vec<(Option<u32>, PathBuf)> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name();
                let bytes = name.as_encoded_bytes();
                if bytes == base.as_encoded_bytes() {
                    return Some((None, e.path()));
                }
                let digits = bytes.strip_prefix(prefix)?;
                if digits.is_empty() || digits[0] == b'0' || !digits.iter().all(u8::is_ascii_digit)
                {
                    return None;
                }
                let n: u32 = std::str::from_utf8(digits).ok()?.parse().ok()?;
                (n <= MAX_NUMBER).then(|| (Some(n), e.path()))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    // Highest number first; the current file (no number) last.
    found.sort_by_key(|(n, _)| std::cmp::Reverse(n.map_or(0, |n| u64::from(n) + 1)));
    found
}

fn open(path: &Path) -> io::Result<Part> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(crate::platform::O_NOFOLLOW)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(Part {
        file,
        id: (meta.dev(), meta.ino()),
    })
}

fn identity(path: &Path) -> Option<Id> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| (m.dev(), m.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Rotation;
    use crate::state::rotation::{RotatingFile, rotate, rotated};

    fn existing(chain: &mut Chain, window: Option<u64>) -> (String, bool) {
        let mut text = Vec::new();
        let cut = chain
            .read_existing(window, &mut |b| {
                text.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
        (String::from_utf8(text).unwrap(), cut)
    }

    fn new(chain: &mut Chain) -> String {
        let mut text = Vec::new();
        chain
            .read_new(&mut |b| {
                text.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
        String::from_utf8(text).unwrap()
    }

    #[test]
    fn the_rotated_files_are_read_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.ndjson");
        let mut chain = Chain::new(path.clone());
        assert_eq!(existing(&mut chain, None), (String::new(), false));
        std::fs::write(rotated(&path, 10), "ten\n").unwrap();
        std::fs::write(rotated(&path, 2), "two\n").unwrap();
        std::fs::write(rotated(&path, 1), "one\n").unwrap();
        std::fs::write(&path, "now\n").unwrap();
        // Not of the chain.
        std::fs::write(dir.path().join("events.ndjson.tmp"), "x\n").unwrap();
        std::fs::write(dir.path().join("events.ndjson.01"), "x\n").unwrap();
        std::fs::write(dir.path().join("events.ndjson.1x"), "x\n").unwrap();
        std::fs::write(dir.path().join("other.1"), "x\n").unwrap();
        std::os::unix::fs::symlink(rotated(&path, 1), rotated(&path, 3)).unwrap();
        let mut chain = Chain::new(path.clone());
        assert_eq!(
            existing(&mut chain, None),
            ("ten\ntwo\none\nnow\n".into(), false)
        );
        let mut chain = Chain::new(path.clone());
        assert_eq!(existing(&mut chain, Some(6)), ("e\nnow\n".into(), true));
        assert_eq!(new(&mut chain), "");
    }

    #[test]
    fn following_crosses_rotations_without_loss_or_repeat() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.ndjson");
        let rotation = Rotation {
            max_bytes: 30,
            keep: 3,
        };
        let mut log = RotatingFile::open(&path, rotation).unwrap();
        let mut chain = Chain::new(path.clone());
        let mut seen = existing(&mut chain, None).0;
        let mut written = String::new();
        let mut line = 0;
        // Between two reads: nothing, a few lines, one rotation, three
        // rotations (as many as are kept), a line and a rotation with nothing after.
        for lines in [0, 2, 4, 9, 3, 1, 7] {
            for _ in 0..lines {
                let text = format!("line {line:04}\n");
                log.append(text.as_bytes()).unwrap();
                written.push_str(&text);
                line += 1;
            }
            seen.push_str(&new(&mut chain));
            assert_eq!(seen, written);
        }
        assert!(!chain.take_missed());
        // More rotations than files kept between two reads: what was removed
        // is missed, and said so; what is left is read once.
        for _ in 0..20 {
            let text = format!("line {line:04}\n");
            log.append(text.as_bytes()).unwrap();
            line += 1;
        }
        let after = new(&mut chain);
        assert!(chain.take_missed());
        let left: String = [".3", ".2", ".1", ""]
            .iter()
            .map(|s| std::fs::read_to_string(format!("{}{s}", path.display())).unwrap())
            .collect();
        assert!(after.ends_with(&left), "{after}");
        assert!(left.ends_with(&format!("line {:04}\n", line - 1)), "{left}");
        let numbers: Vec<&str> = after.lines().collect();
        assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{after}");
    }

    #[test]
    fn a_rotation_in_the_middle_of_a_line_keeps_the_line_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.log");
        std::fs::write(&path, "first\nsecond half").unwrap();
        let mut chain = Chain::new(path.clone());
        assert_eq!(existing(&mut chain, None).0, "first\nsecond half");
        rotate(&path, 1).unwrap();
        std::fs::write(&path, " ends here\n").unwrap();
        assert_eq!(new(&mut chain), " ends here\n");
    }

    #[test]
    fn a_file_cut_short_in_place_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.log");
        std::fs::write(&path, "a long first text\n").unwrap();
        let mut chain = Chain::new(path.clone());
        existing(&mut chain, None);
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(0).unwrap();
        drop(f);
        std::fs::write(&path, "new\n").unwrap();
        assert_eq!(new(&mut chain), "new\n");
    }
}
