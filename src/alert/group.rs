//! Grouping: events that happen together share one mail.
//!
//! When the whole platform goes down, every check fires within seconds;
//! the on-call person wants one "5 checks DOWN" mail, not five. A group
//! opens with its first event and closes `group_window` later; every event
//! of the same kind, for the same recipients, arriving in between joins it.
//! DOWN, reminders, RESOLVED and WARN never share a mail (their subjects
//! say different things; a WARN's "mail" is only rendered for its pushes'
//! ids and summary, never sent), nor do a check's alerts and vigie's own
//! network alert.
//!
//! The [`Grouper`] is fed events and `now`, and polled on a timer; it holds
//! events only in memory. That is safe because the state machine remembers
//! every event that is due until its mail is in the outbox
//! (`state::pending` refills a new grouper after a restart).

use std::time::Duration;

use time::OffsetDateTime;

use super::event::{Event, EventKind};
use crate::clock::saturating_add;

/// Events waiting for their group to close.
#[derive(Debug, Clone)]
pub struct Grouper {
    window: Duration,
    groups: Vec<Group>,
}

/// One mail's worth of events: same kind, same recipients.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub kind: EventKind,
    /// Sorted, without duplicates.
    pub to: Vec<String>,
    /// In the order they happened; at least one.
    pub events: Vec<Event>,
    /// When the first event arrived.
    pub opened: OffsetDateTime,
}

impl Notification {
    /// vigie's own network alert (never grouped with checks).
    pub fn is_network(&self) -> bool {
        self.events.iter().any(Event::is_network)
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Key {
    kind: EventKind,
    network: bool,
    to: Vec<String>,
}

#[derive(Debug, Clone)]
struct Group {
    key: Key,
    opened: OffsetDateTime,
    events: Vec<Event>,
}

impl Grouper {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            groups: Vec::new(),
        }
    }

    /// Adds an event arriving at `now`.
    ///
    /// A RESOLVED whose DOWN is still waiting here withdraws both: the
    /// incident ended before anyone was told, and a DOWN followed by its
    /// RESOLVED in the same minute is noise. It also withdraws a waiting
    /// reminder of its incident; a WARN RESOLVED its WARN, the same way.
    /// The same event pushed twice (a restart
    /// replaying `pending`) is kept once.
    pub fn push(&mut self, event: Event, now: OffsetDateTime) {
        if self.contains(&event) {
            return;
        }
        if event.kind == EventKind::Resolved {
            let announced = !self.withdraw(&event, EventKind::Down);
            self.withdraw(&event, EventKind::Reminder);
            if !announced {
                return;
            }
        }
        // Likewise a warn episode that ended before its WARN went out.
        if event.kind == EventKind::WarnResolved && self.withdraw(&event, EventKind::Warn) {
            return;
        }
        let key = key(&event);
        match self.groups.iter_mut().find(|g| g.key == key) {
            Some(group) => group.events.push(event),
            None => self.groups.push(Group {
                key,
                opened: now,
                events: vec![event],
            }),
        }
    }

    /// The notifications whose window has closed at `now`, oldest group
    /// first; they are removed from the grouper.
    pub fn poll(&mut self, now: OffsetDateTime) -> Vec<Notification> {
        let window = self.window;
        let (closed, open): (Vec<Group>, Vec<Group>) = std::mem::take(&mut self.groups)
            .into_iter()
            .partition(|g| now >= saturating_add(g.opened, window));
        self.groups = open;
        let mut closed = closed;
        closed.sort_by_key(|g| g.opened);
        closed
            .into_iter()
            .map(|g| Notification {
                kind: g.key.kind,
                to: g.key.to,
                events: g.events,
                opened: g.opened,
            })
            .collect()
    }

    /// When the next group closes: the time to poll again.
    pub fn next_due(&self) -> Option<OffsetDateTime> {
        self.groups
            .iter()
            .map(|g| saturating_add(g.opened, self.window))
            .min()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    fn contains(&self, event: &Event) -> bool {
        self.groups.iter().flat_map(|g| &g.events).any(|e| {
            e.incident == event.incident && e.kind == event.kind && e.reminder == event.reminder
        })
    }

    /// Removes waiting events of `kind` about `event`'s incident; true if
    /// there was one.
    fn withdraw(&mut self, event: &Event, kind: EventKind) -> bool {
        let mut found = false;
        for group in &mut self.groups {
            group.events.retain(|e| {
                let same = e.kind == kind && e.incident == event.incident;
                found |= same;
                !same
            });
        }
        self.groups.retain(|g| !g.events.is_empty());
        found
    }
}

fn key(event: &Event) -> Key {
    let mut to = event.to.clone();
    to.sort();
    to.dedup();
    Key {
        kind: event.kind,
        network: event.is_network(),
        to,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::testing::{event, T0};

    const WINDOW: Duration = Duration::from_secs(30);

    #[test]
    fn events_within_the_window_share_a_notification() {
        let mut g = Grouper::new(WINDOW);
        g.push(event(EventKind::Down, "site"), T0);
        g.push(event(EventKind::Down, "app"), T0 + Duration::from_secs(10));
        g.push(
            event(EventKind::Resolved, "old"),
            T0 + Duration::from_secs(20),
        );
        assert!(g.poll(T0 + Duration::from_secs(29)).is_empty());
        assert_eq!(g.next_due(), Some(T0 + WINDOW));
        let out = g.poll(T0 + WINDOW);
        assert_eq!(out.len(), 1, "the RESOLVED group opened later");
        let names: Vec<_> = out[0].events.iter().map(|e| e.check.as_str()).collect();
        assert_eq!(names, ["site", "app"]);
        let out = g.poll(T0 + Duration::from_secs(50));
        assert_eq!(out[0].kind, EventKind::Resolved);
        assert!(g.is_empty());
    }

    #[test]
    fn a_window_past_the_end_of_the_calendar_closes_there() {
        let mut g = Grouper::new(crate::config::limits::MAX_GROUP_WINDOW);
        let end = crate::clock::FAR_FUTURE;
        let late = end - Duration::from_secs(3600);
        g.push(event(EventKind::Down, "site"), late);
        // `opened + 1 year` is past the year 9999: it used to panic.
        assert_eq!(g.next_due(), Some(end));
        assert!(g.poll(late).is_empty());
        assert_eq!(g.poll(end).len(), 1);
        let mut g = Grouper::new(Duration::MAX);
        g.push(event(EventKind::Down, "site"), T0);
        assert_eq!(g.next_due(), Some(end));
        assert!(g.poll(T0 + Duration::from_secs(86_400)).is_empty());
    }

    #[test]
    fn different_recipients_get_different_mails() {
        let mut g = Grouper::new(WINDOW);
        let mut other = event(EventKind::Down, "app");
        other.to = vec!["web@example.com".to_string()];
        g.push(event(EventKind::Down, "site"), T0);
        g.push(other, T0);
        assert_eq!(g.poll(T0 + WINDOW).len(), 2);
    }

    #[test]
    fn a_resolution_inside_the_window_withdraws_its_down() {
        let mut g = Grouper::new(WINDOW);
        g.push(event(EventKind::Down, "site"), T0);
        g.push(event(EventKind::Down, "app"), T0);
        g.push(
            event(EventKind::Resolved, "site"),
            T0 + Duration::from_secs(5),
        );
        let out = g.poll(T0 + WINDOW);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].events.len(), 1);
        assert_eq!(out[0].events[0].check, "app");
    }

    #[test]
    fn a_replayed_event_is_kept_once() {
        let mut g = Grouper::new(WINDOW);
        g.push(event(EventKind::Down, "site"), T0);
        g.push(event(EventKind::Down, "site"), T0 + Duration::from_secs(1));
        assert_eq!(g.poll(T0 + WINDOW)[0].events.len(), 1);
    }
}
