//! Bearer-token authentication of the Alertmanager bridge.
//!
//! Alertmanager sends `Authorization: Bearer <token>` when its webhook
//! receiver has `http_config.authorization.credentials_file` (or
//! `credentials`) set. The token is compared in constant time.

use std::path::{Path, PathBuf};

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use subtle::ConstantTimeEq;
use tarsy_core::SecretValue;

/// How the bridge authenticates callers.
#[derive(Debug, Clone)]
pub enum BridgeAuth {
    /// Every request must carry `Authorization: Bearer <token>`.
    Bearer(SecretValue),
    /// No authentication (tests, or a network-isolated bridge). Must be
    /// chosen explicitly.
    Disabled,
}

/// The token could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Neither a file nor an environment variable was given.
    #[error("no bearer token configured: set a token file or environment variable")]
    NotConfigured,
    /// The token file could not be read.
    #[error("cannot read bearer token file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The environment variable is not set.
    #[error("environment variable {0} is not set")]
    MissingEnv(String),
    /// The token is empty (after trimming whitespace).
    #[error("the bearer token from {0} is empty")]
    Empty(String),
}

/// Loads the token from `file` if given, else from environment variable
/// `env`. Surrounding whitespace (a trailing newline in a Secret) is removed.
pub fn load_token(file: Option<&Path>, env: Option<&str>) -> Result<SecretValue, TokenError> {
    let (raw, origin) = match (file, env) {
        (Some(path), _) => (
            std::fs::read_to_string(path).map_err(|source| TokenError::Read {
                path: path.to_path_buf(),
                source,
            })?,
            path.display().to_string(),
        ),
        (None, Some(var)) => (
            std::env::var(var).map_err(|_| TokenError::MissingEnv(var.to_string()))?,
            format!("${var}"),
        ),
        (None, None) => return Err(TokenError::NotConfigured),
    };
    let token = raw.trim();
    if token.is_empty() {
        return Err(TokenError::Empty(origin));
    }
    Ok(SecretValue::new(token))
}

/// Why a request was not authenticated (the 401 body).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    /// No Authorization header.
    #[error("missing Authorization header: send `Authorization: Bearer <token>`")]
    Missing,
    /// Not the Bearer scheme, or not valid text.
    #[error("the Authorization header must use the Bearer scheme")]
    WrongScheme,
    /// Wrong token.
    #[error("invalid bearer token")]
    Invalid,
}

impl BridgeAuth {
    /// Checks the request's headers.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), AuthFailure> {
        let BridgeAuth::Bearer(expected) = self else {
            return Ok(());
        };
        let value = headers.get(AUTHORIZATION).ok_or(AuthFailure::Missing)?;
        let value = value.to_str().map_err(|_| AuthFailure::WrongScheme)?;
        let (scheme, token) = value.split_once(' ').ok_or(AuthFailure::WrongScheme)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(AuthFailure::WrongScheme);
        }
        let ok: bool = token
            .trim()
            .as_bytes()
            .ct_eq(expected.expose().as_bytes())
            .into();
        if ok {
            Ok(())
        } else {
            Err(AuthFailure::Invalid)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, v.parse().unwrap());
        h
    }

    #[test]
    fn bearer_checks() {
        let auth = BridgeAuth::Bearer(SecretValue::new("s3cret"));
        assert_eq!(auth.check(&HeaderMap::new()), Err(AuthFailure::Missing));
        assert_eq!(
            auth.check(&headers("Basic abc")),
            Err(AuthFailure::WrongScheme)
        );
        assert_eq!(
            auth.check(&headers("Bearer")),
            Err(AuthFailure::WrongScheme)
        );
        assert_eq!(
            auth.check(&headers("Bearer s3cre")),
            Err(AuthFailure::Invalid)
        );
        assert_eq!(
            auth.check(&headers("Bearer s3cret!")),
            Err(AuthFailure::Invalid)
        );
        assert_eq!(auth.check(&headers("Bearer s3cret")), Ok(()));
        assert_eq!(auth.check(&headers("bearer s3cret")), Ok(()));
        assert_eq!(BridgeAuth::Disabled.check(&HeaderMap::new()), Ok(()));
    }

    #[test]
    fn token_from_file_is_trimmed_and_must_not_be_empty() {
        let dir = std::env::temp_dir().join(format!("tarsy-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("token");
        std::fs::write(&f, "abc\n").unwrap();
        assert_eq!(load_token(Some(&f), None).unwrap().expose(), "abc");
        std::fs::write(&f, " \n").unwrap();
        assert!(matches!(
            load_token(Some(&f), None),
            Err(TokenError::Empty(_))
        ));
        assert!(matches!(
            load_token(Some(&dir.join("missing")), None),
            Err(TokenError::Read { .. })
        ));
        assert!(matches!(
            load_token(None, None),
            Err(TokenError::NotConfigured)
        ));
        assert!(matches!(
            load_token(None, Some("TARSY_WEBHOOKS_TEST_UNSET_VAR")),
            Err(TokenError::MissingEnv(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
