//! Which channels a notification goes to: the `[[route]]`s applied to each
//! of its events, the notification split into one part per channel. Each
//! part keeps the events of the original that the channel is told, in
//! their order, so a channel groups exactly as the mail does.

use super::event::EventKind;
use super::group::Notification;
use crate::config::channels::{Notify, NotifyEvent, MAIL};

/// The parts of one notification.
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    /// What the mail says; `None` when no route sends this to the mail.
    pub mail: Option<Notification>,
    /// Channel name -> its part, in the order of `[[notify]]`.
    pub channels: Vec<(String, Notification)>,
}

pub fn notify_event(kind: EventKind) -> NotifyEvent {
    match kind {
        EventKind::Down => NotifyEvent::Down,
        EventKind::Reminder => NotifyEvent::Reminder,
        EventKind::Resolved => NotifyEvent::Resolved,
        // The end of a warn goes exactly where its WARN went.
        EventKind::Warn | EventKind::WarnResolved => NotifyEvent::Warn,
    }
}

/// Splits `n` by the routes of `notify`.
pub fn route(notify: &Notify, n: &Notification) -> Routed {
    let kind = notify_event(n.kind);
    let per_event: Vec<Vec<&str>> = n
        .events
        .iter()
        .map(|e| notify.channels_for(kind, &e.labels))
        .collect();
    let part = |channel: &str| {
        let events: Vec<_> = n
            .events
            .iter()
            .zip(&per_event)
            .filter(|(_, to)| to.contains(&channel))
            .map(|(e, _)| e.clone())
            .collect();
        (!events.is_empty()).then(|| Notification {
            events,
            ..n.clone()
        })
    };
    Routed {
        mail: part(MAIL),
        channels: notify
            .channels
            .iter()
            .filter_map(|c| part(&c.name).map(|p| (c.name.clone(), p)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::alert::testing::{event, T0};

    fn notify(config: &str) -> Notify {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("checks")).unwrap();
        let site = "[[check]]\nname = \"site\"\nkind = \"http\"\nurl = \"https://example.com/\"\n";
        std::fs::write(dir.path().join("checks/site.toml"), site).unwrap();
        let path = dir.path().join("config.toml");
        let text =
            format!("state_dir = \"state\"\n[alerting]\nto = [\"oncall@example.com\"]\n{config}");
        crate::config::load_str(&path, &text).unwrap().notify
    }

    fn grouped(envs: &[(&str, &str)]) -> Notification {
        let events = envs
            .iter()
            .map(|(check, env)| {
                let mut e = event(EventKind::Down, check);
                e.labels = BTreeMap::from([("env".to_string(), env.to_string())]);
                e
            })
            .collect();
        Notification {
            kind: EventKind::Down,
            to: vec!["oncall@example.com".to_string()],
            events,
            opened: T0,
        }
    }

    fn names(n: &Option<Notification>) -> Vec<String> {
        n.iter()
            .flat_map(|n| n.events.iter().map(|e| e.check.clone()))
            .collect()
    }

    const PHONE: &str = "[[notify]]\nname = \"phone\"\nkind = \"ntfy\"\nurl = \"http://127.0.0.1:1/vigie\"\nallow_private = true\n";

    #[test]
    fn without_routes_every_channel_and_the_mail_get_everything() {
        let routed = route(
            &notify(PHONE),
            &grouped(&[("site", "prod"), ("beta", "staging")]),
        );
        assert_eq!(names(&routed.mail), ["site", "beta"]);
        assert_eq!(routed.channels.len(), 1);
        assert_eq!(routed.channels[0].1.events.len(), 2);
    }

    #[test]
    fn prod_goes_to_the_phone_and_the_mail_staging_to_the_mail_only() {
        let config = format!(
            "{PHONE}[[route]]\nmatch = {{ env = \"prod\" }}\nnotify = [\"phone\", \"mail\"]\n\
             [[route]]\nmatch = {{ env = \"staging\" }}\nnotify = [\"mail\"]\n"
        );
        let routed = route(
            &notify(&config),
            &grouped(&[("site", "prod"), ("beta", "staging")]),
        );
        assert_eq!(names(&routed.mail), ["site", "beta"]);
        let phone: Vec<&str> = routed.channels[0]
            .1
            .events
            .iter()
            .map(|e| e.check.as_str())
            .collect();
        assert_eq!(
            (routed.channels[0].0.as_str(), phone),
            ("phone", vec!["site"])
        );
    }

    #[test]
    fn an_event_no_route_matches_still_goes_to_the_mail() {
        let config =
            format!("{PHONE}[[route]]\nmatch = {{ env = \"prod\" }}\nnotify = [\"phone\"]\n");
        let routed = route(
            &notify(&config),
            &grouped(&[("site", "prod"), ("lab", "lab")]),
        );
        assert_eq!(names(&routed.mail), ["lab"]);
        assert_eq!(routed.channels[0].1.events.len(), 1);
    }

    fn warned(envs: &[(&str, &str)]) -> Notification {
        let mut n = grouped(envs);
        n.kind = EventKind::Warn;
        for e in &mut n.events {
            e.kind = EventKind::Warn;
        }
        n
    }

    #[test]
    fn without_routes_a_warn_goes_nowhere() {
        let routed = route(&notify(PHONE), &warned(&[("site", "prod")]));
        assert_eq!(routed.mail, None);
        assert!(routed.channels.is_empty());
    }

    #[test]
    fn a_warn_goes_only_where_a_route_names_it_and_never_to_the_mail() {
        let config = format!(
            "{PHONE}[[notify]]\nname = \"chat\"\nkind = \"slack\"\nurl = \"http://127.0.0.1:1/chat\"\nallow_private = true\n\
             [[route]]\nmatch = {{ env = \"prod\" }}\nnotify = [\"chat\", \"mail\"]\ncontinue = true\n\
             [[route]]\nmatch = {{ env = \"prod\" }}\nevents = [\"down\", \"warn\"]\nnotify = [\"phone\", \"mail\"]\n"
        );
        let notify = notify(&config);
        let routed = route(&notify, &warned(&[("site", "prod"), ("beta", "staging")]));
        assert_eq!(routed.mail, None, "a warn is never mailed");
        let channels: Vec<(&str, Vec<String>)> = routed
            .channels
            .iter()
            .map(|(name, part)| (name.as_str(), names(&Some(part.clone()))))
            .collect();
        assert_eq!(
            channels,
            [("phone", vec!["site".to_string()])],
            "chat's route carries every event but warn; staging matches no warn route"
        );
        // The same routes carry a DOWN to all three.
        let down = route(&notify, &grouped(&[("site", "prod")]));
        assert_eq!(names(&down.mail), ["site"]);
        assert_eq!(down.channels.len(), 2);
    }

    #[test]
    fn continue_lets_later_routes_add_channels_and_events_filter() {
        let config = format!(
            "{PHONE}[[route]]\nmatch_re = {{ env = \"prod|staging\" }}\nnotify = [\"mail\"]\ncontinue = true\n\
             [[route]]\nmatch = {{ env = \"prod\" }}\nevents = [\"resolved\"]\nnotify = [\"phone\"]\n"
        );
        let notify = notify(&config);
        let down = route(&notify, &grouped(&[("site", "prod")]));
        assert_eq!(
            (names(&down.mail).len(), down.channels.len()),
            (1, 0),
            "a DOWN: the phone's route is for resolved only"
        );
        let mut resolved = grouped(&[("site", "prod")]);
        resolved.kind = EventKind::Resolved;
        let routed = route(&notify, &resolved);
        assert_eq!((names(&routed.mail).len(), routed.channels.len()), (1, 1));
    }
}
