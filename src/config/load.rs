//! Reading and validating a fleet file, in either of the formats it may be
//! written in: mcpfleet's YAML, or an MCP client's configuration through
//! [`import`](super::import).

use std::path::Path;

use super::error::ConfigErrors;
use super::import;
use super::parse::load_str;
use super::read::read;
use super::spec::Fleet;

/// Reads and validates a fleet file; `env` looks up `${env:NAME}`. An MCP
/// client's configuration (`*.json`, or text that starts with `{` and has no
/// `version`) is read through [`import`], as `mcpfleet import` maps it.
pub fn load(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Fleet, ConfigErrors> {
    load_text(&read(path)?, path, env)
}

/// Validates the text of a fleet file read from `path`: an MCP client's
/// configuration (see [`load`]) through [`import`], else as YAML.
pub fn load_text(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Fleet, ConfigErrors> {
    if import::is_client_file(path, text) {
        return import::load_client_file(text, path, env);
    }
    load_str(text, path, env)
}

/// [`load_text`] with this process's environment, and the value of each
/// `${env:NAME}` it looked up: what a supervisor needs to validate the file
/// the same way (docs/design.md §16).
pub fn load_text_from_env(
    text: &str,
    path: &Path,
) -> Result<(Fleet, std::collections::BTreeMap<String, String>), ConfigErrors> {
    let seen = std::cell::RefCell::new(std::collections::BTreeMap::new());
    let lookup = |name: &str| {
        let value = std::env::var(name).ok();
        if let Some(v) = &value {
            seen.borrow_mut().insert(name.to_owned(), v.clone());
        }
        value
    };
    let fleet = load_text(text, path, &lookup)?;
    Ok((fleet, seen.into_inner()))
}

/// What a state directory keeps as the copy of the fleet file at `path` whose
/// text is `text`: the text itself, or for an MCP client's JSON file the fleet
/// file that `import` makes of it, whose secrets are `${env:NAME}` templates
/// (the client's file may hold them literally; docs/design.md §15).
pub fn recordable(path: &Path, text: &str) -> String {
    if import::is_client_file(path, text)
        && let Ok(imported) = import::parse(text, path)
    {
        return imported.fleet_file();
    }
    text.to_owned()
}

