//! WireGuard keys in the text form `wg genkey` and `wg pubkey` use: 32 bytes,
//! standard base64 with padding (44 characters).

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use boringtun::x25519;

/// A secret key's 32 bytes (a private or pre-shared key): `Debug` shows
/// none of them, and they are overwritten with zeros when dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret([u8; 32]);

impl Secret {
    /// Take these bytes as a secret.
    pub fn new(bytes: [u8; 32]) -> Self {
        Secret(bytes)
    }

    /// Return the bytes, to hand to the cryptography.
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

/// Why a key's text was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// Not base64.
    NotBase64,
    /// Base64, but not 32 bytes.
    WrongLength(usize),
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::NotBase64 => write!(
                f,
                "not a base64 key (expected 44 characters as `wg genkey` prints)"
            ),
            KeyError::WrongLength(n) => write!(f, "decodes to {n} bytes, a key has 32"),
        }
    }
}

impl std::error::Error for KeyError {}

/// Decode a key's 32 bytes from its base64 text.
pub fn decode_key(text: &str) -> Result<[u8; 32], KeyError> {
    let bytes = STANDARD
        .decode(text.trim())
        .map_err(|_| KeyError::NotBase64)?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| KeyError::WrongLength(bytes.len()))
}

/// Encode 32 key bytes as base64 text.
pub fn encode_key(key: &[u8; 32]) -> String {
    STANDARD.encode(key)
}

/// Turn 32 random bytes into a private key, clamped as `wg genkey` clamps it
/// (RFC 7748), so the printed text is byte-for-byte what `wg` would accept
/// and print back.
pub fn private_key_from_random(mut bytes: [u8; 32]) -> [u8; 32] {
    bytes[0] &= 248;
    bytes[31] &= 127;
    bytes[31] |= 64;
    bytes
}

/// Return the public key of a private key.
pub fn public_key(private: &[u8; 32]) -> [u8; 32] {
    let secret = x25519::StaticSecret::from(*private);
    x25519::PublicKey::from(&secret).to_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_key_matches_rfc7748_vector() {
        // RFC 7748 section 6.1, Alice's key pair, in wg's base64 form.
        let private = decode_key("dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=").unwrap();
        assert_eq!(
            encode_key(&public_key(&private)),
            "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="
        );
    }

    #[test]
    fn generated_keys_are_clamped_like_wg_genkey() {
        let key = private_key_from_random([0xff; 32]);
        assert_eq!(key[0] & 7, 0);
        assert_eq!(key[31] & 0xc0, 0x40);
        assert_eq!(encode_key(&key).len(), 44);
    }

    #[test]
    fn rejects_bad_key_text() {
        assert_eq!(decode_key("not a key!"), Err(KeyError::NotBase64));
        assert_eq!(decode_key("AAAA"), Err(KeyError::WrongLength(3)));
        assert!(decode_key(" dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=\n").is_ok());
    }
}
