//! Why: peers started by tests listen on loopback ports that many tests pick at once on a shared
//! machine; these find a free one, wait for a peer to open it, and show which addresses hold it
//! (so a test can prove a server bound 127.0.0.1 only).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::{Instant, sleep, timeout};

use crate::error::TestkitError;

/// How often a waiting test knocks on the port.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// How long one knock may take before it counts as "not yet".
const CONNECT_ATTEMPT_TIMEOUT: Duration = Duration::from_millis(500);

/// A port that was free on 127.0.0.1 a moment ago, for peers that take a port but cannot report the one
/// they bound. Another process may grab it before the peer does (then the peer fails to start and
/// [`crate::spawn_http_peer`] says so); prefer port 0 and reading the bound port back where a peer allows it.
pub fn free_port() -> Result<u16, TestkitError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(TestkitError::NoFreePort)?;
    let port = listener
        .local_addr()
        .map_err(TestkitError::NoFreePort)?
        .port();
    Ok(port)
}

/// Waits until 127.0.0.1:`port` accepts a TCP connection; `hang_guard` only stops a test that would
/// otherwise wait forever.
pub async fn wait_for_port(port: u16, hang_guard: Duration) -> Result<(), TestkitError> {
    wait_for_port_while(port, hang_guard, || Ok(())).await
}

/// [`wait_for_port`], calling `still_worth_waiting` between attempts so a caller can give up early
/// (for example when the process that should open the port has died).
pub(crate) async fn wait_for_port_while(
    port: u16,
    hang_guard: Duration,
    mut still_worth_waiting: impl FnMut() -> Result<(), TestkitError>,
) -> Result<(), TestkitError> {
    let deadline = Instant::now() + hang_guard;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    loop {
        if let Ok(Ok(_stream)) = timeout(CONNECT_ATTEMPT_TIMEOUT, TcpStream::connect(addr)).await {
            return Ok(());
        }
        still_worth_waiting()?;
        if Instant::now() >= deadline {
            return Err(TestkitError::PortTimeout {
                port,
                timeout: hang_guard,
            });
        }
        sleep(POLL_INTERVAL).await;
    }
}

/// The local addresses of every TCP socket listening on `port` in this network namespace (from
/// /proc/net/tcp and /proc/net/tcp6). `0.0.0.0` or `::` in the result means the port is open on all
/// interfaces.
pub fn listening_addrs(port: u16) -> Result<Vec<IpAddr>, TestkitError> {
    let mut found = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        match std::fs::read_to_string(table) {
            Ok(text) => found.extend(parse_listeners(&text, port)),
            // A kernel without IPv6 has no tcp6 table; nothing listens there then.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(TestkitError::Read {
                    path: table.into(),
                    source,
                });
            }
        }
    }
    Ok(found)
}

/// Listening (`st` = `0A`) entries of one /proc/net/tcp{,6} table whose local port is `port`.
/// Lines it cannot read are skipped: the table is the kernel's, and a test only needs the ones it can.
pub fn parse_listeners(table: &str, port: u16) -> Vec<IpAddr> {
    const TCP_LISTEN: &str = "0A";
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let local = fields.nth(1)?;
            let state = fields.nth(1)?;
            if state != TCP_LISTEN {
                return None;
            }
            let (addr_hex, port_hex) = local.split_once(':')?;
            if u16::from_str_radix(port_hex, 16).ok()? != port {
                return None;
            }
            decode_proc_addr(addr_hex)
        })
        .collect()
}

/// /proc/net/tcp prints an address as 32-bit words in host byte order, 8 hex digits each.
fn decode_proc_addr(hex: &str) -> Option<IpAddr> {
    let mut bytes = Vec::with_capacity(16);
    let mut rest = hex;
    while !rest.is_empty() {
        let (word, tail) = rest.split_at_checked(8)?;
        bytes.extend_from_slice(&u32::from_str_radix(word, 16).ok()?.to_ne_bytes());
        rest = tail;
    }
    if let Ok(v4) = <[u8; 4]>::try_from(bytes.as_slice()) {
        return Some(IpAddr::V4(Ipv4Addr::from(v4)));
    }
    let v6 = <[u8; 16]>::try_from(bytes.as_slice()).ok()?;
    Some(IpAddr::V6(Ipv6Addr::from(v6)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    // Shapes copied from this machine's /proc/net/tcp{,6}, trimmed after the state column.
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue\n\
        0: 0100007F:9C3F 00000000:0000 0A 00000000:00000000\n\
        1: 00000000:9C3F 00000000:0000 0A 00000000:00000000\n\
        2: 0100007F:9C3F 0100007F:D2A4 01 00000000:00000000\n\
        3: 0100007F:1F90 00000000:0000 0A 00000000:00000000\n\
        garbage\n";
    const TCP6: &str = "  sl  local_address                         remote_address                        st\n\
        0: 00000000000000000000000000000000:9C3F 00000000000000000000000000000000:0000 0A\n\
        1: 00000000000000000000000001000000:9C3F 00000000000000000000000000000000:0000 0A\n";

    #[test]
    fn parses_listening_v4_sockets_on_the_port_only() {
        let found = parse_listeners(TCP, 0x9C3F);
        assert_eq!(
            found,
            vec![
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V4(Ipv4Addr::UNSPECIFIED)
            ]
        );
        assert_eq!(
            parse_listeners(TCP, 8080),
            vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]
        );
        assert!(parse_listeners(TCP, 1).is_empty());
    }

    #[test]
    fn parses_listening_v6_sockets() {
        let found = parse_listeners(TCP6, 0x9C3F);
        assert_eq!(
            found,
            vec![
                IpAddr::V6(Ipv6Addr::UNSPECIFIED),
                IpAddr::V6(Ipv6Addr::LOCALHOST)
            ]
        );
    }

    #[test]
    fn free_port_is_bindable_on_loopback() {
        let port = free_port().unwrap();
        assert_ne!(port, 0);
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
    }

    #[tokio::test]
    async fn wait_for_port_returns_once_a_listener_exists() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        wait_for_port(port, Duration::from_secs(30)).await.unwrap();
        assert_eq!(
            listening_addrs(port).unwrap(),
            vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]
        );
    }

    #[tokio::test]
    async fn wait_for_port_gives_up_at_the_hang_guard_when_nothing_listens() {
        let port = free_port().unwrap();
        let err = wait_for_port(port, Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(
            matches!(err, TestkitError::PortTimeout { port: p, .. } if p == port),
            "{err}"
        );
    }
}
