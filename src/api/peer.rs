//! [`Peer`]: who sent a request, as the listener saw it, handed to the
//! router in the request's extensions.

/// Who sent a request, for the router: the peer's address (the login
/// throttle counts by it), whether the connection is TLS (the session
/// cookie is then `Secure`), and whether it came over the local socket
/// from a user allowed to control vigie (`local.rs`), which stands for the
/// token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Peer {
    /// `None` over the local socket.
    pub addr: Option<std::net::SocketAddr>,
    pub tls: bool,
    pub local: bool,
}
