//! Error plumbing shared by every module: [`Detail`], the words and cause that
//! an error enum's variant carries as its `source`, and [`chain`], which reads
//! an error and its causes as one line.

use std::error::Error;
use std::fmt;

/// The error underneath another, boxed.
pub(crate) type Cause = Box<dyn Error + Send + Sync + 'static>;

/// What an error says beyond its kind: our words, the error underneath, or
/// both. An enum's variant holds it as its `#[source]`, so a reader that walks
/// the chain ([`chain`], anyhow's `{:#}`) reads each part once.
#[derive(Debug)]
pub(crate) struct Detail {
    words: Option<String>,
    cause: Option<Cause>,
}

impl Detail {
    /// Our words alone.
    pub(crate) fn words(words: impl Into<String>) -> Detail {
        Detail {
            words: Some(words.into()),
            cause: None,
        }
    }

    /// The error underneath alone; the detail reads as it does.
    pub(crate) fn cause(cause: impl Into<Cause>) -> Detail {
        Detail {
            words: None,
            cause: Some(cause.into()),
        }
    }

    /// Our words, caused by `cause`.
    pub(crate) fn because(words: impl Into<String>, cause: impl Into<Cause>) -> Detail {
        Detail {
            words: Some(words.into()),
            cause: Some(cause.into()),
        }
    }

    /// The whole detail on one line: the words, then each cause in turn.
    pub(crate) fn text(&self) -> String {
        chain(self)
    }
}

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.words, &self.cause) {
            (Some(words), _) => f.write_str(words),
            (None, Some(cause)) => fmt::Display::fmt(cause, f),
            (None, None) => Ok(()),
        }
    }
}

impl Error for Detail {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match (&self.words, &self.cause) {
            (Some(_), Some(cause)) => Some(cause.as_ref()),
            // Without words of its own the detail reads as its cause: the
            // cause's own cause comes next.
            (None, Some(cause)) => cause.source(),
            _ => None,
        }
    }
}

/// An error and its causes on one line, `: ` between them. A cause whose text
/// the line already holds (an error that prints its source itself) is not
/// repeated.
pub(crate) fn chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let more = e.to_string();
        if !more.is_empty() && !text.contains(&more) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&more);
        }
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Failed {
        #[error("the server closed the connection")]
        Closed(#[source] Detail),
    }

    #[test]
    fn a_chain_reads_each_part_once() {
        let io = std::io::Error::other("broken pipe");
        let e = Failed::Closed(Detail::because("the server's stdin", io));
        assert_eq!(chain(&e), "the server closed the connection: the server's stdin: broken pipe");
        let e = Failed::Closed(Detail::cause(std::io::Error::other("reset")));
        assert_eq!(chain(&e), "the server closed the connection: reset");
        let e = Failed::Closed(Detail::words("no pipes"));
        assert_eq!(chain(&e), "the server closed the connection: no pipes");
        assert_eq!(format!("{:#}", anyhow::Error::new(e)), "the server closed the connection: no pipes");
    }

    #[test]
    fn a_detail_without_words_reads_as_its_cause_and_its_causes() {
        let inner = Detail::because("reading the answer", std::io::Error::other("eof"));
        let outer = Detail::cause(Box::new(inner) as Cause);
        assert_eq!(outer.to_string(), "reading the answer");
        assert_eq!(outer.text(), "reading the answer: eof");
    }

    #[test]
    fn a_cause_that_prints_its_source_itself_is_not_repeated() {
        #[derive(Debug, thiserror::Error)]
        #[error("send failed: {0}")]
        struct Loud(#[source] std::io::Error);
        let e = Detail::cause(Loud(std::io::Error::other("closed")));
        assert_eq!(e.text(), "send failed: closed");
    }
}
