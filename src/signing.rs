//! The vantages' Ed25519 keys: a node's signing key (a PKCS#8 PEM file,
//! as `vigie vantage keygen` or `openssl genpkey -algorithm ed25519`
//! writes it) and its peers' public keys (`ed25519:BASE64` in
//! `config.toml`), on the aws-lc-rs that rustls already uses.
//!
//! What is signed, and how it is laid out in the bucket, is
//! `vantage/signed.rs`'s; this module only holds keys and bytes.

use std::fmt;
use std::sync::Arc;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;

const PEM_BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const PEM_END: &str = "-----END PRIVATE KEY-----";
const PUBLIC_PREFIX: &str = "ed25519:";

/// A node's private key. No `Debug` of the secret: it shows the public
/// key only.
#[derive(Clone)]
pub struct SigningKey {
    pair: Arc<Ed25519KeyPair>,
    public: PublicKey,
}

/// A peer's public key, `ed25519:BASE64` in text.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PublicKey([u8; 32]);

impl SigningKey {
    /// A new key, and the text of its key file (PEM, PKCS#8 v2).
    pub fn generate() -> Result<(SigningKey, String), String> {
        let document = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
            .map_err(|_| "the system random source failed".to_string())?;
        let key = SigningKey::from_pkcs8(document.as_ref())?;
        Ok((key, pem(document.as_ref())))
    }

    /// A key file's text; `Err` says what is wrong with it.
    pub fn from_pem(text: &str) -> Result<SigningKey, String> {
        let body = text
            .trim()
            .strip_prefix(PEM_BEGIN)
            .and_then(|rest| rest.trim_end().strip_suffix(PEM_END))
            .ok_or_else(|| {
                format!("is not a PEM private key ({PEM_BEGIN} ... {PEM_END}); make one with `vigie vantage keygen NODE --out DIR`")
            })?;
        let base64: String = body.split_whitespace().collect();
        let der = STANDARD
            .decode(base64)
            .map_err(|e| format!("holds a private key that is not valid base64: {e}"))?;
        SigningKey::from_pkcs8(&der)
    }

    fn from_pkcs8(der: &[u8]) -> Result<SigningKey, String> {
        let pair = Ed25519KeyPair::from_pkcs8(der)
            .map_err(|e| format!("is not an Ed25519 private key ({e}); make one with `vigie vantage keygen NODE --out DIR`"))?;
        let mut public = [0u8; 32];
        public.copy_from_slice(pair.public_key().as_ref());
        Ok(SigningKey {
            pair: Arc::new(pair),
            public: PublicKey(public),
        })
    }

    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// The signature of `message`, in text (`ed25519:BASE64`).
    pub fn sign(&self, message: &[u8]) -> String {
        let signature = self.pair.sign(message);
        format!("{PUBLIC_PREFIX}{}", STANDARD.encode(signature.as_ref()))
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({})", self.public)
    }
}

/// Keys compare by their public half: a reloaded config with the same key
/// file is the same config.
impl PartialEq for SigningKey {
    fn eq(&self, other: &Self) -> bool {
        self.public == other.public
    }
}

impl Eq for SigningKey {}

impl PublicKey {
    /// `ed25519:BASE64` (32 bytes); `Err` says what is wrong.
    pub fn parse(text: &str) -> Result<PublicKey, String> {
        let Some(base64) = text.strip_prefix(PUBLIC_PREFIX) else {
            return Err(format!(
                "{text:?} is not a public key: write \"ed25519:BASE64\", as `vigie vantage keygen` prints it"
            ));
        };
        let bytes = STANDARD
            .decode(base64)
            .map_err(|e| format!("{text:?} is not valid base64 after \"ed25519:\": {e}"))?;
        let key: [u8; 32] = bytes.try_into().map_err(|b: Vec<u8>| {
            format!(
                "{text:?} holds {} bytes; an Ed25519 public key has 32",
                b.len()
            )
        })?;
        Ok(PublicKey(key))
    }

    /// Whether `signature` (`ed25519:BASE64`) is this key's over `message`.
    pub fn verifies(&self, message: &[u8], signature: &str) -> bool {
        let Some(bytes) = signature
            .strip_prefix(PUBLIC_PREFIX)
            .and_then(|b| STANDARD.decode(b).ok())
        else {
            return false;
        };
        UnparsedPublicKey::new(&ED25519, self.0)
            .verify(message, &bytes)
            .is_ok()
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PUBLIC_PREFIX}{}", STANDARD.encode(self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// PKCS#8 DER as PEM, 64 columns.
fn pem(der: &[u8]) -> String {
    let base64 = STANDARD.encode(der);
    let mut out = format!("{PEM_BEGIN}\n");
    for line in base64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(PEM_END);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_reads_back_signs_and_verifies() {
        let (key, file) = SigningKey::generate().unwrap();
        let again = SigningKey::from_pem(&file).unwrap();
        assert_eq!(again.public(), key.public());
        let public = PublicKey::parse(&key.public().to_string()).unwrap();
        let signature = key.sign(b"state");
        assert!(public.verifies(b"state", &signature));
        assert!(!public.verifies(b"other", &signature));
        assert!(!public.verifies(b"state", "ed25519:AAAA"));
        let (other, _) = SigningKey::generate().unwrap();
        assert!(!other.public().verifies(b"state", &signature));
        assert!(!format!("{key:?}").contains(&file[30..60]));
    }

    #[test]
    fn bad_texts_say_what_to_write() {
        assert!(PublicKey::parse("fra")
            .unwrap_err()
            .contains("ed25519:BASE64"));
        assert!(PublicKey::parse("ed25519:AAAA").unwrap_err().contains("32"));
        assert!(SigningKey::from_pem("nope").unwrap_err().contains("keygen"));
    }
}
