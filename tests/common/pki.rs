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
    /// A CRL distribution point (a loopback URL the test serves).
    pub crl_url: Option<String>,
    /// The serial number; random when `None`.
    pub serial: Option<u64>,
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
            crl_url: None,
            serial: None,
        }
    }

    /// Same spec naming `url` as its CRL distribution point.
    pub fn crl_url(mut self, url: impl Into<String>) -> Self {
        self.crl_url = Some(url.into());
        self
    }

    /// Same spec with this serial number.
    pub fn serial(mut self, serial: u64) -> Self {
        self.serial = Some(serial);
        self
    }

    /// Same spec valid for `lifetime` hours, `left` of them remaining
    /// (plus half an hour, so whole hours left == `left`).
    pub fn hours_left(self, left: i64, lifetime: i64) -> Self {
        let not_after = now() + Duration::hours(left) + Duration::minutes(30);
        self.validity(not_after - Duration::hours(lifetime), not_after)
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
    if let Some(url) = &spec.crl_url {
        params.crl_distribution_points = vec![rcgen::CrlDistributionPoint {
            uris: vec![url.clone()],
        }];
    }
    if let Some(serial) = spec.serial {
        params.serial_number = Some(rcgen::SerialNumber::from(serial));
    }
    params
}

/// A CRL (DER) signed by `signer` (an intermediate or root), listing
/// `revoked` serials as revoked an hour ago for key compromise; valid from
/// `this_update` to `next_update`.
pub fn crl(
    signer: &CaCert,
    revoked: &[u64],
    this_update: OffsetDateTime,
    next_update: OffsetDateTime,
) -> Vec<u8> {
    rcgen::CertificateRevocationListParams {
        this_update,
        next_update,
        crl_number: rcgen::SerialNumber::from(1u64),
        issuing_distribution_point: None,
        revoked_certs: revoked
            .iter()
            .map(|serial| rcgen::RevokedCertParams {
                serial_number: rcgen::SerialNumber::from(*serial),
                revocation_time: now() - Duration::hours(1),
                reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                invalidity_date: None,
            })
            .collect(),
        key_identifier_method: rcgen::KeyIdMethod::Sha256,
    }
    .signed_by(&signer.issuer)
    .expect("CRL signing")
    .der()
    .to_vec()
}

/// A hierarchy shaped like Let's Encrypt's Gen Y: a trusted "X1-like"
/// root; an "X2-like" root cross-signed by X1; a "Root-YE-like" root
/// cross-signed by X2; the "YE1-like" intermediate under Root YE; the
/// served chain is leaf, YE1, Root YE (by X2), X2 (by X1): three
/// certificates above the leaf.
pub struct GenY {
    /// The only anchor: self-signed X1.
    pub x1: CaCert,
    /// Root YE self-signed (an anchor in the "YE trusted" scenario).
    pub root_ye: CaCert,
    /// Root YE cross-signed by X2, and X2 cross-signed by X1 (served).
    pub root_ye_by_x2: CertificateDer<'static>,
    pub x2_by_x1: CertificateDer<'static>,
    pub ye1: CaCert,
}

impl GenY {
    /// `x2_days_left`: days left of X2's cross-sign by X1.
    pub fn generate(x2_days_left: i64) -> GenY {
        let now = now();
        let org = "Vigie Gen Y";
        let root = |cn: &str, key: &KeyPair| {
            let mut params = ca_params(cn, org, "US", None);
            params.not_before = now - days(365);
            params.not_after = now + days(3650);
            let cert = params.self_signed(key).expect("root self-sign");
            (params, cert)
        };
        let x1_key = KeyAlg::EcdsaP256.generate();
        let (x1_params, x1_cert) = root("Vigie Root X1", &x1_key);
        let x1 = Issuer::new(x1_params, x1_key);

        // X2: its own self-signed form is never served; the cross-sign is.
        let x2_key = KeyAlg::EcdsaP256.generate();
        let mut x2_params = ca_params("Vigie Root X2", org, "US", None);
        x2_params.not_before = now - days(300);
        x2_params.not_after = now + days(x2_days_left) + SLACK;
        x2_params.use_authority_key_identifier_extension = true;
        let x2_by_x1 = x2_params.signed_by(&x2_key, &x1).expect("X2 by X1");
        let x2 = Issuer::new(x2_params, x2_key);

        let ye_key = KeyAlg::EcdsaP256.generate();
        let (_, ye_self) = root("Vigie Root YE", &ye_key);
        let mut ye_params = ca_params("Vigie Root YE", org, "US", None);
        ye_params.not_before = now - days(200);
        ye_params.not_after = now + days(3000);
        ye_params.use_authority_key_identifier_extension = true;
        let ye_by_x2 = ye_params.signed_by(&ye_key, &x2).expect("YE by X2");
        let ye = Issuer::new(ye_params, ye_key);

        let ye1_key = KeyAlg::EcdsaP256.generate();
        let mut ye1_params = ca_params("Vigie YE1", org, "US", Some(0));
        ye1_params.not_before = now - days(100);
        ye1_params.not_after = now + days(1000);
        ye1_params.use_authority_key_identifier_extension = true;
        let ye1_cert = ye1_params.signed_by(&ye1_key, &ye).expect("YE1 by YE");
        let ye1 = Issuer::new(ye1_params, ye1_key);

        GenY {
            x1: CaCert {
                common_name: "Vigie Root X1".into(),
                pem: x1_cert.pem(),
                cert: x1_cert.der().clone(),
                issuer: x1,
            },
            root_ye: CaCert {
                common_name: "Vigie Root YE".into(),
                pem: ye_self.pem(),
                cert: ye_self.der().clone(),
                issuer: ye,
            },
            root_ye_by_x2: ye_by_x2.der().clone(),
            x2_by_x1: x2_by_x1.der().clone(),
            ye1: CaCert {
                common_name: "Vigie YE1".into(),
                pem: ye1_cert.pem(),
                cert: ye1_cert.der().clone(),
                issuer: ye1,
            },
        }
    }

    /// A leaf from YE1, served with YE1, Root YE (by X2) and X2 (by X1).
    pub fn issue(&self, spec: &LeafSpec) -> Leaf {
        let key = spec.key.generate();
        let cert = leaf_params(spec)
            .signed_by(&key, &self.ye1.issuer)
            .expect("leaf signing");
        Leaf {
            cert: cert.der().clone(),
            key_der: key.serialize_der(),
            chain: vec![
                cert.der().clone(),
                self.ye1.cert.clone(),
                self.root_ye_by_x2.clone(),
                self.x2_by_x1.clone(),
            ],
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            spec: spec.clone(),
        }
    }
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

// ---- Chains refused for what they are, not for their dates or names ----

fn leaf_of(
    cert: &rcgen::Certificate,
    key: &KeyPair,
    spec: &LeafSpec,
    issuers: Vec<CertificateDer<'static>>,
) -> Leaf {
    let mut chain = vec![cert.der().clone()];
    chain.extend(issuers);
    Leaf {
        cert: cert.der().clone(),
        key_der: key.serialize_der(),
        chain,
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        spec: spec.clone(),
    }
}

/// A self-signed CA certificate (CA:TRUE) for HOST served as the server's
/// own, what `openssl req -x509` makes by default; chain = [it].
pub fn self_signed_ca_leaf() -> Leaf {
    let spec = LeafSpec::new([HOST]);
    let key = spec.key.generate();
    let mut params = leaf_params(&spec);
    let mut dn = dn(HOST, "Internet Widgits Pty Ltd", "AU");
    dn.push(DnType::StateOrProvinceName, "Some-State");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.extended_key_usages = Vec::new();
    params.key_usages = Vec::new();
    let cert = params.self_signed(&key).expect("self-sign CA leaf");
    leaf_of(&cert, &key, &spec, Vec::new())
}

/// A trusted leaf whose signature was altered after issuance (its last
/// byte flipped); chain = [leaf, intermediate].
pub fn bad_signature_leaf() -> Leaf {
    let mut leaf = valid_leaf();
    let mut der = leaf.cert.to_vec();
    let last = der.len() - 1;
    der[last] ^= 0x01;
    leaf.cert = CertificateDer::from(der);
    leaf.chain[0] = leaf.cert.clone();
    leaf
}

/// A leaf for HOST signed by `issuer`, served with `issuers` after it.
fn host_leaf_from(issuer: &Issuer<'_, KeyPair>, issuers: Vec<CertificateDer<'static>>) -> Leaf {
    let spec = LeafSpec::new([HOST]);
    let key = spec.key.generate();
    let cert = leaf_params(&spec).signed_by(&key, issuer).expect("leaf");
    leaf_of(&cert, &key, &spec, issuers)
}

/// A CA certificate made from `params` (valid for a year from a month
/// ago) and signed by `signer`, with the means to issue under it.
fn ca_under(
    mut params: CertificateParams,
    signer: &Issuer<'_, KeyPair>,
) -> (CertificateDer<'static>, Issuer<'static, KeyPair>) {
    let key = KeyAlg::EcdsaP256.generate();
    params.not_before = now() - days(30);
    params.not_after = now() + days(365);
    let cert = params.signed_by(&key, signer).expect("CA certificate");
    (cert.der().clone(), Issuer::new(params, key))
}

/// A leaf for HOST issued by another leaf (not a CA) of the trusted
/// intermediate; chain = [leaf, issuing leaf, intermediate].
pub fn issued_by_a_leaf() -> Leaf {
    let ca = test_ca();
    let (issuer_cert, issuer) = ca_under(
        leaf_params(&LeafSpec::new(["issuer.example.test"])),
        &ca.intermediate.issuer,
    );
    host_leaf_from(&issuer, vec![issuer_cert, ca.intermediate.cert.clone()])
}

/// A leaf for HOST issued by a CA under the trusted intermediate, whose
/// path length (0) allows none; chain = [leaf, sub-CA, intermediate].
pub fn path_too_long_leaf() -> Leaf {
    let ca = test_ca();
    let (sub_cert, sub) = ca_under(
        ca_params("Vigie Test Sub CA", "Vigie Test", "FR", None),
        &ca.intermediate.issuer,
    );
    host_leaf_from(&sub, vec![sub_cert, ca.intermediate.cert.clone()])
}

/// A trusted leaf for HOST whose extended key usage allows client
/// authentication only; chain = [leaf, intermediate].
pub fn client_auth_only_leaf() -> Leaf {
    let ca = test_ca();
    let spec = LeafSpec::new([HOST]);
    let key = spec.key.generate();
    let mut params = leaf_params(&spec);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params
        .signed_by(&key, &ca.intermediate.issuer)
        .expect("leaf");
    leaf_of(&cert, &key, &spec, vec![ca.intermediate.cert.clone()])
}

/// A leaf for HOST from an intermediate of the trusted root that may only
/// certify names under `allowed.test`; chain = [leaf, that intermediate].
pub fn outside_name_constraints_leaf() -> Leaf {
    let ca = test_ca();
    let mut params = ca_params("Vigie Test Constrained R2", "Vigie Test", "FR", Some(0));
    params.name_constraints = Some(rcgen::NameConstraints {
        permitted_subtrees: vec![rcgen::GeneralSubtree::DnsName("allowed.test".into())],
        excluded_subtrees: Vec::new(),
    });
    let (int_cert, int) = ca_under(params, &ca.root.issuer);
    host_leaf_from(&int, vec![int_cert])
}

/// A leaf for HOST from a hierarchy nobody trusts, its intermediate
/// served; chain = [leaf, intermediate].
pub fn unknown_ca_leaf() -> Leaf {
    Ca::generate("Nobody's Root", "Nobody's Intermediate", "Nobody", "FR")
        .issue(&LeafSpec::new([HOST]))
}
