//! The cross-language reference: what every binding of the agent (C,
//! Python, WASM) must answer, byte for byte, for the same inputs against the
//! same publisher.
//!
//! ```text
//! cargo run -p blocksieve-tests --example xlang -- setup DIR
//! cargo run -p blocksieve-tests --example xlang -- reference BASE_URL PUBLIC_KEY DIR
//! ```
//!
//! `setup` writes into `DIR`:
//!
//! * `inputs.txt`: the inputs, one per line, each the hex of its UTF-8
//!   bytes (so that inputs holding tabs, newlines or spaces survive every
//!   language's line reader): every input of the canonicalization vectors
//!   (`format/tests/data/canonicalization.tsv`) that is valid UTF-8, every
//!   URL of the expression vectors (`format/tests/data/expressions.txt`),
//!   then the 10,000 real phishing URLs of `format/benches/data/urls-10k.txt`;
//! * `feed.txt`: every other URL of that sample, the threat list `xlang`;
//! * `config.toml`: a publisher serving `xlang` from `feed.txt` with its
//!   data in `DIR/data` (`blocksieve-publisher serve --config DIR/config.toml
//!   --listen 127.0.0.1:0` logs its address and public key).
//!
//! `reference` checks every input with the Rust agent against the publisher
//! at `BASE_URL` (trusting `PUBLIC_KEY`, base64) and prints one JSON object
//! per input, in input order:
//!
//! ```text
//! {"canonical":"http://a.example/","full_hashes":["<64 hex>",...],"verdict":"safe"}
//! {"canonical":"http://b.example/x","full_hashes":[...],"verdict":"unsafe","list":"xlang","expression":"b.example/x"}
//! {"canonical":null,"full_hashes":[],"verdict":"invalid"}
//! ```
//!
//! `canonical` is the Safe Browsing canonical URL (null when the input has
//! none), `full_hashes` the SHA-256 of each expression in expression order,
//! `verdict` one of `safe`, `unsafe` (with the list and the matching
//! expression), `unverified` or `invalid`. A binding passes when its lines
//! parse to the same JSON values.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use blocksieve_agent::{Agent, ErrorKind, Verdict};
use blocksieve_format::{TrustedKey, canonicalize};
use serde_json::{Value, json};

type BoxError = Box<dyn std::error::Error>;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Decodes the escapes of the canonicalization vectors: `\t \r \n \xHH \\`.
fn unescape(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            match b[i + 1] {
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'n' => out.push(b'\n'),
                b'\\' => out.push(b'\\'),
                b'x' => {
                    let hex = s.get(i + 2..i + 4)?;
                    out.push(u8::from_str_radix(hex, 16).ok()?);
                    i += 2;
                }
                _ => return None,
            }
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// The inputs `setup` writes, in order.
fn inputs() -> Result<Vec<String>, BoxError> {
    let mut inputs = Vec::new();
    let canon = std::fs::read_to_string(repo().join("format/tests/data/canonicalization.tsv"))?;
    for line in canon.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let input = line.split('\t').next().unwrap_or_default();
        let bytes = unescape(input).ok_or_else(|| format!("bad escape in {line:?}"))?;
        // Strings in JavaScript and Python hold only valid UTF-8 here.
        if let Ok(text) = String::from_utf8(bytes) {
            inputs.push(text);
        }
    }
    let expressions = std::fs::read_to_string(repo().join("format/tests/data/expressions.txt"))?;
    for line in expressions.lines() {
        if let Some(url) = line.strip_prefix("URL:") {
            inputs.push(url.trim().to_owned());
        }
    }
    let sample = std::fs::read_to_string(repo().join("format/benches/data/urls-10k.txt"))?;
    inputs.extend(sample.lines().map(str::to_owned));
    Ok(inputs)
}

fn setup(dir: &Path) -> Result<(), BoxError> {
    std::fs::create_dir_all(dir)?;
    let inputs = inputs()?;
    let hex: String = inputs.iter().map(|i| hex::encode(i) + "\n").collect();
    std::fs::write(dir.join("inputs.txt"), hex)?;
    let sample = std::fs::read_to_string(repo().join("format/benches/data/urls-10k.txt"))?;
    let feed: String = sample.lines().step_by(2).map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("feed.txt"), feed)?;
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "data_dir = {:?}\nlisten = \"127.0.0.1:0\"\nschedule = \"0 0 0 1 1 *\"\n\n[[lists]]\nname = \"xlang\"\nsources = [{{ path = {:?}, format = \"urls\" }}]\n",
            dir.join("data"),
            dir.join("feed.txt"),
        ),
    )?;
    eprintln!(
        "{} inputs, {} listed URLs in {}",
        inputs.len(),
        sample.lines().count().div_ceil(2),
        dir.display()
    );
    Ok(())
}

/// One input's reference line.
fn line(input: &str, verdict: Result<Verdict, blocksieve_agent::Error>) -> Result<Value, BoxError> {
    let (canonical, full_hashes) = match canonicalize(input) {
        Ok(url) => {
            let mut hashes = Vec::new();
            url.full_hashes_into(&mut hashes);
            (
                Some(url.as_str().to_owned()),
                hashes.iter().map(|h| h.to_string()).collect(),
            )
        }
        Err(_) => (None, Vec::<String>::new()),
    };
    let mut out = json!({"canonical": canonical, "full_hashes": full_hashes});
    let verdict = match verdict {
        Ok(Verdict::Unsafe { list, expression, .. }) => {
            out["list"] = json!(list);
            out["expression"] = json!(expression);
            "unsafe"
        }
        Ok(Verdict::Safe { .. }) => "safe",
        Ok(_) => "unverified",
        Err(e) if e.kind() == ErrorKind::InvalidInput => "invalid",
        Err(e) => return Err(format!("{input:?}: {e}").into()),
    };
    out["verdict"] = json!(verdict);
    Ok(out)
}

async fn reference(base: &str, key: &str, dir: &Path) -> Result<(), BoxError> {
    let agent = Agent::builder(base)
        .list("xlang")
        .trusted_key(TrustedKey::from_base64(key)?)
        .build()?;
    agent.update().await?;
    let hex = std::fs::read_to_string(dir.join("inputs.txt"))?;
    let mut out = String::new();
    for h in hex.lines() {
        let input = String::from_utf8(hex::decode(h)?)?;
        let verdict = agent.check_url(&input).await;
        out.push_str(&line(&input, verdict)?.to_string());
        out.push('\n');
    }
    print!("{out}");
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["setup", dir] => setup(Path::new(dir)),
        ["reference", base, key, dir] => reference(base, key, Path::new(dir)).await,
        _ => Err("usage: xlang setup DIR | xlang reference BASE_URL PUBLIC_KEY DIR".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xlang: {e}");
            ExitCode::from(2)
        }
    }
}
