//! A TCP gate in front of a real server, to make it unreachable for a while
//! without losing its state (moto keeps everything in memory: stopping it
//! would empty the bucket). Open, it forwards bytes both ways; closed, it
//! cuts every connection in progress and drops new ones as soon as they
//! are accepted, which the client sees as a connection closed before any
//! answer, like a server that went away.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

#[derive(Debug)]
pub struct Gate {
    /// Where clients connect (127.0.0.1).
    pub addr: SocketAddr,
    open: Arc<AtomicBool>,
    /// Where accepted connections are forwarded; [`Gate::point_to`] moves it.
    upstream: Arc<std::sync::Mutex<SocketAddr>>,
    /// Bumped on every close; forwarding tasks end when it changes.
    generation: watch::Sender<u64>,
    dropped: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Gate {
    /// Starts open, forwarding to `upstream`. Must run inside a Tokio
    /// runtime (the test's).
    pub async fn start(upstream: SocketAddr) -> Gate {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the gate");
        let addr = listener.local_addr().expect("gate address");
        let open = Arc::new(AtomicBool::new(true));
        let upstream = Arc::new(std::sync::Mutex::new(upstream));
        let dropped = Arc::new(AtomicUsize::new(0));
        let (generation, _) = watch::channel(0u64);
        let task = {
            let open = open.clone();
            let dropped = dropped.clone();
            let generation = generation.clone();
            let upstream = upstream.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        continue;
                    };
                    if !open.load(Ordering::SeqCst) {
                        dropped.fetch_add(1, Ordering::SeqCst);
                        drop(client);
                        continue;
                    }
                    let mut cut = generation.subscribe();
                    let upstream = *upstream.lock().unwrap();
                    tokio::spawn(async move {
                        let Ok(mut server) = TcpStream::connect(upstream).await else {
                            return;
                        };
                        let mut client = client;
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                            _ = cut.changed() => {}
                        }
                    });
                }
            })
        };
        Gate {
            addr,
            open,
            upstream,
            generation,
            dropped,
            task,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Cuts every connection and refuses new ones until [`Gate::open`].
    pub fn close(&self) {
        self.open.store(false, Ordering::SeqCst);
        self.generation.send_modify(|g| *g += 1);
    }

    pub fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
    }

    /// New connections go to `upstream` from now on (say, a server with
    /// another certificate: a renewal as the client sees it).
    pub fn point_to(&self, upstream: SocketAddr) {
        *self.upstream.lock().unwrap() = upstream;
    }

    /// Connections dropped while closed.
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.task.abort();
    }
}
