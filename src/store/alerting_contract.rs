//! The contract of [`AlertStore`] and [`OutboxStore`], one scenario per
//! test, run against both backends: sled (as the daemon opens it) and
//! memory. What only sled can show (surviving a reopen, a damaged entry
//! skipped) is tested beside the sled code.

use std::time::Duration;

use time::macros::datetime;
use time::OffsetDateTime;

use super::{AlertStore, NewPush, OutboxStore, SledStore, Telling, ToldEvent, TransportState};
use crate::alert::report::{CertChange, ChangeKind, Leaf};
use crate::alert::{AlertState, Email, EventKind, Silence};

const T0: OffsetDateTime = datetime!(2026-11-29 07:00:00 UTC);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);
const MINUTE: Duration = Duration::from_secs(60);

/// A DOWN page, told apart by `n` (also for the mail side's tests).
pub(crate) fn message(n: u32) -> Email {
    Email {
        subject: format!("[vigie] DOWN check-{n}"),
        text: "down\n".into(),
        html: "<p>down</p>".into(),
        message_id: format!("<down.{n}@vigie.test>"),
        in_reply_to: None,
        references: vec![],
        to: vec!["oncall@example.com".into()],
    }
}

fn leaf(sha: &str) -> Leaf {
    Leaf {
        subject: "CN=www.example.com".into(),
        issuer: "C=US, O=Let's Encrypt, CN=R11".into(),
        sans: vec!["www.example.com".into()],
        not_after: T0 + Duration::from_secs(90 * 86_400),
        sha256: sha.into(),
    }
}

fn change(check: &str, at: OffsetDateTime) -> CertChange {
    CertChange {
        check: check.into(),
        at,
        kind: ChangeKind::Renewed,
        before: leaf("aa"),
        after: leaf("bb"),
    }
}

fn sorted(mut states: Vec<AlertState>) -> Vec<AlertState> {
    states.sort_by(|a, b| a.check.cmp(&b.check));
    states
}

fn states_are_saved_and_replaced(store: &AlertStore) {
    assert!(store.states().unwrap().is_empty());
    let mut site = AlertState::new("site");
    store.save(&[site.clone(), AlertState::new("app")]).unwrap();
    site.consecutive_failures = 3;
    store.save(&[site.clone()]).unwrap();
    assert_eq!(
        sorted(store.states().unwrap()),
        [AlertState::new("app"), site]
    );
}

fn commit_queues_the_mail_with_its_states(store: &AlertStore) {
    let outbox = store.outbox();
    let mut site = AlertState::new("site");
    site.consecutive_failures = 2;
    let first = store.commit(&[site.clone()], &message(1), T0).unwrap();
    let second = store.commit(&[], &message(2), T0 + HOUR).unwrap();
    assert!(first < second, "ids grow in queueing order");
    assert_eq!(store.states().unwrap(), [site]);
    let pending = outbox.pending().unwrap();
    assert_eq!(
        pending.iter().map(|p| p.id).collect::<Vec<_>>(),
        [first, second]
    );
    assert_eq!(pending[0].message, message(1));
    assert_eq!(
        (
            pending[1].attempts,
            pending[1].next_attempt,
            pending[1].enqueued_at,
            pending[1].last_error.as_deref()
        ),
        (0, T0 + HOUR, T0 + HOUR, None),
        "a new message is due at once"
    );
    assert_eq!(outbox.len(), 2);
}

fn silences_are_added_replaced_removed_and_swept(store: &AlertStore) {
    store
        .add_silence(&Silence::new("staging-*", HOUR, "deploy", T0).unwrap())
        .unwrap();
    store
        .add_silence(&Silence::new("staging-*", 2 * HOUR, "longer", T0).unwrap())
        .unwrap();
    store
        .add_silence(&Silence::new("app", HOUR / 2, "", T0).unwrap())
        .unwrap();
    let silences = store.silences().unwrap();
    assert_eq!(silences.len(), 2, "one per pattern: {silences:?}");
    assert!(silences.iter().any(|s| s.reason == "longer"));
    store.sweep_silences(T0 + HOUR).unwrap();
    let left: Vec<String> = store
        .silences()
        .unwrap()
        .into_iter()
        .map(|s| s.pattern)
        .collect();
    assert_eq!(left, ["staging-*"]);
    assert!(store.remove_silence("staging-*").unwrap());
    assert!(!store.remove_silence("staging-*").unwrap());
    assert!(store.silences().unwrap().is_empty());
}

fn certificate_changes_of_the_last_day_are_listed_and_old_ones_dropped(store: &AlertStore) {
    store.record_change(&change("old", T0 - 10 * DAY)).unwrap();
    store.record_change(&change("app", T0 - DAY / 2)).unwrap();
    store.record_change(&change("site", T0 - DAY / 4)).unwrap();
    let listed = |since| -> Vec<String> {
        store
            .changes_since(since)
            .unwrap()
            .into_iter()
            .map(|c| c.check)
            .collect()
    };
    assert_eq!(
        listed(T0 - DAY),
        ["app", "site"],
        "oldest first, from since"
    );
    assert_eq!(
        listed(T0 - 20 * DAY),
        ["app", "site"],
        "older than a week before the last listing is gone"
    );
}

fn enqueue_outside_a_commit_keeps_order(store: &AlertStore) {
    let outbox = store.outbox();
    let a = outbox.enqueue(&message(1), T0).unwrap();
    let b = store.commit(&[], &message(2), T0).unwrap();
    let c = outbox.enqueue(&message(3), T0).unwrap();
    assert!(a < b && b < c);
    let order: Vec<_> = outbox.schedules().map(|s| s.unwrap().0).collect();
    assert_eq!(order, [a, b, c]);
    assert_eq!(outbox.count_from(0), (3, Some(c)));
    assert_eq!(outbox.count_from(b), (2, Some(c)));
    assert_eq!(outbox.count_from(c + 1), (0, None));
}

fn defer_bury_deliver_and_sweep(store: &AlertStore) {
    let outbox: OutboxStore = store.outbox();
    let a = outbox.enqueue(&message(1), T0).unwrap();
    let b = outbox.enqueue(&message(2), T0).unwrap();
    let pa = outbox.load(a).unwrap().unwrap();
    let next = T0 + Duration::from_secs(10);
    outbox.defer(&pa, "451 try later", next).unwrap();
    let pa = outbox.load(a).unwrap().unwrap();
    assert_eq!((pa.attempts, pa.next_attempt), (1, next));
    assert_eq!(pa.last_error.as_deref(), Some("451 try later"));
    assert_eq!(pa.message, message(1));
    let (id, schedule) = outbox.schedules().next().unwrap().unwrap();
    assert_eq!((id, schedule.attempts), (a, 1));
    assert_eq!(
        schedule.next_attempt_ms,
        (next.unix_timestamp_nanos() / 1_000_000) as i64
    );

    outbox.bury(&pa, "550 no such user", next).unwrap();
    assert_eq!(
        outbox.load(a).unwrap(),
        None,
        "a dead letter is not pending"
    );
    let dead = outbox.dead_letters().unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!((dead[0].id, dead[0].attempts), (a, 2));
    assert_eq!((dead[0].enqueued_at, dead[0].given_up_at), (T0, next));
    assert_eq!(dead[0].reason, "550 no such user");
    assert_eq!(dead[0].message, message(1));

    assert!(outbox.remove(b).unwrap());
    assert!(!outbox.remove(b).unwrap(), "removed once");
    assert!(outbox.pending().unwrap().is_empty());
    assert!(outbox.is_empty());
    assert_eq!(outbox.dead_len(), 1);
    assert_eq!(outbox.sweep_dead_letters(next).unwrap(), 0);
    assert_eq!(
        outbox
            .sweep_dead_letters(next + Duration::from_secs(1))
            .unwrap(),
        1
    );
    assert_eq!(outbox.dead_len(), 0);
}

fn the_delivery_backoff_round_trips(store: &AlertStore) {
    let outbox = store.outbox();
    assert_eq!(outbox.transport().unwrap(), None);
    let state = TransportState {
        failures: 3,
        next_attempt: T0,
        last_error: "smtp 127.0.0.1:25: connecting: refused".into(),
    };
    outbox.set_transport(Some(&state)).unwrap();
    assert_eq!(outbox.transport().unwrap(), Some(state));
    outbox.set_transport(None).unwrap();
    assert_eq!(outbox.transport().unwrap(), None);
}

fn times_come_back_at_the_millisecond(store: &AlertStore) {
    let outbox = store.outbox();
    let at = T0 + time::Duration::microseconds(1_234_567);
    let id = outbox.enqueue(&message(1), at).unwrap();
    let pending = outbox.load(id).unwrap().unwrap();
    let millis = T0 + time::Duration::milliseconds(1_234);
    assert_eq!(
        (pending.enqueued_at, pending.next_attempt),
        (millis, millis)
    );
}

fn told_event(
    check: &str,
    kind: EventKind,
    since: OffsetDateTime,
    at: OffsetDateTime,
) -> ToldEvent {
    ToldEvent {
        check: check.into(),
        incident: format!("{check}@x"),
        kind,
        since,
        at,
    }
}

fn push(channel: &str, n: u32) -> NewPush {
    NewPush {
        channel: channel.into(),
        event_id: format!("event-{n}"),
        document: "{}".into(),
    }
}

fn who_was_told_is_queued_with_the_page_and_marked_as_it_is_delivered(store: &AlertStore) {
    let down = told_event("site", EventKind::Down, T0, T0 + MINUTE);
    let told = store.told();
    let telling = Telling {
        mail: vec![down.clone()],
        pushes: vec![vec![down.clone()], vec![down.clone()]],
    };
    let pushes = [push("phone", 1), push("hooks", 1)];
    let mail = store
        .commit_routed(&[], Some(&message(1)), &pushes, &telling, T0 + MINUTE)
        .unwrap()
        .unwrap();
    let entries = told.of_incident("site", T0).unwrap();
    let channels: Vec<_> = entries.iter().map(|t| t.channel.as_str()).collect();
    assert_eq!(channels, ["hooks", "mail", "phone"], "{entries:?}");
    assert!(entries
        .iter()
        .all(|t| t.told_at.is_none() && t.kind == EventKind::Down));
    assert!(
        told.of_incident("site", T0 + MINUTE).unwrap().is_empty(),
        "another incident"
    );
    assert!(
        told.of_incident("app", T0).unwrap().is_empty(),
        "another check"
    );

    // The mail is accepted, the phone's push too, the hook gives up.
    let outbox = store.outbox();
    outbox.remove(mail).unwrap();
    outbox.mark_told(mail, T0 + 2 * MINUTE);
    let pushes = store.pushes();
    let phone = pushes.pending("phone").unwrap().remove(0);
    pushes.remove(&phone).unwrap();
    pushes.mark_told(&phone, T0 + 3 * MINUTE);
    let hook = pushes.pending("hooks").unwrap().remove(0);
    pushes
        .bury(&hook, "401 Unauthorized", T0 + 4 * MINUTE)
        .unwrap();
    let entries = told.of_incident("site", T0).unwrap();
    let said: Vec<_> = entries
        .iter()
        .map(|t| (t.channel.as_str(), t.told_at, t.gave_up.as_deref()))
        .collect();
    assert_eq!(
        said,
        [
            ("hooks", None, Some("401 Unauthorized")),
            ("mail", Some(T0 + 2 * MINUTE), None),
            ("phone", Some(T0 + 3 * MINUTE), None),
        ]
    );

    // A RESOLVED of the same incident sorts after its DOWN.
    let resolved = told_event("site", EventKind::Resolved, T0, T0 + HOUR);
    let telling = Telling {
        mail: vec![resolved],
        pushes: Vec::new(),
    };
    store
        .commit_routed(&[], Some(&message(2)), &[], &telling, T0 + HOUR)
        .unwrap();
    let kinds: Vec<_> = told
        .of_incident("site", T0)
        .unwrap()
        .iter()
        .map(|t| t.kind)
        .collect();
    assert_eq!(kinds.last(), Some(&EventKind::Resolved), "{kinds:?}");

    // The ledger names its incidents once each, by key; a warn episode
    // is not one.
    let warn = told_event("app", EventKind::Warn, T0, T0 + HOUR);
    let telling = Telling {
        mail: Vec::new(),
        pushes: vec![vec![warn]],
    };
    store
        .commit_routed(&[], None, &[push("phone", 2)], &telling, T0 + HOUR)
        .unwrap();
    let site = crate::alert::KnownIncident {
        key: crate::alert::IncidentId::from_key("site@x"),
        check: "site".to_string(),
        since: T0,
        open: false,
    };
    assert_eq!(told.incidents().unwrap(), [site]);

    // Eight days on, the incident's entries go.
    assert_eq!(told.sweep(T0 + 7 * DAY).unwrap(), 0);
    assert_eq!(told.sweep(T0 + 8 * DAY + HOUR).unwrap(), 5);
    assert!(told.of_incident("site", T0).unwrap().is_empty());
}

fn a_buried_push_is_listed_and_counted_under_its_channel(store: &AlertStore) {
    let pushes = store.pushes();
    for (channel, event) in [("phone", "a"), ("phone", "b"), ("hooks", "c")] {
        let push = NewPush {
            channel: channel.into(),
            event_id: event.into(),
            document: "{}".into(),
        };
        pushes.enqueue(&push, T0).unwrap();
    }
    let phone = pushes.pending("phone").unwrap();
    pushes
        .bury(&phone[0], "ntfy phone answered 401", T0)
        .unwrap();
    assert_eq!(pushes.pending("phone").unwrap().len(), 1);
    let dead = pushes.dead("phone").unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].record.event_id, "a");
    assert_eq!(dead[0].reason, "ntfy phone answered 401");
    assert_eq!(pushes.dead_count("phone").unwrap(), 1);
    assert_eq!(pushes.dead_count("hooks").unwrap(), 0);
}

/// Runs `scenario` on a sled store as the daemon opens it.
fn on_sled(scenario: fn(&AlertStore)) {
    let dir = tempfile::tempdir().unwrap();
    let sled = SledStore::open(dir.path(), Duration::from_secs(1)).unwrap();
    scenario(&sled.alerts().unwrap());
}

/// One `#[test]` per scenario and backend: `memory::name`, `sled::name`.
macro_rules! scenarios {
    ($($scenario:ident,)*) => {
        mod memory {
            $(
                #[test]
                fn $scenario() {
                    super::$scenario(&super::AlertStore::in_memory());
                }
            )*
        }
        mod sled {
            $(
                #[test]
                fn $scenario() {
                    super::on_sled(super::$scenario);
                }
            )*
        }
    };
}

scenarios!(
    states_are_saved_and_replaced,
    commit_queues_the_mail_with_its_states,
    silences_are_added_replaced_removed_and_swept,
    certificate_changes_of_the_last_day_are_listed_and_old_ones_dropped,
    enqueue_outside_a_commit_keeps_order,
    defer_bury_deliver_and_sweep,
    the_delivery_backoff_round_trips,
    times_come_back_at_the_millisecond,
    who_was_told_is_queued_with_the_page_and_marked_as_it_is_delivered,
    a_buried_push_is_listed_and_counted_under_its_channel,
);
