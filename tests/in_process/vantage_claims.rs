//! The claims themselves against a real S3-compatible server (moto with
//! SigV4 and atomic conditional writes, `common/s3_auth.rs`): two
//! coordinators, as two vantages would hold them, race for the same
//! events; exactly one wins each, and the loser learns who did.

use std::sync::Arc;

use time::OffsetDateTime;

use crate::common::env::Env;
use crate::common::s3_auth::AuthS3;
use crate::common::vantage::FleetKeys;
use vigie::alert::EventKind;
use vigie::vantage::{claim, ClaimRequest, Claimed, Conditional, Coordinator, VantageStats};

/// The fleet every coordinator of these tests belongs to.
fn fleet_keys() -> &'static FleetKeys {
    static KEYS: std::sync::OnceLock<FleetKeys> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| FleetKeys::new(&["eu-par", "fra", "other"]))
}

/// A coordinator for `node` on `bucket`, built from config as the daemon
/// builds it.
fn coordinator(s3: &AuthS3, bucket: &str, node: &str) -> (Env, Coordinator) {
    let env = Env::new();
    let (id, secret) = s3.write_keys(env.path());
    env.append_config(&format!(
        "[replication]\nurl = \"s3://{bucket}/{node}\"\nendpoint = \"{}\"\n\
         access_key_id_file = {:?}\nsecret_access_key_file = {:?}\n{}",
        s3.endpoint(),
        id.display().to_string(),
        secret.display().to_string(),
        fleet_keys().section(node),
    ));
    let config = env.load();
    let c = Coordinator::open(
        config.vantage.as_ref().unwrap(),
        config.replication.as_ref().unwrap(),
        None,
        Arc::new(VantageStats::default()),
    )
    .unwrap();
    (env, c)
}

fn request<'a>(
    check: &'a str,
    kind: EventKind,
    message_id: &'a (dyn Fn(&str) -> String + Sync),
) -> ClaimRequest<'a> {
    let now = OffsetDateTime::now_utc();
    ClaimRequest {
        check,
        kind,
        reminder: 0,
        since: now,
        message_id,
        now,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_bucket_honours_conditional_writes() {
    let s3 = AuthS3::shared();
    let (_env, c) = coordinator(s3, &s3.bucket(), "eu-par");
    let now = OffsetDateTime::now_utc();
    assert_eq!(
        c.test_conditional(now).await.unwrap(),
        Conditional::Honoured
    );
    assert_eq!(
        c.test_conditional(now).await.unwrap(),
        Conditional::Honoured,
        "again"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn two_vantages_racing_twenty_times_each_event_is_won_once() {
    let s3 = AuthS3::shared();
    let bucket = s3.bucket();
    let (_a_env, a) = coordinator(s3, &bucket, "eu-par");
    let (_b_env, b) = coordinator(s3, &bucket, "fra");
    for round in 0..20 {
        // Pseudo-checks have colons in their names: they must work too.
        let check = match round % 2 {
            0 => format!("site-{round}"),
            _ => format!("vigie:vantage:peer-{round}"),
        };
        for kind in [EventKind::Down, EventKind::Resolved] {
            // Each node's Message-ID is made from the fleet's key, which
            // only the claim learns.
            let id_a = |key: &str| format!("<a.{key}@eu-par>");
            let id_b = |key: &str| format!("<b.{key}@fra>");
            let (ra, rb) = (request(&check, kind, &id_a), request(&check, kind, &id_b));
            let (x, y) = tokio::join!(claim(&a, &ra), claim(&b, &rb));
            let (x, y) = (x.unwrap(), y.unwrap());
            let won = [&x, &y]
                .iter()
                .filter(|c| matches!(c, Claimed::Won { .. }))
                .count();
            assert_eq!(won, 1, "round {round} {kind:?}: {x:?} / {y:?}");
            let key = |c: &Claimed| match c {
                Claimed::Won { key } | Claimed::Lost { key, .. } => key.clone(),
            };
            assert_eq!(key(&x), key(&y), "one incident key for both");
            let lost = if matches!(x, Claimed::Lost { .. }) {
                &x
            } else {
                &y
            };
            let Claimed::Lost { by, message_id, .. } = lost else {
                unreachable!()
            };
            let expected = if by == "eu-par" {
                id_a(&key(lost))
            } else {
                id_b(&key(lost))
            };
            assert_eq!(
                message_id, &expected,
                "the loser learns the winner's mail, under the fleet's key"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_outage_after_a_resolved_one_gets_a_new_key() {
    let s3 = AuthS3::shared();
    let bucket = s3.bucket();
    let (_env, a) = coordinator(s3, &bucket, "eu-par");
    let first = claim(
        &a,
        &request("site", EventKind::Down, &|_| "<1>".to_string()),
    )
    .await
    .unwrap();
    claim(
        &a,
        &request("site", EventKind::Resolved, &|_| "<2>".to_string()),
    )
    .await
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let second = claim(
        &a,
        &request("site", EventKind::Down, &|_| "<3>".to_string()),
    )
    .await
    .unwrap();
    let (Claimed::Won { key: k1 }, Claimed::Won { key: k2 }) = (&first, &second) else {
        panic!("{first:?} {second:?}");
    };
    assert_ne!(k1, k2);
}
