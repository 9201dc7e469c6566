//! [`Storage`] on an object store (`object_store`): S3 and S3-compatible
//! stores (with the `aws` feature), or any other [`ObjectStore`].
//!
//! Keys are those of the data directory ([`crate::storage`]), under the
//! store's prefix: `s3://bucket/prefix` holds `prefix/lists/<name>/builds/<build>.snapshot`
//! where a data directory holds `lists/<name>/builds/<build>.snapshot`, so a
//! bucket holds what a data directory holds. The signing key and the lock
//! stay in the local data directory.
//!
//! [`PutMode::Create`] is `object_store`'s `PutMode::Create` (`If-None-Match:
//! *`), [`PutMode::Update`] its `PutMode::Update` (`If-Match` on the ETag).
//! A store that ignores those headers would let two writers replace each
//! other's objects unseen, so [`check_conditional_writes`] tries both on a
//! scratch key when the publisher starts and refuses such a store.
//!
//! [`Storage`]'s calls block; `object_store`'s are async. Each call runs on
//! a small runtime of the store's own and the calling thread waits for it,
//! so calls work from any thread: the publisher's blocking pool, a plain
//! thread, or (briefly blocking it) an async task.
//!
//! A listing skips the keys `object_store` cannot represent as a path (an
//! empty segment as in `a//b`, a `.` or `..` segment, a control
//! character): anyone who can write the bucket can put one, and it must not
//! hide the others. `object_store` fails a whole S3 listing for one such
//! key, so an S3 listing that fails so is made again by a request of our own
//! ([`s3_list`]), whose keys are checked one by one.

use std::future::Future;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use object_store::path::{Path, PathPart};
use object_store::{ObjectStore, ObjectStoreExt as _, PutOptions, PutPayload, UpdateVersion};

use crate::error::{Error, StoreFailure};
use crate::storage::{Conditional, PutMode, Storage, Version};

#[cfg(feature = "aws")]
mod s3_list;

/// A configuration error of the `store` field.
#[cfg(feature = "aws")]
fn store_config(e: &dyn std::fmt::Display) -> Error {
    Error::Config {
        field: "store".to_owned(),
        reason: e.to_string(),
    }
}

/// [`Storage`] on an [`ObjectStore`], every key under a prefix.
#[derive(Debug)]
pub struct ObjectStorage {
    store: Arc<dyn ObjectStore>,
    /// The keys' common prefix in the store (may be empty).
    prefix: Path,
    /// The store as configured (`s3://bucket/prefix`), for messages.
    name: String,
    runtime: Bridge,
    /// For an S3 store: the listing made when `object_store`'s fails on a
    /// key it cannot represent.
    #[cfg(feature = "aws")]
    raw_listing: Option<Arc<s3_list::S3Lister>>,
}

/// One level of keys, as `object_store` or a raw S3 listing gives them.
enum Listed {
    Paths(object_store::ListResult),
    #[cfg(feature = "aws")]
    Raw(s3_list::RawListing),
}

/// The runtime [`ObjectStorage`]'s requests run on.
#[derive(Debug)]
struct Bridge(Option<tokio::runtime::Runtime>);

impl Drop for Bridge {
    fn drop(&mut self) {
        // Dropping a runtime waits for its tasks, which is not allowed
        // from async code; the publisher may drop its storage there.
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl ObjectStorage {
    /// `store`'s keys under `prefix` (`/`-separated, may be empty); `name`
    /// names the store in messages (its URL).
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the store's runtime cannot be started.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str, name: &str) -> Result<Self, Error> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("blocksieve-store")
            .enable_all()
            .build()
            .map_err(|e| Error::Store {
                store: name.to_owned(),
                key: String::new(),
                kind: StoreFailure::Other,
                answer: format!("starting its runtime: {e}"),
            })?;
        Ok(Self {
            store,
            prefix: split(prefix).collect(),
            name: name.to_owned(),
            runtime: Bridge(Some(runtime)),
            #[cfg(feature = "aws")]
            raw_listing: None,
        })
    }

    /// The S3 (or S3-compatible) store at `url`, `s3://bucket/prefix`,
    /// configured from the `AWS_*` environment variables and then `options`
    /// (keys of `object_store`'s `AmazonS3ConfigKey`: `endpoint`, `region`,
    /// `allow_http`, `access_key_id`, ...).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a URL or option the store's client refuses.
    #[cfg(feature = "aws")]
    pub fn s3<'a>(
        url: &str,
        options: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Result<Self, Error> {
        let (builder, prefix) = Self::s3_builder(url, options)?;
        let store = Arc::new(builder.clone().build().map_err(|e| store_config(&e))?);
        let raw_listing = s3_list::S3Lister::new(&builder, store.clone()).map_err(|e| store_config(&e))?;
        Ok(Self {
            raw_listing: raw_listing.map(Arc::new),
            ..Self::new(store, prefix, url)?
        })
    }

    /// The client of the S3 store at `url` (`s3://bucket/prefix`) as
    /// [`Self::s3`] configures it, and the prefix; nothing is asked of the
    /// store.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a URL that is not `s3://`, or an option key
    /// the client does not know (`store_options.<key>`).
    #[cfg(feature = "aws")]
    fn s3_builder<'a, 'u>(
        url: &'u str,
        options: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Result<(object_store::aws::AmazonS3Builder, &'u str), Error> {
        use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
        let Some(rest) = url.strip_prefix("s3://") else {
            return Err(store_config(&"not an s3:// URL"));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        for (key, value) in options {
            let key: AmazonS3ConfigKey = key.parse().map_err(|e| Error::Config {
                field: format!("store_options.{key}"),
                reason: format!("{e}"),
            })?;
            builder = builder.with_config(key, value);
        }
        Ok((builder, prefix))
    }

    /// Checks the S3 store's URL and options as [`Self::s3`] would take
    /// them (the client built, nothing asked of the store): what
    /// `check-config` and the configuration's validation refuse before
    /// `serve` would.
    ///
    /// # Errors
    ///
    /// As [`Self::s3`], short of reaching the store.
    #[cfg(feature = "aws")]
    pub fn check_s3<'a>(
        url: &str,
        options: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Result<(), Error> {
        let (builder, _) = Self::s3_builder(url, options)?;
        builder.build().map(drop).map_err(|e| store_config(&e))
    }

    /// The store's path of `key`.
    fn path(&self, key: &str) -> Path {
        let prefix = self.prefix.parts().map(|p| PathPart::from(p.as_ref().to_owned()));
        prefix.chain(split(key)).collect()
    }

    /// `key` of a path under the prefix.
    fn key_of(&self, path: &Path) -> Option<String> {
        let parts: Vec<String> = path
            .prefix_match(&self.prefix)?
            .map(|p| p.as_ref().to_owned())
            .collect();
        Some(parts.join("/"))
    }

    /// The keys of a raw listing under `prefix`, those that are no path
    /// skipped with one warning.
    #[cfg(feature = "aws")]
    fn keys_of_raw(&self, prefix: &str, raw: s3_list::RawListing) -> Vec<String> {
        let mut skipped = raw.undecodable;
        let mut first_skipped = None;
        let mut keys = Vec::new();
        for raw_key in raw.objects.iter().chain(&raw.prefixes) {
            match Path::parse(raw_key) {
                Ok(path) => keys.extend(self.key_of(&path)),
                Err(_) => {
                    skipped += 1;
                    first_skipped.get_or_insert(raw_key);
                }
            }
        }
        if skipped > 0 {
            // The key as Debug: it may hold control characters, which
            // must not reach the log as they are.
            tracing::warn!(
                store = %self.name,
                prefix,
                skipped,
                first = ?first_skipped,
                "listing skipped keys that are no object_store path (an empty, `.` or `..` segment, a control character)"
            );
        }
        keys
    }

    fn error(&self, key: &str, e: &object_store::Error) -> Error {
        Error::Store {
            store: self.name.clone(),
            key: key.to_owned(),
            kind: match e {
                object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. } => {
                    StoreFailure::Precondition
                }
                object_store::Error::NotFound { .. } => StoreFailure::NotFound,
                object_store::Error::NotSupported { .. } | object_store::Error::NotImplemented { .. } => {
                    StoreFailure::Unsupported
                }
                e if is_transient(e) => StoreFailure::Transient,
                _ => StoreFailure::Other,
            },
            answer: with_credentials_hint(e.to_string()),
        }
    }

    /// Runs `future` on the store's runtime and waits for it.
    fn run<T: Send + 'static>(
        &self,
        key: &str,
        future: impl Future<Output = object_store::Result<T>> + Send + 'static,
    ) -> Result<T, Error> {
        let stopped = || Error::Store {
            store: self.name.clone(),
            key: key.to_owned(),
            kind: StoreFailure::Other,
            answer: "the store's runtime stopped".to_owned(),
        };
        let runtime = self.runtime.0.as_ref().ok_or_else(stopped)?;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let _ = tx.send(future.await);
        });
        rx.recv().map_err(|_| stopped())?.map_err(|e| self.error(key, &e))
    }
}

/// `answer` with what it means when the S3 client, finding no credentials
/// in the environment or `store_options`, asked the cloud's instance
/// metadata service (`169.254.169.254`), which a machine outside that
/// cloud does not have: the error names only that address.
fn with_credentials_hint(answer: String) -> String {
    if answer.contains("169.254.169.254") {
        format!(
            "{answer} (no credentials were found in AWS_* variables or store_options, so the client asked a \
             cloud instance's metadata service: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or \
             store_options access_key_id and secret_access_key)"
        )
    } else {
        answer
    }
}

/// Whether `e` is one the same request may not meet later: the store was
/// not reached or did not answer in time, or answered a server error.
///
/// `object_store` keeps a failed request's status in an error type it does
/// not export, so the status is read from that error's message (`Server
/// returned non-2xx status code: 503 ...`); the unit tests pin it.
fn is_transient(e: &object_store::Error) -> bool {
    // `object_store`'s HTTP client comes with its cloud stores: without
    // `aws` there is no store to fail over HTTP.
    #[cfg(feature = "aws")]
    use object_store::client::{HttpError, HttpErrorKind};
    const STATUS: &str = "Server returned non-2xx status code: ";
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(error) = source {
        #[cfg(feature = "aws")]
        if let Some(http) = error.downcast_ref::<HttpError>() {
            return matches!(
                http.kind(),
                HttpErrorKind::Connect
                    | HttpErrorKind::Request
                    | HttpErrorKind::Timeout
                    | HttpErrorKind::Interrupted
            );
        }
        #[cfg(feature = "aws")]
        if let Some(status) = error.downcast_ref::<s3_list::StatusError>() {
            return transient_status(status.status);
        }
        let message = error.to_string();
        if let Some(status) = message.strip_prefix(STATUS) {
            let code = status.split(|c: char| !c.is_ascii_digit()).next();
            return code.and_then(|c| c.parse().ok()).is_some_and(transient_status);
        }
        source = error.source();
    }
    false
}

/// A server error (5xx) or 429 Too Many Requests.
fn transient_status(status: u16) -> bool {
    status == 429 || (500..600).contains(&status)
}

/// The non-empty `/`-separated parts of `key`.
fn split(key: &str) -> impl Iterator<Item = PathPart<'static>> + '_ {
    key.split('/')
        .filter(|p| !p.is_empty())
        .map(|p| PathPart::from(p.to_owned()))
}

/// `Ok(None)` for a missing object.
fn not_found_is_none<T>(result: Result<T, Error>) -> Result<Option<T>, Error> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(Error::Store {
            kind: StoreFailure::NotFound,
            ..
        }) => Ok(None),
        Err(e) => Err(e),
    }
}

impl Storage for ObjectStorage {
    /// Nothing to do: an object store has no directories, and its writes
    /// leave no temporary objects.
    fn prepare(&self, _prefix: &str) -> Result<(), Error> {
        Ok(())
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        let (store, path) = (self.store.clone(), self.path(key));
        not_found_is_none(self.run(key, async move { store.get(&path).await?.bytes().await }))
            .map(|b| b.map(Vec::from))
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Option<Vec<u8>>, Error> {
        // One GET (a range over the end gives the bytes up to it); only a
        // range that starts at or past the end, which a store refuses
        // (416), or an empty one needs the object's size.
        let size = |key: &str| {
            let (store, path) = (self.store.clone(), self.path(key));
            not_found_is_none(self.run(key, async move { store.head(&path).await }))
                .map(|meta| meta.map(|m| m.size))
        };
        if range.is_empty() {
            return Ok(size(key)?.map(|_| Vec::new()));
        }
        let (store, path) = (self.store.clone(), self.path(key));
        let bounded = range.clone();
        match not_found_is_none(self.run(key, async move { store.get_range(&path, bounded).await })) {
            Ok(got) => Ok(got.map(Vec::from)),
            Err(e) => match size(key)? {
                None => Ok(None),
                Some(size) if range.start >= size => Ok(Some(Vec::new())),
                Some(_) => Err(e),
            },
        }
    }

    fn version(&self, key: &str) -> Result<Option<Version>, Error> {
        let (store, path) = (self.store.clone(), self.path(key));
        let meta = not_found_is_none(self.run(key, async move { store.head(&path).await }))?;
        Ok(meta.map(|m| Version::new(m.e_tag.unwrap_or_default())))
    }

    fn get_if_changed(&self, key: &str, known: Option<&Version>) -> Result<Conditional, Error> {
        let (store, path) = (self.store.clone(), self.path(key));
        let options = object_store::GetOptions {
            if_none_match: known.map(|v| v.as_str().to_owned()),
            ..Default::default()
        };
        // One GET: the ETag is that of the bytes it returns.
        let got = self.run(key, async move {
            match store.get_opts(&path, options).await {
                Ok(got) => {
                    let e_tag = got.meta.e_tag.clone().unwrap_or_default();
                    Ok(Some((got.bytes().await?, e_tag)))
                }
                Err(object_store::Error::NotModified { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        });
        Ok(match not_found_is_none(got)? {
            None => Conditional::Missing,
            Some(None) => Conditional::NotModified,
            Some(Some((bytes, e_tag))) => Conditional::Value {
                bytes: Vec::from(bytes),
                version: Version::new(e_tag),
            },
        })
    }

    fn put_chunks(
        &self,
        key: &str,
        chunks: &mut dyn Iterator<Item = &[u8]>,
        mode: PutMode,
    ) -> Result<Option<Version>, Error> {
        // One request with the whole value: a single PUT takes up to 5 GB,
        // far more than a list's hashes (32 bytes per full hash).
        let mut value = Vec::new();
        for chunk in chunks {
            value.extend_from_slice(chunk);
        }
        let update = matches!(mode, PutMode::Update(_));
        let mode = match mode {
            PutMode::Overwrite => object_store::PutMode::Overwrite,
            PutMode::Create => object_store::PutMode::Create,
            PutMode::Update(version) => object_store::PutMode::Update(UpdateVersion {
                e_tag: Some(version.as_str().to_owned()),
                version: None,
            }),
        };
        let (store, path) = (self.store.clone(), self.path(key));
        let put = self.run(key, async move {
            (store.put_opts(&path, PutPayload::from(value), PutOptions::from(mode))).await
        });
        match put {
            Ok(result) => Ok(Some(Version::new(result.e_tag.unwrap_or_default()))),
            // The condition does not hold: the key exists (Create), its
            // version changed or it is gone (Update).
            Err(Error::Store {
                kind: StoreFailure::Precondition,
                ..
            }) => Ok(None),
            Err(Error::Store {
                kind: StoreFailure::NotFound,
                ..
            }) if update => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, Error> {
        let (store, path) = (self.store.clone(), self.path(prefix));
        #[cfg(feature = "aws")]
        let raw_listing = self.raw_listing.clone();
        let listed = self.run(prefix, async move {
            match store.list_with_delimiter(Some(&path)).await {
                Ok(listed) => Ok(Listed::Paths(listed)),
                // A key that is no path: list again, raw.
                #[cfg(feature = "aws")]
                Err(e @ object_store::Error::InvalidPath { .. }) => {
                    let Some(raw) = raw_listing else { return Err(e) };
                    let prefix = if path.as_ref().is_empty() {
                        String::new()
                    } else {
                        format!("{}/", path.as_ref())
                    };
                    raw.list(&prefix).await.map(Listed::Raw)
                }
                Err(e) => Err(e),
            }
        })?;
        match listed {
            Listed::Paths(listed) => Ok((listed.objects.iter().map(|o| &o.location))
                .chain(&listed.common_prefixes)
                .filter_map(|p| self.key_of(p))
                .collect()),
            #[cfg(feature = "aws")]
            Listed::Raw(raw) => Ok(self.keys_of_raw(prefix, raw)),
        }
    }

    fn delete(&self, key: &str) -> Result<(), Error> {
        let (store, path) = (self.store.clone(), self.path(key));
        not_found_is_none(self.run(key, async move { store.delete(&path).await })).map(drop)
    }

    fn location(&self, key: &str) -> PathBuf {
        PathBuf::from(format!("{}/{key}", self.name.trim_end_matches('/')))
    }
}

/// The store at `url` (`s3://bucket/prefix`, with `options`), checked by
/// [`check_conditional_writes`]: a store that fails the check is refused
/// unless `ignore_conditions` (the configuration's
/// `dangerous_store_ignores_conditions`), and then only logged.
///
/// # Errors
///
/// [`Error::Config`] for a URL or option the client refuses, or when the
/// publisher was built without the `aws` feature;
/// [`Error::StoreIgnoresConditions`] and [`Error::Store`] as
/// [`check_conditional_writes`].
pub fn open_store(
    url: &str,
    options: &std::collections::BTreeMap<String, String>,
    ignore_conditions: bool,
) -> Result<Arc<dyn Storage>, Error> {
    #[cfg(not(feature = "aws"))]
    {
        let _ = (options, ignore_conditions);
        Err(Error::Config {
            field: "store".to_owned(),
            reason: format!("{url}: this publisher was built without the `aws` feature"),
        })
    }
    #[cfg(feature = "aws")]
    {
        let storage = ObjectStorage::s3(url, options)?;
        match check_conditional_writes(&storage, url) {
            Ok(()) => {}
            Err(e @ Error::StoreIgnoresConditions { .. }) if ignore_conditions => {
                tracing::warn!(error = %e, "using the store anyway (dangerous_store_ignores_conditions)")
            }
            Err(e) => return Err(e),
        }
        tracing::info!(store = url, "storing in the object store");
        Ok(Arc::new(storage))
    }
}

/// The store at `url` for a replica, which only reads it: no self-test
/// (it writes) and no request at all, so a replica starts while the store
/// is unreachable and finds it once it answers.
///
/// # Errors
///
/// [`Error::Config`] for a URL or option the store's client refuses, or a
/// publisher built without the `aws` feature.
pub fn follow_store(
    url: &str,
    options: &std::collections::BTreeMap<String, String>,
) -> Result<Arc<dyn Storage>, Error> {
    #[cfg(not(feature = "aws"))]
    {
        let _ = options;
        Err(Error::Config {
            field: "store".to_owned(),
            reason: format!("{url}: this publisher was built without the `aws` feature"),
        })
    }
    #[cfg(feature = "aws")]
    {
        tracing::info!(store = url, "following the object store (replica)");
        Ok(Arc::new(ObjectStorage::s3(url, options)?))
    }
}

/// Checks that `storage` enforces conditional writes, on a scratch key
/// under `.blocksieve-selftest/` that it removes afterwards: a second
/// [`PutMode::Create`] of a key must fail, and so must a
/// [`PutMode::Update`] with a stale version; an update with the current
/// version must succeed. `name` names the store in the error.
///
/// # Errors
///
/// [`Error::StoreIgnoresConditions`] when a check fails; [`Error::Store`]
/// when the store cannot be reached.
pub fn check_conditional_writes(storage: &dyn Storage, name: &str) -> Result<(), Error> {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = (SystemTime::now().duration_since(UNIX_EPOCH)).map_or(0, |d| d.as_nanos());
    let key = format!(".blocksieve-selftest/{}-{nanos:x}", std::process::id());
    let result = check_on(storage, &key);
    let _ = storage.delete(&key);
    result.map_err(|reason| match reason {
        Check::Ignored(reason) => Error::StoreIgnoresConditions {
            store: name.to_owned(),
            reason: reason.to_owned(),
        },
        Check::Failed(e) => e,
    })
}

enum Check {
    Ignored(&'static str),
    Failed(Error),
}

fn check_on(storage: &dyn Storage, key: &str) -> Result<(), Check> {
    let put = |value: &[u8], mode| storage.put(key, value, mode).map_err(Check::Failed);
    let Some(first) = put(b"first", PutMode::Create)? else {
        return Err(Check::Ignored("creating a new scratch object was refused"));
    };
    if put(b"second", PutMode::Create)?.is_some() {
        return Err(Check::Ignored(
            "a create-only write (If-None-Match: *) replaced an existing object",
        ));
    }
    let Some(current) = put(b"third", PutMode::Update(first.clone()))? else {
        return Err(Check::Ignored(
            "a write conditional on the current version (If-Match) was refused",
        ));
    };
    if current == first {
        return Err(Check::Ignored(
            "an object's version did not change when it was replaced",
        ));
    }
    if put(b"fourth", PutMode::Update(first))?.is_some() {
        return Err(Check::Ignored(
            "a write conditional on a stale version (If-Match) replaced the object",
        ));
    }
    match storage.get(key).map_err(Check::Failed)? {
        Some(value) if value == b"third" => Ok(()),
        _ => Err(Check::Ignored("a refused conditional write changed the object")),
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;

    use super::*;

    /// With no credentials, the S3 client asks the instance metadata
    /// service, and its error names only that address: the answer says
    /// what it means and what to set.
    #[test]
    fn an_answer_from_the_metadata_service_says_that_credentials_are_missing() {
        let answer = "Generic S3 error: Error performing PUT http://169.254.169.254/latest/api/token in 1ms: 403 Forbidden";
        let hinted = with_credentials_hint(answer.to_owned());
        assert!(
            hinted.starts_with(answer) && hinted.contains("AWS_ACCESS_KEY_ID"),
            "{hinted}"
        );
        let other = "Generic S3 error: 503 Service Unavailable";
        assert_eq!(with_credentials_hint(other.to_owned()), other);
    }

    fn in_memory() -> ObjectStorage {
        ObjectStorage::new(Arc::new(InMemory::new()), "some/prefix", "memory://some/prefix").unwrap()
    }

    // The calls themselves are checked by the storage contract (the tests
    // crate's `storage_contract`), on this store in memory and on moto.

    #[test]
    fn keys_are_the_data_directory_layout_under_the_prefix() {
        let memory = Arc::new(InMemory::new());
        let storage = ObjectStorage::new(memory.clone(), "p", "memory://p").unwrap();
        let mut chunks = [&b"ab"[..], b"cd"].into_iter();
        (storage.put_chunks("lists/a/1.hashes", &mut chunks, PutMode::Overwrite)).unwrap();

        // The layout's keys, under the prefix, as a data directory has them.
        let stored = |key: &str| {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async { memory.get(&Path::from(key)).await.ok()?.bytes().await.ok() })
        };
        assert_eq!(stored("p/lists/a/1.hashes").unwrap(), &b"abcd"[..]);
        assert_eq!(stored("lists/a/1.hashes"), None);
        assert_eq!(storage.list("lists/a").unwrap(), ["lists/a/1.hashes"]);
        assert!(
            storage
                .location("lists/a/1.snapshot")
                .ends_with("p/lists/a/1.snapshot")
        );
    }

    #[test]
    fn the_self_test_passes_on_a_store_that_enforces_conditions_and_leaves_nothing() {
        let storage = in_memory();
        check_conditional_writes(&storage, "memory://some/prefix").unwrap();
        assert_eq!(
            storage.list(".blocksieve-selftest").unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_self_test_refuses_a_store_that_ignores_conditions_naming_it() {
        // Every write passed on as an overwrite, as a store that ignores
        // `If-None-Match` and `If-Match` does.
        let storage =
            crate::storage::testing::Intercepted::over(in_memory()).put_mode(|_, _| PutMode::Overwrite);
        match check_conditional_writes(&storage, "memory://some/prefix") {
            Err(e @ Error::StoreIgnoresConditions { .. }) => {
                let message = e.to_string();
                assert!(message.contains("memory://some/prefix"), "{message}");
                assert!(message.contains("If-None-Match"), "{message}");
            }
            other => panic!("a store that ignores conditions: {other:?}"),
        }
        assert_eq!(
            storage.list(".blocksieve-selftest").unwrap(),
            Vec::<String>::new()
        );
    }

    /// An S3 store at `addr` whose client does not retry and waits at most
    /// half a second for an answer.
    #[cfg(feature = "aws")]
    fn s3_at(addr: std::net::SocketAddr) -> ObjectStorage {
        use object_store::aws::AmazonS3Builder;
        use object_store::{BackoffConfig, ClientOptions, RetryConfig};
        let builder = AmazonS3Builder::new()
            .with_endpoint(format!("http://{addr}"))
            .with_bucket_name("bucket")
            .with_region("us-east-1")
            .with_access_key_id("testing")
            .with_secret_access_key("testing")
            .with_retry(RetryConfig {
                backoff: BackoffConfig::default(),
                max_retries: 0,
                retry_timeout: std::time::Duration::from_secs(1),
            })
            .with_client_options(
                ClientOptions::new()
                    .with_allow_http(true)
                    .with_timeout(std::time::Duration::from_millis(500)),
            );
        let s3 = Arc::new(builder.clone().build().unwrap());
        let raw_listing = s3_list::S3Lister::new(&builder, s3.clone()).unwrap();
        ObjectStorage {
            raw_listing: raw_listing.map(Arc::new),
            ..ObjectStorage::new(s3, "p", "s3://bucket/p").unwrap()
        }
    }

    /// A server on 127.0.0.1:0 that reads each request and answers it
    /// `answer` (raw HTTP), or never when `answer` is empty.
    #[cfg(feature = "aws")]
    fn answering(answer: &'static str) -> std::net::SocketAddr {
        use std::io::{BufRead as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                std::thread::spawn(move || {
                    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                    let mut line = String::new();
                    while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                        line.clear();
                    }
                    if answer.is_empty() {
                        std::thread::sleep(std::time::Duration::from_secs(5));
                    } else {
                        let _ = stream.write_all(answer.as_bytes());
                    }
                });
            }
        });
        addr
    }

    #[cfg(feature = "aws")]
    fn failure(result: Result<Option<Vec<u8>>, Error>) -> StoreFailure {
        match result {
            Err(Error::Store { kind, .. }) => kind,
            other => panic!("a store error: {other:?}"),
        }
    }

    #[cfg(feature = "aws")]
    #[test]
    fn unreachable_stores_and_server_errors_are_transient_and_refusals_are_not() {
        let status = |line: &str| -> &'static str {
            format!("HTTP/1.1 {line}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").leak()
        };
        for (answer, kind) in [
            (status("503 Service Unavailable"), StoreFailure::Transient),
            (status("500 Internal Server Error"), StoreFailure::Transient),
            (status("429 Too Many Requests"), StoreFailure::Transient),
            // No answer within the client's timeout.
            ("", StoreFailure::Transient),
            (status("400 Bad Request"), StoreFailure::Other),
            (status("403 Forbidden"), StoreFailure::Other),
        ] {
            let storage = s3_at(answering(answer));
            assert_eq!(failure(storage.get("k")), kind, "{answer:?}");
        }
        // A refused connection: a port nothing listens on any more.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        assert_eq!(failure(s3_at(closed).get("k")), StoreFailure::Transient);
        // The raw listing's own answers too.
        let storage = s3_at(answering(status("503 Service Unavailable")));
        let raw = storage.raw_listing.clone().unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let e = runtime.block_on(raw.list("p/")).unwrap_err();
        assert!(is_transient(&e), "{e}");
    }

    #[test]
    fn works_from_async_code_and_is_dropped_there() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let storage = in_memory();
            storage.put("k", b"v", PutMode::Overwrite).unwrap();
            assert_eq!(storage.get("k").unwrap().unwrap(), b"v");
            drop(storage);
        });
    }
}
