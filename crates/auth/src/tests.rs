use std::collections::HashMap;
use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue};

use crate::*;

fn caller(roles: &[&str]) -> Caller {
    Caller {
        name: "ann".to_owned(),
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        via: Via::Token,
    }
}

fn entry(role: &str, admin: bool, ops: &[&str]) -> AclEntry {
    AclEntry {
        role: role.to_owned(),
        admin,
        ops: ops.iter().map(|o| (*o).to_owned()).collect(),
    }
}

/// Spin Cycle's test cases 127 and 128 (test-cases.md §O): ACLs {role1: admin, role2:
/// [start, stop]}, admin roles [finch], strict.
fn spin_cycle_auth(strict: bool) -> Auth {
    let acls = Acls::new(HashMap::from([
        (
            "req1".to_owned(),
            vec![
                entry("role1", true, &[]),
                entry("role2", false, &["start", "stop"]),
            ],
        ),
        ("open".to_owned(), Vec::new()),
    ]));
    Auth {
        authenticators: Vec::new(),
        acls,
        admin_roles: vec!["finch".to_owned()],
        strict,
        read_roles: None,
        service_roles: vec!["spindle".to_owned()],
        metrics_roles: vec!["metrics".to_owned()],
    }
}

#[test]
fn spin_cycles_acl_cases() {
    let auth = spin_cycle_auth(true);
    assert_eq!(
        auth.authorize(&caller(&["dev"]), "start", "req1"),
        Err(Denied::Forbidden(
            "denied: no caller role matches req1 ACL: caller has [dev], req1 requires one of [role1 role2]"
                .to_owned()
        ))
    );
    assert_eq!(
        auth.authorize(&caller(&["role2"]), "foo", "req1"),
        Err(Denied::Forbidden(
            "denied: no matching caller role granted foo op for request req1".to_owned()
        ))
    );
    assert_eq!(auth.authorize(&caller(&["finch"]), "start", "req1"), Ok(()));
    assert_eq!(
        auth.authorize(&caller(&["finch"]), "start", "nope"),
        Ok(()),
        "admins pass everything"
    );
    assert_eq!(auth.authorize(&caller(&["role2"]), "start", "req1"), Ok(()));
    assert_eq!(auth.authorize(&caller(&["role2"]), "stop", "req1"), Ok(()));
    assert_eq!(
        auth.authorize(&caller(&["role1"]), "anything", "req1"),
        Ok(())
    );
    assert_eq!(
        auth.authorize(&caller(&["role2"]), "start", "foo"),
        Err(Denied::Forbidden(
            "denied: request foo is not defined".to_owned()
        ))
    );
    // 128: an empty ACL list.
    assert_eq!(
        auth.authorize(&caller(&["dev"]), "start", "open"),
        Err(Denied::Forbidden(
            "denied: request open has no ACLs and strict auth is enabled".to_owned()
        ))
    );
    assert_eq!(
        spin_cycle_auth(false).authorize(&caller(&["dev"]), "start", "open"),
        Ok(())
    );
    assert_eq!(
        auth.authorize(&caller(&[]), "start", "req1"),
        Err(Denied::Forbidden(
            "denied: no caller role matches req1 ACL: caller has [], req1 requires one of [role1 role2]"
                .to_owned()
        ))
    );
}

#[test]
fn reading_and_service_calls_need_their_roles() {
    let mut auth = spin_cycle_auth(false);
    assert_eq!(auth.allow(&caller(&["dev"]), Access::Read), Ok(()));
    auth.read_roles = Some(vec!["viewer".to_owned()]);
    assert!(matches!(
        auth.allow(&caller(&["dev"]), Access::Read),
        Err(Denied::Forbidden(_))
    ));
    assert_eq!(auth.allow(&caller(&["viewer"]), Access::Read), Ok(()));
    assert_eq!(auth.allow(&caller(&["finch"]), Access::Read), Ok(()));
    assert_eq!(auth.allow(&caller(&["spindle"]), Access::Service), Ok(()));
    let err = auth
        .allow(&caller(&["finch"]), Access::Service)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "denied: only Job Runners and Request Managers may call this (roles [spindle]); caller ann has [finch]"
    );
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(*name, HeaderValue::from_str(value).unwrap());
    }
    map
}

#[test]
fn tokens_are_kept_as_hashes_and_read_from_the_header_or_the_cookie() {
    let token = new_token();
    assert!(
        token.starts_with(TOKEN_PREFIX) && token.len() > 40,
        "{token}"
    );
    assert_ne!(new_token(), token);
    let line = TokenLine::of(&token, "ann", &["dev".to_owned(), "ops".to_owned()]);
    let text = format!(
        "# tokens\n\n{line}\n{}\n",
        TokenLine::of("other", "bob", &[])
    );
    assert!(!text.contains(&token), "only the hash is in the file");
    let tokens = Tokens::parse("tokens", &text).unwrap();
    assert_eq!(tokens.len(), 2);
    let peer = Peer::default();
    let found = tokens
        .authenticate(
            &headers(&[("authorization", &format!("Bearer {token}"))]),
            &peer,
        )
        .unwrap()
        .unwrap();
    assert_eq!(
        (found.name.as_str(), found.roles.clone()),
        ("ann", vec!["dev".to_owned(), "ops".to_owned()])
    );
    let from_cookie = tokens
        .authenticate(
            &headers(&[("cookie", &format!("theme=dark; {TOKEN_COOKIE}={token}"))]),
            &peer,
        )
        .unwrap()
        .unwrap();
    assert_eq!(from_cookie.name, "ann");
    assert_eq!(tokens.authenticate(&HeaderMap::new(), &peer), Ok(None));
    assert_eq!(
        tokens.authenticate(&headers(&[("authorization", "Bearer spindle_nope")]), &peer),
        Err(Denied::Unauthenticated(
            "the token is not valid (unknown or revoked)".to_owned()
        ))
    );
    assert!(matches!(
        tokens.authenticate(
            &headers(&[("authorization", "Basic YWxhZGRpbjpvcGVu")]),
            &peer
        ),
        Err(Denied::Unauthenticated(_))
    ));
    // A broken file says which line and what was expected.
    let err = Tokens::parse("t.txt", "sha256:abc ann\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("t.txt:1: \"sha256:abc\" is not a token hash"),
        "{err}"
    );
    let err = Tokens::parse("t.txt", &format!("\n{} \n", hash_token("x")))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("t.txt:2: the line names no user"), "{err}");
    let err = Tokens::parse("t.txt", &format!("{} ann dev ops\n", hash_token("x")))
        .unwrap_err()
        .to_string();
    assert!(err.contains("unexpected \"ops\""), "{err}");
}

#[test]
fn the_proxys_headers_count_only_from_the_proxy() {
    let proxy = Proxy {
        user_header: "x-forwarded-user".to_owned(),
        groups_header: "x-forwarded-groups".to_owned(),
        trusted: vec!["10.1.0.0/16".parse().unwrap(), "::1".parse().unwrap()],
    };
    let sent = headers(&[
        ("x-forwarded-user", "carol"),
        ("x-forwarded-groups", "dev, ops"),
    ]);
    let from = |addr: &str| Peer {
        addr: Some(addr.parse().unwrap()),
        certificate: None,
    };
    let found = proxy
        .authenticate(&sent, &from("10.1.2.3:5000"))
        .unwrap()
        .unwrap();
    assert_eq!(found.name, "carol");
    assert_eq!(found.roles, ["dev", "ops"]);
    assert!(
        proxy
            .authenticate(&sent, &from("[::1]:5000"))
            .unwrap()
            .is_some()
    );
    let err = proxy
        .authenticate(&sent, &from("10.2.0.1:5000"))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "header x-forwarded-user is only accepted from the authenticating proxy, not from 10.2.0.1"
    );
    assert_eq!(
        proxy.authenticate(&HeaderMap::new(), &from("10.2.0.1:1")),
        Ok(None)
    );
    assert!("10.0.0.0/33".parse::<Network>().is_err());
    assert!("nope".parse::<Network>().is_err());
    assert!(
        "0.0.0.0/0"
            .parse::<Network>()
            .unwrap()
            .contains("192.0.2.1".parse().unwrap())
    );
}

#[test]
fn a_client_certificate_names_the_caller_and_its_roles() {
    let cert = Certificate {
        common_names: vec!["jr-7".to_owned()],
        organizational_units: vec!["spindle".to_owned()],
        uris: vec![
            "spiffe://example.org/role/runner".to_owned(),
            "https://x".to_owned(),
        ],
    };
    let peer = Peer {
        addr: None,
        certificate: Some(cert),
    };
    let by_ou = ClientCertificates {
        roles: CertificateRoles::OrganizationalUnits,
    };
    let found = by_ou
        .authenticate(&HeaderMap::new(), &peer)
        .unwrap()
        .unwrap();
    assert_eq!(
        (found.name.as_str(), found.roles.as_slice()),
        ("jr-7", &["spindle".to_owned()][..])
    );
    let by_uri = ClientCertificates {
        roles: CertificateRoles::UriPrefix("spiffe://example.org/role/".to_owned()),
    };
    assert_eq!(
        by_uri
            .authenticate(&HeaderMap::new(), &peer)
            .unwrap()
            .unwrap()
            .roles,
        ["runner"]
    );
    assert_eq!(
        by_ou.authenticate(&HeaderMap::new(), &Peer::default()),
        Ok(None)
    );
    // The first authenticator that finds credentials decides.
    let auth = Auth {
        authenticators: vec![Arc::new(by_ou), Arc::new(Tokens::default())],
        ..spin_cycle_auth(false)
    };
    assert_eq!(
        auth.authenticate(&HeaderMap::new(), &peer).unwrap().name,
        "jr-7"
    );
    assert!(matches!(
        auth.authenticate(&HeaderMap::new(), &Peer::default()),
        Err(Denied::Unauthenticated(_))
    ));
}
