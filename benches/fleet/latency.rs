//! A loopback TCP relay that holds every chunk of bytes for a fixed time in each direction, so
//! explain and the floor can be timed against a backend some milliseconds of round trip away
//! (`--latency`), as a remote Thanos or Mimir is, with the backend's own work unchanged.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

/// A running relay; it stops when dropped.
pub struct Relay {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Relay to `upstream` (`http://host:port`), each direction `one_way` late.
pub fn start(rt: &tokio::runtime::Runtime, upstream: &str, one_way: Duration) -> Result<Relay, String> {
    let target = upstream.trim_start_matches("http://").trim_end_matches('/').to_string();
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).map_err(|e| format!("latency relay: {e}"))?;
    let port = listener.local_addr().map_err(|e| format!("latency relay: {e}"))?.port();
    let task = rt.spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(&target).await else { return };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::join!(pipe(client_read, server_write, one_way), pipe(server_read, client_write, one_way));
            });
        }
    });
    Ok(Relay { url: format!("http://127.0.0.1:{port}"), task })
}

/// Copy `from` to `to`, each chunk written `delay` after it was read, in order.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let writer = async move {
        while let Some((at, bytes)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 || tx.send((tokio::time::Instant::now() + delay, buf[..n].to_vec())).is_err() {
                return;
            }
        }
    };
    tokio::join!(reader, writer);
}
