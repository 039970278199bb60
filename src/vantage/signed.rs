//! Every object a vantage writes to the bucket is signed with its key, so
//! that write access to the prefix is not enough to speak for a node: a
//! forged "up" state would veto every page, a forged claim would make
//! every node believe another one sent it.
//!
//! The object is an envelope around the JSON it carries:
//!
//! ```json
//! {"signer":"fra","signature":"ed25519:BASE64","signed":{ ...the state or claim... }}
//! ```
//!
//! The signature covers a domain tag, the object's name in the bucket and
//! the exact bytes of `signed` (kept raw, never re-serialised): an object
//! copied to another name (an old claim replayed for a new incident, one
//! node's state put in another's place) does not verify.
//!
//! What is not decided here: whether a verified object is current (the
//! clock checks are the state's and the claim's), and what a rejection
//! does (the callers').

use std::collections::BTreeMap;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::config::VantageConfig;
use crate::signing::{PublicKey, SigningKey};

/// The most of a node's state vigie reads: 1,000 checks take about 150 KB;
/// anything far beyond is not a vigie's state.
pub const MAX_STATE_BYTES: u64 = 8 << 20;

/// The most of a claim or an incident pointer: each is a few hundred bytes.
pub const MAX_CLAIM_BYTES: u64 = 4 << 10;

const DOMAIN: &[u8] = b"vigie vantage object v1\n";

/// Why an object from the bucket is not used: the `reason` label of
/// `vigie_vantage_rejected_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// The signature is not the signer's (or there is none).
    Signature,
    /// The object names another node than its signer, or a signer that is
    /// not in the fleet.
    Signer,
    /// Probes further in the future than `max_clock_skew`.
    ClockSkew,
    /// Over its size cap.
    Oversized,
    /// Not a vigie object at all (not JSON, or not this shape).
    Malformed,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Signature => "signature",
            Reason::Signer => "signer",
            Reason::ClockSkew => "clock_skew",
            Reason::Oversized => "oversized",
            Reason::Malformed => "malformed",
        }
    }
}

/// One refused object, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: Reason,
    pub detail: String,
    /// The node the object says signed it; empty when it does not say.
    pub signer: String,
    /// The same object refused before (unchanged ETag): not counted again.
    pub repeated: bool,
}

impl Rejection {
    pub fn new(reason: Reason, detail: impl Into<String>) -> Rejection {
        Rejection {
            reason,
            detail: detail.into(),
            signer: String::new(),
            repeated: false,
        }
    }

    fn by(mut self, signer: &str) -> Rejection {
        self.signer = signer.to_string();
        self
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.detail, self.reason.as_str())
    }
}

/// This node's key and every node's public key: what signs and verifies.
#[derive(Debug, Clone)]
pub struct Keys {
    node: String,
    key: SigningKey,
    public: BTreeMap<String, PublicKey>,
}

#[derive(Serialize)]
struct SealedOut<'a> {
    signer: &'a str,
    signature: String,
    signed: &'a RawValue,
}

#[derive(Deserialize)]
struct SealedIn<'a> {
    signer: String,
    signature: String,
    #[serde(borrow)]
    signed: &'a RawValue,
}

impl Keys {
    pub fn of(config: &VantageConfig) -> Keys {
        let mut public: BTreeMap<String, PublicKey> = config
            .peers
            .iter()
            .map(|p| (p.name.clone(), p.public_key.clone()))
            .collect();
        public.insert(config.node.clone(), config.signing_key.public().clone());
        Keys {
            node: config.node.clone(),
            key: config.signing_key.clone(),
            public,
        }
    }

    /// `value` as this node's signed object named `name`.
    pub fn seal<T: Serialize>(&self, name: &str, value: &T) -> Vec<u8> {
        seal_as(&self.key, &self.node, name, value)
    }

    /// The value of the signed object `name`, and its signer, if it
    /// verifies with a fleet node's key. `author` is the node the value
    /// says it is from, which must be its signer.
    pub fn open<T: DeserializeOwned>(
        &self,
        name: &str,
        bytes: &[u8],
        author: impl Fn(&T) -> &str,
    ) -> Result<(String, T), Rejection> {
        let sealed: SealedIn<'_> = serde_json::from_slice(bytes).map_err(|e| {
            Rejection::new(
                Reason::Malformed,
                format!("{name} is not a signed vantage object: {e}"),
            )
        })?;
        let signer = sealed.signer.as_str();
        let Some(public) = self.public.get(signer) else {
            let detail =
                format!("{name} is signed by {signer:?}, which is not a vantage of this fleet");
            return Err(Rejection::new(Reason::Signer, detail).by(signer));
        };
        if !public.verifies(&message(name, sealed.signed.get()), &sealed.signature) {
            let detail = format!("{name} does not verify with {signer}'s public key");
            return Err(Rejection::new(Reason::Signature, detail).by(signer));
        }
        let value: T = serde_json::from_str(sealed.signed.get())
            .map_err(|e| Rejection::new(Reason::Malformed, format!("{name}: {e}")).by(signer))?;
        let by = author(&value);
        if by != signer {
            let detail = format!("{name} names {by:?} but is signed by {signer}");
            return Err(Rejection::new(Reason::Signer, detail).by(signer));
        }
        Ok((sealed.signer, value))
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// `name` if it is a node of this fleet, else `unknown`: a metric
    /// label must not take whatever a forged object says.
    pub fn fleet_name<'a>(&self, name: &'a str) -> &'a str {
        match self.public.contains_key(name) {
            true => name,
            false => "unknown",
        }
    }
}

/// `value` signed by `signer` with `key`, as the object named `name`.
pub fn seal_as<T: Serialize>(key: &SigningKey, signer: &str, name: &str, value: &T) -> Vec<u8> {
    // Serialising vigie's own structs cannot fail (no maps with non-string
    // keys, no failing Serialize impls).
    let Ok(signed) = serde_json::value::to_raw_value(value) else {
        return Vec::new();
    };
    let signature = key.sign(&message(name, signed.get()));
    serde_json::to_vec(&SealedOut {
        signer,
        signature,
        signed: &signed,
    })
    .unwrap_or_default()
}

fn message(name: &str, signed: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(DOMAIN.len() + name.len() + 1 + signed.len());
    out.extend_from_slice(DOMAIN);
    out.extend_from_slice(name.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(signed.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Note {
        node: String,
        n: u32,
    }

    fn by_node(n: &Note) -> &str {
        &n.node
    }

    fn keys(node: &str, peers: &[(&str, &PublicKey)], key: SigningKey) -> Keys {
        let mut public: BTreeMap<String, PublicKey> = peers
            .iter()
            .map(|(n, k)| (n.to_string(), (*k).clone()))
            .collect();
        public.insert(node.to_string(), key.public().clone());
        Keys {
            node: node.into(),
            key,
            public,
        }
    }

    #[test]
    fn what_a_node_seals_its_peer_opens_and_nothing_else_verifies() {
        let (par_key, _) = SigningKey::generate().unwrap();
        let (fra_key, _) = SigningKey::generate().unwrap();
        let par = keys("par", &[("fra", fra_key.public())], par_key.clone());
        let fra = keys("fra", &[("par", par_key.public())], fra_key);
        let note = Note {
            node: "fra".into(),
            n: 1,
        };
        let sealed = fra.seal("v/fra/state.json", &note);
        let (signer, opened) = par.open("v/fra/state.json", &sealed, by_node).unwrap();
        assert_eq!((signer.as_str(), &opened), ("fra", &note));

        // Moved to another name: the signature no longer holds.
        let moved = par.open::<Note>("v/ams/state.json", &sealed, by_node);
        assert_eq!(moved.unwrap_err().reason, Reason::Signature);
        // Edited after signing.
        let text = String::from_utf8(sealed.clone()).unwrap();
        let edited = text.replace(r#""n":1"#, r#""n":2"#);
        let err = par.open::<Note>("v/fra/state.json", edited.as_bytes(), by_node);
        assert_eq!(err.unwrap_err().reason, Reason::Signature);
        // Unsigned, or signed by a stranger.
        let plain = serde_json::to_vec(&note).unwrap();
        let err = par.open::<Note>("v/fra/state.json", &plain, by_node);
        assert_eq!(err.unwrap_err().reason, Reason::Malformed);
        let stranger = text.replace(r#""signer":"fra""#, r#""signer":"evil""#);
        let err = par.open::<Note>("v/fra/state.json", stranger.as_bytes(), by_node);
        assert_eq!(err.unwrap_err().reason, Reason::Signer);
        // Signed by fra, but saying it is par's.
        let lying = fra.seal(
            "v/x",
            &Note {
                node: "par".into(),
                n: 1,
            },
        );
        let err = par.open::<Note>("v/x", &lying, by_node);
        assert_eq!(err.unwrap_err().reason, Reason::Signer);
    }
}
