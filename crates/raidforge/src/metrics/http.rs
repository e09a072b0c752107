//! The HTTP side of `raidforge serve --metrics ADDR`: `GET /metrics` (and `HEAD`), nothing
//! else.
//!
//! A small HTTP/1.1 responder over `std::net::TcpListener` rather than a crate: the endpoint
//! is one path, one method, a body rendered on demand, and `Connection: close`, which a
//! Prometheus scraper (or curl) is content with; an HTTP server crate (hyper, tiny_http, axum)
//! would bring an async runtime or a dependency tree larger than this file for it. What it
//! does: reads the request head (at most 8 KiB, within 5 s), answers 200 with the metrics for
//! `GET /metrics` (any query string is ignored), the headers alone for `HEAD`, 405 (with
//! `Allow`) for another method on `/metrics`, 404 for another path, 400 for what is not an
//! HTTP/1.x request head. The format follows the `Accept` header (OpenMetrics when asked for,
//! else Prometheus text 0.0.4). Each connection is served on a short-lived thread, at most
//! [`MAX_CONNECTIONS`] at once (more are answered 503 at once), so a slow client cannot hold
//! the scrape of another.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::text::Format;

/// The longest request head read.
const MAX_HEAD: usize = 8 << 10;
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 8;
/// How long a client may take to send its request, or to take the reply.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Renders the metrics in a format.
pub type Render = Arc<dyn Fn(Format) -> String + Send + Sync>;

/// Accepts connections on `l` until `stop`, answering each (see the module documentation).
pub fn serve(l: TcpListener, stop: Arc<AtomicBool>, render: Render) -> std::io::Result<()> {
    l.set_nonblocking(true)?;
    let busy = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::SeqCst) {
        match l.accept() {
            Ok((s, _)) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(IO_TIMEOUT));
                let _ = s.set_write_timeout(Some(IO_TIMEOUT));
                if busy.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    busy.fetch_sub(1, Ordering::SeqCst);
                    let _ = (&s).write_all(&response(503, "Service Unavailable", &[], b"", true));
                    continue;
                }
                let busy = Arc::clone(&busy);
                let render = Arc::clone(&render);
                std::thread::spawn(move || {
                    handle(s, &render);
                    busy.fetch_sub(1, Ordering::SeqCst);
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    Ok(())
}

fn handle(mut s: TcpStream, render: &Render) {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            break;
        }
        if head.len() > MAX_HEAD {
            let _ = s.write_all(&response(
                431,
                "Request Header Fields Too Large",
                &[],
                b"",
                true,
            ));
            return;
        }
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(_) => return,
        }
    }
    let reply = answer(&String::from_utf8_lossy(&head), render);
    let _ = s.write_all(&reply);
    let _ = s.flush();
    let _ = s.shutdown(std::net::Shutdown::Write);
}

/// The whole response to a request head.
pub fn answer(head: &str, render: &Render) -> Vec<u8> {
    let mut lines = head.lines();
    let request = lines.next().unwrap_or("");
    let parts: Vec<&str> = request.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return response(400, "Bad Request", &[], b"not an HTTP request\n", true);
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return response(400, "Bad Request", &[], b"not an HTTP/1.x request\n", true);
    }
    let path = target.split(['?', '#']).next().unwrap_or(target);
    if path != "/metrics" {
        return response(
            404,
            "Not Found",
            &[],
            b"raidforge serves its metrics on /metrics only\n",
            true,
        );
    }
    let body_too = match method {
        "GET" => true,
        "HEAD" => false,
        _ => {
            return response(
                405,
                "Method Not Allowed",
                &[("Allow", "GET, HEAD")],
                b"only GET (and HEAD) on /metrics\n",
                true,
            )
        }
    };
    let accept = lines
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("accept"))
        .map(|(_, v)| v.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let format = if accept.contains("application/openmetrics-text") {
        Format::OpenMetrics
    } else {
        Format::Prometheus
    };
    let body = render(format);
    response(
        200,
        "OK",
        &[("Content-Type", format.content_type())],
        body.as_bytes(),
        body_too,
    )
}

/// A response with `Content-Length` and `Connection: close`; the body is left out when
/// `body_too` is false (the length still says what a GET would get).
fn response(
    code: u16,
    reason: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    body_too: bool,
) -> Vec<u8> {
    let mut r = format!("HTTP/1.1 {code} {reason}\r\n");
    let plain = [("Content-Type", "text/plain; charset=utf-8")];
    let has_type = headers.iter().any(|(k, _)| *k == "Content-Type");
    for (k, v) in headers.iter().chain(plain.iter().filter(|_| !has_type)) {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    let mut r = r.into_bytes();
    if body_too {
        r.extend_from_slice(body);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render() -> Render {
        Arc::new(|f: Format| match f {
            Format::Prometheus => "up 1\n".to_string(),
            Format::OpenMetrics => "up 1\n# EOF\n".to_string(),
        })
    }

    fn text(r: Vec<u8>) -> String {
        String::from_utf8(r).unwrap()
    }

    #[test]
    fn get_metrics_is_the_prometheus_text_unless_openmetrics_is_accepted() {
        let r = text(answer(
            "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
            &render(),
        ));
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
        assert!(r.contains("Content-Length: 5\r\n"));
        assert!(r.ends_with("\r\n\r\nup 1\n"), "{r}");
        // What Prometheus sends.
        let r = text(answer(
            "GET /metrics?x=1 HTTP/1.1\r\naccept: application/openmetrics-text;version=1.0.0,\
             application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5\r\n\r\n",
            &render(),
        ));
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains("Content-Type: application/openmetrics-text; version=1.0.0"));
        assert!(r.ends_with("up 1\n# EOF\n"));
    }

    #[test]
    fn head_has_the_headers_and_no_body() {
        let r = text(answer("HEAD /metrics HTTP/1.0\r\n\r\n", &render()));
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains("Content-Length: 5\r\n"));
        assert!(r.ends_with("\r\n\r\n"), "{r:?}");
    }

    #[test]
    fn other_paths_methods_and_garbage_are_refused() {
        let r = text(answer("GET / HTTP/1.1\r\n\r\n", &render()));
        assert!(r.starts_with("HTTP/1.1 404 Not Found\r\n"), "{r}");
        let r = text(answer("GET /metricsx HTTP/1.1\r\n\r\n", &render()));
        assert!(r.starts_with("HTTP/1.1 404 Not Found\r\n"), "{r}");
        for m in ["POST", "PUT", "DELETE", "OPTIONS"] {
            let r = text(answer(&format!("{m} /metrics HTTP/1.1\r\n\r\n"), &render()));
            assert!(r.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{r}");
            assert!(r.contains("Allow: GET, HEAD\r\n"), "{r}");
        }
        for bad in ["", "hello", "GET /metrics", "GET /metrics SPDY/3\r\n\r\n"] {
            let r = text(answer(bad, &render()));
            assert!(
                r.starts_with("HTTP/1.1 400 Bad Request\r\n"),
                "{bad:?}: {r}"
            );
        }
    }

    #[test]
    fn a_real_connection_gets_the_metrics_and_the_listener_stops() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let st = Arc::clone(&stop);
        let t = std::thread::spawn(move || serve(l, st, render()));
        for path in ["/metrics", "/nope"] {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .unwrap();
            let mut got = String::new();
            c.read_to_string(&mut got).unwrap();
            if path == "/metrics" {
                assert!(got.starts_with("HTTP/1.1 200 OK\r\n") && got.ends_with("up 1\n"));
            } else {
                assert!(got.starts_with("HTTP/1.1 404 "), "{got}");
            }
        }
        stop.store(true, Ordering::SeqCst);
        t.join().unwrap().unwrap();
    }
}
