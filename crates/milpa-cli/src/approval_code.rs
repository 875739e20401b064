//! The short code of an approval: six characters a person reads in `milpa approvals show`
//! (or `list`) and types at `milpa approvals grant|reject`, so a decision from a shell is
//! one a person meant for this approval, not a line an agent ran on its own.
//!
//! The code is derived from the approval's id (the first bytes of its SHA-256), so every
//! process computes the same one without storing it. It is no secret: whoever can read the
//! queue can read it. What it proves is that someone looked up this approval and typed its
//! code at a terminal (see the README on what that does and does not protect against).

use sha2::{Digest, Sha256};

/// The characters of a code: digits and capital letters without the look-alikes
/// `0`/`O`, `1`/`I`/`L` and `U`/`V`.
const ALPHABET: &[u8; 29] = b"23456789ABCDEFGHJKMNPQRSTWXYZ";

/// How many characters a code has (29^6, about 600 million codes).
pub(crate) const CODE_LEN: usize = 6;

/// The short code of the approval `id` (`7KQ2MX`).
///
/// ```
/// use milpa_cli::approval_code::short_code;
///
/// let code = short_code("0b8f6e1c-3d0a-4b7e-9a51-2f4c8d9e7a10");
/// assert_eq!(code.len(), 6);
/// assert_eq!(code, short_code("0b8f6e1c-3d0a-4b7e-9a51-2f4c8d9e7a10"));
/// ```
pub fn short_code(id: &str) -> String {
    let digest = Sha256::digest(id.trim().as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    let mut n = u64::from_be_bytes(bytes);
    let base = ALPHABET.len() as u64;
    (0..CODE_LEN)
        .map(|_| {
            let c = ALPHABET[(n % base) as usize] as char;
            n /= base;
            c
        })
        .collect()
}

/// Whether `typed` is the code of `id`: case and surrounding spaces do not matter.
pub(crate) fn matches(id: &str, typed: &str) -> bool {
    typed.trim().eq_ignore_ascii_case(&short_code(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_six_unambiguous_characters_stable_per_id() {
        let a = short_code("a");
        assert_eq!(a.len(), CODE_LEN);
        assert!(a.bytes().all(|c| ALPHABET.contains(&c)));
        assert!(!a.contains(['0', 'O', '1', 'I', 'L', 'U', 'V']));
        assert_eq!(a, short_code(" a "));
        assert_ne!(a, short_code("b"));
    }

    #[test]
    fn a_typed_code_matches_in_any_case() {
        let code = short_code("id-1");
        assert!(matches("id-1", &code));
        assert!(matches("id-1", &format!("  {}\n", code.to_lowercase())));
        assert!(!matches("id-1", &short_code("id-2")));
        assert!(!matches("id-1", ""));
    }
}
