//! A throw-away test PKI, generated at test time with dates relative to now.
//!
//! Two hierarchies exist:
//! * the trusted one ([`test_ca`]): root "Vigie Test Root CA" and intermediate
//!   "Vigie Test Intermediate R1";
//! * an untrusted one named like Let's Encrypt staging ([`staging_ca`]): root
//!   "(STAGING) Pretend Pear X1" and intermediate "(STAGING) Artificial Apricot R3",
//!   O = "(STAGING) Let's Encrypt", C = US.
//!
//! Both are generated once per test binary (lazily) and shared by all tests.
//! Leaves are generated fresh on every call, with a fresh key.
//!
//! Validity windows of the scenario helpers are built so that the number of
//! *whole* days left (`(not_after - now).whole_days()`) is exactly the advertised
//! number: `not_after = now + N days + SLACK` (one hour).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rcgen::string::PrintableString;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use time::{Duration, OffsetDateTime};

/// The host name most scenarios are issued for.
pub const HOST: &str = "www.example.test";
/// The only name of [`wrong_host_leaf`].
pub const OTHER_HOST: &str = "other.test";
/// The SAN of [`wildcard_leaf`].
pub const WILDCARD: &str = "*.example.test";
/// Extra time added to `not_after` so that whole days left == the advertised number.
pub const SLACK: Duration = Duration::hours(1);
/// Lifetime of the scenario leaves.
pub const LIFETIME_DAYS: i64 = 90;

/// The current UTC time, truncated to whole seconds (X.509 has no sub-second precision).
pub fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .expect("zero nanoseconds is valid")
}

/// `n` days, as a `time::Duration`.
pub fn days(n: i64) -> Duration {
    Duration::days(n)
}

/// Key algorithm of a leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyAlg {
    /// ECDSA on P-256, signed with SHA-256.
    EcdsaP256,
    /// RSA 2048-bit, PKCS#1 v1.5 with SHA-256.
    Rsa2048,
}

impl KeyAlg {
    fn generate(self) -> KeyPair {
        let alg = match self {
            KeyAlg::EcdsaP256 => &rcgen::PKCS_ECDSA_P256_SHA256,
            KeyAlg::Rsa2048 => &rcgen::PKCS_RSA_SHA256,
        };
        KeyPair::generate_for(alg).expect("key generation")
    }
}

/// What a leaf certificate should look like.
#[derive(Clone, Debug)]
pub struct LeafSpec {
    /// DNS SANs (wildcards such as `*.example.test` allowed). The first one is also the CN.
    pub names: Vec<String>,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
    pub key: KeyAlg,
    /// The subject CN when it is not the first name (a hostile server's
    /// CN with escape sequences in it, say).
    pub common_name: Option<String>,
}

impl LeafSpec {
    /// A leaf for `names`, 90-day lifetime with 60 whole days left, ECDSA P-256.
    pub fn new<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        let (not_before, not_after) = window_days_left(60);
        LeafSpec {
            names: names.into_iter().map(Into::into).collect(),
            not_before,
            not_after,
            key: KeyAlg::EcdsaP256,
            common_name: None,
        }
    }

    /// Same spec with this subject CN (the SANs stay `names`).
    pub fn common_name(mut self, cn: impl Into<String>) -> Self {
        self.common_name = Some(cn.into());
        self
    }

    /// Same spec with another key algorithm.
    pub fn key(mut self, key: KeyAlg) -> Self {
        self.key = key;
        self
    }

    /// Same spec with an explicit validity window.
    pub fn validity(mut self, not_before: OffsetDateTime, not_after: OffsetDateTime) -> Self {
        self.not_before = not_before;
        self.not_after = not_after;
        self
    }

    /// Same spec with a 90-day lifetime and `n` whole days left (n may be negative).
    pub fn days_left(self, n: i64) -> Self {
        let (nb, na) = window_days_left(n);
        self.validity(nb, na)
    }
}

/// `(not_before, not_after)` of a 90-day certificate with `n` whole days left.
pub fn window_days_left(n: i64) -> (OffsetDateTime, OffsetDateTime) {
    let not_after = now() + days(n) + SLACK;
    (not_after - days(LIFETIME_DAYS), not_after)
}

/// An issued leaf: what a TLS server needs, plus PEM forms.
#[derive(Debug)]
pub struct Leaf {
    /// The leaf certificate alone.
    pub cert: CertificateDer<'static>,
    /// The leaf's private key, PKCS#8 DER.
    pub key_der: Vec<u8>,
    /// The chain to serve, leaf first (normally leaf + intermediate).
    pub chain: Vec<CertificateDer<'static>>,
    /// The leaf certificate, PEM.
    pub cert_pem: String,
    /// The leaf's private key, PKCS#8 PEM.
    pub key_pem: String,
    /// The spec it was issued from.
    pub spec: LeafSpec,
}

impl Leaf {
    /// The private key in the form rustls wants.
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }

    /// The same leaf, served alone (no intermediate in the chain).
    pub fn without_intermediate(mut self) -> Self {
        self.chain.truncate(1);
        self
    }
}

/// A CA certificate and what is needed to sign with it.
pub struct CaCert {
    /// The CA certificate's subject CN.
    pub common_name: String,
    pub cert: CertificateDer<'static>,
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for CaCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaCert")
            .field("common_name", &self.common_name)
            .finish_non_exhaustive()
    }
}

/// A root and an intermediate issued by it.
#[derive(Debug)]
pub struct Ca {
    pub root: CaCert,
    pub intermediate: CaCert,
}

fn dn(cn: &str, org: &str, country: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CountryName,
        DnValue::PrintableString(PrintableString::try_from(country).expect("printable country")),
    );
    dn.push(DnType::OrganizationName, org);
    dn.push(DnType::CommonName, cn);
    dn
}

fn ca_params(cn: &str, org: &str, country: &str, path_len: Option<u8>) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = dn(cn, org, country);
    params.is_ca = IsCa::Ca(match path_len {
        None => BasicConstraints::Unconstrained,
        Some(n) => BasicConstraints::Constrained(n),
    });
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

impl Ca {
    /// Generate a fresh hierarchy (ECDSA P-256 keys). Prefer [`test_ca`] / [`staging_ca`].
    pub fn generate(root_cn: &str, intermediate_cn: &str, org: &str, country: &str) -> Ca {
        let now = now();

        let root_key = KeyAlg::EcdsaP256.generate();
        let mut root_params = ca_params(root_cn, org, country, None);
        root_params.not_before = now - days(365);
        root_params.not_after = now + days(3650);
        let root_cert = root_params.self_signed(&root_key).expect("root self-sign");
        let root_issuer = Issuer::new(root_params, root_key);

        let int_key = KeyAlg::EcdsaP256.generate();
        let mut int_params = ca_params(intermediate_cn, org, country, Some(0));
        int_params.not_before = now - days(180);
        int_params.not_after = now + days(1825);
        int_params.use_authority_key_identifier_extension = true;
        let int_cert = int_params
            .signed_by(&int_key, &root_issuer)
            .expect("intermediate signing");
        let int_issuer = Issuer::new(int_params, int_key);

        Ca {
            root: CaCert {
                common_name: root_cn.to_string(),
                pem: root_cert.pem(),
                cert: root_cert.der().clone(),
                issuer: root_issuer,
            },
            intermediate: CaCert {
                common_name: intermediate_cn.to_string(),
                pem: int_cert.pem(),
                cert: int_cert.der().clone(),
                issuer: int_issuer,
            },
        }
    }

    /// Issue a leaf from the intermediate; chain = [leaf, intermediate].
    pub fn issue(&self, spec: &LeafSpec) -> Leaf {
        let key = spec.key.generate();
        let params = leaf_params(spec);
        let cert = params
            .signed_by(&key, &self.intermediate.issuer)
            .expect("leaf signing");
        Leaf {
            cert: cert.der().clone(),
            key_der: key.serialize_der(),
            chain: vec![cert.der().clone(), self.intermediate.cert.clone()],
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            spec: spec.clone(),
        }
    }

    /// Write the root certificate as PEM into `dir/file_name`; returns the path.
    pub fn write_root_pem_as(&self, dir: &Path, file_name: &str) -> PathBuf {
        let path = dir.join(file_name);
        std::fs::write(&path, &self.root.pem).expect("write root PEM");
        path
    }
}

fn leaf_params(spec: &LeafSpec) -> CertificateParams {
    let mut params = CertificateParams::new(spec.names.clone()).expect("valid SAN names");
    let mut dn = DistinguishedName::new();
    if let Some(cn) = spec.common_name.as_ref().or(spec.names.first()) {
        dn.push(DnType::CommonName, cn.as_str());
    }
    params.distinguished_name = dn;
    params.not_before = spec.not_before;
    params.not_after = spec.not_after;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = match spec.key {
        KeyAlg::EcdsaP256 => vec![KeyUsagePurpose::DigitalSignature],
        KeyAlg::Rsa2048 => vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ],
    };
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params
}

/// The trusted test hierarchy ("Vigie Test Root CA" / "Vigie Test Intermediate R1").
pub fn test_ca() -> &'static Ca {
    static CA: OnceLock<Ca> = OnceLock::new();
    CA.get_or_init(|| {
        Ca::generate(
            "Vigie Test Root CA",
            "Vigie Test Intermediate R1",
            "Vigie Test",
            "FR",
        )
    })
}

/// The untrusted, Let's-Encrypt-staging-like hierarchy.
pub fn staging_ca() -> &'static Ca {
    static CA: OnceLock<Ca> = OnceLock::new();
    CA.get_or_init(|| {
        Ca::generate(
            "(STAGING) Pretend Pear X1",
            "(STAGING) Artificial Apricot R3",
            "(STAGING) Let's Encrypt",
            "US",
        )
    })
}

/// Write the trusted test root as PEM to `dir/vigie-test-root.pem`; returns the path.
pub fn write_root_pem(dir: &Path) -> PathBuf {
    test_ca().write_root_pem_as(dir, "vigie-test-root.pem")
}

/// Write the staging root as PEM to `dir/staging-root.pem`; returns the path.
pub fn write_staging_root_pem(dir: &Path) -> PathBuf {
    staging_ca().write_root_pem_as(dir, "staging-root.pem")
}

/// Issue `spec` from the trusted test intermediate.
pub fn issue(spec: &LeafSpec) -> Leaf {
    test_ca().issue(spec)
}

/// A self-signed leaf for `spec` (not a CA, no issuer); chain = [leaf].
pub fn self_signed(spec: &LeafSpec) -> Leaf {
    let key = spec.key.generate();
    let cert = leaf_params(spec).self_signed(&key).expect("self-sign leaf");
    Leaf {
        cert: cert.der().clone(),
        key_der: key.serialize_der(),
        chain: vec![cert.der().clone()],
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        spec: spec.clone(),
    }
}

// ---- Scenario helpers (all for HOST unless said otherwise) ----

/// Valid: 90-day lifetime, 60 days left, ECDSA, trusted chain.
pub fn valid_leaf() -> Leaf {
    issue(&LeafSpec::new([HOST]))
}

/// Expired: 90-day lifetime that ended 2 days ago.
pub fn expired_leaf() -> Leaf {
    let not_after = now() - days(2);
    issue(&LeafSpec::new([HOST]).validity(not_after - days(LIFETIME_DAYS), not_after))
}

/// Not yet valid: 90-day lifetime starting in 3 days.
pub fn not_yet_valid_leaf() -> Leaf {
    let not_before = now() + days(3);
    issue(&LeafSpec::new([HOST]).validity(not_before, not_before + days(LIFETIME_DAYS)))
}

/// Wrong host: valid and trusted, but only for `other.test`.
pub fn wrong_host_leaf() -> Leaf {
    issue(&LeafSpec::new([OTHER_HOST]))
}

/// Self-signed leaf for HOST (60 days left), no CA involved.
pub fn self_signed_leaf() -> Leaf {
    self_signed(&LeafSpec::new([HOST]))
}

/// Leaf for HOST issued by the staging intermediate; chain = [leaf, staging intermediate].
pub fn staging_leaf() -> Leaf {
    staging_ca().issue(&LeafSpec::new([HOST]))
}

/// Valid trusted leaf served WITHOUT its intermediate; chain = [leaf].
pub fn missing_intermediate_leaf() -> Leaf {
    valid_leaf().without_intermediate()
}

/// Trusted leaf with `n` whole days left of a 90-day lifetime.
pub fn days_left_leaf(n: i64) -> Leaf {
    issue(&LeafSpec::new([HOST]).days_left(n))
}

/// Trusted leaf with 20 days left of a 90-day lifetime.
pub fn twenty_days_left_leaf() -> Leaf {
    days_left_leaf(20)
}

/// Trusted leaf with 5 days left of a 90-day lifetime.
pub fn five_days_left_leaf() -> Leaf {
    days_left_leaf(5)
}

/// Trusted wildcard leaf for `*.example.test` only (60 days left).
pub fn wildcard_leaf() -> Leaf {
    issue(&LeafSpec::new([WILDCARD]))
}

/// Trusted ECDSA P-256 leaf for HOST (same as [`valid_leaf`]).
pub fn ecdsa_leaf() -> Leaf {
    valid_leaf()
}

/// Trusted RSA-2048 leaf for HOST (60 days left).
pub fn rsa_leaf() -> Leaf {
    issue(&LeafSpec::new([HOST]).key(KeyAlg::Rsa2048))
}
