//! Random identifiers: confirmation tokens, approval ids and the request id every call
//! without one gets. Below the context and the stores that hand them out.

use rand::RngCore;

/// 16 bytes from the operating system's CSPRNG-seeded generator, as 32 lowercase hex chars.
pub fn random_hex_128() -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    // Every call gets a request id from here: `encode_to_slice` writes the bytes directly,
    // where `hex::encode` goes through a char iterator (measured at about 1 % of a stdio
    // server's time at 32 calls in flight).
    let mut text = [0u8; 32];
    hex::encode_to_slice(bytes, &mut text).expect("32 hex digits for 16 bytes");
    String::from_utf8(text.to_vec()).expect("hex digits are ASCII")
}

#[cfg(test)]
mod tests {
    use super::random_hex_128;

    #[test]
    fn tokens_are_32_hex_chars_and_differ() {
        let a = random_hex_128();
        let b = random_hex_128();
        assert_eq!(a.len(), 32);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
    }
}
