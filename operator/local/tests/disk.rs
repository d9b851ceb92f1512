//! Local mode on a database whose disk is full from the start: it refuses to
//! start with a message that says so, instead of a database error code.

use tarsy_config::{Config, Defaults};
use tarsy_local::{LocalApp, LocalOptions};
use tarsy_store::testing::faults::SmallDisk;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_at_start_says_so() {
    let disk = SmallDisk::mount(1024 * 1024);
    disk.fill();
    let mut options = LocalOptions::new(Config::builtin(Defaults::default()), disk.path());
    options.database_url = format!("sqlite:{}", disk.path().join("tarsy.db").display());
    let error = match LocalApp::start(options).await {
        Ok(app) => {
            app.shutdown().await;
            panic!("started on a full disk")
        }
        Err(e) => e.to_string(),
    };
    assert!(error.contains("disk is full"), "{error}");
}
