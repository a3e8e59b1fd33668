//! A TCP proxy in front of Redis that can cut its connections, refuse new ones or hang them:
//! Redis outages on demand, without stopping the machine's Redis.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

/// What the proxy does with new connections.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// Forwards them to Redis.
    Up = 0,
    /// Closes them at once (Redis is down).
    Refuse = 1,
    /// Accepts them and never answers (Redis hangs, or packets are dropped).
    Hang = 2,
}

/// A TCP proxy in front of Redis that can cut its connections and refuse new ones.
pub struct Proxy {
    pub addr: SocketAddr,
    mode: Arc<AtomicU8>,
    held: Arc<parking_lot::Mutex<Vec<tokio::net::TcpStream>>>,
    pub open: Arc<AtomicUsize>,
    conns: Arc<parking_lot::Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Proxy {
    pub async fn start(redis_url: &str) -> Proxy {
        let target = url::Url::parse(redis_url).expect("redis url");
        let upstream = format!(
            "{}:{}",
            target.host_str().unwrap_or("127.0.0.1"),
            target.port().unwrap_or(6379)
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = Proxy {
            addr: listener.local_addr().unwrap(),
            mode: Arc::new(AtomicU8::new(Mode::Up as u8)),
            held: Arc::default(),
            open: Arc::new(AtomicUsize::new(0)),
            conns: Arc::default(),
        };
        let (mode, held) = (proxy.mode.clone(), proxy.held.clone());
        let (open, conns) = (proxy.open.clone(), proxy.conns.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                match mode.load(Ordering::SeqCst) {
                    m if m == Mode::Refuse as u8 => continue, // dropped at once
                    m if m == Mode::Hang as u8 => {
                        held.lock().push(inbound);
                        continue;
                    }
                    _ => {}
                }
                let upstream = upstream.clone();
                let open = open.clone();
                open.fetch_add(1, Ordering::SeqCst);
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                conns.lock().push(task.abort_handle());
                tokio::spawn(async move {
                    let _ = task.await;
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        proxy
    }

    /// The Redis URL through this proxy.
    pub fn url(&self, redis_url: &str) -> String {
        let mut url = url::Url::parse(redis_url).expect("redis url");
        url.set_host(Some("127.0.0.1")).unwrap();
        url.set_port(Some(self.addr.port())).unwrap();
        url.to_string()
    }

    /// Cuts every open connection.
    pub fn cut(&self) {
        for conn in self.conns.lock().drain(..) {
            conn.abort();
        }
    }

    /// Switches what happens to new connections; unless `Up`, the open ones are cut.
    pub fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
        if mode != Mode::Up {
            self.cut();
        }
        if mode != Mode::Hang {
            self.held.lock().clear();
        }
    }
}
