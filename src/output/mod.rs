//! Output: the report model, its text, JSON and NDJSON renderings and its JUnit XML
//! (`check --junit`), tool contracts as reported, progress on a terminal, and the
//! exit-code table. Output never touches processes.

pub mod calls;
pub mod contract;
pub mod exit;
pub mod fleets;
pub mod junit;
pub mod line;
pub mod plan;
pub mod progress;
pub mod report;
pub mod table;
