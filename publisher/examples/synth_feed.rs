//! Writes a synthetic URL feed for benchmarks: `COUNT` distinct-looking
//! phishing-style URLs, one per line, from a seeded RNG (the same arguments
//! give the same file).
//!
//! ```sh
//! cargo run --release -p blocksieve-publisher --example synth_feed -- 10000000 /tmp/synth-10m.txt [SEED]
//! ```
//!
//! Shapes, loosely after the real feeds in `shared/data/feeds`: `http` (70%)
//! or `https`; a host of 2 to 4 labels under a common TLD (2% dotted IPv4
//! addresses, 5% with `www.`, 3% with an uppercase letter); a path of 0 to 4
//! segments, the last often a `.php`/`.html` page; a query on 25% (ids,
//! 32-digit session tokens); 2% carry a percent-escape, 1% a port.

use std::io::Write as _;

use rand::{Rng, SeedableRng as _};

const TLDS: &[&str] = &[
    "com", "com", "com", "net", "org", "info", "ru", "de", "br", "in", "tk", "xyz", "top", "co.uk", "com.br",
];
const WORDS: &[&str] = &[
    "login",
    "secure",
    "account",
    "verify",
    "update",
    "bank",
    "paypal",
    "apple",
    "office",
    "mail",
    "signin",
    "wp-admin",
    "wp-content",
    "includes",
    "images",
    "docs",
    "share",
    "drive",
    "auth",
    "billing",
    "support",
];
const PAGES: &[&str] = &[
    "index.php",
    "login.php",
    "index.html",
    "verify.html",
    "auth.aspx",
    "form.htm",
];
const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

fn word(rng: &mut impl Rng, out: &mut String, min: usize, max: usize) {
    if rng.gen_bool(0.3) {
        out.push_str(WORDS[rng.gen_range(0..WORDS.len())]);
        return;
    }
    for _ in 0..rng.gen_range(min..=max) {
        out.push(char::from(ALNUM[rng.gen_range(0..ALNUM.len())]));
    }
}

fn url(rng: &mut impl Rng, out: &mut String) {
    out.clear();
    out.push_str(if rng.gen_bool(0.7) { "http://" } else { "https://" });
    if rng.gen_bool(0.02) {
        let [a, b, c, d]: [u8; 4] = rng.r#gen();
        out.push_str(&format!("{}.{b}.{c}.{d}", a.max(1)));
    } else {
        if rng.gen_bool(0.05) {
            out.push_str("www.");
        }
        let labels = rng.gen_range(2..=4);
        for _ in 0..labels - 1 {
            word(rng, out, 3, 12);
            out.push('.');
        }
        out.push_str(TLDS[rng.gen_range(0..TLDS.len())]);
        if rng.gen_bool(0.03) {
            // An uppercase letter somewhere in the host.
            let i = rng.gen_range("https://".len().min(out.len())..out.len());
            let upper = out[i..].chars().next().map(|c| c.to_ascii_uppercase());
            if let Some(c) = upper.filter(char::is_ascii_uppercase) {
                out.replace_range(i..=i, &c.to_string());
            }
        }
    }
    if rng.gen_bool(0.01) {
        out.push_str(&format!(":{}", rng.gen_range(1024..65535u32)));
    }
    let segments = rng.gen_range(0..=4);
    for s in 0..segments {
        out.push('/');
        if s + 1 == segments && rng.gen_bool(0.5) {
            out.push_str(PAGES[rng.gen_range(0..PAGES.len())]);
        } else {
            word(rng, out, 2, 12);
        }
    }
    if segments == 0 || rng.gen_bool(0.3) {
        out.push('/');
    }
    if rng.gen_bool(0.02) {
        out.push_str("%20x");
    }
    if rng.gen_bool(0.25) {
        out.push_str(&format!("?id={}", rng.gen_range(0..10_000_000u32)));
        if rng.gen_bool(0.5) {
            let token: u128 = rng.r#gen();
            out.push_str(&format!("&session={token:032x}"));
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(count), Some(path)) = (args.get(1), args.get(2)) else {
        anyhow::bail!("usage: synth_feed COUNT OUT_FILE [SEED]");
    };
    let count: u64 = count.parse()?;
    let seed: u64 = args.get(3).map_or(Ok(7), |s| s.parse())?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut line = String::new();
    for _ in 0..count {
        url(&mut rng, &mut line);
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}
