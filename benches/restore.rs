//! `vigie restore` against a bucket someone else can write: its peak
//! resident memory and wall time, the release binary as an operator runs
//! it, on a real S3 server on loopback (moto).
//!
//! The bucket holds SEGMENTS genuine segments of 20,000 results each
//! (default 5), then the hostile ones: a segment of 64 KiB whose second
//! line inflates to 2 GiB, one of 17 MiB (over the segment cap), and a key
//! with a right-to-left override. The restore is run twice: the second
//! time the refused segments are not downloaded again (their ETags are
//! kept).
//!
//! Run: `cargo bench --bench restore [-- SEGMENTS]`. Aim: peak RSS under
//! 128 MiB whatever a segment holds.

#[path = "../tests/common/mod.rs"]
mod common;

use common::daemon::vigie_cli_measured;
use common::history::T0;
use common::s3::S3Server;
use common::segments;

const PER_SEGMENT: u64 = 20_000;

fn main() {
    let count: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(5);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let s3 = S3Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let bucket = runtime.block_on(s3.new_bucket("restore"));
    let (id, secret) = common::s3_auth::write_keys(dir.path(), "AKIABENCH", "any-secret");
    std::fs::create_dir_all(dir.path().join("checks")).expect("checks dir");
    // vigie refuses a config that checks nothing; this one is never probed.
    std::fs::write(
        dir.path().join("checks/idle.toml"),
        "[[check]]\nname = \"idle\"\nkind = \"http\"\nurl = \"https://localhost:1/\"\n",
    )
    .expect("write a check");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = \"state\"\n[alerting]\nto = [\"oncall@example.com\"]\n[replication]\nurl = \"s3://{bucket}/bench\"\nendpoint = \"{}\"\n\
             region = \"eu-west-3\"\naccess_key_id_file = {:?}\nsecret_access_key_file = {:?}\n",
            s3.endpoint(),
            id.display().to_string(),
            secret.display().to_string()
        ),
    )
    .expect("write the config");

    let mut compressed = 0;
    runtime.block_on(async {
        let mut after = 0;
        for n in 0..count {
            let at = T0 + time::Duration::seconds((n * PER_SEGMENT) as i64);
            let (name, bytes) = segments::genuine("bench", after, after + 1, PER_SEGMENT, at);
            compressed += bytes.len();
            s3.put_object(&bucket, &name, bytes).await;
            after += PER_SEGMENT;
        }
        let (name, bytes) = segments::one_long_line("bench", after, after + 1, T0, 2 << 30);
        println!(
            "hostile segment: {} KiB stored, a 2 GiB line",
            bytes.len() / 1024
        );
        s3.put_object(&bucket, &name, bytes).await;
        let name = vigie::replicate::segment::object_name("bench", T0, after + 2, after + 2);
        s3.put_object(&bucket, &name, vec![0; 17 << 20]).await;
        s3.put_object(&bucket, "history/bench/%E2%80%AEtxt.exe", "x")
            .await;
    });
    println!(
        "{count} genuine segments of {PER_SEGMENT} results ({:.1} MiB compressed)",
        compressed as f64 / (1024.0 * 1024.0)
    );
    for run in ["first restore", "second restore"] {
        let measured = vigie_cli_measured(&config, &["restore"]);
        assert_eq!(measured.code, 2, "{}", measured.stdout);
        println!(
            "{run}: {:.1} s wall, peak RSS {:.1} MiB",
            measured.elapsed.as_secs_f64(),
            measured.peak_kib as f64 / 1024.0
        );
        for line in measured.stdout.lines() {
            println!("  {line}");
        }
    }
}
