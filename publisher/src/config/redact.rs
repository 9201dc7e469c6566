//! Source URLs as the publisher shows them: without credentials.

/// `url` with its userinfo and secret-looking query values replaced by
/// `***` ([`SourceConfig::public_label`](super::SourceConfig::public_label)).
pub fn redact_url(url: &str) -> String {
    // Names holding these anywhere (`api_key`, `X-Amz-Signature`), and the
    // short names that are secrets only whole (`pw`, not `pwr`).
    const SECRET: [&str; 10] = [
        "key",
        "token",
        "secret",
        "pass",
        "auth",
        "sig",
        "credential",
        "session",
        "jwt",
        "bearer",
    ];
    const SECRET_NAMES: [&str; 3] = ["pw", "pwd", "sid"];
    let (rest, fragment) = url.split_once('#').map_or((url, None), |(r, f)| (r, Some(f)));
    let (base, query) = rest.split_once('?').map_or((rest, None), |(b, q)| (b, Some(q)));
    let mut out = match base.split_once("://") {
        Some((scheme, after)) => {
            let end = after.find('/').unwrap_or(after.len());
            let (authority, path) = after.split_at(end);
            match authority.rfind('@') {
                Some(at) => format!("{scheme}://***@{}{path}", &authority[at + 1..]),
                None => base.to_owned(),
            }
        }
        None => base.to_owned(),
    };
    if let Some(query) = query {
        out.push('?');
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _))
                    if {
                        let name = name.to_ascii_lowercase();
                        SECRET.iter().any(|s| name.contains(s)) || SECRET_NAMES.contains(&name.as_str())
                    } =>
                {
                    format!("{name}=***")
                }
                _ => pair.to_owned(),
            })
            .collect();
        out.push_str(&pairs.join("&"));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn credentials_and_secret_query_values_are_hidden() {
        for (url, shown) in [
            ("https://feed.example/list.txt", "https://feed.example/list.txt"),
            (
                "https://user:pw@feed.example/l.txt",
                "https://***@feed.example/l.txt",
            ),
            ("https://token@feed.example/", "https://***@feed.example/"),
            (
                "https://feed.example/l?list=phish&api_key=abc&Token=x&format=csv#top",
                "https://feed.example/l?list=phish&api_key=***&Token=***&format=csv#top",
            ),
            (
                "https://feed.example/l?X-Amz-Signature=ab&X-Amz-Credential=cd",
                "https://feed.example/l?X-Amz-Signature=***&X-Amz-Credential=***",
            ),
            ("https://feed.example/a@b/c", "https://feed.example/a@b/c"),
            ("not a url?password=1", "not a url?password=***"),
            (
                "https://feed.example/l?PW=a&pwd=b&sid=c&sessionid=d&jwt=e&pwr=on&side=l",
                "https://feed.example/l?PW=***&pwd=***&sid=***&sessionid=***&jwt=***&pwr=on&side=l",
            ),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }
}
