//! One level of an S3 bucket listed by a ListObjectsV2 request of our own,
//! its keys as raw strings.
//!
//! `object_store` turns each page of a listing into its `Path`s at once, so
//! one key it cannot represent (an empty segment as in `a//b`, a `.` or
//! `..` segment, a control character) fails the whole listing. Anyone who
//! can write the bucket can put such a key, so [`ObjectStorage`]'s listing
//! falls back to this one, which returns every key and leaves it to the
//! caller to skip those it cannot represent.
//!
//! The request is signed as `object_store` signs its own (SigV4, with the
//! store's credentials) and asks for URL-encoded keys (`encoding-type=url`):
//! a key may hold characters an XML document cannot.
//!
//! [`ObjectStorage`]: super::ObjectStorage

use std::sync::Arc;

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, AwsAuthorizer};
use object_store::client::{HttpClient, HttpConnector as _, HttpRequest, HttpRequestBody, ReqwestConnector};
use object_store::{ClientConfigKey, ClientOptions};
use serde::Deserialize;

/// The most pages one listing reads (1,000 keys each): a store that keeps
/// answering with a continuation token does not hold the caller forever.
const MAX_PAGES: usize = 10_000;

/// The client options that carry over from the store's configuration: how
/// it is reached (TLS, proxy, timeouts).
const CLIENT_KEYS: [ClientConfigKey; 8] = [
    ClientConfigKey::AllowHttp,
    ClientConfigKey::AllowInvalidCertificates,
    ClientConfigKey::ConnectTimeout,
    ClientConfigKey::Timeout,
    ClientConfigKey::ProxyUrl,
    ClientConfigKey::ProxyCaCertificate,
    ClientConfigKey::ProxyExcludes,
    ClientConfigKey::UserAgent,
];

/// Lists a bucket as the store `s3` sees it.
#[derive(Debug)]
pub(super) struct S3Lister {
    /// The store, for its credentials (they may rotate).
    s3: Arc<AmazonS3>,
    /// An HTTP client configured as the store's.
    client: HttpClient,
    /// The bucket's URL, as the store addresses it.
    bucket_url: String,
    /// The region requests are signed for.
    region: String,
}

/// The keys one level under a prefix, as the store holds them.
#[derive(Debug, Default)]
pub(super) struct RawListing {
    /// Objects directly under the prefix.
    pub(super) objects: Vec<String>,
    /// Deeper keys' common prefixes ("directories"), each ending in `/`.
    pub(super) prefixes: Vec<String>,
    /// Keys and prefixes that did not decode to UTF-8 (S3 keys are UTF-8:
    /// only a store that is not S3 gives them), left out.
    pub(super) undecodable: usize,
}

/// A ListObjectsV2 answer (the fields used).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Page {
    #[serde(default)]
    contents: Vec<Object>,
    #[serde(default)]
    common_prefixes: Vec<CommonPrefix>,
    #[serde(default)]
    next_continuation_token: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Object {
    key: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct CommonPrefix {
    prefix: String,
}

/// A listing answered with a status other than success.
#[derive(Debug, thiserror::Error)]
#[error("listing {prefix}: status {status}: {answer}")]
pub(super) struct StatusError {
    /// The listed prefix.
    prefix: String,
    /// The HTTP status.
    pub(super) status: u16,
    /// The start of the answer's body.
    answer: String,
}

fn generic(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> object_store::Error {
    object_store::Error::Generic {
        store: "S3",
        source: source.into(),
    }
}

impl S3Lister {
    /// The lister for `s3`, built from `builder`: `None` for an S3 Express
    /// bucket, whose requests need session credentials.
    ///
    /// # Errors
    ///
    /// When the HTTP client cannot be built.
    pub(super) fn new(builder: &AmazonS3Builder, s3: Arc<AmazonS3>) -> object_store::Result<Option<Self>> {
        let config = |key: AmazonS3ConfigKey| builder.get_config_value(&key);
        if config(AmazonS3ConfigKey::S3Express).is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let mut options = ClientOptions::new();
        for key in CLIENT_KEYS {
            if let Some(value) = config(AmazonS3ConfigKey::Client(key)) {
                options = options.with_config(key, value);
            }
        }
        let client = ReqwestConnector::default().connect(&options)?;
        let bucket = config(AmazonS3ConfigKey::Bucket).unwrap_or_default();
        let region = config(AmazonS3ConfigKey::Region).unwrap_or_else(|| "us-east-1".to_owned());
        let virtual_hosted = config(AmazonS3ConfigKey::VirtualHostedStyleRequest)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        // As the store addresses the bucket (`AmazonS3Builder::build`).
        let endpoint = config(AmazonS3ConfigKey::S3Endpoint).or_else(|| config(AmazonS3ConfigKey::Endpoint));
        let bucket_url = match (endpoint, virtual_hosted) {
            (Some(endpoint), true) => endpoint,
            (Some(endpoint), false) => format!("{}/{bucket}", endpoint.trim_end_matches('/')),
            (None, true) => format!("https://{bucket}.s3.{region}.amazonaws.com"),
            (None, false) => format!("https://s3.{region}.amazonaws.com/{bucket}"),
        };
        Ok(Some(Self {
            s3,
            client,
            bucket_url: bucket_url.trim_end_matches('/').to_owned(),
            region,
        }))
    }

    /// The keys directly under `prefix` (a store path: empty, or ending in
    /// `/`), every page of them.
    ///
    /// # Errors
    ///
    /// When a request fails or an answer does not parse.
    pub(super) async fn list(&self, prefix: &str) -> object_store::Result<RawListing> {
        let mut listing = RawListing::default();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let page = self.page(prefix, token.as_deref()).await?;
            for object in page.contents {
                match decode(&object.key) {
                    Some(key) => listing.objects.push(key),
                    None => listing.undecodable += 1,
                }
            }
            for prefix in page.common_prefixes {
                match decode(&prefix.prefix) {
                    Some(prefix) => listing.prefixes.push(prefix),
                    None => listing.undecodable += 1,
                }
            }
            match page.next_continuation_token {
                Some(next) if !next.is_empty() => token = Some(next),
                _ => return Ok(listing),
            }
        }
        Err(generic(format!("listing {prefix}: more than {MAX_PAGES} pages")))
    }

    async fn page(&self, prefix: &str, token: Option<&str>) -> object_store::Result<Page> {
        let mut url = format!(
            "{}?list-type=2&delimiter=%2F&encoding-type=url&prefix={}",
            self.bucket_url,
            encode(prefix)
        );
        if let Some(token) = token {
            url.push_str("&continuation-token=");
            url.push_str(&encode(token));
        }
        let mut request = HttpRequest::new(HttpRequestBody::empty());
        *request.uri_mut() = url.parse().map_err(generic)?;
        let credential = self.s3.credentials().get_credential().await?;
        AwsAuthorizer::new(&credential, "s3", &self.region).try_authorize(&mut request, None)?;
        let response = self.client.execute(request).await.map_err(generic)?;
        let status = response.status();
        let body = response.into_body().bytes().await.map_err(generic)?;
        if !status.is_success() {
            let answer = String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned();
            return Err(generic(StatusError {
                prefix: prefix.to_owned(),
                status: status.as_u16(),
                answer,
            }));
        }
        quick_xml::de::from_reader(&body[..]).map_err(generic)
    }
}

/// `value` percent-encoded for a query string (all but the unreserved
/// characters of RFC 3986, section 2.3).
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A key as `encoding-type=url` gives it, decoded: `%XX` is a byte and `+`
/// a space (S3 encodes a space so; a `+` comes as `%2B`). A malformed escape
/// is kept as it is. `None` when the bytes are not UTF-8.
fn decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let escaped = (b == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match (b, escaped) {
            (_, Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', None) => {
                out.push(b' ');
                i += 1;
            }
            (b, None) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_decode_as_s3_encodes_them() {
        let decoded = |s: &str| decode(s).unwrap();
        assert_eq!(decoded("p/lists/a/del%7Fx"), "p/lists/a/del\u{7f}x");
        assert_eq!(decoded("sp+ace%20and%2Bplus"), "sp ace and+plus");
        assert_eq!(decoded("caf%C3%A9"), "café");
        // A malformed escape is kept; a cut one too.
        assert_eq!(decoded("100%zz%4"), "100%zz%4");
        assert_eq!(decode("half%C3"), None);
        assert_eq!(encode("p/a b+é~"), "p%2Fa%20b%2B%C3%A9~");
    }

    #[test]
    fn a_page_parses_with_its_keys_and_token() {
        let xml = r#"<?xml version="1.0" encoding="utf-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>true</IsTruncated>
<Contents><Key>p/a/ok</Key><Size>1</Size></Contents><Contents><Key>p/a/del%7Fx</Key></Contents>
<Name>b</Name><Prefix>p/a/</Prefix><CommonPrefixes><Prefix>p/a//</Prefix></CommonPrefixes>
<NextContinuationToken>t+1</NextContinuationToken></ListBucketResult>"#;
        let page: Page = quick_xml::de::from_str(xml).unwrap();
        let keys: Vec<_> = page.contents.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["p/a/ok", "p/a/del%7Fx"]);
        assert_eq!(page.common_prefixes[0].prefix, "p/a//");
        assert_eq!(page.next_continuation_token.as_deref(), Some("t+1"));
    }
}
