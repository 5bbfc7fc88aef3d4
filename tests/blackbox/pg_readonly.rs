//! Readers of PostgreSQL under a role that may only read: `hotlist query` and `hotlist serve`
//! run no DDL (they check the schema version instead), so a role with `CONNECT`, `USAGE` on
//! the schema and `SELECT` on its tables serves the job's lists; over an older schema they
//! stop with one line naming the versions.

use hotlist_tests::run_hotlist;
use std::io::{BufRead, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Drops the test's schema and role.
struct Cleanup {
    url: String,
    schema: String,
    role: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.url, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{0}\" CASCADE; DROP OWNED BY \"{1}\"; DROP ROLE IF EXISTS \"{1}\"",
                self.schema, self.role
            ));
        }
    }
}

/// `GET path` on `addr`: the status code and the body.
fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let code = out.split(' ').nth(1)?.parse().ok()?;
    Some((code, out.split_once("\r\n\r\n")?.1.to_string()))
}

/// The job writes as the superuser; a role with only `SELECT` reads its list with `query` and
/// serves it with `serve`. Then the schema is marked as version 5: `query` and `serve` refuse
/// it with one line. (Before: readers ran the schema migration on connect, so a read-only role
/// failed with "permission denied for schema", and an old schema was migrated by the reader.)
#[test]
fn readers_work_under_a_select_only_role_and_refuse_an_older_schema() {
    let _postgres = hotlist_tests::serial::postgres();
    let url = std::env::var("HOTLIST_TEST_POSTGRES_URL").unwrap_or("postgresql://postgres@127.0.0.1:5432/test".into());
    let schema = format!("hotlist_ro_{}", std::process::id());
    let role = format!("hotlist_reader_{}", std::process::id());
    let _cleanup = Cleanup {
        url: url.clone(),
        schema: schema.clone(),
        role: role.clone(),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let job = |url: &str| {
        format!(
            "[job]\nid = \"ro\"\n[source]\nkind = \"generator\"\nitems = 50\nevents = 3000\n\
             [[window]]\nname = \"10s\"\nsize = \"10s\"\nk = 5\n\
             [sink]\nkind = \"postgres\"\nurl = \"{url}\"\nschema = \"{schema}\"\n"
        )
    };
    std::fs::write(dir.path().join("writer.toml"), job(&url)).expect("config");
    run_hotlist(
        dir.path(),
        &["run", "--config", "writer.toml", "--progress", "never"],
        true,
    );

    let mut admin = postgres::Client::connect(&url, postgres::NoTls).expect("connect postgres");
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS \"{role}\"; CREATE ROLE \"{role}\" LOGIN; \
             GRANT CONNECT ON DATABASE test TO \"{role}\"; GRANT USAGE ON SCHEMA \"{schema}\" TO \"{role}\"; \
             GRANT SELECT ON ALL TABLES IN SCHEMA \"{schema}\" TO \"{role}\""
        ))
        .expect("create the read-only role");
    let reader_url = format!("postgresql://{role}@127.0.0.1:5432/test");
    std::fs::write(dir.path().join("reader.toml"), job(&reader_url)).expect("config");

    let out = run_hotlist(
        dir.path(),
        &["query", "--config", "reader.toml", "--window", "10s", "--json"],
        true,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"items\""), "query printed a list: {stdout}");

    let mut serve = Command::new(hotlist_tests::hotlist_bin())
        .args(["serve", "--config", "reader.toml", "--listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn hotlist serve");
    let first = std::io::BufReader::new(serve.stdout.take().expect("stdout"))
        .lines()
        .next()
        .and_then(Result::ok)
        .unwrap_or_default();
    let addr = first
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    let served = loop {
        match get(&addr, "/v1/top?window=10s&k=5") {
            Some((200, body)) => break body,
            other => {
                if Instant::now() > deadline {
                    let _ = serve.kill();
                    panic!("serve under the read-only role did not answer 200: {other:?}");
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(served.contains("\"items\""), "{served}");

    // an older schema: one line, from both readers
    admin
        .batch_execute(&format!("UPDATE \"{schema}\".hotlist_schema SET version = 5"))
        .expect("mark the schema version 5");
    let want = "schema version 5 is older than this build reads";
    let out = run_hotlist(
        dir.path(),
        &["query", "--config", "reader.toml", "--window", "10s"],
        false,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "query over an old schema fails");
    assert!(
        stderr.contains(want) && stderr.trim_end().lines().count() == 1,
        "{stderr}"
    );
    let mut serve = Command::new(hotlist_tests::hotlist_bin())
        .args(["serve", "--config", "reader.toml", "--listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hotlist serve");
    let ended = hotlist_tests::reap(&mut serve, Duration::from_secs(30));
    if !ended {
        let _ = serve.kill();
    }
    let out = serve.wait_with_output().expect("serve's output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(ended, "serve over an old schema did not stop: {stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(want) && stderr.trim_end().lines().count() == 1,
        "{stderr}"
    );
    let version: i64 = admin
        .query_one(&format!("SELECT version FROM \"{schema}\".hotlist_schema"), &[])
        .expect("version")
        .get(0);
    assert_eq!(version, 5, "no reader migrated the schema");
}
