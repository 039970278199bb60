//! `vigie restore` on a hostile bucket (a line that inflates to 2 GiB, an
//! oversized segment, keys no segment has) keeps its peak resident memory
//! bounded and restores the rest. The peak is the child's `ru_maxrss`,
//! which Linux carries over from the test process's own high-water mark
//! when it spawns the child: measured here, where [`crate::alone`] keeps
//! other tests from growing this process meanwhile.

use crate::common::daemon::vigie_cli_measured;
use crate::common::env::Env;

/// Peak resident memory `vigie restore` may reach on a hostile bucket.
const RESTORE_PEAK_KIB: u64 = 128 * 1024;

#[test]
fn a_hostile_bucket_costs_restore_bounded_memory_and_the_rest_is_restored() {
    let _alone = crate::alone();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(restore_a_hostile_bucket());
}

async fn restore_a_hostile_bucket() {
    // moto without authentication: with it, moto computes the signature of
    // a key holding control characters unlike every S3 client does.
    let s3 = crate::common::s3::S3Server::shared();
    let bucket_name = s3.new_bucket("hostile").await;
    let env = Env::with_config("");
    let (id, secret) = crate::common::s3_auth::write_keys(env.path(), "AKIAHOSTILE", "any-secret");
    env.append_config(&format!(
        "[replication]\nurl = \"s3://{bucket_name}/vm-h\"\nendpoint = \"{}\"\nregion = \"eu-west-3\"\n\
         access_key_id_file = {:?}\nsecret_access_key_file = {:?}\n",
        s3.endpoint(),
        id.display().to_string(),
        secret.display().to_string(),
    ));
    let config = env.load();
    let settings =
        vigie::replicate::BucketSettings::from_config(config.replication.as_ref().unwrap(), None);
    let bucket = vigie::replicate::Bucket::open(&settings).unwrap();
    let at = crate::common::history::T0;

    // A genuine segment, then one whose second line inflates to 2 GiB
    // (64 KiB stored), one of 17 MiB, a key no segment has, and a genuine
    // one after them all.
    let (first, bytes) = crate::common::segments::genuine("vm-h", 0, 1, 20, at);
    bucket.put(&first, bytes).await.unwrap();
    let (long, bytes) = crate::common::segments::one_long_line("vm-h", 20, 21, at, 2 << 30);
    assert!(bytes.len() < 100 * 1024, "{} bytes", bytes.len());
    bucket.put(&long, bytes).await.unwrap();
    let big = vigie::replicate::segment::object_name("vm-h", at, 22, 22);
    bucket.put(&big, vec![0; 17 << 20]).await.unwrap();
    // Put unsigned and percent-encoded (object_store would encode it into
    // the key itself): a right-to-left override, which shows `exe.txt` as
    // `txt.exe`.
    s3.put_object(&bucket_name, "history/vm-h/%E2%80%AEtxt.exe", "x")
        .await;
    let (last, bytes) =
        crate::common::segments::genuine("vm-h", 22, 23, 20, at + time::Duration::minutes(1));
    bucket.put(&last, bytes).await.unwrap();

    let run = vigie_cli_measured(&env.config_path(), &["restore"]);
    let (code, report, peak_kib) = (run.code, run.stdout, run.peak_kib);
    println!("vigie restore on a hostile bucket: peak RSS {peak_kib} KiB\n{report}");
    assert_eq!(code, 2, "incomplete: {report}");
    assert!(
        report.contains("restored from") && report.contains("2 of 4 segments, 40 results"),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "corrupt segment {long}: line 2 is longer than 1048576 bytes"
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "corrupt segment {big}: it is 17825792 bytes, over the 16777216"
        )),
        "{report}"
    );
    assert!(
        report.contains("ignored history/vm-h/\\u{202e}txt.exe: not a segment name"),
        "{report}"
    );
    assert!(!report.contains('\u{202e}'), "{report}");
    assert!(
        peak_kib < RESTORE_PEAK_KIB,
        "vigie restore peaked at {peak_kib} KiB (bound {RESTORE_PEAK_KIB} KiB)"
    );

    // Again: the two refused segments are not downloaded a second time.
    let run = vigie_cli_measured(&env.config_path(), &["restore"]);
    let (code, again) = (run.code, run.stdout);
    assert_eq!(code, 2, "{again}");
    assert_eq!(
        again
            .matches("unchanged since a restore refused it: not downloaded again")
            .count(),
        2,
        "{again}"
    );
    assert!(again.contains("40 already present"), "{again}");

    // A key with a carriage return and an escape sequence, which XML cannot
    // carry raw: listed percent-encoded, decoded, and quoted escaped, while
    // the restore goes on. 25 more foreign objects: 20 named, the rest
    // counted.
    s3.put_object(&bucket_name, "history/vm-h/%0Dall%20restored%1B%5B2J", "x")
        .await;
    for n in 0..25 {
        s3.put_object(&bucket_name, &format!("history/vm-h/junk-{n:02}"), "x")
            .await;
    }
    let run = vigie_cli_measured(&env.config_path(), &["restore"]);
    let (code, report) = (run.code, run.stdout);
    assert_eq!(code, 2, "{report}");
    assert!(report.contains("40 already present"), "{report}");
    assert!(
        report.contains("ignored history/vm-h/\\rall restored\\x1b[2J: not a segment name"),
        "{report}"
    );
    assert!(!report.contains(['\r', '\x1b']), "{report}");
    assert_eq!(
        report.matches(": not a segment name").count(),
        20,
        "{report}"
    );
    assert!(
        report.contains("ignored 7 more objects whose names are not segment names"),
        "{report}"
    );
}
