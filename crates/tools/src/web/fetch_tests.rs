//! The fetch's own checks, with a resolver that answers what a hostile DNS server would.

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::fetch::{fetch, parse_url, FetchCx, FetchLimits, Resolver};
use super::{
    DigestRequest, HostPermit, SearchAnswer, SearchRequest, WebError, WebHost, WebModelError,
};
use crate::{BoxFuture, CancelToken};

/// Answers every name with the same addresses.
struct Fixed(Vec<IpAddr>);

impl Resolver for Fixed {
    fn lookup<'a>(&'a self, _host: &'a str) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>> {
        let a = self.0.clone();
        Box::pin(async move { Ok(a) })
    }
}

/// Rules that allow every host, naming none.
struct Open;

impl WebHost for Open {
    fn permit(&self, _host: &str, _port: u16) -> HostPermit {
        HostPermit::Allowed { named: false }
    }
    fn digest<'a>(
        &'a self,
        _: DigestRequest,
        _: &'a CancelToken,
    ) -> BoxFuture<'a, Result<String, WebModelError>> {
        Box::pin(async { Err(WebModelError::Failed("unused".into())) })
    }
    fn search<'a>(
        &'a self,
        _: SearchRequest,
        _: &'a CancelToken,
    ) -> BoxFuture<'a, Result<SearchAnswer, WebModelError>> {
        Box::pin(async { Err(WebModelError::Failed("unused".into())) })
    }
}

/// A server on loopback that counts connections and answers one small page.
async fn server() -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            h.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 2048];
            let _ = s.read(&mut buf).await;
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\nconnection: close\r\n\r\nhi")
                .await;
        }
    });
    (port, hits)
}

async fn get(
    url: &str,
    addrs: Vec<IpAddr>,
    permit: HostPermit,
) -> Result<super::fetch::Page, WebError> {
    let limits = FetchLimits::default();
    let cancel = CancelToken::new();
    let resolver = Fixed(addrs);
    let cx = FetchCx {
        host: &Open,
        resolver: &resolver,
        limits: &limits,
        cancel: &cancel,
        gate: None,
    };
    fetch(&cx, parse_url(url).unwrap(), permit).await
}

/// A public-looking name whose DNS answers loopback (or a mix with loopback) is refused after
/// keel's own lookup, and no connection is made.
#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused_without_connecting() {
    let (port, hits) = server().await;
    let url = format!("http://rebind.example.com:{port}/");
    for addrs in [
        vec!["127.0.0.1".parse().unwrap()],
        vec![
            "93.184.216.34".parse().unwrap(),
            "127.0.0.1".parse().unwrap(),
        ],
        vec!["::ffff:169.254.169.254".parse().unwrap()],
    ] {
        match get(&url, addrs.clone(), HostPermit::Allowed { named: false }).await {
            Err(WebError::AddressRefused { host, .. }) => assert_eq!(host, "rebind.example.com"),
            other => panic!("{addrs:?}: {other:?}"),
        }
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}

/// With a rule naming the host, the same name is fetched — over plain http, from exactly the
/// address keel checked (the name itself resolves nowhere).
#[tokio::test]
async fn a_named_local_host_is_reached_at_the_checked_address_over_http() {
    let (port, hits) = server().await;
    let url = format!("http://dev.example.invalid:{port}/");
    let page = get(
        &url,
        vec!["127.0.0.1".parse().unwrap()],
        HostPermit::Allowed { named: true },
    )
    .await
    .unwrap();
    assert_eq!(page.body, "hi");
    assert_eq!(page.url.scheme(), "http");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

/// Plain http is kept only towards a named host whose every address is local.
#[test]
fn plain_http_only_to_a_named_local_host() {
    let lo: IpAddr = "127.0.0.1".parse().unwrap();
    let public: IpAddr = "93.184.216.34".parse().unwrap();
    assert!(super::fetch::keeps_http(true, &[lo]));
    assert!(!super::fetch::keeps_http(false, &[lo]));
    assert!(!super::fetch::keeps_http(true, &[public]));
    assert!(!super::fetch::keeps_http(true, &[lo, public]));
}

/// A gate that answers every further URL the same way, and records what it was asked.
#[derive(Debug)]
struct Gate(HostPermit, std::sync::Mutex<Vec<String>>);

impl super::HopGate for Gate {
    fn judge<'a>(&'a self, url: &'a url::Url) -> BoxFuture<'a, HostPermit> {
        self.1.lock().unwrap().push(url.to_string());
        let p = self.0.clone();
        Box::pin(async move { p })
    }
}

/// A server on loopback whose `/go` redirects to `/next` on itself; counts requests.
async fn redirecting() -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            h.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 2048];
            let n = s.read(&mut buf).await.unwrap_or(0);
            let reply: &[u8] = if buf[..n].starts_with(b"GET /go ") {
                b"HTTP/1.1 302 Found\r\nlocation: /next\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            } else {
                b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\nconnection: close\r\n\r\nhi"
            };
            let _ = s.write_all(reply).await;
        }
    });
    (port, hits)
}

async fn get_gated(
    url: &str,
    gate: &Gate,
    addrs: Vec<IpAddr>,
) -> Result<super::fetch::Page, WebError> {
    let limits = FetchLimits::default();
    let cancel = CancelToken::new();
    let resolver = Fixed(addrs);
    let cx = FetchCx {
        host: &Open,
        resolver: &resolver,
        limits: &limits,
        cancel: &cancel,
        gate: Some(gate),
    };
    fetch(
        &cx,
        parse_url(url).unwrap(),
        HostPermit::Allowed { named: true },
    )
    .await
}

/// Every hop goes through the call's gate, the same host and port included: a refusal stops
/// it; a hop that would need asking keeps the permission only on the same host and port.
#[tokio::test]
async fn every_redirect_hop_goes_through_the_calls_gate() {
    let (port, hits) = redirecting().await;
    let url = format!("http://127.0.0.1:{port}/go");
    let refuse = Gate(
        HostPermit::Refused {
            why: "a hook said no".into(),
        },
        Default::default(),
    );
    match get_gated(&url, &refuse, vec![]).await {
        Err(WebError::RedirectRefused { to, why, .. }) => {
            assert!(to.ends_with("/next"), "{to}");
            assert_eq!(why, "a hook said no");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(hits.load(Ordering::SeqCst), 1, "the hop was not fetched");
    assert_eq!(refuse.1.lock().unwrap().len(), 1);
    let ask = Gate(
        HostPermit::Ask {
            why: "no rule".into(),
        },
        Default::default(),
    );
    let page = get_gated(&url, &ask, vec![]).await.unwrap();
    assert_eq!(page.body, "hi");
    assert_eq!(
        ask.1.lock().unwrap().len(),
        1,
        "asked, and kept on the same host"
    );
}

/// A named local name that resolves to a public address is upgraded to https; when that moves
/// it to port 443, the upgraded URL is judged before anything is sent.
#[tokio::test]
async fn an_upgrade_that_changes_the_port_is_judged_again() {
    let refuse = Gate(
        HostPermit::Ask {
            why: "no rule for 443".into(),
        },
        Default::default(),
    );
    let public: IpAddr = "93.184.216.34".parse().unwrap();
    match get_gated("http://buildbox/x", &refuse, vec![public]).await {
        Err(WebError::UpgradeRefused { from, to, why }) => {
            assert_eq!(from, "http://buildbox/x");
            assert_eq!(to, "https://buildbox/x");
            assert_eq!(why, "no rule for 443");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(refuse.1.lock().unwrap().as_slice(), ["https://buildbox/x"]);
}

/// Rules and URLs name a host in one spelling.
#[test]
fn hosts_have_one_spelling() {
    let host = |u: &str| super::fetch::rule_host(&parse_url(u).unwrap());
    for u in [
        "http://8.8.8.8/",
        "http://[::ffff:8.8.8.8]/",
        "http://[::ffff:808:808]/",
        "http://[::8.8.8.8]/",
        "http://134744072/",
        "http://0x8.8.8.8/",
        "http://010.8.8.8/",
        "http://8.8.8.8./",
    ] {
        assert_eq!(host(u), "8.8.8.8", "{u}");
    }
    assert_eq!(host("http://[::1]/"), "::1");
    assert_eq!(host("http://[::]/"), "::");
    assert_eq!(host("http://Example.COM./"), "example.com");
    let up = |u: &str| super::fetch::effective_url(&parse_url(u).unwrap()).to_string();
    assert_eq!(up("http://example.com/a"), "https://example.com/a");
    assert_eq!(up("http://example.com:80/a"), "https://example.com/a");
    assert_eq!(
        up("http://example.com:8080/a"),
        "https://example.com:8080/a"
    );
    assert_eq!(up("http://127.0.0.1/a"), "http://127.0.0.1/a");
}
