//! The accept loop of both listeners (MCP clients; operators on `admin_listen`): what
//! `axum::serve` with a graceful shutdown does, with each connection's task run under
//! [`RepollOnSelfWake`].
//!
//! Why not `axum::serve` itself: it spawns each connection's task on its own, so nothing can wrap
//! that task's future, and the self-wake that wrapper absorbs happens on every request with a body
//! (`self_wake.rs`). Everything else is as `axum::serve` does it: the same hyper connection
//! builder (HTTP/1.1, and HTTP/2 with prior knowledge where hyper-util is built with it), accept
//! errors that concern one connection skipped and others retried after a pause, and on stop no
//! new connection, each open one told to finish its request in flight and close, and the loop
//! ending once every connection has.

use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::self_wake::RepollOnSelfWake;

/// How long the loop waits after an accept error that is not one connection's (no file
/// descriptors left, say) before accepting again.
pub const ACCEPT_ERROR_PAUSE: Duration = Duration::from_secs(1);

/// Serves `app` on `listener` until `stop` is cancelled and every open connection has closed.
pub async fn serve(listener: TcpListener, app: Router, stop: CancellationToken) {
    let connections = TaskTracker::new();
    loop {
        let stream = tokio::select! {
            stream = accept(&listener) => stream,
            () = stop.cancelled() => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let stop = stop.clone();
        connections.spawn(RepollOnSelfWake::new(async move {
            let builder = Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = served {
                tracing::trace!(error = %e, "a client connection ended with an error");
            }
        }));
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// The next connection. Errors that concern only the connection being accepted are skipped;
/// others (out of file descriptors, say) are logged and retried after [`ACCEPT_ERROR_PAUSE`].
async fn accept(listener: &TcpListener) -> TcpStream {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => return stream,
            Err(e) if concerns_one_connection(&e) => {}
            Err(e) => {
                tracing::error!(error = %e, pause_s = ACCEPT_ERROR_PAUSE.as_secs(), "accepting a client connection failed; accepting again after a pause (if this says too many open files, raise the process's file limit)");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
            }
        }
    }
}

fn concerns_one_connection(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::sync::Notify;

    const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";

    /// A server whose one route answers "done" once `release` is notified (or at once when
    /// `release` is `None`).
    async fn server(
        release: Option<Arc<Notify>>,
    ) -> (
        std::net::SocketAddr,
        CancellationToken,
        tokio::task::JoinHandle<()>,
    ) {
        let app = Router::new().route(
            "/",
            axum::routing::get(move || {
                let release = release.clone();
                async move {
                    if let Some(release) = release {
                        release.notified().await;
                    }
                    "done"
                }
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let stop = CancellationToken::new();
        let served = tokio::spawn(serve(listener, app, stop.clone()));
        (addr, stop, served)
    }

    async fn read_until_closed(stream: &mut TcpStream) -> String {
        let mut answer = Vec::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
        String::from_utf8_lossy(&answer).into_owned()
    }

    #[tokio::test]
    async fn on_stop_a_request_in_flight_is_answered_before_the_loop_ends() {
        let release = Arc::new(Notify::new());
        let (addr, stop, mut served) = server(Some(Arc::clone(&release))).await;
        let mut client = TcpStream::connect(addr).await.expect("connect");
        client.write_all(REQUEST).await.expect("send");
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.cancel();
        let early = tokio::time::timeout(Duration::from_millis(300), &mut served).await;
        assert!(early.is_err(), "the loop ended with a request in flight");
        release.notify_one();
        let answer = read_until_closed(&mut client).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("done"), "{answer}");
        let ended = tokio::time::timeout(Duration::from_secs(10), served).await;
        assert!(
            ended.is_ok(),
            "the loop did not end once the connection closed"
        );
    }

    #[tokio::test]
    async fn on_stop_an_idle_kept_alive_connection_is_closed_and_no_new_one_is_taken() {
        let (addr, stop, served) = server(None).await;
        let mut client = TcpStream::connect(addr).await.expect("connect");
        client.write_all(REQUEST).await.expect("send");
        let mut first = [0u8; 512];
        let n = client.read(&mut first).await.expect("answer");
        assert!(
            first
                .get(..n)
                .unwrap_or_default()
                .starts_with(b"HTTP/1.1 200")
        );
        stop.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(10), served).await;
        assert!(
            ended.is_ok(),
            "an idle connection kept the loop from ending"
        );
        assert_eq!(
            read_until_closed(&mut client).await,
            "",
            "the idle connection was not closed"
        );
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "a connection was taken after the stop"
        );
    }

    #[test]
    fn only_errors_of_the_connection_being_accepted_are_skipped_without_a_pause() {
        use std::io::{Error, ErrorKind};
        for kind in [
            ErrorKind::ConnectionRefused,
            ErrorKind::ConnectionAborted,
            ErrorKind::ConnectionReset,
        ] {
            assert!(concerns_one_connection(&Error::from(kind)), "{kind:?}");
        }
        assert!(
            !concerns_one_connection(&Error::from_raw_os_error(24)),
            "EMFILE"
        );
        assert!(!concerns_one_connection(&Error::from(
            ErrorKind::OutOfMemory
        )));
    }
}
