//! Runbook URL rules: validation, GitHub rewriting, the domain allow-list.

use super::source::RunbookError;

/// A runbook URL ready to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunbookUrl {
    /// The URL as given (trimmed).
    pub original: String,
    /// Host of the original URL, lowercase, without port.
    pub original_host: String,
    /// The URL to fetch (raw content for GitHub blob URLs; no fragment).
    pub fetch_url: String,
    /// Host of `fetch_url`, lowercase, without port.
    pub fetch_host: String,
    /// True when `fetch_url` was rewritten from a GitHub page URL.
    pub rewritten: bool,
}

/// Validates a runbook URL and works out what to fetch.
///
/// Accepts `http` and `https` URLs with a host and without credentials.
/// `https://github.com/{owner}/{repo}/blob/{ref}/{path}` and `.../raw/...`
/// become `https://raw.githubusercontent.com/{owner}/{repo}/{ref}/{path}`
/// (query and fragment dropped); other URLs only lose their fragment.
pub fn resolve_runbook_url(url: &str) -> Result<RunbookUrl, RunbookError> {
    let original = url.trim().to_string();
    let invalid = |reason: &str| RunbookError::InvalidUrl {
        url: original.clone(),
        reason: reason.to_string(),
    };
    let (scheme, rest) = original
        .split_once("://")
        .ok_or_else(|| invalid("missing scheme (expected https://...)"))?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "https" && scheme != "http" {
        return Err(invalid("only http and https URLs are fetched"));
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let path_and_more = &rest[authority_end..];
    if authority.contains('@') {
        return Err(invalid("credentials in the URL are not allowed"));
    }
    let host = host_of(authority);
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(invalid("missing host"));
    }
    if original.contains(char::is_whitespace) {
        return Err(invalid("the URL contains whitespace"));
    }
    let without_fragment = match path_and_more.find('#') {
        Some(i) => &path_and_more[..i],
        None => path_and_more,
    };

    if host == "github.com" || host == "www.github.com" {
        let path = without_fragment.split('?').next().unwrap_or("");
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        if segments.len() >= 5 && (segments[2] == "blob" || segments[2] == "raw") {
            let fetch_url = format!(
                "https://raw.githubusercontent.com/{}/{}/{}",
                segments[0],
                segments[1],
                segments[3..].join("/")
            );
            return Ok(RunbookUrl {
                original_host: host,
                fetch_url,
                fetch_host: "raw.githubusercontent.com".to_string(),
                rewritten: true,
                original,
            });
        }
    }

    Ok(RunbookUrl {
        fetch_url: format!("{scheme}://{authority}{without_fragment}"),
        fetch_host: host.clone(),
        original_host: host,
        rewritten: false,
        original,
    })
}

/// `url` without its query string and fragment, as messages and logs show
/// it: a runbook URL's query may carry a credential (`?token=`, a signed
/// link).
pub fn url_for_display(url: &str) -> &str {
    let url = url.trim();
    &url[..url.find(['?', '#']).unwrap_or(url.len())]
}

/// `text` with runbook `url` — as given and as fetched — shown without its
/// query string and fragment.
pub(super) fn hide_queries(text: &str, url: &str) -> String {
    let mut urls = vec![url.trim().to_string()];
    urls.extend(resolve_runbook_url(url).ok().map(|t| t.fetch_url));
    // The longest first: the fetch URL may be a prefix of the given one.
    urls.sort_by_key(|u| std::cmp::Reverse(u.len()));
    let mut text = text.to_string();
    for u in &urls {
        let shown = url_for_display(u);
        if shown.len() < u.len() {
            text = text.replace(u.as_str(), shown);
        }
    }
    text
}

/// Lowercase host of an authority, without port (IPv6 brackets kept).
fn host_of(authority: &str) -> String {
    let host = if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => &authority[..=end],
            None => authority,
        }
    } else {
        authority.split(':').next().unwrap_or("")
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Hosts runbooks may be fetched from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainAllowList {
    entries: Vec<String>,
}

impl DomainAllowList {
    /// An allow-list of exact host names and `*.domain` wildcards (which
    /// match subdomains of `domain`, not `domain` itself). Entries are
    /// case-insensitive; blank entries are ignored.
    pub fn new<I, S>(entries: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self {
            entries: entries
                .into_iter()
                .map(|e| e.as_ref().trim().trim_end_matches('.').to_ascii_lowercase())
                .filter(|e| !e.is_empty())
                .collect(),
        }
    }

    /// `github.com` and `raw.githubusercontent.com`.
    pub fn github() -> Self {
        Self::new(["github.com", "raw.githubusercontent.com"])
    }

    /// Whether `host` (no port) is allowed.
    pub fn allows(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.entries
            .iter()
            .any(|entry| match entry.strip_prefix("*.") {
                Some(domain) => {
                    host.len() > domain.len() + 1 && host.ends_with(&format!(".{domain}"))
                }
                None => *entry == host,
            })
    }

    /// Whether the URL may be fetched: its fetch host is allowed, or it is a
    /// rewritten GitHub URL and `github.com` is allowed.
    pub fn allows_url(&self, url: &RunbookUrl) -> bool {
        self.allows(&url.fetch_host)
            || (url.rewritten && (self.allows(&url.original_host) || self.allows("github.com")))
    }

    /// The entries, for messages.
    pub fn entries(&self) -> &[String] {
        &self.entries
    }
}
