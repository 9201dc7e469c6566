//! A fetched feed as a whole: whether it is a list at all, and its lines.

/// Whether `bytes` look like an HTML page rather than a list: a feed URL that
/// answers with an error or login page must not be read as entries.
pub fn looks_like_html(bytes: &[u8]) -> bool {
    let start = bytes
        .strip_prefix(b"\xEF\xBB\xBF")
        .unwrap_or(bytes)
        .trim_ascii_start();
    let head: Vec<u8> = start.iter().take(512).map(u8::to_ascii_lowercase).collect();
    head.starts_with(b"<!doctype html") || head.starts_with(b"<html") || head.starts_with(b"<head")
}

/// A feed's lines, as the build splits them: on LF, and on a CR that is
/// not part of a CRLF pair (a file with old Mac line ends, or a stray CR
/// between two URLs: no URL holds a raw CR, browsers drop it). A final line
/// end does not start an extra line.
pub fn feed_lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let trimmed = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    trimmed
        .split(|&b| b == b'\n')
        .filter(move |_| !bytes.is_empty())
        .flat_map(|line| line.strip_suffix(b"\r").unwrap_or(line).split(|&b| b == b'\r'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_detection() {
        assert!(looks_like_html(b"\n  <!DOCTYPE html><html>"));
        assert!(looks_like_html(b"<html><body>Login</body></html>"));
        assert!(!looks_like_html(b"http://a.example/\n"));
    }
}
