//! `ls`: one line per fleet under the state root, as text (a table) or JSON (an
//! array of objects with stable keys; NDJSON, one object per line).

use serde::Serialize;

use super::report::Format;

/// A fleet as `ls` shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct FleetLine {
    /// The fleet's `name:`, else the state directory's own name.
    pub name: String,
    /// The fleet file the state directory records; `None` when it records none.
    pub file: Option<String>,
    /// Whether that file exists now.
    pub file_exists: bool,
    pub state_dir: String,
    /// The supervisor's pid, when one runs.
    pub supervisor_pid: Option<i32>,
    pub servers_running: usize,
    pub servers_total: usize,
}

/// Renders the lines in `format`; with none, a header only (text) or `[]`.
pub(crate) fn render(lines: &[FleetLine], format: Format) -> String {
    match format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(lines).expect("fleet lines serialize");
            s.push('\n');
            s
        }
        Format::Ndjson => lines
            .iter()
            .map(|l| {
                format!(
                    "{}\n",
                    serde_json::to_value(l).expect("fleet lines serialize")
                )
            })
            .collect(),
        Format::Text => text(lines),
    }
}

fn text(lines: &[FleetLine]) -> String {
    let mut rows = vec![[
        "NAME".to_owned(),
        "FILE".to_owned(),
        "STATE DIR".to_owned(),
        "PID".to_owned(),
        "SERVERS".to_owned(),
    ]];
    for l in lines {
        let file = match (&l.file, l.file_exists) {
            (None, _) => "-".to_owned(),
            (Some(f), true) => f.clone(),
            (Some(f), false) => format!("{f} (gone)"),
        };
        rows.push([
            l.name.clone(),
            file,
            l.state_dir.clone(),
            l.supervisor_pid.map_or("-".to_owned(), |p| p.to_string()),
            format!("{}/{}", l.servers_running, l.servers_total),
        ]);
    }
    super::table::render(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(name: &str, exists: bool, pid: Option<i32>) -> FleetLine {
        FleetLine {
            name: name.into(),
            file: Some(format!("/p/{name}/mcpfleet.yaml")),
            file_exists: exists,
            state_dir: format!("/s/{name}"),
            supervisor_pid: pid,
            servers_running: pid.map_or(0, |_| 2),
            servers_total: 3,
        }
    }

    #[test]
    fn text_is_a_table_with_a_header_even_when_empty() {
        assert_eq!(
            render(&[], Format::Text),
            "NAME  FILE  STATE DIR  PID  SERVERS\n"
        );
        let text = render(
            &[line("demo", true, Some(42)), line("old", false, None)],
            Format::Text,
        );
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 3, "{text}");
        assert!(
            rows[1].starts_with("demo  /p/demo/mcpfleet.yaml "),
            "{text}"
        );
        assert!(rows[1].ends_with("42   2/3"), "{text}");
        assert!(rows[2].contains("/p/old/mcpfleet.yaml (gone)"), "{text}");
        assert!(rows[2].ends_with("-    0/3"), "{text}");
    }

    #[test]
    fn json_is_an_array_with_stable_keys() {
        assert_eq!(render(&[], Format::Json).trim(), "[]");
        assert_eq!(render(&[], Format::Ndjson), "");
        let doc: serde_json::Value =
            serde_json::from_str(&render(&[line("demo", true, Some(42))], Format::Json)).unwrap();
        let keys: Vec<&String> = doc[0].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "file",
                "file_exists",
                "name",
                "servers_running",
                "servers_total",
                "state_dir",
                "supervisor_pid"
            ]
        );
        assert_eq!(doc[0]["supervisor_pid"], 42);
    }
}
