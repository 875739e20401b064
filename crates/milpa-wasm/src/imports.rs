//! Checks what a component imports against its [`Sandbox`] before anything runs, so a
//! component that asks for more than it was granted is refused at load (and by
//! `milpa check`), naming the import.
//!
//! What is refused, and what is not:
//!
//! - `wasi:http/*` without `allow_hosts`: no grant could let such a call through, so the
//!   component is refused rather than left to fail on every call;
//! - anything outside the WASI 0.2 interfaces the host links (`wasi:cli`, `wasi:clocks`,
//!   `wasi:filesystem`, `wasi:io`, `wasi:random`, `wasi:sockets`, and `wasi:http` when
//!   hosts are granted): nothing would satisfy it;
//! - `wasi:filesystem/*` is **not** refused without `fs_read`/`fs_write`: every program
//!   built on wasi-libc imports it through the preview-1 adapter, used or not. Without a
//!   folder grant there is simply no preopened folder, and every file access fails inside
//!   the guest;
//! - `wasi:sockets/*` is **not** refused either, for the same reason (libraries link it
//!   whether or not the tool opens a socket); it is linked with TCP, UDP and name lookup
//!   all denied, so every socket the guest tries to make fails inside the guest.

use crate::sandbox::Sandbox;

/// The WASI packages the host links for every component.
const ALWAYS_LINKED: &[&str] = &[
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:io/",
    "wasi:random/",
    "wasi:sockets/",
];

/// The package linked only when the sandbox grants hosts.
const HTTP: &str = "wasi:http/";

/// Why a component's imports were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImportRefused {
    /// The component imports something only a grant would allow, and the grant is absent.
    #[error(
        "the component imports `{import}`, which needs `{grant}` in its sandbox (none granted)"
    )]
    NeedsGrant {
        /// The import, e.g. `wasi:http/outgoing-handler@0.2.0`.
        import: String,
        /// The sandbox field that would grant it, e.g. `allow_hosts`.
        grant: &'static str,
    },
    /// The component imports something the host never provides.
    #[error(
        "the component imports `{import}`, which the sandbox does not provide (only WASI 0.2 cli, clocks, filesystem, io, random, sockets and, with allow_hosts, http)"
    )]
    Unsupported {
        /// The import as named by the component.
        import: String,
    },
}

/// Checks every import name against `sandbox`; the first refused import is the error.
pub fn check<'a>(
    imports: impl IntoIterator<Item = &'a str>,
    sandbox: &Sandbox,
) -> Result<(), ImportRefused> {
    for import in imports {
        if ALWAYS_LINKED
            .iter()
            .any(|prefix| import.starts_with(prefix))
        {
            continue;
        }
        if import.starts_with(HTTP) {
            if sandbox.allow_hosts.is_empty() {
                return Err(ImportRefused::NeedsGrant {
                    import: import.to_owned(),
                    grant: "allow_hosts",
                });
            }
            continue;
        }
        return Err(ImportRefused::Unsupported {
            import: import.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIBC: &[&str] = &[
        "wasi:cli/environment@0.2.0",
        "wasi:filesystem/preopens@0.2.0",
        "wasi:filesystem/types@0.2.0",
        "wasi:io/streams@0.2.0",
        "wasi:sockets/tcp@0.2.0",
    ];

    #[test]
    fn a_libc_program_needs_no_grant() {
        assert_eq!(check(LIBC.iter().copied(), &Sandbox::new()), Ok(()));
    }

    #[test]
    fn http_needs_hosts() {
        let imports = ["wasi:io/poll@0.2.0", "wasi:http/outgoing-handler@0.2.0"];
        let refused = check(imports, &Sandbox::new()).unwrap_err();
        assert_eq!(
            refused,
            ImportRefused::NeedsGrant {
                import: "wasi:http/outgoing-handler@0.2.0".into(),
                grant: "allow_hosts"
            }
        );
        assert!(
            refused
                .to_string()
                .contains("wasi:http/outgoing-handler@0.2.0")
        );
        assert_eq!(
            check(imports, &Sandbox::new().allow_host("localhost")),
            Ok(())
        );
    }

    #[test]
    fn unknown_interfaces_are_refused_by_name() {
        let refused = check(["acme:db/query@1.0.0"], &Sandbox::new()).unwrap_err();
        assert!(refused.to_string().contains("`acme:db/query@1.0.0`"));
    }
}
