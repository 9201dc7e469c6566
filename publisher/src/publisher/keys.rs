//! The keys a publisher opens with: a builder's check of a public key it
//! is given against its signing key, and a replica's public key (its
//! `public_key`, else the public key file beside the signing key).

use blocksieve_format::{SigningKey, TrustedKey};

use super::{Error, Publisher, Settings, object_storage, storage};

impl Publisher {
    /// A builder's `public_key` (or `serve --key`) is its signing key's
    /// public key: `own`, the key at [`Settings::signing_key_path`], if any.
    pub(crate) fn check_given_key(
        config: &Settings,
        given: &TrustedKey,
        own: Option<&SigningKey>,
    ) -> Result<(), Error> {
        let (path, from) = (config.signing_key_path(), config.signing_key_origin());
        let (id, path) = (hex::encode(given.id()), path.display());
        let only = "only a replica (--role replica) takes another key";
        let reason = match own.map(SigningKey::public_key) {
            Some(own) if own == given => return Ok(()),
            Some(own) => format!(
                "key id {id} is not the public key of the signing key {path}{from} (key id {}): {only}",
                hex::encode(own.id())
            ),
            None => format!(
                "key id {id} cannot be the public key of the signing key {path}{from}: it does not exist yet (a builder creates one at its first start); {only}"
            ),
        };
        Err(Error::Config {
            field: "public_key (or serve --key)".to_owned(),
            reason,
        })
    }

    /// Whether a builder whose signing key does not exist may create one:
    /// not while `previous_public_keys` names keys it replaces (a key
    /// rotation, README "Rotating the signing key"). Then the key is the
    /// new one, made with `keygen` and given to every builder; one created
    /// here (a mistyped `signing_key`, a `BLOCKSIEVE_SIGNING_KEY` naming
    /// the wrong file) would be trusted by no agent, and every list would
    /// be published again under it, refused by the whole fleet.
    pub(crate) fn check_key_may_be_created(config: &Settings) -> Result<(), Error> {
        if config.previous_public_keys.is_empty() {
            return Ok(());
        }
        let (path, from) = (config.signing_key_path(), config.signing_key_origin());
        Err(Error::Config {
            field: "signing_key".to_owned(),
            reason: format!(
                "{}{from} does not exist, and previous_public_keys is set (a key rotation): the new key is \
                 the one made with `keygen --out` and given to every builder, never one created at start, \
                 which no agent would trust; give its path, or remove previous_public_keys",
                path.display()
            ),
        })
    }

    /// A replica's [`Publisher::open`].
    pub(super) fn open_replica(config: Settings) -> Result<Self, Error> {
        let public_key = match &config.public_key {
            Some(key) => key.clone(),
            None => {
                let path = storage::public_key_path(&config.signing_key_path());
                if !path.exists() {
                    return Err(Error::Config {
                        field: "public_key".to_owned(),
                        reason: format!(
                            "a replica needs the builders' public key, and {} does not exist: pass --key, set public_key, or copy the builders' public.key there",
                            path.display()
                        ),
                    });
                }
                storage::load_public_key(&path)?
            }
        };
        // `validate` requires a store of a replica.
        let url = config.store.clone().unwrap_or_default();
        let storage = object_storage::follow_store(&url, &config.store_options)?;
        Self::assemble(config, storage, None, public_key, None)
    }
}
