//! keel's environment knobs, read and range-checked in one place: a value out of range is an
//! error that names the variable, the value and what is allowed — never clamped in silence,
//! never a zero that makes every command time out.

use std::time::Duration;

use super::BuildError;

pub use crate::env::Env;

/// Typed, range-checked reads of the environment.
pub(super) struct Knobs<'a> {
    pub env: &'a Env,
}

impl<'a> Knobs<'a> {
    pub fn new(env: &'a Env) -> Self {
        Self { env }
    }

    fn raw(&self, var: &str) -> Option<String> {
        (self.env)(var).filter(|v| !v.trim().is_empty())
    }

    /// A whole number in `min..=max`.
    pub fn count(&self, var: &str, min: u64, max: u64) -> Result<Option<u64>, BuildError> {
        let Some(v) = self.raw(var) else {
            return Ok(None);
        };
        match v.trim().parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(BuildError::Usage(format!(
                "Error: {var}={v:?} is not valid: expected a whole number from {min} to {max}"
            ))),
        }
    }

    /// Milliseconds from `min_ms` to `max`.
    pub fn ms(
        &self,
        var: &str,
        min_ms: u64,
        max: Duration,
    ) -> Result<Option<Duration>, BuildError> {
        let max_ms = max.as_millis().min(u64::MAX as u128) as u64;
        let Some(v) = self.raw(var) else {
            return Ok(None);
        };
        match v.trim().parse::<u64>() {
            Ok(n) if (min_ms..=max_ms).contains(&n) => Ok(Some(Duration::from_millis(n))),
            _ => Err(BuildError::Usage(format!(
                "Error: {var}={v:?} is not valid: expected milliseconds from {min_ms} to {max_ms}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_out_of_range_name_the_variable() {
        let env = |k: &str| match k {
            "ZERO" => Some("0".to_owned()),
            "BIG" => Some("99999999999999999999".to_owned()),
            "OK" => Some(" 250 ".to_owned()),
            "EMPTY" => Some(" ".to_owned()),
            _ => None,
        };
        let k = Knobs::new(&env);
        let e = k
            .ms("ZERO", 1, Duration::from_secs(1))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("ZERO=\"0\"") && e.contains("from 1 to 1000"),
            "{e}"
        );
        assert!(k.count("BIG", 0, 10).is_err());
        assert_eq!(
            k.ms("OK", 1, Duration::from_secs(1)).unwrap(),
            Some(Duration::from_millis(250))
        );
        assert_eq!(k.count("EMPTY", 0, 1).unwrap(), None);
        assert_eq!(k.count("UNSET", 0, 1).unwrap(), None);
    }
}
