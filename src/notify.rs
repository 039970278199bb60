//! systemd's notify protocol (`Type=notify`): READY once the first
//! schedule is armed, RELOADING/READY around a config reload, STOPPING on
//! the way out, and WATCHDOG only while the scheduler makes progress and
//! every supervised task can be brought back (the daemon's watch decides),
//! so systemd restarts a daemon that hangs rather than one that is merely
//! busy.
//!
//! Outside systemd (`NOTIFY_SOCKET` unset) every call is a no-op.

use sd_notify::NotifyState;

pub fn ready() {
    send(&[NotifyState::Ready]);
}

pub fn reloading() {
    send(&[NotifyState::Reloading]);
}

pub fn stopping() {
    send(&[NotifyState::Stopping]);
}

pub fn watchdog() {
    send(&[NotifyState::Watchdog]);
}

pub fn status(text: &str) {
    send(&[NotifyState::Status(text)]);
}

fn send(states: &[NotifyState<'_>]) {
    if let Err(err) = sd_notify::notify(false, states) {
        tracing::warn!(error = %err, "cannot notify systemd");
    }
}
