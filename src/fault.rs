//! Fault injection for the supervision tests: with the `fault-injection`
//! cargo feature (never in a release build), a supervised task panics on
//! demand. `VIGIE_FAULT_DIR` names a directory; a file there named after a
//! task (`alerter`, `sender`, ...) makes that task panic within a tenth of
//! a second, whenever it appears. A file holding `always` stays and makes
//! every start of the task panic; any other content is removed by the panic
//! it causes (one panic).
//!
//! Without the feature, [`armed`] is the task itself.

use std::future::Future;

/// `task` with its fault point: under the feature, a watcher beside it
/// panics the task when its file appears.
#[cfg(feature = "fault-injection")]
pub async fn armed(name: &'static str, task: impl Future<Output = ()> + Send + 'static) {
    let Some(dir) = std::env::var_os("VIGIE_FAULT_DIR") else {
        return task.await;
    };
    let file = std::path::PathBuf::from(dir).join(name);
    let watch = async {
        loop {
            if let Ok(content) = std::fs::read_to_string(&file) {
                if content.trim() != "always" {
                    let _ = std::fs::remove_file(&file);
                }
                panic!("injected fault in {name}");
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    tokio::select! {
        () = task => {}
        () = watch => {}
    }
}

#[cfg(not(feature = "fault-injection"))]
pub fn armed(
    _name: &'static str,
    task: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = ()> + Send + 'static {
    task
}

/// Whether this build can inject faults (logged at start, so a test can
/// tell a build without the hook from a hook that did not fire).
pub const ENABLED: bool = cfg!(feature = "fault-injection");
