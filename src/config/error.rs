//! The problems `load` reports, and the collector that gathers them.
//!
//! Every stage pushes into one [`Diagnostics`] instead of returning early,
//! so `vigie validate` can show every problem of every file in one run.
//! Positions are computed here, from the [`Source`] a problem belongs to,
//! so the stages only deal in spans.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::source::Source;

/// One problem in one file: `FILE:LINE:COL: message`, 1-based, column in
/// characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}:{col}: {message}", file.display())]
pub struct ConfigError {
    pub file: PathBuf,
    pub line: usize,
    pub col: usize,
    /// Names the key (with its path, e.g. `expect.status`) it is about.
    pub message: String,
}

/// Every problem found while loading, in file order then position order.
/// Displays as one problem per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

/// Collects problems from every stage and file.
#[derive(Debug, Default)]
pub(crate) struct Diagnostics {
    /// The file's rank (load order) travels with each problem so the final
    /// list can be sorted without comparing paths.
    errors: Vec<(usize, ConfigError)>,
    /// What loads but deserves the operator's eye (a secret file others
    /// may read), in the same form.
    warnings: Vec<(usize, ConfigError)>,
}

impl Diagnostics {
    /// A problem at the start of `span` in `src`.
    pub fn at(&mut self, src: &Source, span: &Range<usize>, message: impl Into<String>) {
        let (line, col) = src.span_position(span);
        self.push(src.rank, &src.path, line, col, message.into());
    }

    /// A problem about a whole file (unreadable, say), shown at 1:1.
    pub fn file(&mut self, rank: usize, path: &Path, message: impl Into<String>) {
        self.push(rank, path, 1, 1, message.into());
    }

    /// A warning at the start of `span` in `src`: shown by `validate` and
    /// logged at start, never a refusal.
    pub fn warn_at(&mut self, src: &Source, span: &Range<usize>, message: impl Into<String>) {
        let (line, col) = src.span_position(span);
        let warning = ConfigError {
            file: src.path.clone(),
            line,
            col,
            message: message.into(),
        };
        self.warnings.push((src.rank, warning));
    }

    /// A warning about a whole file (shown at 1:1).
    pub fn warn_file(&mut self, rank: usize, path: &Path, message: impl Into<String>) {
        let warning = ConfigError {
            file: path.to_path_buf(),
            line: 1,
            col: 1,
            message: message.into(),
        };
        self.warnings.push((rank, warning));
    }

    /// The warnings so far, in file order then position order.
    pub fn take_warnings(&mut self) -> Vec<ConfigError> {
        let mut warnings = std::mem::take(&mut self.warnings);
        warnings.sort_by_key(|(rank, w)| (*rank, w.line, w.col));
        warnings.into_iter().map(|(_, w)| w).collect()
    }

    fn push(&mut self, rank: usize, path: &Path, line: usize, col: usize, message: String) {
        let error = ConfigError {
            file: path.to_path_buf(),
            line,
            col,
            message,
        };
        self.errors.push((rank, error));
    }

    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// `value` if nothing was reported, else every problem in reading order.
    pub fn finish<T>(self, value: T) -> Result<T, ConfigErrors> {
        match self.errors.is_empty() {
            true => Ok(value),
            false => Err(self.into_errors()),
        }
    }

    /// Every problem, in file order then position order.
    pub fn into_errors(mut self) -> ConfigErrors {
        // Stable: problems at the same position keep the order they were
        // found in.
        self.errors.sort_by_key(|(rank, e)| (*rank, e.line, e.col));
        ConfigErrors(self.errors.into_iter().map(|(_, e)| e).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_file_line_col_message() {
        let e = ConfigError {
            file: PathBuf::from("checks/site.toml"),
            line: 7,
            col: 1,
            message: "unknown key `bdy_contains`".into(),
        };
        assert_eq!(
            e.to_string(),
            "checks/site.toml:7:1: unknown key `bdy_contains`"
        );
    }

    #[test]
    fn problems_are_sorted_by_file_then_position() {
        let a = Source::new(Path::new("a.toml"), "x = 1\ny = 2\n".into(), 0);
        let b = Source::new(Path::new("b.toml"), "z = 3\n".into(), 1);
        let mut diag = Diagnostics::default();
        diag.at(&b, &(0..1), "in b");
        diag.at(&a, &(6..7), "second line of a");
        diag.at(&a, &(0..1), "first line of a");
        let errors = diag.finish(()).err().map(|e| e.to_string());
        assert_eq!(
            errors.as_deref(),
            Some("a.toml:1:1: first line of a\na.toml:2:1: second line of a\nb.toml:1:1: in b")
        );
    }
}
