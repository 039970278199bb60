//! What a page says of the vantages: the words of the judgment that let it
//! through. The alerter releases a page on one judgment and claims and
//! mails it a second or more later; judged again then, on a loaded machine,
//! the same fleet can read as "unknown" (its states no longer freshly
//! read), and the mail would contradict the decision that sent it ("down
//! from eu-ams only" on a DOWN three vantages confirmed).

use std::collections::HashMap;

use super::quorum::Judgment;

/// The last releasing judgment of each check.
#[derive(Debug, Default)]
pub struct Released {
    by_check: HashMap<String, Words>,
}

#[derive(Debug, Clone)]
struct Words {
    /// It released a DOWN or a reminder (else a RESOLVED).
    down: bool,
    words: String,
}

impl Released {
    /// `judgment` of `check` (this node down: `self_down`) held nothing:
    /// the page it releases carries its words. A later judgment that would
    /// hold it does not take back what was released, so only releases are
    /// recorded.
    pub fn released(&mut self, check: &str, judgment: &Judgment, self_down: bool) {
        let words = Words {
            down: self_down,
            words: judgment.words(self_down),
        };
        self.by_check.insert(check.to_string(), words);
    }

    /// The fleet was not judged (no coordination): what was recorded no
    /// longer speaks for `check`'s next page.
    pub fn forget(&mut self, check: &str) {
        self.by_check.remove(check);
    }

    /// The words of the release of `check`'s DOWN or reminder (`down`) or
    /// RESOLVED, if the last release was of that kind.
    pub fn words(&self, check: &str, down: bool) -> Option<String> {
        self.by_check
            .get(check)
            .filter(|w| w.down == down)
            .map(|w| w.words.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judgment(down: &[&str], up: &[&str], unknown: &[&str]) -> Judgment {
        let names = |list: &[&str]| list.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let vantages = down.len() + up.len() + unknown.len();
        Judgment {
            down: names(down),
            up: names(up),
            unknown: names(unknown),
            vantages,
            quorum: vantages / 2 + 1,
        }
    }

    #[test]
    fn a_page_keeps_the_words_of_the_judgment_that_released_it() {
        let mut released = Released::default();
        let confirming = judgment(&["eu-ams", "eu-par", "fra"], &[], &[]);
        assert!(confirming.hold(true).is_none());
        released.released("site", &confirming, true);
        // A second later the peers' states are no longer fresh: judged
        // now, the page would read as eu-ams's alone.
        let stale = judgment(&["eu-ams"], &[], &["eu-par", "fra"]);
        assert!(stale.hold(true).is_some());
        assert_eq!(
            stale.words(true),
            "down from eu-ams only; eu-par: unknown, fra: unknown"
        );
        assert_eq!(
            released.words("site", true).as_deref(),
            Some("confirmed down from 3 of 3 vantages (eu-ams, eu-par, fra)")
        );
    }

    #[test]
    fn a_release_speaks_only_for_its_own_kind_and_check() {
        let mut released = Released::default();
        let confirming = judgment(&["eu-ams", "fra"], &["eu-par"], &[]);
        released.released("site", &confirming, true);
        assert_eq!(released.words("site", false), None, "not a RESOLVED's");
        assert_eq!(released.words("app", true), None);
        let recovered = judgment(&[], &["eu-ams", "fra"], &["eu-par"]);
        released.released("site", &recovered, false);
        assert_eq!(
            released.words("site", false).as_deref(),
            Some("confirmed up from 2 of 3 vantages (eu-ams, fra); eu-par: unknown")
        );
        assert_eq!(released.words("site", true), None);
        released.forget("site");
        assert_eq!(released.words("site", false), None);
    }
}
