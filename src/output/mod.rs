//! Output: the report model, its text, JSON and NDJSON renderings and its JUnit XML
//! (`check --junit`), tool contracts as reported, progress on a terminal, and the
//! exit-code table. Output never touches processes.

pub(crate) mod calls;
pub(crate) mod contract;
pub(crate) mod exit;
pub(crate) mod fleets;
pub(crate) mod junit;
pub(crate) mod line;
pub(crate) mod plan;
pub(crate) mod progress;
pub(crate) mod report;
pub(crate) mod table;
