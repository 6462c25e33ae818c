//! The retry policy: how often and how long keel retries a transient API error.

use std::time::Duration;

use rand::Rng;

/// Bounds and pacing of retries.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = never retry).
    pub max_retries: u32,
    /// Total time keel may spend waiting between attempts.
    pub budget: Duration,
    /// The first backoff.
    pub base_delay: Duration,
    /// The largest backoff.
    pub max_delay: Duration,
    /// Consecutive overload errors on the main model before switching to the fallback model.
    pub fallback_after: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 10,
            budget: Duration::from_secs(300),
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            fallback_after: 3,
        }
    }
}

/// Where an environment knob came from, for error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvError {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
    /// What was expected.
    pub expected: &'static str,
}

impl std::fmt::Display for EnvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}={:?} is not valid: expected {}",
            self.var, self.value, self.expected
        )
    }
}

impl RetryPolicy {
    /// Read `KEEL_MAX_RETRIES` (or `CLAUDE_CODE_MAX_RETRIES`), `KEEL_RETRY_BUDGET_MS`.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Self, EnvError> {
        let mut p = Self::default();
        for var in ["KEEL_MAX_RETRIES", "CLAUDE_CODE_MAX_RETRIES"] {
            if let Some(v) = get(var) {
                p.max_retries = v.trim().parse().map_err(|_| EnvError {
                    var: if var == "KEEL_MAX_RETRIES" {
                        "KEEL_MAX_RETRIES"
                    } else {
                        "CLAUDE_CODE_MAX_RETRIES"
                    },
                    value: v.clone(),
                    expected: "a whole number of retries (0 = no retry)",
                })?;
                break;
            }
        }
        if let Some(v) = get("KEEL_RETRY_BUDGET_MS") {
            let ms: u64 = v.trim().parse().map_err(|_| EnvError {
                var: "KEEL_RETRY_BUDGET_MS",
                value: v.clone(),
                expected: "milliseconds",
            })?;
            p.budget = Duration::from_millis(ms);
        }
        Ok(p)
    }

    /// The wait before retry number `retry` (1-based): exponential with up to 25 % jitter,
    /// capped; the API's `retry-after` wins when it asks for longer.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20));
        let capped = exp.min(self.max_delay);
        let jitter = rand::thread_rng().gen_range(0.0..0.25);
        let backoff = capped.mul_f64(1.0 + jitter);
        match retry_after {
            Some(ra) if ra >= backoff => ra,
            _ => backoff,
        }
    }
}

/// Read a millisecond duration from the environment.
pub fn env_ms(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
) -> Result<Option<Duration>, EnvError> {
    match get(var) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse::<u64>()
            .map(|ms| Some(Duration::from_millis(ms)))
            .map_err(|_| EnvError {
                var,
                value: v.clone(),
                expected: "milliseconds",
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_bounded_jitter_and_cap() {
        let p = RetryPolicy::default();
        for (retry, base) in [
            (1, 500),
            (2, 1000),
            (3, 2000),
            (4, 4000),
            (10, 30_000),
            (40, 30_000),
        ] {
            let d = p.delay(retry, None).as_millis() as u64;
            assert!(d >= base && d <= base + base / 4, "retry {retry}: {d}");
        }
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn env_knobs() {
        let env = |k: &str| match k {
            "CLAUDE_CODE_MAX_RETRIES" => Some("1".to_owned()),
            "KEEL_RETRY_BUDGET_MS" => Some("2500".to_owned()),
            _ => None,
        };
        let p = RetryPolicy::from_env(env).unwrap();
        assert_eq!((p.max_retries, p.budget), (1, Duration::from_millis(2500)));
        let both = |k: &str| match k {
            "KEEL_MAX_RETRIES" => Some("0".to_owned()),
            "CLAUDE_CODE_MAX_RETRIES" => Some("5".to_owned()),
            _ => None,
        };
        assert_eq!(RetryPolicy::from_env(both).unwrap().max_retries, 0);
        let bad = |k: &str| (k == "KEEL_MAX_RETRIES").then(|| "lots".to_owned());
        assert!(RetryPolicy::from_env(bad)
            .unwrap_err()
            .to_string()
            .contains("KEEL_MAX_RETRIES"));
    }
}
