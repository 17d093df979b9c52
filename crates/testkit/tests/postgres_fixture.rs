//! The throwaway PostgreSQL server: it really serves on its loopback port, and dropping it stops
//! the server and removes its files, so no test leaves a database behind.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::TcpStream;

use manifold_testkit::Postgres;

#[test]
fn a_dropped_server_is_stopped_and_its_files_removed() {
    let pg = Postgres::start().unwrap();
    let port = pg.port();
    let data = pg.data_dir().to_path_buf();
    assert!(data.join("PG_VERSION").is_file());
    TcpStream::connect(("127.0.0.1", port)).unwrap();
    pg.stop().unwrap();
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    pg.start_again().unwrap();
    TcpStream::connect(("127.0.0.1", port)).unwrap();
    drop(pg);
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    assert!(!data.exists(), "{} is left behind", data.display());
}
