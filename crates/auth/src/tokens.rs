//! Bearer tokens: a file of their SHA-256 hashes, each with a user and roles. A token is
//! shown once, when `spindle token create` makes it; the server keeps only hashes and
//! never logs a token.
//!
//! A line of the file: `sha256:<64 hex digits> <user> [<role>,<role>...]`; blank lines
//! and lines starting with `#` are ignored.

use std::collections::HashMap;
use std::path::Path;

use axum::http::{HeaderMap, header};
use base64::Engine as _;
use sha2::{Digest as _, Sha256};

use crate::{Authenticator, Caller, Denied, Peer, TOKEN_COOKIE, Via};

/// What every Spindle token starts with (so that a leaked one is recognisable).
pub const TOKEN_PREFIX: &str = "spindle_";

/// A new token: the prefix and 32 random bytes, base64url.
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::random();
    format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// The hash a tokens file keeps: `sha256:` and 64 hex digits.
pub fn hash_token(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    let mut hex = String::with_capacity(71);
    hex.push_str("sha256:");
    for byte in digest {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// One line of a tokens file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenLine {
    pub hash: String,
    pub user: String,
    pub roles: Vec<String>,
}

impl TokenLine {
    /// The line for a token, to add to the file.
    pub fn of(token: &str, user: &str, roles: &[String]) -> TokenLine {
        TokenLine {
            hash: hash_token(token),
            user: user.to_owned(),
            roles: roles.to_vec(),
        }
    }
}

impl std::fmt::Display for TokenLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.hash, self.user)?;
        if !self.roles.is_empty() {
            write!(f, " {}", self.roles.join(","))?;
        }
        Ok(())
    }
}

/// The tokens of a tokens file, by hash.
/// Why a tokens file cannot be used: it cannot be read, or a line (named `file:line`) is
/// not what `spindle token create` prints.
#[derive(Debug, thiserror::Error)]
pub enum TokensError {
    /// The file's error is in the message (not a source: printed once).
    #[error("cannot read the tokens file {}: {error}", path.display())]
    Read {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
    #[error("{at}: {problem}")]
    Line { at: String, problem: String },
}

#[derive(Debug, Clone, Default)]
pub struct Tokens {
    by_hash: HashMap<String, (String, Vec<String>)>,
}

impl Tokens {
    /// Reads a tokens file; an error names the line and what was expected.
    pub fn parse(file: &str, text: &str) -> Result<Tokens, TokensError> {
        let mut by_hash = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = || format!("{file}:{}", n + 1);
            let bad = |problem: String| TokensError::Line { at: at(), problem };
            let mut words = line.split_whitespace();
            let hash = words.next().unwrap_or_default();
            let valid = hash
                .strip_prefix("sha256:")
                .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
            if !valid {
                return Err(bad(format!(
                    "{hash:?} is not a token hash; expected sha256: and 64 hex digits (the line `spindle token create` prints)"
                )));
            }
            let Some(user) = words.next() else {
                return Err(bad(
                    "the line names no user; expected HASH USER [ROLE,...]".to_owned()
                ));
            };
            let roles: Vec<String> = words
                .next()
                .map(|r| {
                    r.split(',')
                        .filter(|r| !r.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            if let Some(extra) = words.next() {
                return Err(bad(format!(
                    "unexpected {extra:?}; expected HASH USER [ROLE,ROLE...] (roles separated by commas, no spaces)"
                )));
            }
            if by_hash
                .insert(hash.to_ascii_lowercase(), (user.to_owned(), roles))
                .is_some()
            {
                return Err(bad("the same token hash is listed twice".to_owned()));
            }
        }
        Ok(Tokens { by_hash })
    }

    pub fn read(path: &Path) -> Result<Tokens, TokensError> {
        let text = std::fs::read_to_string(path).map_err(|error| TokensError::Read {
            path: path.to_owned(),
            error,
        })?;
        Tokens::parse(&path.display().to_string(), &text)
    }

    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }
}

/// The token a request carries: `Authorization: Bearer`, else the web UI's cookie.
pub(crate) fn presented(headers: &HeaderMap) -> Result<Option<String>, Denied> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let text = value.to_str().unwrap_or_default();
        let Some(token) = text
            .strip_prefix("Bearer ")
            .or_else(|| text.strip_prefix("bearer "))
        else {
            return Err(Denied::Unauthenticated(
                "the Authorization header is not a bearer token; expected Authorization: Bearer <token>"
                    .to_owned(),
            ));
        };
        return Ok(Some(token.trim().to_owned()));
    }
    for cookies in headers.get_all(header::COOKIE) {
        for pair in cookies.to_str().unwrap_or_default().split(';') {
            if let Some((name, value)) = pair.trim().split_once('=')
                && name == TOKEN_COOKIE
                && !value.is_empty()
            {
                return Ok(Some(value.to_owned()));
            }
        }
    }
    Ok(None)
}

impl Authenticator for Tokens {
    fn authenticate(&self, headers: &HeaderMap, _: &Peer) -> Result<Option<Caller>, Denied> {
        let Some(token) = presented(headers)? else {
            return Ok(None);
        };
        match self.by_hash.get(&hash_token(&token)) {
            Some((user, roles)) => Ok(Some(Caller {
                name: user.clone(),
                roles: roles.clone(),
                via: Via::Token,
            })),
            None => Err(Denied::Unauthenticated(
                "the token is not valid (unknown or revoked)".to_owned(),
            )),
        }
    }
}
