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
