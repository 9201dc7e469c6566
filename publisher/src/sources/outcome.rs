//! What reading a feed produces: the report of a source and the outcome
//! of a line, and the fixed words they count by ([`reason`], [`cleaned`]).

use std::collections::BTreeMap;

use blocksieve_format::FullHash;

/// How many rejected lines a report keeps as examples.
pub const REJECT_SAMPLES: usize = 10;

/// Why a line or entry is rejected: the keys of [`ParseReport::rejected`].
/// Each is true of every line it counts. Only the JSON and CSV
/// document-level reasons (no such array, no such column, not valid JSON)
/// are written out with the key, column or parser error.
pub mod reason {
    /// A host-wide entry (`host/`) whose host is on the ICANN section of
    /// the Public Suffix List (`com`, `co.uk`, a `*.ck` name).
    pub const PUBLIC_SUFFIX_ICANN: &str = "host-wide entry on a public suffix (ICANN section of the Public Suffix List): would block a whole registry";
    /// A host-wide entry (`host/`) whose host is on the private section of
    /// the Public Suffix List (`github.io`, `s3.amazonaws.com`, an
    /// `ec2-….compute-1.amazonaws.com` name by the wildcard rule).
    pub const PUBLIC_SUFFIX_PRIVATE: &str = "host-wide entry on a public suffix (private section of the Public Suffix List): would block every site under it";
    /// A host-wide entry (`host/`) whose host is one label of letters,
    /// digits, `-` and `_` the Public Suffix List does not know (`adp`).
    pub const SINGLE_LABEL: &str = "host-wide entry on a single-label host: no registrable domain";
    /// A token that cannot be a host name: a domain entry holding `/`, `?`,
    /// `@`, `\`, `*` or white space, or a host-wide entry on a single label
    /// holding other characters (`!`, `{apple`).
    pub const NOT_A_HOST_NAME: &str = "not a host name";
    /// A domain entry that is empty once `*.`, dots or a port are removed.
    pub const EMPTY_HOST_NAME: &str = "empty host name";
    /// An entry on the unspecified or a loopback address.
    pub const LOOPBACK: &str = "host is a loopback or unspecified address";
    /// [`CanonError::Empty`](blocksieve_format::CanonError::Empty).
    pub const EMPTY_URL: &str = "empty URL";
    /// [`CanonError::TooLong`](blocksieve_format::CanonError::TooLong).
    pub const TOO_LONG: &str = "longer than the 2 MiB URL limit";
    /// [`CanonError::NotHierarchical`](blocksieve_format::CanonError::NotHierarchical).
    pub const NOT_HIERARCHICAL: &str = "scheme is not followed by \"//\" (URL has no host)";
    /// [`CanonError::RelativeUrl`](blocksieve_format::CanonError::RelativeUrl).
    pub const RELATIVE_URL: &str = "URL has no host (it starts with a path or query)";
    /// [`CanonError::EmptyHost`](blocksieve_format::CanonError::EmptyHost).
    pub const EMPTY_HOST: &str = "URL has an empty host";
    /// [`CanonError::InvalidIpv6`](blocksieve_format::CanonError::InvalidIpv6).
    pub const INVALID_IPV6: &str = "bracketed host is not a valid IPv6 address";
    /// [`CanonError::DelimiterInHost`](blocksieve_format::CanonError::DelimiterInHost).
    pub const DELIMITER_IN_HOST: &str = "host holds a URL delimiter once unescaped, which browsers reject";
    /// `urls`, `csv`: text joined to a URL before its scheme, in its
    /// authority (`2024-05-01,http://…`, `href=http://…`, `{"url":"http://…`):
    /// read as a URL without a scheme, its host would be that text, which
    /// no visit has (a comma-separated export or a JSON document read as
    /// `urls`, or a layout that changed).
    pub const TEXT_BEFORE_SCHEME: &str = "text joined to the URL before its scheme (a column? read a comma-separated export with the `csv` format): its host would be that text";
    /// A canonicalization error this version does not know.
    pub const NOT_A_URL: &str = "not a URL";
    /// `urls`, `csv`: an e-mail address (no `scheme://`, a user name, no
    /// path): as a URL, its host would be the address's domain.
    pub const EMAIL_ADDRESS: &str =
        "an e-mail address (no scheme, a user name, no path), not a URL: its domain is not listed";
    /// `urls`: a URL with no path, then white space and an `@` before any
    /// path (`https://evil.example spoof@bank.example`): the line is that
    /// URL and columns, or one URL whose user name runs to the `@`, and
    /// either host listed host-wide may be one the line does not name.
    pub const AMBIGUOUS_USER_NAME: &str = "URL followed after a space by an @ (an e-mail address, or the URL's own user name?): neither host is listed";
    /// A URL's host holds `|` or `^`, which the URL Standard forbids in a
    /// host (forbidden host code points): no browser visits such a URL, so
    /// its expression matches no browser's check. Adblock syntax read as a URL
    /// (`||evil.example^` in a `urls` source) is the usual cause.
    pub const ADBLOCK_SYNTAX_IN_HOST: &str =
        "host holds | or ^, which no URL's host may (adblock syntax read as a URL?)";
    /// A URL's host holds another character no browser accepts in a host
    /// (`<`, `>`, brackets outside an IPv6 address, or `%`, which the
    /// canonical form writes only for an escaped byte no host may hold:
    /// white space, a control, `#`, `%`): no visit can match the entry.
    pub const FORBIDDEN_IN_HOST: &str = "host holds a character no browser accepts in a host (<, >, [, ], or an escaped space, control, # or %): no visit can match it";
    /// A URL's (or domain entry's) host is a domain name whose last label
    /// is a number (`1.2.3.256`, `evil.example.0.0.0.0`, a hosts line that
    /// lost its line end): the URL Standard parses such a host as an IPv4
    /// address, and browsers refuse the URL when it is not one. The
    /// entry would match no visit.
    pub const ENDS_IN_A_NUMBER: &str =
        "host ends in a number but is not an IPv4 address: browsers refuse it (URL Standard, host parsing)";
    /// An entry without a scheme that is a number of fewer than four dotted
    /// parts (`1234`, `1.5`, `10:00`): a URL parser reads it as an IPv4
    /// address (`0.0.4.210`, `1.0.0.5`), but written so it is a count, a
    /// version or a time read from the wrong column far more often; listed,
    /// it would block an address no feed named. With a scheme
    /// (`http://1572395042/`) or four parts it is an address.
    pub const NUMBER_NOT_ADDRESS: &str = "a number with no scheme and fewer than four dotted parts, not an IPv4 address (a count, version or time in the wrong column?)";
    /// A URL's host holds non-ASCII bytes that the canonicalizer's IDNA
    /// mapping (UTS #46) refused, escaped in the canonical form: invalid
    /// UTF-8, a disallowed character, a label breaking the bidi rule
    /// (RFC 5893: `a\u{870}b`, Latin and Arabic letters in one label, which
    /// browsers refuse too), or a character newer than the `idna` crate's
    /// Unicode table (17.0 in the version pinned), which a newer browser may
    /// visit. The entry would match no agent's check.
    pub const IDNA_REFUSED: &str = "host holds non-ASCII the IDNA mapping refused (UTS #46: invalid, disallowed, against the bidi rule, or newer than its Unicode table)";
    /// A hosts line with an address and no name.
    pub const HOSTS_NO_NAME: &str = "hosts line has an address but no name";
    /// An adblock exception rule (`@@…`): it allows, it does not block.
    pub const ADBLOCK_EXCEPTION: &str = "exception rule";
    /// An adblock cosmetic rule (`example.com##.ad`): it hides page
    /// elements, it does not block the site.
    pub const ADBLOCK_COSMETIC: &str = "cosmetic (element hiding) rule";
    /// An adblock rule with a wildcard, a regular expression or no host.
    pub const ADBLOCK_NOT_HOST_OR_URL: &str = "adblock rule is not a host or URL";
    /// An adblock host rule with an option not read here: one that narrows
    /// it to some clients or rewrites the answer (AdGuard DNS's `client`,
    /// `ctag`, `dnsrewrite`), or one no adblock syntax this reader knows
    /// names; or a URL rule with such an option beside known ones.
    pub const ADBLOCK_UNKNOWN_OPTION: &str =
        "adblock rule has an option not read here (not a block for every client?)";
    /// An adblock rule whose options make it no block of what it names: it
    /// cancels another rule (`badfilter`), modifies requests or responses
    /// (`removeparam`, `csp`, …) or turns off hiding.
    pub const ADBLOCK_NOT_A_BLOCK: &str =
        "adblock rule does not block (its options cancel or modify other rules)";
    /// An adblock rule whose options make it block only some requests
    /// pages make (their resources, requests on some sites, requests from
    /// another site), never a visit to the page it names.
    pub const ADBLOCK_NOT_A_VISIT: &str = "adblock rule blocks only some requests pages make (its request types, domain= or third-party options), not a visit to the page";
    /// Reasons for a line read as what it is and left out by a rule of
    /// this reader: an adblock exception, cosmetic rule or rule that blocks
    /// no visit, a loopback or sink address (`127.0.0.1 localhost`), a
    /// public suffix. Lists hold such lines by design (a general adblock
    /// list is mostly cosmetic rules), so they are no sign that content no
    /// longer reads as its format: a collapsed parse's share of rejected
    /// lines leaves them out (content of nothing else still collapses).
    pub const DELIBERATE: [&str; 7] = [
        ADBLOCK_EXCEPTION,
        ADBLOCK_COSMETIC,
        ADBLOCK_NOT_A_BLOCK,
        ADBLOCK_NOT_A_VISIT,
        LOOPBACK,
        PUBLIC_SUFFIX_ICANN,
        PUBLIC_SUFFIX_PRIVATE,
    ];
    /// A `sha256` line that is not 64 hex digits.
    pub const NOT_SHA256: &str = "not a 64-digit hex SHA-256";
    /// A JSON array item that is not a string.
    pub const JSON_NOT_STRING: &str = "array item is not a string";
    /// A CSV row the CSV reader could not read.
    pub const CSV_MALFORMED: &str = "malformed CSV row";
    /// A CSV row with more (non-empty) fields than its header and than most
    /// rows: a comma outside quotes shifted its columns, and the value
    /// under the URL column may be another column's (or part of the URL).
    pub const CSV_MORE_FIELDS: &str = "row has more fields than the header (a comma outside quotes?)";
}

/// What reading removed from an entry line or read twice: the keys of
/// [`ParseReport::cleaned`] and the items of [`LineOutcome::cleaned`].
pub mod cleaned {
    /// Unicode (not ASCII) white space trimmed at either end.
    pub const UNICODE_WHITE_SPACE: &str = "Unicode white space trimmed";
    /// One pair of surrounding quotes removed.
    pub const QUOTES: &str = "surrounding quotes removed";
    /// `urls`: other columns removed — a field after a TAB, a field around
    /// the URL when another holds none (`1 http://…`), or what follows a
    /// quoted URL (`"http://…","2020-01-01"`).
    pub const COLUMN: &str = "other columns removed";
    /// A trailing comment removed (`urls`: white space then `#`; `hosts`,
    /// `domains`, `sha256`: `#`).
    pub const COMMENT: &str = "trailing comment removed";
    /// `urls`: a space inside the URL field; read both cut at the space and
    /// as written.
    pub const SPACE: &str = "space inside: read cut at the space and as written";
    /// `urls`: a space inside a URL field that is followed by more than
    /// columns (more of the host, a user name, a path, a word:
    /// `http://bank.example .evil.example/`, `http://bank.example
    /// @1.2.3.4`, `http://bank.example /p`): read as written only, since
    /// the text before the space alone is not what the line names.
    pub const SPACE_IN_HOST: &str = "space inside, not followed by columns alone: read as written only";
    /// `urls`: a URL field wrapped in `<…>` or `(…)`, or opened by a quote
    /// that nothing closes (`<http://…>`, `'http://…`): the wrapper removed.
    pub const WRAPPER: &str = "brackets or a lone quote around the URL removed";
}

/// What reading one or more sources produced.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ParseReport {
    /// Lines read, including comments and blank lines.
    pub lines: u64,
    /// Entries that became a full hash.
    pub accepted: u64,
    /// Rejected lines by reason (see [`reason`]).
    pub rejected: BTreeMap<String, u64>,
    /// The first few rejected lines with their reason.
    pub samples: Vec<(String, String)>,
    /// Entry lines read differently from their raw bytes, by what was
    /// removed (see [`cleaned`]); a line can count under several kinds.
    pub cleaned: BTreeMap<String, u64>,
    /// Domain entries (host-wide, `host/`) on a name of more than
    /// [`AGENT_HOST_LABELS`] labels (`a.b.c.d.evil.example`): an agent checks
    /// a URL's exact host and the suffixes of its last five labels (Safe
    /// Browsing, "Suffix/Prefix Expressions"), so such an entry blocks that
    /// host alone, not its subdomains as a `hosts` or adblock list means.
    /// Listed all the same; counted so that the build says so.
    pub host_wide_too_deep: u64,
    /// Adblock URL rules that also stand for the URLs under their path
    /// (`||evil.example/a/b/c/d^`, read as `evil.example/a/b/c/d` and the
    /// directory `evil.example/a/b/c/d/`) where that directory is more than
    /// [`AGENT_PATH_PREFIXES`]` - 1` levels deep: an agent checks a URL's
    /// exact path and only its first [`AGENT_PATH_PREFIXES`] directory
    /// prefixes (`/`, `/a/`, `/a/b/`, `/a/b/c/`; Safe Browsing,
    /// "Suffix/Prefix Expressions"), so such a rule blocks its own URL (with
    /// any query) and that directory's, not the pages under it. Listed all
    /// the same; counted so that the build says so.
    pub directory_too_deep: u64,
}

/// The most labels of a URL's host an agent reads host suffixes from
/// (Safe Browsing: "the last five components").
pub(super) const AGENT_HOST_LABELS: usize = 5;

/// The most directory prefixes of a URL's path an agent checks, `/`
/// included (Safe Browsing: "the 4 paths formed by starting at the root").
pub(super) const AGENT_PATH_PREFIXES: usize = 4;

impl ParseReport {
    /// Total rejected lines.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.values().sum()
    }

    pub(super) fn reject(&mut self, line: &[u8], reason: impl Into<String>) {
        let reason = reason.into();
        if self.samples.len() < REJECT_SAMPLES {
            let shown: String = String::from_utf8_lossy(line).chars().take(200).collect();
            self.samples.push((shown, reason.clone()));
        }
        *self.rejected.entry(reason).or_default() += 1;
    }

    /// Adds `other`'s counts to this report.
    pub fn merge(&mut self, other: &ParseReport) {
        self.lines += other.lines;
        self.accepted += other.accepted;
        for (k, v) in &other.rejected {
            *self.rejected.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &other.cleaned {
            *self.cleaned.entry(k.clone()).or_default() += v;
        }
        self.host_wide_too_deep += other.host_wide_too_deep;
        self.directory_too_deep += other.directory_too_deep;
        for s in &other.samples {
            if self.samples.len() < REJECT_SAMPLES {
                self.samples.push(s.clone());
            }
        }
    }
}

/// What the build reads from one feed line: see [`read_line`](super::read_line).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineOutcome {
    /// What was removed from the line, or read twice, before its entries
    /// were read (items of [`cleaned`]); counted in [`ParseReport::cleaned`].
    pub cleaned: Vec<&'static str>,
    /// The line's entries, in order: none for a blank line or a comment,
    /// one for most lines, one per name of a `hosts` line (boilerplate
    /// names such as `localhost` are no entries).
    pub entries: Vec<EntryOutcome>,
}

impl LineOutcome {
    /// Whether the line holds no entry (blank, a comment, or only hosts
    /// boilerplate).
    pub fn is_skipped(&self) -> bool {
        self.entries.is_empty()
    }
}

/// One entry of a line: published, or rejected with its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryOutcome {
    /// Published. One reading, or two for a `urls` line with a space inside
    /// (cut at the space, and as written) when both are accepted and
    /// differ.
    Accepted(Vec<Reading>),
    /// Not published; counted in [`ParseReport::rejected`] under `reason`.
    Rejected {
        /// The entry as read (for a `urls` line with a space inside, the
        /// whole line), also kept as the report's sample.
        text: Vec<u8>,
        /// Why, one of [`reason`].
        reason: &'static str,
    },
}

/// One reading of an accepted entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// The entry exactly as the build reads it, what a user would visit:
    /// the URL or host name once white space, quotes, columns, comments,
    /// a doubled scheme, `*.` or adblock rule syntax are removed.
    /// Canonicalized, its most specific expression is one of `expressions`
    /// (the last for a URL written with `&amp;`).
    pub text: Vec<u8>,
    /// The expressions published for it: its most specific expression, and
    /// for a URL written with `&amp;` also that of the line as written (and
    /// of each level of escaping between, for `&amp;amp;`).
    /// Empty for a `sha256` line.
    pub expressions: Vec<String>,
    /// The full hashes published: SHA-256 of each expression, or the
    /// `sha256` line's hash.
    pub full_hashes: Vec<FullHash>,
}
