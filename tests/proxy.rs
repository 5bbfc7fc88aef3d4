//! A TCP proxy that can be frozen: a server that stops answering (SIGSTOPped, a hung host or
//! proxy) without stopping the server the other tests share. While frozen it still accepts
//! connections and reads what clients send, but forwards nothing, in either direction: the
//! connections stay open and nothing comes back, as with a frozen server.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

/// A proxy on a loopback port to an upstream address (see the module documentation). Dropping
/// it thaws it, so that its pumps end with their connections.
pub struct FreezableProxy {
    /// The loopback port clients connect to.
    pub port: u16,
    frozen: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
}

impl FreezableProxy {
    /// Starts forwarding 127.0.0.1:`port` to `upstream`.
    pub fn start(upstream: &'static str) -> FreezableProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let frozen = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (f, a) = (frozen.clone(), accepted.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                a.fetch_add(1, SeqCst);
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (from, to, frozen) = (from.try_clone(), to.try_clone(), f.clone());
                    if let (Ok(from), Ok(to)) = (from, to) {
                        std::thread::spawn(move || pump(from, to, &frozen));
                    }
                }
            }
        });
        FreezableProxy { port, frozen, accepted }
    }

    /// Stops forwarding (what arrives meanwhile is held, and forwarded after [`Self::thaw`]).
    pub fn freeze(&self) {
        self.frozen.store(true, SeqCst);
    }

    /// Forwards again.
    pub fn thaw(&self) {
        self.frozen.store(false, SeqCst);
    }

    /// Connections accepted so far (frozen or not): a client that connects while frozen shows
    /// here, though its handshake gets no answer.
    pub fn accepted(&self) -> usize {
        self.accepted.load(SeqCst)
    }
}

impl Drop for FreezableProxy {
    fn drop(&mut self) {
        self.thaw();
    }
}

/// Copies `from` to `to`, holding what it read while `frozen`; at the end shuts both down.
fn pump(mut from: TcpStream, mut to: TcpStream, frozen: &AtomicBool) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buf).unwrap_or(0);
        // a frozen server: held, not refused (nothing to await here but the flag)
        while frozen.load(SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(std::net::Shutdown::Both);
    let _ = to.shutdown(std::net::Shutdown::Both);
}
