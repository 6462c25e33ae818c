//! AWS credentials the way the AWS tools find them, in their order: the environment's keys,
//! web identity (`AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`), the shared profile
//! (`AWS_PROFILE`: a role assumed with another profile's or the machine's credentials or a
//! web identity token, SSO, static keys, `credential_process`),
//! the container credentials endpoint, the EC2 instance metadata service. [`chain::resolve`]
//! picks the link without touching the network; a [`CredentialsProvider`] fetches from it at
//! the first request and refreshes before the credentials expire or when AWS refuses them.

pub mod chain;
mod fetch;
pub mod metadata;
pub mod process;
pub mod profile;
pub mod provider;
pub mod sso;
pub mod time;
pub mod web_identity;

pub use chain::{profile_source, resolve};
pub use profile::ProfileSource;
pub use provider::{CredentialsProvider, Source, Timed, REFRESH_MARGIN};

/// Whether `region` looks like an AWS region name (`us-east-1`).
pub(crate) fn region_ok(region: &str) -> bool {
    !region.is_empty()
        && region.len() <= 32
        && region
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}
