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

    /// The wait before retry number `retry` (1-based). Spread out so that sessions that failed
    /// together — a fleet behind one rate limit — do not come back together: the backoff is
    /// exponential and capped, times a random factor in [1, 2); a `retry-after` that asks for
    /// longer is honoured (never retried sooner) plus a random part of up to a quarter of it
    /// (at least [`MIN_RETRY_AFTER_SPREAD`], at most [`MAX_RETRY_AFTER_SPREAD`]).
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20));
        let capped = exp.min(self.max_delay);
        let mut rng = rand::thread_rng();
        let backoff = capped.mul_f64(rng.gen_range(1.0..2.0));
        match retry_after {
            Some(ra) if ra >= backoff => {
                let room = (ra / 4).clamp(MIN_RETRY_AFTER_SPREAD, MAX_RETRY_AFTER_SPREAD);
                ra.saturating_add(room.mul_f64(rng.gen_range(0.0..1.0)))
            }
            _ => backoff,
        }
    }
}

/// The least room a `retry-after` wait is spread over (so a fleet told "1 s" does not return
/// in the same instant).
pub const MIN_RETRY_AFTER_SPREAD: Duration = Duration::from_secs(1);
/// The most a `retry-after` wait is lengthened.
pub const MAX_RETRY_AFTER_SPREAD: Duration = Duration::from_secs(10);

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
            assert!(d >= base && d < 2 * base, "retry {retry}: {d}");
        }
        for _ in 0..100 {
            let d = p.delay(1, Some(Duration::from_secs(2)));
            assert!(
                d >= Duration::from_secs(2) && d < Duration::from_secs(3),
                "{d:?}"
            );
        }
        let huge = p.delay(1, Some(Duration::from_secs(86_400)));
        assert!(huge >= Duration::from_secs(86_400) && huge < Duration::from_secs(86_410));
    }

    /// A fleet of sessions that hit the same error at the same instant: their retries are
    /// spread, not a wave (no 100 ms window holds more than 30 % of them).
    #[test]
    fn a_fleet_that_failed_together_does_not_retry_together() {
        let p = RetryPolicy::default();
        for retry_after in [
            None,
            Some(Duration::from_secs(2)),
            Some(Duration::from_secs(1)),
        ] {
            let mut buckets = std::collections::HashMap::new();
            for _ in 0..1000 {
                let ms = p.delay(1, retry_after).as_millis() / 100;
                *buckets.entry(ms).or_insert(0u32) += 1;
            }
            let fullest = buckets.values().max().copied().unwrap_or(0);
            assert!(
                fullest <= 300,
                "{retry_after:?}: {fullest} of 1000 in one 100 ms window"
            );
        }
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
