//! Reading the text of a file the fleet file names or is: bounded in size and
//! valid UTF-8.

use std::io::Read;
use std::path::Path;

use super::error::{ConfigError, ConfigErrors};
use super::yaml;

/// Far beyond any real fleet file; it bounds the time and memory spent on a
/// wrong file (a log, a binary) passed by mistake.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

/// The text of a fleet file, as [`load`] reads it: at most [`MAX_FILE_BYTES`],
/// UTF-8 (an error says where it is not).
pub fn read(path: &Path) -> Result<String, ConfigErrors> {
    read_text(path, "fleet file")
}

/// The text of a file of at most [`MAX_FILE_BYTES`], valid UTF-8; `what` names
/// the file in the message when it cannot be read.
pub(super) fn read_text(path: &Path, what: &str) -> Result<String, ConfigErrors> {
    let cannot_read =
        |e: std::io::Error| ConfigErrors::single(path, format!("cannot read the {what}: {e}"));
    let file = std::fs::File::open(path).map_err(cannot_read)?;
    let mut bytes = Vec::new();
    // One byte more than allowed tells "too large" apart from "exactly the limit".
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot_read)?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(too_large(path));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let bytes = e.as_bytes();
            let (line, column) =
                yaml::line_column(&String::from_utf8_lossy(&bytes[..valid]), valid);
            Err(ConfigErrors {
                file: path.to_path_buf(),
                errors: vec![ConfigError {
                    line: Some(line),
                    column: Some(column),
                    path: String::new(),
                    message: "the file is not valid UTF-8".into(),
                }],
            })
        }
    }
}


pub(super) fn too_large(path: &Path) -> ConfigErrors {
    ConfigErrors::single(
        path,
        format!(
            "the file is larger than {} KiB; a fleet file is a small YAML file",
            MAX_FILE_BYTES / 1024
        ),
    )
}

