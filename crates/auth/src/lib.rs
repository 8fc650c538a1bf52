//! Who is calling, and whether they may: authentication ([`Authenticator`]: bearer
//! tokens, client certificates, a trusted authenticating proxy, or a team's own) and
//! Spin Cycle's authorization of `start` and `stop` by the specs' ACLs
//! (config-auth.md §6.3), with `admin_roles` and strict mode.
//!
//! [`Auth`] is what a server holds; `None` in its place means no authentication (every
//! caller may do everything, as in Spin Cycle's default plugin). Errors carry the text a
//! caller is told: [`Denied::Unauthenticated`] is 401, [`Denied::Forbidden`] 403.

mod acl;
pub mod oidc;
mod secret;
pub use secret::{SecretError, SecretSource};
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod tokens;

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::http::HeaderMap;

pub use acl::{AclEntry, Acls};
pub use tokens::{TOKEN_PREFIX, TokenLine, Tokens, TokensError, hash_token, new_token};

/// The name of the cookie the web UI keeps its token in.
pub const TOKEN_COOKIE: &str = "spindle_token";

/// How a caller was recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Token,
    ClientCertificate,
    Proxy,
    /// A team's own [`Authenticator`].
    Custom,
    /// A token of the OpenID Connect provider ([`oidc::Oidc`]).
    Oidc,
}

/// An authenticated caller: a person or a service, and its roles (opaque,
/// case-sensitive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: String,
    pub roles: Vec<String>,
    pub via: Via,
}

/// What a server knows of a connection besides its headers.
#[derive(Debug, Clone, Default)]
pub struct Peer {
    pub addr: Option<SocketAddr>,
    /// The client certificate the TLS handshake verified, if one was presented.
    pub certificate: Option<Certificate>,
}

impl Peer {
    /// The peer of a request: what the server put in its extensions, else axum's
    /// connection info (the address only).
    pub fn of(extensions: &axum::http::Extensions) -> Peer {
        if let Some(peer) = extensions.get::<Peer>() {
            return peer.clone();
        }
        Peer {
            addr: extensions
                .get::<axum::extract::ConnectInfo<SocketAddr>>()
                .map(|info| info.0),
            certificate: None,
        }
    }
}

/// The fields of a verified client certificate that authentication reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Certificate {
    /// The subject's common names (the first is the user).
    pub common_names: Vec<String>,
    /// The subject's organizational units.
    pub organizational_units: Vec<String>,
    /// The subject alternative names that are URIs.
    pub uris: Vec<String>,
}

/// Why a caller is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// No credentials, or credentials that are not valid (401).
    #[error("{0}")]
    Unauthenticated(String),
    /// Known, but not allowed (403).
    #[error("{0}")]
    Forbidden(String),
}

impl Denied {
    pub fn status(&self) -> u16 {
        match self {
            Denied::Unauthenticated(_) => 401,
            Denied::Forbidden(_) => 403,
        }
    }
}

/// One way of recognising callers. A team's own binary can add its own
/// (`spindle::main_with`).
pub trait Authenticator: Send + Sync + fmt::Debug + 'static {
    /// `Ok(None)`: this request carries no credentials of this kind (the next
    /// authenticator is asked); `Err`: it carries some, and they are not valid.
    fn authenticate(&self, headers: &HeaderMap, peer: &Peer) -> Result<Option<Caller>, Denied>;

    /// Run (awaited) before [`Authenticator::authenticate`] on each request: what needs
    /// the network first (an OpenID Connect provider's rotated keys). Nothing by default.
    fn prepare<'a>(
        &'a self,
        _headers: &'a HeaderMap,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
        Box::pin(async {})
    }

    /// The OpenID Connect provider this is, for the web UI's sign-in.
    fn oidc(&self) -> Option<&oidc::Oidc> {
        None
    }
}

/// Where a client certificate's roles come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertificateRoles {
    /// Each organizational unit (OU) of the subject is a role.
    OrganizationalUnits,
    /// Each URI subject alternative name that starts with this prefix is a role (the
    /// rest of it), such as `spiffe://example.org/role/`.
    UriPrefix(String),
}

/// Client certificates (mutual TLS): the subject's first common name is the user.
#[derive(Debug, Clone)]
pub struct ClientCertificates {
    pub roles: CertificateRoles,
}

impl Authenticator for ClientCertificates {
    fn authenticate(&self, _: &HeaderMap, peer: &Peer) -> Result<Option<Caller>, Denied> {
        let Some(cert) = &peer.certificate else {
            return Ok(None);
        };
        let Some(name) = cert.common_names.first() else {
            return Err(Denied::Unauthenticated(
                "the client certificate's subject has no common name (CN) to name the caller"
                    .to_owned(),
            ));
        };
        let roles = match &self.roles {
            CertificateRoles::OrganizationalUnits => cert.organizational_units.clone(),
            CertificateRoles::UriPrefix(prefix) => cert
                .uris
                .iter()
                .filter_map(|uri| uri.strip_prefix(prefix.as_str()))
                .filter(|role| !role.is_empty())
                .map(str::to_owned)
                .collect(),
        };
        Ok(Some(Caller {
            name: name.clone(),
            roles,
            via: Via::ClientCertificate,
        }))
    }
}

/// An address or a network (`10.0.0.0/8`, `::1/128`, or one address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    addr: IpAddr,
    prefix: u8,
}

impl std::str::FromStr for Network {
    type Err = String;

    fn from_str(text: &str) -> Result<Network, String> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = addr.trim().parse().map_err(|_| {
            format!(
                "{text:?} is not an address or a network; expected such as 10.0.0.5 or 10.0.0.0/8"
            )
        })?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))?,
            None => max,
        };
        Ok(Network { addr, prefix })
    }
}

impl Network {
    pub fn contains(&self, addr: IpAddr) -> bool {
        let addr = match addr {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, addr) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// An authenticating proxy in front of Spindle (an OAuth2/OIDC proxy, say): the user
/// and groups are read from its headers, and only from connections from its addresses;
/// from anywhere else those headers are refused.
#[derive(Debug, Clone)]
pub struct Proxy {
    pub user_header: String,
    /// Groups (roles), separated by commas.
    pub groups_header: String,
    pub trusted: Vec<Network>,
}

impl Authenticator for Proxy {
    fn authenticate(&self, headers: &HeaderMap, peer: &Peer) -> Result<Option<Caller>, Denied> {
        let Some(user) = headers.get(self.user_header.as_str()) else {
            return Ok(None);
        };
        let trusted = peer
            .addr
            .is_some_and(|addr| self.trusted.iter().any(|net| net.contains(addr.ip())));
        if !trusted {
            let from = peer
                .addr
                .map_or("an unknown address".to_owned(), |a| a.ip().to_string());
            return Err(Denied::Unauthenticated(format!(
                "header {} is only accepted from the authenticating proxy, not from {from}",
                self.user_header
            )));
        }
        let user = user
            .to_str()
            .ok()
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| {
                Denied::Unauthenticated(format!("header {} names no user", self.user_header))
            })?;
        let roles = headers
            .get(self.groups_header.as_str())
            .and_then(|v| v.to_str().ok())
            .map(|groups| {
                groups
                    .split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        Ok(Some(Caller {
            name: user.to_owned(),
            roles,
            via: Via::Proxy,
        }))
    }
}

/// What may be done, besides starting and stopping (which the specs' ACLs decide).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reading requests, their logs and output, the request list.
    Read,
    /// What Job Runners do: register, renew, report; and what a Request Manager asks of
    /// a Job Runner.
    Service,
    /// What a monitor reads: `/metrics` and `/readyz`. Granted to the metrics roles
    /// (a scraper's token need not read requests) and to whoever may read.
    Observe,
}

/// Authentication and authorization, as configured.
#[derive(Debug, Clone)]
pub struct Auth {
    pub authenticators: Vec<Arc<dyn Authenticator>>,
    pub acls: Acls,
    /// Callers with one of these roles may do anything, without the ACLs.
    pub admin_roles: Vec<String>,
    /// A request type without ACLs may not be started or stopped (but by admins).
    pub strict: bool,
    /// When set, only callers with one of these roles (or an admin role) may read.
    pub read_roles: Option<Vec<String>>,
    /// The roles of Job Runners and Request Managers talking to each other.
    pub service_roles: Vec<String>,
    /// The roles of monitors (a Prometheus, a load balancer's probe): they may read
    /// `/metrics` and `/readyz`, nothing else unless another role lets them.
    pub metrics_roles: Vec<String>,
}

impl Auth {
    /// What each authenticator needs before [`Auth::authenticate`] (see
    /// [`Authenticator::prepare`]).
    pub async fn prepare(&self, headers: &HeaderMap) {
        for authenticator in &self.authenticators {
            authenticator.prepare(headers).await;
        }
    }

    /// The OpenID Connect provider people sign in with, if one is configured.
    pub fn oidc(&self) -> Option<&oidc::Oidc> {
        self.authenticators.iter().find_map(|a| a.oidc())
    }

    /// The caller, by the first authenticator that finds credentials.
    pub fn authenticate(&self, headers: &HeaderMap, peer: &Peer) -> Result<Caller, Denied> {
        for authenticator in &self.authenticators {
            if let Some(caller) = authenticator.authenticate(headers, peer)? {
                return Ok(caller);
            }
        }
        Err(Denied::Unauthenticated(
            "authentication required: send a token (Authorization: Bearer ...) or a client certificate"
                .to_owned(),
        ))
    }

    fn has_any(caller: &Caller, roles: &[String]) -> bool {
        caller.roles.iter().any(|role| roles.contains(role))
    }

    pub fn is_admin(&self, caller: &Caller) -> bool {
        Self::has_any(caller, &self.admin_roles)
    }

    pub fn is_service(&self, caller: &Caller) -> bool {
        Self::has_any(caller, &self.service_roles)
    }

    /// Whether the caller may read, act as a service, or observe.
    pub fn allow(&self, caller: &Caller, access: Access) -> Result<(), Denied> {
        match access {
            Access::Observe if Self::has_any(caller, &self.metrics_roles) => Ok(()),
            Access::Observe => self.allow(caller, Access::Read).map_err(|_| {
                Denied::Forbidden(format!(
                    "denied: metrics and readiness require one of the roles {} or a reader's; caller {} has {}",
                    list(&self.metrics_roles),
                    caller.name,
                    list(&caller.roles)
                ))
            }),
            Access::Read => match &self.read_roles {
                Some(roles)
                    if !self.is_admin(caller)
                        && !self.is_service(caller)
                        && !Self::has_any(caller, roles) =>
                {
                    Err(Denied::Forbidden(format!(
                        "denied: reading requests requires one of the roles {}; caller has {}",
                        list(roles),
                        list(&caller.roles)
                    )))
                }
                _ => Ok(()),
            },
            Access::Service if self.is_service(caller) => Ok(()),
            Access::Service => Err(Denied::Forbidden(format!(
                "denied: only Job Runners and Request Managers may call this (roles {}); caller {} has {}",
                list(&self.service_roles),
                caller.name,
                list(&caller.roles)
            ))),
        }
    }

    /// Spin Cycle's authorization of `op` (`start`, `stop`) on a request of
    /// `request_type` (config-auth.md §6.3), with its messages.
    pub fn authorize(&self, caller: &Caller, op: &str, request_type: &str) -> Result<(), Denied> {
        if self.is_admin(caller) {
            return Ok(());
        }
        let Some(entries) = self.acls.get(request_type) else {
            return Err(Denied::Forbidden(format!(
                "denied: request {request_type} is not defined"
            )));
        };
        if entries.is_empty() {
            return if self.strict {
                Err(Denied::Forbidden(format!(
                    "denied: request {request_type} has no ACLs and strict auth is enabled"
                )))
            } else {
                Ok(())
            };
        }
        let mut role_matched = false;
        for entry in entries {
            if caller.roles.contains(&entry.role) {
                role_matched = true;
                if entry.admin || entry.ops.iter().any(|o| o == op) {
                    return Ok(());
                }
            }
        }
        if !role_matched {
            let required: Vec<String> = entries.iter().map(|e| e.role.clone()).collect();
            return Err(Denied::Forbidden(format!(
                "denied: no caller role matches {request_type} ACL: caller has {}, {request_type} requires one of {}",
                list(&caller.roles),
                list(&required)
            )));
        }
        Err(Denied::Forbidden(format!(
            "denied: no matching caller role granted {op} op for request {request_type}"
        )))
    }
}

/// Roles as Go prints a slice: `[a b]`.
fn list(roles: &[String]) -> String {
    format!("[{}]", roles.join(" "))
}

#[cfg(test)]
mod tests;
