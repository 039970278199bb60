//! Push channels: webhook, ntfy, PagerDuty and Slack-style endpoints, told
//! what mail is told, through a durable outbox of their own.
//!
//! This module owns *getting a push to an endpoint and knowing it got
//! there*. Which events go to which channel is the routes' business
//! (`config::channels`, applied by the alerter); what is said is the
//! [`PushEvent`] the alerter writes with the mail.
//!
//! - `document.rs`: the versioned JSON document of one notification.
//! - `webhook.rs`, `ntfy.rs`, `pagerduty.rs`, `slack.rs`: each kind's
//!   requests, written from the document.
//! - `channel.rs`: a configured channel made ready (secrets read, client
//!   built); `deliver.rs` sends one request to an address the policy
//!   allows and reads the answer; `answer.rs` judges it.
//! - `breaker.rs`: each channel's circuit breaker; `limit.rs`: the rate
//!   limits, in requests a minute, one per ntfy topic or other channel.
//! - `sender.rs`: the task per channel that drains its part of the
//!   outbox: retries with capped backoff and jitter (honouring
//!   `Retry-After`), dead pushes for permanent refusals, one mail about a
//!   broken channel.
//! - `stats.rs`: the counters `/metrics` and `/healthz` read.
//! - `test_event.rs`: `vigie test-notify`.
//!
//! The guarantee is the mail outbox's: a push is stored (with the alert
//! state change that caused it) before it is sent, and leaves the outbox
//! only once its endpoint answered 2xx, or as a dead push. A crash between
//! the answer and the removal reaching the disk sends it again, with the
//! same id (`webhook-id`, the ntfy sequence id, the PagerDuty
//! `dedup_key`), so the receiver can tell.

mod answer;
mod breaker;
mod channel;
mod deliver;
pub mod document;
mod limit;
mod ntfy;
mod pagerduty;
mod request;
mod sender;
mod slack;
mod stats;
mod test_event;
mod webhook;

pub use self::answer::Answer;
pub use self::channel::LiveChannel;
pub use self::document::{PushCheck, PushEvent, PushKind};
pub use self::request::Request;
pub use self::sender::{broken_channel_mail, PushSender, PushWaker};
pub use self::stats::{ChannelSnapshot, PushStats};
pub use self::test_event::{send_test, test_event, Tried};
