//! Request headers of a `url` source ([`SourceConfig::headers`]): an API
//! key a feed asks for (`Auth-Key`, `Authorization`, `X-API-Key`), written
//! in the file or read from an environment variable at start
//! ([`HeaderValueConfig`]).
//!
//! A value is never shown: its `Debug` is `***`, refusals name the header
//! and the variable but not what they hold, and `check-config` lists the
//! names only.

use std::collections::BTreeMap;
use std::fmt;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;

use crate::Error;

/// Headers a source may not set: the publisher sets them itself (`Host`,
/// the conditional GET's validators, `Accept-Encoding` for gzip) or they
/// govern the transfer (`Content-Length`, `Transfer-Encoding`,
/// `Connection`, `Range`, and the other conditionals, which would turn the
/// fetch into a partial or a `412`). Lowercase, as [`HeaderName`] is.
pub const RESERVED_HEADERS: [&str; 11] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "range",
    "accept-encoding",
    "if-none-match",
    "if-modified-since",
    "if-match",
    "if-unmodified-since",
    "if-range",
];

/// Looks an environment variable up: `std::env::var` when a publisher
/// starts, a table in tests.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment, as [`EnvLookup`] (a variable that is not
/// UTF-8 counts as not set).
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// One header's value: a literal string (`"Auth-Key" = "…"`), or the value
/// of an environment variable (`"Auth-Key" = { env = "ABUSECH_AUTH_KEY" }`),
/// read when the configuration is resolved ([`super::Config::resolve`]).
///
/// Its `Debug` never shows the value, only where it comes from.
#[derive(Clone, PartialEq, Eq)]
pub struct HeaderValueConfig {
    /// The environment variable, when the value comes from one.
    env: Option<String>,
    /// The value: a literal's, or the variable's once resolved.
    value: Option<String>,
}

impl HeaderValueConfig {
    /// A value written in the configuration.
    pub fn literal(value: impl Into<String>) -> Self {
        Self {
            env: None,
            value: Some(value.into()),
        }
    }

    /// A value read from environment variable `name` at start.
    pub fn env(name: impl Into<String>) -> Self {
        Self {
            env: Some(name.into()),
            value: None,
        }
    }

    /// The environment variable the value comes from, if it does.
    pub fn env_var(&self) -> Option<&str> {
        self.env.as_deref()
    }

    /// The value: a literal's, a resolved variable's, else the variable's
    /// in `env`.
    fn value_in(&self, env: EnvLookup<'_>) -> Option<String> {
        match (&self.value, &self.env) {
            (Some(v), _) => Some(v.clone()),
            (None, Some(var)) => env(var),
            (None, None) => None,
        }
    }

    /// Reads the variable, if the value comes from one and is not read yet.
    pub(super) fn resolve(&mut self, env: EnvLookup<'_>) {
        if self.value.is_none()
            && let Some(var) = &self.env
        {
            self.value = env(var).filter(|v| !v.is_empty());
        }
    }

    /// Where the value comes from, as `check-config` shows it: `from
    /// $VAR`, or `in the file`.
    pub fn origin(&self) -> String {
        match &self.env {
            Some(var) => format!("from ${var}"),
            None => "in the file".to_owned(),
        }
    }
}

impl fmt::Debug for HeaderValueConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.env {
            Some(var) => write!(f, "{{ env = {var:?}, value = *** }}"),
            None => f.write_str("***"),
        }
    }
}

/// What a value may be written as, for serde's messages.
const EXPECTED_VALUE: &str = "a string, or { env = \"VARIABLE\" }";

impl<'de> Deserialize<'de> for HeaderValueConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = HeaderValueConfig;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(EXPECTED_VALUE)
            }

            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Self::Value, E> {
                Ok(HeaderValueConfig::literal(value))
            }

            // A number or a boolean may be a key: serde's own message would
            // quote it.
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Err(not_a_value())
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Err(not_a_value())
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Err(not_a_value())
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Err(not_a_value())
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut env = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key != "env" || env.is_some() {
                        return Err(serde::de::Error::custom(format!(
                            "unknown or repeated key {key:?} in a header value: expected {EXPECTED_VALUE}"
                        )));
                    }
                    env = Some(map.next_value::<String>()?);
                }
                env.map(HeaderValueConfig::env)
                    .ok_or_else(|| serde::de::Error::custom(format!("expected {EXPECTED_VALUE}")))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// A header value of another type, not quoted.
fn not_a_value<E: serde::de::Error>() -> E {
    E::custom(format!(
        "a header value must be {EXPECTED_VALUE} (the value is not shown)"
    ))
}

/// [`SourceConfig::headers`]: a table of header name to value; anything
/// else is refused without quoting it (it may be a key written in the
/// wrong place).
pub(super) fn deserialize_headers<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, HeaderValueConfig>, D::Error> {
    struct Visitor;
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = BTreeMap<String, HeaderValueConfig>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a table of header name = value")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((name, value)) = map.next_entry::<String, HeaderValueConfig>()? {
                out.insert(name, value);
            }
            Ok(out)
        }

        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Err(E::custom(
                "`headers` must be a table of header name = value, e.g. { \"Auth-Key\" = { env = \"VARIABLE\" } } (the string is not shown)",
            ))
        }
    }
    deserializer.deserialize_map(Visitor)
}

/// A TOML parse error of configuration `text` as shown: toml's own, which
/// quotes the offending line, unless the file sets `headers`, where that
/// line may hold a header's value: then its position and message only.
pub(super) fn parse_error(text: &str, e: &toml::de::Error) -> String {
    if !text.contains("headers") {
        return e.to_string();
    }
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!(
                "TOML parse error at line {line}, column {column} (the line is not shown: it may hold a header's value): {}",
                e.message()
            )
        }
        None => e.message().to_owned(),
    }
}

/// Checks the `headers` of a source, `field` naming it
/// (`lists.<name>.sources[i]`), reading variables from `env`; `read` says
/// what the source is when it is read rather than fetched (`a file`).
pub(super) fn check_headers(
    field: &str,
    headers: &BTreeMap<String, HeaderValueConfig>,
    read: Option<&str>,
    env: EnvLookup<'_>,
) -> Result<(), Error> {
    if headers.is_empty() {
        return Ok(());
    }
    if let Some(what) = read {
        return Err(Error::config(
            format!("{field}.headers"),
            format!("applies to `url` sources only: {what} is read, not fetched"),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for (name, value) in headers {
        let Ok(parsed) = HeaderName::from_bytes(name.as_bytes()) else {
            return Err(Error::config(
                format!("{field}.headers"),
                format!(
                    "{name:?} is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)"
                ),
            ));
        };
        let field = format!("{field}.headers.{name}");
        if RESERVED_HEADERS.contains(&parsed.as_str()) {
            return Err(Error::config(
                field,
                "is set by the publisher or governs the fetch (Host, Content-Length, Transfer-Encoding, \
                 Connection, Range, Accept-Encoding, If-None-Match, If-Modified-Since, If-Match, \
                 If-Unmodified-Since, If-Range): a source cannot set it",
            ));
        }
        if !seen.insert(parsed) {
            return Err(Error::config(
                field,
                "named twice (header names are case-insensitive)",
            ));
        }
        let from = match &value.env {
            Some(var) => {
                if var.is_empty() || var.contains(['=', '\0']) {
                    return Err(Error::config(
                        field,
                        format!("{var:?} is not an environment variable name"),
                    ));
                }
                match value.value_in(env) {
                    None => {
                        return Err(Error::config(
                            field,
                            format!("environment variable ${var} is not set"),
                        ));
                    }
                    Some(v) if v.is_empty() => {
                        return Err(Error::config(
                            field,
                            format!("environment variable ${var} is empty"),
                        ));
                    }
                    Some(_) => format!("environment variable ${var}"),
                }
            }
            None => "value".to_owned(),
        };
        let text = value.value_in(env).unwrap_or_default();
        if text.is_empty() {
            return Err(Error::config(field, "the value is empty"));
        }
        if HeaderValue::from_str(&text).is_err() {
            return Err(Error::config(
                field,
                format!(
                    "the {from} is not a valid HTTP header value: printable characters, spaces and tabs only, \
                     no line break or control character (the value is not shown)"
                ),
            ));
        }
    }
    Ok(())
}

/// The request headers of `headers`, each value marked sensitive; an
/// error names a header whose value is missing or not valid (never the
/// value).
pub(super) fn request_headers(headers: &BTreeMap<String, HeaderValueConfig>) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("header {name:?}: not a valid name"))?;
        let Some(text) = &value.value else {
            return Err(format!("header {name}: {} was not read at start", value.origin()));
        };
        let mut text =
            HeaderValue::from_str(text).map_err(|_| format!("header {name}: not a valid value"))?;
        text.set_sensitive(true);
        map.insert(name, text);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, SourceConfig, SourceFormat};

    const SECRET: &str = "s3cr3t-value-never-shown";

    fn env_with(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn config(headers: &str) -> Config {
        toml::from_str(&format!(
            "[[lists]]\nname = \"p\"\nsources = [{{ url = \"https://feed.example/u.txt\", format = \"urls\", headers = {headers} }}]\n"
        ))
        .unwrap()
    }

    /// Why `config(headers)` is refused with `env`: the field and reason.
    fn refusal(headers: &str, env: EnvLookup<'_>) -> (String, String) {
        match config(headers).validate_with(env) {
            Err(Error::Config { field, reason }) => (field, reason),
            other => panic!("{headers}: {other:?}"),
        }
    }

    #[test]
    fn a_literal_and_an_env_value_parse_and_the_env_one_is_read_at_resolve() {
        let env = env_with(&[("BLOCKSIEVE_TEST_KEY", SECRET)]);
        let c = config(&format!(
            "{{ \"Auth-Key\" = {{ env = \"BLOCKSIEVE_TEST_KEY\" }}, \"X-API-Key\" = \"{SECRET}\" }}"
        ));
        let source = &c.lists[0].sources[0];
        assert_eq!(source.headers["Auth-Key"].env_var(), Some("BLOCKSIEVE_TEST_KEY"));
        assert_eq!(source.headers["X-API-Key"].env_var(), None);
        // Not read yet: fetching it would fail, naming the variable.
        let err = source.request_headers().unwrap_err();
        assert_eq!(
            err,
            "header auth-key: from $BLOCKSIEVE_TEST_KEY was not read at start"
        );
        let settings = c.resolve_with(&env).unwrap();
        let map = settings.lists[0].sources[0].request_headers().unwrap();
        assert_eq!(map["auth-key"], SECRET);
        assert_eq!(map["x-api-key"], SECRET);
        assert!(map["auth-key"].is_sensitive());
    }

    #[test]
    fn debug_of_the_configuration_never_shows_a_value() {
        let env = env_with(&[("BLOCKSIEVE_TEST_KEY", SECRET)]);
        let c = config(&format!(
            "{{ \"Auth-Key\" = {{ env = \"BLOCKSIEVE_TEST_KEY\" }}, Authorization = \"Bearer {SECRET}\" }}"
        ));
        let text = format!("{c:?}");
        assert!(!text.contains(SECRET), "{text}");
        let settings = c.resolve_with(&env).unwrap();
        for text in [format!("{settings:?}"), format!("{settings:#?}")] {
            assert!(!text.contains(SECRET), "{text}");
            assert!(
                text.contains("Auth-Key") && text.contains("BLOCKSIEVE_TEST_KEY"),
                "{text}"
            );
        }
        let map = settings.lists[0].sources[0].request_headers().unwrap();
        assert!(!format!("{map:?}").contains(SECRET));
    }

    #[test]
    fn each_refusal_names_the_field_and_why_without_the_value() {
        let none = env_with(&[("EMPTY_VAR", ""), ("BAD_VAR", "a\nb")]);
        for (headers, field, says) in [
            (
                "{ \"Bad Name\" = \"x\" }".to_owned(),
                "lists.p.sources[0].headers",
                "\"Bad Name\" is not a valid HTTP header name",
            ),
            (
                format!("{{ \"X-Key\" = \"a\\r\\nInjected: {SECRET}\" }}"),
                "lists.p.sources[0].headers.X-Key",
                "the value is not a valid HTTP header value",
            ),
            (
                "{ \"X-Key\" = \"\" }".to_owned(),
                "lists.p.sources[0].headers.X-Key",
                "the value is empty",
            ),
            (
                "{ \"Auth-Key\" = { env = \"BLOCKSIEVE_UNSET_VAR\" } }".to_owned(),
                "lists.p.sources[0].headers.Auth-Key",
                "environment variable $BLOCKSIEVE_UNSET_VAR is not set",
            ),
            (
                "{ \"Auth-Key\" = { env = \"EMPTY_VAR\" } }".to_owned(),
                "lists.p.sources[0].headers.Auth-Key",
                "environment variable $EMPTY_VAR is empty",
            ),
            (
                "{ \"Auth-Key\" = { env = \"BAD_VAR\" } }".to_owned(),
                "lists.p.sources[0].headers.Auth-Key",
                "the environment variable $BAD_VAR is not a valid HTTP header value",
            ),
            (
                "{ \"X-Key\" = \"a\", \"x-key\" = \"b\" }".to_owned(),
                "lists.p.sources[0].headers.x-key",
                "named twice",
            ),
        ] {
            let (f, reason) = refusal(&headers, &none);
            assert_eq!(f, field, "{headers}");
            assert!(reason.contains(says), "{headers}: {reason}");
            assert!(
                !reason.contains(SECRET) && !reason.contains("Injected"),
                "{reason}"
            );
        }
        for reserved in [
            "Host",
            "content-length",
            "Transfer-Encoding",
            "CONNECTION",
            "Range",
            "Accept-Encoding",
            "If-None-Match",
            "if-modified-since",
            "If-Match",
            "If-Unmodified-Since",
            "If-Range",
        ] {
            let (f, reason) = refusal(&format!("{{ \"{reserved}\" = \"x\" }}"), &none);
            assert_eq!(f, format!("lists.p.sources[0].headers.{reserved}"));
            assert!(reason.contains("a source cannot set it"), "{reason}");
        }
        // Headers are fetched with: a file or the built-in list has none.
        for source in ["path = \"a.txt\"", "builtin = true"] {
            let c: Config = toml::from_str(&format!(
                "[[lists]]\nname = \"p\"\nsources = [{{ {source}, format = \"urls\", headers = {{ \"X-Key\" = \"x\" }} }}]\n"
            ))
            .unwrap();
            match c.validate_with(&none) {
                Err(Error::Config { field, reason }) => {
                    assert_eq!(field, "lists.p.sources[0].headers");
                    assert!(reason.contains("applies to `url` sources only"), "{reason}");
                }
                other => panic!("{other:?}"),
            }
        }
        // An allowlist is checked as a source.
        let c: Config = toml::from_str(
            "[[lists]]\nname = \"p\"\nsources = [{ path = \"a.txt\", format = \"urls\" }]\n\
             allow = [{ url = \"https://a.example/ok\", format = \"domains\", headers = { Host = \"x\" } }]\n",
        )
        .unwrap();
        match c.validate_with(&none) {
            Err(Error::Config { field, .. }) => assert_eq!(field, "lists.p.allow[0].headers.Host"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_value_of_another_shape_is_refused_at_parse_without_quoting_it() {
        for (headers, says) in [
            ("\"Auth-Key: 8675309\"", "must be a table"),
            ("{ \"Auth-Key\" = 8675309 }", "a header value must be"),
            (
                "{ \"Auth-Key\" = { var = \"X\" } }",
                "unknown or repeated key \"var\"",
            ),
            ("{ \"Auth-Key\" = {} }", "expected a string, or { env"),
        ] {
            let text = format!(
                "[[lists]]\nname = \"p\"\nsources = [{{ url = \"https://a.example/\", format = \"urls\", headers = {headers} }}]\n"
            );
            let err = toml::from_str::<Config>(&text).unwrap_err();
            assert!(err.message().contains(says), "{headers}: {}", err.message());
            assert!(!err.message().contains("8675309"), "{}", err.message());
        }
    }

    #[test]
    fn a_parse_error_in_a_file_with_headers_does_not_quote_its_line() {
        let text = format!(
            "[[lists]]\nname = \"p\"\nsources = [{{ url = \"https://a.example/\", format = \"urlz\", headers = {{ \"X-Key\" = \"{SECRET}\" }} }}]\n"
        );
        let e = toml::from_str::<Config>(&text).unwrap_err();
        assert!(e.to_string().contains(SECRET), "toml quotes the line: {e}");
        let shown = parse_error(&text, &e);
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(
            shown.starts_with("TOML parse error at line 3, column "),
            "{shown}"
        );
        assert!(shown.contains("urlz"), "{shown}");
    }

    #[test]
    fn a_source_without_headers_is_as_before() {
        let s = SourceConfig::http("https://a.example/", SourceFormat::Urls);
        assert!(s.headers.is_empty());
        assert!(s.request_headers().unwrap().is_empty());
        s.check_headers("s", &|_| None).unwrap();
    }
}
