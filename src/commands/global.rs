//! The options every command gets, whatever it is.



use crate::output::report::Format;


/// Options every command gets.
#[derive(Clone)]
pub struct Global {
    pub output: Format,
    pub quiet: bool,
    pub verbose: u8,
}
