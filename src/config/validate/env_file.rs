//! `env_file:` of a stdio server or of `defaults:`: one path or a list, relative
//! to the fleet file, each file read now in the dotenv format (`dotenv.rs`).
//! A file that cannot be read, or a line of it that cannot, is an error at the
//! path's place in the fleet file; the message names the env file and, for a
//! malformed line, its line and column, never its text (docs/design.md §7).

use std::io::Read;

use super::super::dotenv;
use super::super::expand::Text;
use super::super::walk::{At, Entry, Validator};
use super::super::yaml::Node;
use super::super::read::MAX_FILE_BYTES;
use super::super::spec::EnvFile;

impl Validator<'_> {
    pub(super) fn env_file(&mut self, entry: &Entry) -> Vec<EnvFile> {
        let items: Vec<(&Node, At)> = match entry.value {
            Node::Null => return Vec::new(),
            Node::Seq(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| (item, entry.value_at.item(i)))
                .collect(),
            node @ (Node::Str(_) | Node::Number { .. } | Node::Bool { .. }) => {
                vec![(node, entry.value_at.clone())]
            }
            other => {
                self.expected(&entry.value_at, "a path or a list of paths", other);
                return Vec::new();
            }
        };
        let mut files = Vec::with_capacity(items.len());
        for (node, at) in items {
            if let Some(file) = self.one_env_file(node, &at) {
                files.push(file);
            }
        }
        files
    }

    fn one_env_file(&mut self, node: &Node, at: &At) -> Option<EnvFile> {
        let text = self.text(node, at)?;
        if text.value.is_empty() {
            self.error(at, "`env_file` must not be empty; name a file");
            return None;
        }
        let path = std::path::absolute(self.base_dir.join(&text.value))
            .unwrap_or_else(|_| self.base_dir.join(&text.value));
        // A path built from the environment is shown as its template.
        let shown = match &text.template {
            Some(template) => template.clone(),
            None => path.display().to_string(),
        };
        let text = match read(&path) {
            Ok(text) => text,
            Err(why) => {
                self.error(at, format!("cannot read env file `{shown}`: {why}"));
                return None;
            }
        };
        match dotenv::parse(&text) {
            Ok(vars) => {
                let vars = vars
                    .into_iter()
                    .map(|(name, value)| {
                        let template = format!("<{name} from {shown}>");
                        (name, Text::secret(value, template))
                    })
                    .collect();
                Some(EnvFile { path, shown, vars })
            }
            Err(e) => {
                self.error(at, format!("{shown}:{e}"));
                None
            }
        }
    }
}

/// The text of an env file: at most [`MAX_FILE_BYTES`], UTF-8.
fn read(path: &std::path::Path) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        _ => e.to_string(),
    })?;
    if meta.is_dir() {
        return Err("it is a directory".into());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES as u64 + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(format!("larger than {} KiB", MAX_FILE_BYTES / 1024));
    }
    String::from_utf8(bytes)
        .map_err(|e| format!("not valid UTF-8 (at byte {})", e.utf8_error().valid_up_to()))
}
