//! Dependencies that fail on purpose, for the fault tests: a Postgres
//! server of the test's own that can be stopped and started again
//! ([`PrivatePostgres`]), and a small disk that can be filled up and freed
//! ([`SmallDisk`]). Never the shared test server: stopping that would fail
//! every other test running at the time.
//!
//! Both need what `scripts/postgres.sh` and `.ci/run` have: Debian's
//! PostgreSQL server binaries, and root (to run the server as `postgres`
//! and to mount a tmpfs). A test that cannot have them fails, naming what
//! is missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A directory of this process's own under `base`.
fn scratch(base: &str, what: &str) -> PathBuf {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = PathBuf::from(base).join(format!("tarsy-{what}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn is_root() -> bool {
    run(Command::new("id").arg("-u")).trim() == "0"
}

/// A Postgres server of its own, on a free port, with its data in a scratch
/// directory; stopped and removed when dropped.
pub struct PrivatePostgres {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
}

impl PrivatePostgres {
    /// Initialises and starts a server (a few seconds).
    pub fn start() -> Self {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("bin"))
            .filter(|b| b.join("postgres").exists())
            .max()
            .expect(
                "no PostgreSQL server under /usr/lib/postgresql (run scripts/postgres.sh once)",
            );
        let data = scratch("/var/tmp", "pg");
        if is_root() {
            run(Command::new("chown").arg("-R").arg("postgres").arg(&data));
        }
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            l.local_addr().expect("its address").port()
        };
        let pg = Self { bin, data, port };
        pg.as_postgres(&[
            "initdb",
            "-D",
            &pg.data.to_string_lossy(),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
        ]);
        pg.resume();
        let sql = "CREATE ROLE tarsy LOGIN SUPERUSER PASSWORD 'tarsy'; CREATE DATABASE tarsy OWNER tarsy;";
        for statement in sql.split_inclusive(';') {
            run(Command::new(pg.bin.join("psql"))
                .args(["-q", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres"])
                .args(["-p", &pg.port.to_string(), "-c", statement]));
        }
        pg
    }

    fn as_postgres(&self, args: &[&str]) -> String {
        let program = self.bin.join(args[0]);
        if is_root() {
            run(Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(program)
                .args(&args[1..]))
        } else {
            run(Command::new(program).args(&args[1..]))
        }
    }

    /// Its URL (role and database `tarsy`).
    pub fn url(&self) -> String {
        format!("postgres://tarsy:tarsy@127.0.0.1:{}/tarsy", self.port)
    }

    /// Stops it as a managed database's failover does: `pg_ctl stop -m
    /// fast` (sessions are terminated, "terminating connection due to
    /// administrator command").
    pub fn stop(&self) {
        self.as_postgres(&[
            "pg_ctl",
            "-D",
            &self.data.to_string_lossy(),
            "-m",
            "fast",
            "-w",
            "stop",
        ]);
    }

    /// Starts it again (after [`PrivatePostgres::stop`]), on the same port.
    pub fn resume(&self) {
        let options = format!(
            "-p {} -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port
        );
        self.as_postgres(&[
            "pg_ctl",
            "-D",
            &self.data.to_string_lossy(),
            "-l",
            &self.data.join("server.log").to_string_lossy(),
            "-o",
            &options,
            "-w",
            "start",
        ]);
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "-w", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

/// A tmpfs of `size` bytes mounted on a scratch directory: a disk that can
/// be filled up ([`SmallDisk::fill`]) and freed. Unmounted when dropped.
pub struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    /// Mounts it (needs root).
    pub fn mount(size: u64) -> Self {
        assert!(
            is_root(),
            "mounting a tmpfs for the full-disk tests needs root"
        );
        let dir = scratch("/tmp", "disk");
        run(Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}")])
            .arg("tmpfs")
            .arg(&dir));
        Self { dir }
    }

    /// The mounted directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn filler(&self) -> PathBuf {
        self.dir.join("filler")
    }

    /// Takes every free byte.
    pub fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.filler())
            .expect("the filler file");
        let chunk = vec![0u8; 4096];
        while f.write_all(&chunk).is_ok() {}
        // The last partial block too.
        while f.write_all(&[0u8]).is_ok() {}
        let _ = f.flush();
    }

    /// Gives the space back.
    pub fn free(&self) {
        let _ = std::fs::remove_file(self.filler());
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
