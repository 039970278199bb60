//! `/login` attempts counted per client: [`ATTEMPTS`] in any
//! [`WINDOW`], then 429 until the oldest attempt leaves the window. The
//! token is long enough not to be guessed at any rate; the throttle keeps
//! a guesser from also filling the log and the CPU.
//!
//! A client is its IPv4 address, or its IPv6 /64 (one host usually owns a
//! whole /64, so counting addresses would give it 2^64 tries). At most
//! [`MAX_CLIENTS`] are remembered; past that, every client not yet known
//! shares one count, so a spread of addresses costs memory no more than
//! it buys attempts.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

pub(super) const ATTEMPTS: usize = 5;
pub(super) const WINDOW: Duration = Duration::from_secs(60);
const MAX_CLIENTS: usize = 4096;

/// Who is counted together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Client {
    V4(u32),
    V6Prefix(u64),
    /// No address known (a request from inside the process), or the table
    /// is full.
    Shared,
}

impl Client {
    fn of(addr: Option<IpAddr>) -> Client {
        match addr.map(|a| a.to_canonical()) {
            Some(IpAddr::V4(v4)) => Client::V4(u32::from(v4)),
            Some(IpAddr::V6(v6)) => Client::V6Prefix((u128::from(v6) >> 64) as u64),
            None => Client::Shared,
        }
    }
}

/// The recent attempts of each client.
#[derive(Default)]
pub(super) struct Throttle {
    recent: Mutex<HashMap<Client, VecDeque<Instant>>>,
}

impl Throttle {
    /// Counts one attempt from `addr`; `Err(wait)` when it is one too many,
    /// with how long until the next is allowed. A refused attempt is not
    /// counted, so waiting is always enough.
    pub(super) fn attempt(&self, addr: Option<IpAddr>) -> Result<(), Duration> {
        let now = Instant::now();
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        let mut client = Client::of(addr);
        if !recent.contains_key(&client) && recent.len() >= MAX_CLIENTS {
            recent.retain(|_, times| times.back().is_some_and(|t| now - *t < WINDOW));
            if recent.len() >= MAX_CLIENTS {
                client = Client::Shared;
            }
        }
        let times = recent.entry(client).or_default();
        while times.front().is_some_and(|t| now - *t >= WINDOW) {
            times.pop_front();
        }
        if times.len() >= ATTEMPTS {
            let oldest = times.front().copied().unwrap_or(now);
            return Err(WINDOW.saturating_sub(now - oldest));
        }
        times.push_back(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn five_attempts_a_minute_per_client() {
        let throttle = Throttle::default();
        for _ in 0..ATTEMPTS {
            assert!(throttle.attempt(ip("192.0.2.1")).is_ok());
        }
        let wait = throttle.attempt(ip("192.0.2.1")).unwrap_err();
        assert_eq!(wait, WINDOW);
        // Another client is counted on its own.
        assert!(throttle.attempt(ip("192.0.2.2")).is_ok());
        tokio::time::advance(Duration::from_secs(20)).await;
        assert_eq!(
            throttle.attempt(ip("192.0.2.1")),
            Err(Duration::from_secs(40))
        );
        tokio::time::advance(Duration::from_secs(40)).await;
        assert!(throttle.attempt(ip("192.0.2.1")).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn an_ipv6_host_is_counted_by_its_slash_64() {
        let throttle = Throttle::default();
        for n in 0..ATTEMPTS {
            assert!(throttle.attempt(ip(&format!("2001:db8::{n:x}"))).is_ok());
        }
        assert!(throttle.attempt(ip("2001:db8::ffff:1")).is_err());
        assert!(throttle.attempt(ip("2001:db8:0:1::1")).is_ok());
        // A v4-mapped address is the v4 client.
        for _ in 0..ATTEMPTS {
            assert!(throttle.attempt(ip("198.51.100.7")).is_ok());
        }
        assert!(throttle.attempt(ip("::ffff:198.51.100.7")).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_table_counts_newcomers_together() {
        let throttle = Throttle::default();
        for n in 0..MAX_CLIENTS as u32 {
            let addr = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + n));
            assert!(throttle.attempt(Some(addr)).is_ok());
        }
        for n in 0..ATTEMPTS as u32 {
            let addr = IpAddr::V4(std::net::Ipv4Addr::from(0x0b00_0000 + n));
            assert!(throttle.attempt(Some(addr)).is_ok());
        }
        let addr = IpAddr::V4(std::net::Ipv4Addr::from(0x0c00_0000));
        assert!(throttle.attempt(Some(addr)).is_err());
        assert_eq!(throttle.recent.lock().unwrap().len(), MAX_CLIENTS + 1);
    }
}
