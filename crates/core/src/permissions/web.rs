//! WebFetch and WebSearch rules: `WebFetch` (any public host), `WebFetch(domain:example.com)`
//! (that host; `domain:*.example.com` its subdomains; `domain:127.0.0.1:8080` that port only),
//! `WebSearch`.
//!
//! A loopback, private or link-local address, `localhost` or a name without a dot is reached
//! only through an allow rule that names that host exactly, in every mode: neither
//! bypassPermissions nor a bare `WebFetch` rule nor a wildcard opens them. Deny rules err
//! towards denying: `domain:example.com` also denies its subdomains, on every port. A rule for a
//! DNS name never opens non-public addresses: were the name to resolve to one (DNS rebinding),
//! the fetch is refused; a private machine is allowed by naming its address.

use keel_tools::web::fetch::{
    canonical_rule_host, effective_url, local_host, parse_url, rule_host,
};
use keel_tools::web::HostPermit;
use keel_tools::ToolKind;
use serde_json::Value;

use super::{AllowedBy, Decision, PermissionConfig, PermissionMode, Rule};

/// A `domain:` pattern, parsed: the host (lower case, no brackets, no trailing dot) and the
/// port when it names one.
#[derive(Debug, PartialEq, Eq)]
struct DomainSpec {
    host: String,
    port: Option<u16>,
}

fn parse_spec(pattern: &str) -> Option<DomainSpec> {
    let spec = pattern
        .trim()
        .strip_prefix("domain:")?
        .trim()
        .to_ascii_lowercase();
    let (host, port) = if let Some(rest) = spec.strip_prefix('[') {
        // [v6] or [v6]:port
        let (h, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse::<u16>().ok()?),
            None if after.is_empty() => None,
            None => return None,
        };
        (h.to_owned(), port)
    } else if spec.matches(':').count() == 1 {
        let (h, p) = spec.split_once(':')?;
        (h.to_owned(), Some(p.parse::<u16>().ok()?))
    } else {
        (spec.clone(), None)
    };
    let host = host.trim_end_matches('.').to_owned();
    let ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '*' | ':'));
    if !ok {
        return None;
    }
    // One spelling per host, the one URLs' hosts are compared in: `::ffff:8.8.8.8`,
    // `0x8.8.8.8` and `8.8.8.8` are one address, and a rule on any of them reaches all.
    let host = if host.contains('*') {
        host
    } else {
        canonical_rule_host(&host).unwrap_or(host)
    };
    Some(DomainSpec { host, port })
}

/// Whether an allow rule reaches `host:port`, and whether it names the host exactly.
fn allow_match(rule: &Rule, host: &str, port: u16) -> Option<bool> {
    let Some(p) = rule.pattern.as_deref() else {
        return Some(false);
    };
    let spec = parse_spec(p)?;
    if spec.port.is_some_and(|want| want != port) {
        return None;
    }
    if spec.host == host {
        // "Named" opens non-public addresses, so only a rule whose host is itself local (an
        // address that is not public, `localhost`, a name without a dot) names one: a rule
        // for a DNS name keeps the public-address check, or the name's owner could point it
        // at the metadata service or this machine after the user allowed it (DNS rebinding).
        return Some(!spec.host.contains('*') && names_local(&spec.host));
    }
    if spec.host == "*" {
        return Some(false);
    }
    let sub = spec.host.strip_prefix("*.")?;
    host.strip_suffix(sub)
        .is_some_and(|head| head.ends_with('.'))
        .then_some(false)
}

/// Whether a rule's host is itself local: an address that is not public, or a local name.
fn names_local(host: &str) -> bool {
    match host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
    {
        Ok(ip) => keel_tools::web::addr::non_public(ip).is_some(),
        Err(_) => keel_tools::web::addr::refused_name(host).is_some(),
    }
}

/// Whether a deny or ask rule reaches `host`: the host, its subdomains, any port; a pattern
/// keel cannot read reaches every host.
fn restrict_match(rule: &Rule, host: &str) -> bool {
    let Some(p) = rule.pattern.as_deref() else {
        return true;
    };
    let Some(spec) = parse_spec(p) else {
        return true;
    };
    let base = spec.host.trim_start_matches("*.");
    base == "*" || host == base || host.ends_with(&format!(".{base}"))
}

/// The host and port a WebFetch call reaches, as rules see them: of the URL as it will be
/// fetched (plain http to a public host is upgraded first, so a rule for port 80 never opens
/// 443), its host in the one spelling rules are compared in.
fn target(input: &Value) -> Option<(String, u16, bool)> {
    let url = effective_url(&parse_url(input.get("url")?.as_str()?).ok()?);
    let local = local_host(&url);
    Some((
        rule_host(&url),
        url.port_or_known_default().unwrap_or(443),
        local,
    ))
}

impl PermissionConfig {
    /// The deny or ask rule among `rules` that reaches this WebFetch call.
    pub(super) fn web_rule_hit<'a>(
        &'a self,
        rules: &'a [Rule],
        tool: &str,
        kind: ToolKind,
        input: &Value,
    ) -> Option<(&'a Rule, String)> {
        let host = target(input).map(|t| t.0);
        rules
            .iter()
            .find(|r| {
                kind.answers_to(&r.tool, tool)
                    && match &host {
                        Some(h) => restrict_match(r, h),
                        // A URL keel cannot read is reached by every rule of the tool.
                        None => true,
                    }
            })
            .map(|r| (r, host.unwrap_or_default()))
    }

    /// The allow rule that reaches `host:port`, and whether it names the host exactly (an
    /// exact name wins over a broader rule).
    fn web_allowed(&self, host: &str, port: u16) -> Option<(&Rule, bool)> {
        let mut found: Option<(&Rule, bool)> = None;
        for r in self.allow.iter().filter(|r| r.tool == "WebFetch") {
            if let Some(named) = allow_match(r, host, port) {
                if named || found.is_none() {
                    found = Some((r, named));
                }
                if named {
                    break;
                }
            }
        }
        found
    }

    /// Decide a WebFetch call no deny rule stopped.
    pub(super) fn decide_web_fetch(&self, tool: &str, input: &Value) -> Decision {
        let Some((host, port, local)) = target(input) else {
            // The tool refuses such a URL itself, without sending anything.
            return Decision::Allow(AllowedBy::ReadOnly);
        };
        let allowed = self.web_allowed(&host, port);
        if local && !allowed.is_some_and(|(_, named)| named) {
            return Decision::Deny {
                message: format!(
                    "{tool} was not run: {host} is a local or private address, which WebFetch reaches only when an allow rule names that host exactly (bypassPermissions and broader rules do not). To allow it, add the rule WebFetch(domain:{host}) (or WebFetch(domain:{host}:{port}) for that port only)."
                ),
            };
        }
        if self.mode == PermissionMode::BypassPermissions {
            return Decision::Allow(AllowedBy::Mode(self.mode));
        }
        match allowed {
            Some((rule, _)) => Decision::Allow(AllowedBy::Rule(rule.text())),
            None => Decision::AskWhy(format!("no rule allows WebFetch to reach {host}")),
        }
    }

    /// Decide a WebSearch call no deny rule stopped: a rule or bypassPermissions allows it,
    /// otherwise it is asked about (plan mode included: it changes nothing here).
    pub(super) fn decide_web_search(&self, tool: &str, kind: ToolKind, input: &Value) -> Decision {
        if self.mode == PermissionMode::BypassPermissions {
            return Decision::Allow(AllowedBy::Mode(self.mode));
        }
        let query = input.get("query").and_then(Value::as_str);
        let rule = self.allow.iter().find(|r| {
            kind.answers_to(&r.tool, tool)
                && match (&r.pattern, query) {
                    (None, _) => true,
                    (Some(p), Some(q)) => super::wildcard_escaped(p, q),
                    (Some(_), None) => false,
                }
        });
        match rule {
            Some(r) => Decision::Allow(AllowedBy::Rule(r.text())),
            None => Decision::Ask,
        }
    }

    /// What the live rules say about WebFetch reaching `host:port` mid-call (a redirect):
    /// nobody can be asked then, so only a rule or bypassPermissions allows it.
    pub fn web_permit(&self, host: &str, port: u16) -> HostPermit {
        let host = canonical_rule_host(host).unwrap_or_else(|| host.to_ascii_lowercase());
        if let Some(r) = self
            .deny
            .iter()
            .find(|r| r.tool == "WebFetch" && restrict_match(r, &host))
        {
            return HostPermit::Refused {
                why: format!("the rule `{}` from {} denies {host}", r.text(), r.source),
            };
        }
        if let Some(r) = self
            .ask
            .iter()
            .find(|r| r.tool == "WebFetch" && restrict_match(r, &host))
        {
            return HostPermit::Ask {
                why: format!("the rule `{}` from {} asks about {host}, and nobody can be asked in the middle of a fetch; call WebFetch with that URL to be asked", r.text(), r.source),
            };
        }
        let allowed = self.web_allowed(&host, port);
        match (allowed, self.mode) {
            (Some((_, named)), _) => HostPermit::Allowed { named },
            (None, PermissionMode::BypassPermissions) => HostPermit::Allowed { named: false },
            (None, _) => HostPermit::Ask {
                why: format!("no permission rule allows WebFetch to reach {host}; call WebFetch with that URL to be asked, or add the rule WebFetch(domain:{host})"),
            },
        }
    }

    /// The rule text that would allow this WebFetch call, for denials and suggestions.
    pub(crate) fn web_suggestion(input: &Value) -> Option<String> {
        target(input).map(|(host, _, _)| format!("domain:{host}"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Decision, PermissionConfig, PermissionMode, Roots, Rule, RuleSource};
    use super::*;
    use serde_json::json;

    fn cfg(mode: PermissionMode, allow: &[&str], deny: &[&str]) -> PermissionConfig {
        let rules = |l: &[&str]| {
            l.iter()
                .map(|r| Rule::parse(r, RuleSource::Flag).unwrap())
                .collect()
        };
        PermissionConfig {
            mode,
            allow: rules(allow),
            deny: rules(deny),
            ask: Vec::new(),
            roots: Roots {
                cwd: std::env::temp_dir(),
                dirs: Vec::new(),
                home: None,
                readable: Vec::new(),
            },
        }
    }

    fn fetch(c: &PermissionConfig, url: &str) -> Decision {
        c.decide(
            "WebFetch",
            ToolKind::WebFetch,
            &json!({"url": url, "prompt": "p"}),
            false,
        )
    }

    #[test]
    fn only_a_rule_for_a_local_host_opens_non_public_addresses() {
        let c = cfg(
            PermissionMode::Default,
            &[
                "WebFetch(domain:attacker.example)",
                "WebFetch(domain:127.0.0.1:8080)",
                "WebFetch(domain:buildbox)",
                "WebFetch(domain:*)",
            ],
            &[],
        );
        let named = |host: &str, port: u16| c.web_allowed(host, port).map(|(_, n)| n);
        // Allowed, but its addresses are still checked: a rebinding to 169.254.169.254 fails.
        assert_eq!(named("attacker.example", 443), Some(false));
        assert_eq!(named("127.0.0.1", 8080), Some(true));
        assert_eq!(named("buildbox", 80), Some(true));
        // A literal `*` host (the url crate takes it) is not named by `domain:*`.
        assert_eq!(named("*", 443), Some(false));
        assert!(matches!(fetch(&c, "https://*/"), Decision::Deny { .. }));
    }

    #[test]
    fn domain_rules_allow_their_host_and_local_hosts_need_an_exact_rule() {
        let c = cfg(
            PermissionMode::Default,
            &["WebFetch(domain:example.com)"],
            &[],
        );
        assert!(matches!(
            fetch(&c, "https://example.com/a"),
            Decision::Allow(_)
        ));
        assert!(matches!(
            fetch(&c, "https://EXAMPLE.com./a"),
            Decision::Allow(_)
        ));
        assert!(matches!(
            fetch(&c, "https://www.example.com/"),
            Decision::AskWhy(_)
        ));
        assert!(matches!(
            fetch(&c, "https://example.org/"),
            Decision::AskWhy(_)
        ));
        let sub = cfg(
            PermissionMode::Default,
            &["WebFetch(domain:*.example.com)"],
            &[],
        );
        assert!(matches!(
            fetch(&sub, "https://docs.example.com/"),
            Decision::Allow(_)
        ));
        assert!(matches!(
            fetch(&sub, "https://badexample.com/"),
            Decision::AskWhy(_)
        ));

        // Local addresses: not by a bare rule, not by bypass, not by a wildcard.
        for c in [
            cfg(PermissionMode::Default, &["WebFetch"], &[]),
            cfg(PermissionMode::BypassPermissions, &[], &[]),
            cfg(PermissionMode::Default, &["WebFetch(domain:*)"], &[]),
        ] {
            for url in [
                "http://127.0.0.1:8080/",
                "http://localhost/",
                "http://169.254.169.254/latest/meta-data/",
                "http://10.0.0.1/",
                "http://[::1]/",
                "http://[::ffff:127.0.0.1]/",
                "http://2130706433/",
                "http://intranet/",
            ] {
                assert!(
                    matches!(fetch(&c, url), Decision::Deny { .. }),
                    "{url}: {:?}",
                    fetch(&c, url)
                );
            }
            assert!(matches!(
                fetch(&c, "https://example.com/"),
                Decision::Allow(_)
            ));
        }
        let exact = cfg(
            PermissionMode::Default,
            &["WebFetch(domain:127.0.0.1:8080)"],
            &[],
        );
        assert!(matches!(
            fetch(&exact, "http://127.0.0.1:8080/x"),
            Decision::Allow(_)
        ));
        assert!(matches!(
            fetch(&exact, "http://127.0.0.1:9090/x"),
            Decision::Deny { .. }
        ));
        assert_eq!(
            exact.web_permit("127.0.0.1", 8080),
            HostPermit::Allowed { named: true }
        );
    }

    #[test]
    fn deny_rules_cover_subdomains_and_redirect_hosts() {
        let c = cfg(
            PermissionMode::BypassPermissions,
            &[],
            &["WebFetch(domain:evil.test)"],
        );
        assert!(matches!(
            fetch(&c, "https://evil.test/"),
            Decision::Deny { .. }
        ));
        assert!(matches!(
            fetch(&c, "https://a.evil.test:444/"),
            Decision::Deny { .. }
        ));
        assert!(matches!(
            c.web_permit("x.evil.test", 443),
            HostPermit::Refused { .. }
        ));
        assert_eq!(
            c.web_permit("fine.test", 443),
            HostPermit::Allowed { named: false }
        );
        let d = cfg(PermissionMode::Default, &["WebFetch(domain:a.test)"], &[]);
        assert!(matches!(
            d.web_permit("b.test", 443),
            HostPermit::Ask { .. }
        ));
        assert!(Rule::parse("WebFetch(https://x)", RuleSource::Flag).is_err());
        assert!(Rule::parse("WebFetch(domain:[::1]:80)", RuleSource::Flag).is_ok());
    }

    #[test]
    fn headless_denial_names_the_domain_rule() {
        let c = cfg(PermissionMode::Default, &[], &[]);
        let input = json!({"url": "https://docs.example.com/x", "prompt": "p"});
        let msg = c.headless_denial("WebFetch", ToolKind::WebFetch, &input, None);
        assert!(msg.contains("WebFetch(domain:docs.example.com)"), "{msg}");
        let s = c.decide(
            "WebSearch",
            ToolKind::WebSearch,
            &json!({"query": "q"}),
            false,
        );
        assert_eq!(s, Decision::Ask);
        let s = cfg(PermissionMode::Plan, &["WebSearch"], &[]);
        assert!(matches!(
            s.decide(
                "WebSearch",
                ToolKind::WebSearch,
                &json!({"query": "q"}),
                false
            ),
            Decision::Allow(_)
        ));
    }

    #[test]
    fn deny_rules_on_an_address_reach_every_spelling_of_it() {
        for rule in [
            "WebFetch(domain:8.8.8.8)",
            "WebFetch(domain:::ffff:8.8.8.8)",
            "WebFetch(domain:[::ffff:8.8.8.8])",
            "WebFetch(domain:0x8.8.8.8)",
            "WebFetch(domain:134744072)",
        ] {
            let c = cfg(PermissionMode::BypassPermissions, &[], &[rule]);
            for url in [
                "https://8.8.8.8/",
                "https://[::ffff:8.8.8.8]/",
                "https://[::ffff:808:808]/",
                "https://[::8.8.8.8]/",
                "http://134744072/",
                "http://0x8.8.8.8/",
                "http://0x08080808/",
                "http://010.8.8.8/",
                "http://8.8.8.8./",
                "http://8.8.8.8.:8443/",
            ] {
                assert!(
                    matches!(fetch(&c, url), Decision::Deny { .. }),
                    "{rule} {url}: {:?}",
                    fetch(&c, url)
                );
            }
            assert!(matches!(
                c.web_permit("::ffff:8.8.8.8", 443),
                HostPermit::Refused { .. }
            ));
            assert!(matches!(fetch(&c, "https://8.8.4.4/"), Decision::Allow(_)));
        }
        // `::1` is IPv6's loopback, not the IPv4 address 0.0.0.1.
        assert_eq!(
            keel_tools::web::canonical_rule_host("::1").as_deref(),
            Some("::1")
        );
        assert_eq!(
            keel_tools::web::canonical_rule_host("Example.COM.").as_deref(),
            Some("example.com")
        );
    }

    #[test]
    fn a_rule_for_port_80_does_not_open_the_https_upgrade() {
        let c = cfg(
            PermissionMode::Default,
            &["WebFetch(domain:example.com:80)"],
            &[],
        );
        // The fetch goes to https on 443: that is what is judged.
        assert!(matches!(
            fetch(&c, "http://example.com/"),
            Decision::AskWhy(_)
        ));
        assert!(matches!(
            fetch(&c, "http://example.com:80/"),
            Decision::AskWhy(_)
        ));
        let https = cfg(
            PermissionMode::Default,
            &["WebFetch(domain:example.com:443)"],
            &[],
        );
        assert!(matches!(
            fetch(&https, "http://example.com/"),
            Decision::Allow(_)
        ));
        // An explicit port is kept by the upgrade, so its rule still reaches it.
        let odd = cfg(
            PermissionMode::Default,
            &["WebFetch(domain:example.com:8080)"],
            &[],
        );
        assert!(matches!(
            fetch(&odd, "http://example.com:8080/"),
            Decision::Allow(_)
        ));
        // A local host a rule names stays on plain http: its port-80 rule still holds.
        let local = cfg(
            PermissionMode::Default,
            &["WebFetch(domain:127.0.0.1:80)"],
            &[],
        );
        assert!(matches!(
            fetch(&local, "http://127.0.0.1/"),
            Decision::Allow(_)
        ));
    }
}
