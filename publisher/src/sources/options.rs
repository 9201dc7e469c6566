//! Options of the document formats.

/// Options of the formats that need them.
#[derive(Debug, Clone, Default)]
pub struct FormatOptions {
    /// CSV: the URL column's header name (default `url`, case-insensitive).
    pub column: Option<String>,
    /// CSV: the field separator (default `,`).
    pub delimiter: Option<u8>,
    /// JSON: the array to read (default `blacklist`).
    pub json_key: Option<String>,
    /// JSON: a document without the `json_key` array yields no entries
    /// instead of a rejection (for a block source's allow array, which most
    /// documents do not have).
    pub json_key_optional: bool,
}
