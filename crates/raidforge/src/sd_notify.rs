//! systemd's service notification (`sd_notify(3)`): `raidforge serve` under a unit of
//! `Type=notify` says `READY=1` once every export listens, `STOPPING=1` when it shuts down, and
//! `STATUS=` lines that `systemctl status` shows.
//!
//! The protocol is one datagram of `KEY=VALUE` lines sent to the Unix socket named by
//! `$NOTIFY_SOCKET` (a path, or an abstract name written with a leading `@`). That is a few
//! lines on std's `UnixDatagram`, so no crate (the `sd-notify` crate, or linking libsystemd)
//! is taken for it. Without `$NOTIFY_SOCKET` (not started by systemd) nothing is sent.

use std::os::unix::net::UnixDatagram;

/// Sends `state` (newline-separated `KEY=VALUE` assignments) to `$NOTIFY_SOCKET`, if set. A
/// failure is said on stderr and otherwise ignored: serving does not depend on it.
pub fn notify(state: &str) {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(e) = send(&target, state) {
        eprintln!(
            "raidforge serve: warning: telling systemd '{}' through NOTIFY_SOCKET={}: {e}",
            state.replace('\n', " "),
            target.to_string_lossy()
        );
    }
}

/// `STATUS=TEXT` (one line: newlines in `text` become spaces).
pub fn status(text: &str) {
    if std::env::var_os("NOTIFY_SOCKET").is_some() {
        notify(&format!("STATUS={}", text.replace('\n', " ")));
    }
}

fn send(target: &std::ffi::OsStr, state: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let sock = UnixDatagram::unbound()?;
    let bytes = target.as_bytes();
    let sent = match bytes.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            sock.send_to_addr(state.as_bytes(), &addr)?
        }
        None => sock.send_to(state.as_bytes(), target)?,
    };
    if sent != state.len() {
        return Err(std::io::Error::other(format!(
            "sent {sent} of {} bytes",
            state.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both address forms reach a bound socket with the message intact.
    #[test]
    fn sends_to_a_path_and_to_an_abstract_name() {
        let dir = std::env::temp_dir().join(format!("rf-sdn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let rx = UnixDatagram::bind(&path).unwrap();
        send(path.as_os_str(), "READY=1\nSTATUS=x").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=x");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("raidforge-sdn-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).unwrap();
        send(std::ffi::OsStr::new(&format!("@{name}")), "STOPPING=1").unwrap();
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
