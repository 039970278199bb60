//! A CRL bomb: a trusted leaf served with as many certificates of the
//! target's own making as fit in one handshake, each naming a CRL
//! distribution point, and a 10 MiB CRL that those certificates' issuer
//! (also served, self-made) really signed.
//!
//! A monitor that looks revocation up for every served certificate, and
//! verifies each CRL with any key the target served, fetches, verifies and
//! keeps one such list per certificate: hundreds of megabytes from one
//! hostile target. The chain still verifies: the extra certificates are
//! not on the path from the leaf to the trust anchor.
//!
//! The CRL is written here as DER by hand (and signed with aws-lc-rs)
//! rather than by rcgen: 388,000 entries through rcgen's builder take
//! seconds; this takes milliseconds.

use std::sync::OnceLock;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use axum::body::Bytes;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::CertificateDer;
use time::OffsetDateTime;

use super::pki::{now, Leaf};

/// The size the bomb's CRL reaches, just under what a monitor capping CRLs
/// at 10 MiB still reads whole.
pub const CRL_BYTES: usize = 10 * 1024 * 1024 - 4096;
/// rustls refuses a handshake message larger than this (64 KiB), so a
/// Certificate message holds no more.
const HANDSHAKE_MAX: usize = 0xffff;
/// Left free below [`HANDSHAKE_MAX`]: rustls counts the record framing
/// against the same buffer.
const HANDSHAKE_MARGIN: usize = 512;

/// The bomb's self-made issuer: its certificate (served) and its key.
pub struct BombCa {
    pub cert: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
    /// The same key, for signing the CRL.
    signer: EcdsaKeyPair,
    /// Its subject Name, DER: the CRL's issuer.
    name: Vec<u8>,
}

/// What the target serves, and the CRL its extra certificates name.
pub struct Bomb {
    /// `leaf` with its chain extended: leaf, intermediate, the bomb's
    /// issuer, then the extra certificates.
    pub leaf: Leaf,
    /// How many extra certificates name a CRL.
    pub extra: usize,
    /// The CRL each of them names: 10 MiB, signed by the bomb's issuer.
    pub crl: Bytes,
    /// The bomb issuer's SubjectPublicKeyInfo (DER), which verifies `crl`.
    pub issuer_key: Vec<u8>,
}

/// `leaf` (trusted, issued as usual) served with as many extra
/// certificates as fit in a handshake, the `i`th naming `crl_url(i)`.
pub fn bomb(leaf: Leaf, crl_url: impl Fn(usize) -> String) -> Bomb {
    let ca = bomb_ca();
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let mut leaf = leaf;
    leaf.chain.push(ca.cert.clone());
    let mut size = certificate_message(&leaf.chain);
    let mut extra = 0;
    loop {
        let cert = extra_cert(extra, &crl_url(extra), &key, ca);
        size += cert.len() + 5;
        if size > HANDSHAKE_MAX - HANDSHAKE_MARGIN {
            break;
        }
        leaf.chain.push(cert);
        extra += 1;
    }
    let (_, parsed) = x509_parser::parse_x509_certificate(&ca.cert).expect("bomb CA parses");
    Bomb {
        leaf,
        extra,
        crl: bomb_crl().clone(),
        issuer_key: parsed.public_key().raw.to_vec(),
    }
}

/// The bytes of a TLS 1.3 Certificate message's body for `chain`: the
/// context and list lengths, and per certificate its length and an empty
/// extension list.
fn certificate_message(chain: &[CertificateDer<'static>]) -> usize {
    4 + chain.iter().map(|c| c.len() + 5).sum::<usize>()
}

fn extra_cert(i: usize, url: &str, key: &KeyPair, ca: &BombCa) -> CertificateDer<'static> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .distinguished_name
        .push(DnType::CommonName, format!("bomb {i}"));
    params.not_before = now() - time::Duration::days(1);
    params.not_after = now() + time::Duration::days(30);
    params.crl_distribution_points = vec![rcgen::CrlDistributionPoint {
        uris: vec![url.to_string()],
    }];
    params
        .signed_by(key, &ca.issuer)
        .expect("bomb certificate")
        .der()
        .clone()
}

/// The bomb's issuer, made once per test binary.
pub fn bomb_ca() -> &'static BombCa {
    static CA: OnceLock<BombCa> = OnceLock::new();
    CA.get_or_init(|| {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let signer =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &key.serialize_der())
                .expect("the same key for aws-lc-rs");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, "Bomb CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.not_before = now() - time::Duration::days(1);
        params.not_after = now() + time::Duration::days(365);
        let cert = params.self_signed(&key).expect("bomb CA");
        let (_, parsed) = x509_parser::parse_x509_certificate(cert.der()).expect("parses");
        let name = parsed.subject().as_raw().to_vec();
        BombCa {
            cert: cert.der().clone(),
            issuer: Issuer::new(params, key),
            signer,
            name,
        }
    })
}

/// The bomb's CRL, made once per test binary: [`CRL_BYTES`] of revoked
/// serials, current for a day, signed by [`bomb_ca`].
pub fn bomb_crl() -> &'static Bytes {
    static CRL: OnceLock<Bytes> = OnceLock::new();
    CRL.get_or_init(|| Bytes::from(signed_crl(bomb_ca(), CRL_BYTES)))
}

/// A CRL of about `bytes` bytes signed by `ca` (RFC 5280 §5.1, v2, no
/// extensions).
fn signed_crl(ca: &BombCa, bytes: usize) -> Vec<u8> {
    // ecdsa-with-SHA256, without parameters.
    let algorithm = tlv(
        0x30,
        &tlv(0x06, &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02]),
    );
    let revoked_at = utc_time(now() - time::Duration::hours(1));
    // Each entry is 27 bytes: SEQUENCE { INTEGER (8 octets), UTCTime }.
    let entries = bytes.saturating_sub(1024) / 27;
    let mut revoked = Vec::with_capacity(entries * 27);
    for n in 0..entries as u64 {
        let serial = tlv(0x02, &(n | 1 << 56).to_be_bytes());
        revoked.extend(tlv(0x30, &[serial, revoked_at.clone()].concat()));
    }
    let tbs = tlv(
        0x30,
        &[
            tlv(0x02, &[1]),
            algorithm.clone(),
            ca.name.clone(),
            utc_time(now() - time::Duration::hours(1)),
            utc_time(now() + time::Duration::days(1)),
            tlv(0x30, &revoked),
        ]
        .concat(),
    );
    let signature = ca
        .signer
        .sign(&SystemRandom::new(), &tbs)
        .expect("sign the CRL");
    let bits = [&[0u8][..], signature.as_ref()].concat();
    tlv(0x30, &[tbs, algorithm, tlv(0x03, &bits)].concat())
}

/// One DER tag, length and value.
fn tlv(tag: u8, value: &[u8]) -> Vec<u8> {
    let len = value.len();
    let mut out = vec![tag];
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let octets: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | octets.len() as u8);
        out.extend(octets);
    }
    out.extend_from_slice(value);
    out
}

fn utc_time(at: OffsetDateTime) -> Vec<u8> {
    let format = time::macros::format_description!(
        "[year repr:last_two][month][day][hour][minute][second]Z"
    );
    tlv(0x17, at.format(&format).expect("UTCTime").as_bytes())
}
