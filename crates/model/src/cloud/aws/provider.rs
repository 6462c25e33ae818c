//! Credentials that expire, and the one cache every request of a client shares: refreshed
//! before they expire and once when AWS refuses them, by one fetch at a time that every
//! waiting request joins. The lock is never held across an await: a refresh in flight is a
//! shared future the waiters poll, each fetch bounded by its source's own timeouts and
//! [`FETCH_LIMIT`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use futures_util::future::{FutureExt as _, Shared};

use super::super::sigv4::Credentials;
pub mod assume_role;

pub use super::fetch::{Timed, FETCH_LIMIT, REFRESH_MARGIN};
use super::metadata::{Container, Imds};
use super::process::Process;
use super::profile::ProfileSource;
use super::sso::Sso;
use super::time::format_rfc3339;
use super::web_identity::WebIdentity;
use crate::error::{ApiError, ApiErrorKind};
use crate::BoxFuture;
use assume_role::AssumeRole;

/// The link of the AWS credential chain a client uses (chosen once, at start-up, without
/// touching the network).
#[derive(Debug)]
pub enum Source {
    /// `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (/ `AWS_SESSION_TOKEN`): used as given.
    Static(Credentials),
    /// Keys in the shared credentials or config file: read again when AWS refuses them.
    Profile(ProfileSource),
    /// `AssumeRole` at STS, signed with another source's credentials.
    AssumeRole(AssumeRole),
    /// `AssumeRoleWithWebIdentity` at STS with a token file (EKS, GitHub Actions, ...).
    WebIdentity(WebIdentity),
    /// IAM Identity Center: the cached SSO token traded at the portal for role credentials.
    Sso(Sso),
    /// A profile's `credential_process`.
    Process(Process),
    /// The ECS / EKS container credentials endpoint.
    Container(Container),
    /// The EC2 instance metadata service (IMDSv2).
    Imds(Imds),
}

impl Source {
    /// Where credentials come from, for messages.
    pub fn describe(&self) -> String {
        match self {
            Source::Static(_) => "the environment (AWS_ACCESS_KEY_ID)".to_owned(),
            Source::Profile(p) => format!("the AWS profile {:?}", p.profile),
            Source::AssumeRole(a) => a.describe(),
            Source::WebIdentity(w) => w.describe(),
            Source::Sso(s) => s.describe(),
            Source::Process(p) => p.describe(),
            Source::Container(c) => c.describe(),
            Source::Imds(i) => i.describe(),
        }
    }

    /// Credentials from this source, checked not to have expired already.
    pub(crate) async fn fetch(&self) -> Result<Timed, ApiError> {
        let timed = match self {
            Source::Static(c) => Timed {
                creds: c.clone(),
                expires: None,
            },
            Source::Profile(p) => match p.load()? {
                Some(creds) => Timed {
                    creds,
                    expires: None,
                },
                None => {
                    return Err(ApiError::new(
                        ApiErrorKind::Config,
                        format!(
                            "the AWS profile {:?} no longer has credentials in the shared files",
                            p.profile
                        ),
                    ))
                }
            },
            Source::AssumeRole(a) => a.fetch().await?,
            Source::WebIdentity(w) => w.fetch().await?,
            Source::Sso(s) => s.fetch().await?,
            Source::Process(p) => p.fetch().await?,
            Source::Container(c) => c.fetch().await?,
            Source::Imds(i) => i.fetch().await?,
        };
        if let Some(t) = timed.expires {
            if t <= SystemTime::now() {
                return Err(ApiError::new(
                    ApiErrorKind::Config,
                    format!(
                        "{} handed out credentials that had already expired (at {})",
                        self.describe(),
                        format_rfc3339(t)
                    ),
                ));
            }
        }
        Ok(timed)
    }
}

type Fetch = Shared<BoxFuture<'static, Result<Timed, ApiError>>>;

#[derive(Default)]
struct State {
    current: Option<Timed>,
    /// The fetch in flight and its number (a finished `Shared` no longer compares).
    inflight: Option<(u64, Fetch)>,
    started: u64,
}

/// AWS credentials that refresh themselves: what a Bedrock client signs with.
pub struct CredentialsProvider {
    source: Arc<Source>,
    state: Mutex<State>,
    fetches: AtomicU64,
}

impl std::fmt::Debug for CredentialsProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CredentialsProvider({})", self.source.describe())
    }
}

/// Forgets a fetch that nobody waits for any more (its request was cancelled), so that a
/// credential process it started is killed rather than left running unpolled.
struct Waiter<'a> {
    provider: &'a CredentialsProvider,
    id: u64,
    fetch: Fetch,
    done: bool,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut st = self.provider.lock();
        // Two holders: the state and this waiter; nobody else will poll it.
        if st
            .inflight
            .as_ref()
            .is_some_and(|(id, f)| *id == self.id && f.strong_count() == Some(2))
        {
            st.inflight = None;
        }
    }
}

impl CredentialsProvider {
    /// Credentials from `source`, fetched at the first request.
    pub fn new(source: Source) -> Self {
        let current = match &source {
            Source::Static(c) => Some(Timed {
                creds: c.clone(),
                expires: None,
            }),
            _ => None,
        };
        Self {
            source: Arc::new(source),
            state: Mutex::new(State {
                current,
                ..State::default()
            }),
            fetches: AtomicU64::new(0),
        }
    }

    /// Credentials that never change (tests, and keys given directly).
    pub fn fixed(creds: Credentials) -> Self {
        Self::new(Source::Static(creds))
    }

    /// The source, for messages and `system/init`.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// How many times the source has been asked (start-up not included for static keys).
    pub fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Credentials good for at least [`REFRESH_MARGIN`] (or the freshest the source gives):
    /// the cached ones, or the result of the one fetch in flight, started here if none is.
    pub async fn credentials(&self) -> Result<Credentials, ApiError> {
        let fetch = {
            let mut st = self.lock();
            if let Some(t) = &st.current {
                if t.expires
                    .is_none_or(|e| SystemTime::now() + REFRESH_MARGIN < e)
                {
                    return Ok(t.creds.clone());
                }
            }
            match &st.inflight {
                Some((id, f)) => (*id, f.clone()),
                None => {
                    let f = self.start_fetch();
                    st.started += 1;
                    st.inflight = Some((st.started, f.clone()));
                    (st.started, f)
                }
            }
        };
        let mut waiter = Waiter {
            provider: self,
            id: fetch.0,
            fetch: fetch.1,
            done: false,
        };
        // Polled through the waiter's own handle, so a cancelled request leaves exactly the
        // state's handle behind (see `Waiter`'s drop).
        let res = (&mut waiter.fetch).await;
        waiter.done = true;
        let mut st = self.lock();
        if st.inflight.as_ref().is_some_and(|(id, _)| *id == waiter.id) {
            st.inflight = None;
            if let Ok(t) = &res {
                st.current = Some(t.clone());
            }
        }
        match res {
            Ok(t) => Ok(t.creds),
            // A failed refresh of credentials that still work: use them while they last.
            Err(e) => match &st.current {
                Some(t) if t.expires.is_some_and(|x| SystemTime::now() < x) => Ok(t.creds.clone()),
                _ => Err(e),
            },
        }
    }

    fn start_fetch(&self) -> Fetch {
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let source = Arc::clone(&self.source);
        let fut: BoxFuture<'static, Result<Timed, ApiError>> = Box::pin(async move {
            match tokio::time::timeout(FETCH_LIMIT, source.fetch()).await {
                Ok(r) => r,
                Err(_) => Err(ApiError::new(
                    ApiErrorKind::Connect,
                    format!(
                        "{} gave no credentials within {} s",
                        source.describe(),
                        FETCH_LIMIT.as_secs()
                    ),
                )),
            }
        });
        fut.shared()
    }

    /// AWS refused `refused`: forget them, so the next [`Self::credentials`] fetches anew.
    /// Credentials another request already replaced are left alone.
    pub fn invalidate(&self, refused: &Credentials) {
        let mut st = self.lock();
        if st.current.as_ref().is_some_and(|t| &t.creds == refused) {
            st.current = None;
        }
    }
}
