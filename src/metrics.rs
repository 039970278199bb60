//! The Prometheus text exposition (format 0.0.4): the one writer every
//! module's `/metrics` lines go through.
//!
//! A module declares each of its families once, as a [`Family`] constant
//! (name, type, HELP text), and writes its samples into an [`Exposition`];
//! the API's registry (`api/metrics/`) says which modules are asked, in
//! which order. Nothing else writes `# HELP`, `# TYPE` or a sample line,
//! so escaping and layout are decided here only.
//!
//! Why not the `prometheus-client` crate: it writes OpenMetrics, not this
//! format. Its counters lose `_total` in their HELP and TYPE lines, every
//! HELP text gains a final period and the body ends with `# EOF`; the
//! names, HELP texts and layout scrapers and dashboards read today would
//! change. Its metrics are also objects updated as things happen, while
//! vigie's counters already live in each module's atomics and are read
//! once per scrape.

use std::fmt::Write;

/// A metric family's type, as the `# TYPE` line says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        }
    }
}

/// One metric family: its name, type and HELP text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

impl Family {
    pub const fn gauge(name: &'static str, help: &'static str) -> Family {
        Family {
            name,
            kind: Kind::Gauge,
            help,
        }
    }

    pub const fn counter(name: &'static str, help: &'static str) -> Family {
        Family {
            name,
            kind: Kind::Counter,
            help,
        }
    }
}

/// Exposition text being appended to a `String` (each source of
/// `/metrics` is handed the body's text and writes its families into it).
/// The format wants every sample of a family right after its `# HELP` and
/// `# TYPE` lines; [`Exposition::family`] opens a family and
/// [`Exposition::sample`] writes into the one open.
#[derive(Debug)]
pub struct Exposition<'a> {
    text: &'a mut String,
    open: Option<&'static str>,
}

impl<'a> Exposition<'a> {
    /// Appends to `text`.
    pub fn new(text: &'a mut String) -> Exposition<'a> {
        Exposition { text, open: None }
    }

    /// The `# HELP` and `# TYPE` lines of `family`, which samples follow.
    pub fn family(&mut self, family: &Family) {
        let Family { name, kind, help } = family;
        let _ = writeln!(
            self.text,
            "# HELP {name} {help}\n# TYPE {name} {}",
            kind.as_str()
        );
        self.open = Some(name);
    }

    /// One sample of `family`, which must be the family opened last (or,
    /// in a body written in chunks, opened in an earlier chunk).
    pub fn sample(&mut self, family: &Family, labels: &[(&str, &str)], value: f64) {
        debug_assert!(
            self.open.is_none_or(|open| open == family.name),
            "a {} sample after the # TYPE of {:?}",
            family.name,
            self.open
        );
        self.text.push_str(family.name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                self.text.push_str(key);
                self.text.push_str("=\"");
                escape_into(self.text, value);
                self.text.push('"');
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }

    /// A family of one sample without labels.
    pub fn single(&mut self, family: &Family, value: f64) {
        self.family(family);
        self.sample(family, &[], value);
    }
}

/// `1` or `0`, as gauges say yes and no.
pub fn flag(yes: bool) -> f64 {
    f64::from(u8::from(yes))
}

/// Label values escape backslash, double quote and newline, as the
/// exposition format says. Every label value goes through here; control
/// characters are first made visible escapes (`sanitize`), so that a
/// certificate name stored by an older vigie cannot carry them into a
/// scraper's logs or a dashboard.
fn escape_into(out: &mut String, value: &str) {
    for c in crate::sanitize::escape_controls(value).chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: Family = Family::gauge("x", "an example");

    #[test]
    fn label_values_are_escaped_for_the_exposition_format() {
        let mut text = String::new();
        Exposition::new(&mut text).sample(&X, &[("subject", "CN=\"a\\b\"\n\x1b[2J")], 1.0);
        assert_eq!(text, "x{subject=\"CN=\\\"a\\\\b\\\"\\\\n\\\\x1b[2J\"} 1\n");
    }

    #[test]
    fn a_family_is_its_help_and_type_then_its_samples() {
        let mut text = String::new();
        let mut m = Exposition::new(&mut text);
        m.single(&Family::counter("y_total", "ys seen"), 3.0);
        m.family(&X);
        m.sample(&X, &[("a", "1"), ("b", "2")], 0.5);
        assert_eq!(
            text,
            "# HELP y_total ys seen\n# TYPE y_total counter\ny_total 3\n\
             # HELP x an example\n# TYPE x gauge\nx{a=\"1\",b=\"2\"} 0.5\n"
        );
    }
}
