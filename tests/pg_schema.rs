//! A fresh PostgreSQL schema for one test (on `HOTLIST_TEST_POSTGRES_URL`, else the local test
//! database), dropped at the end.

/// A schema named `<prefix>_<random>`; dropped with its tables when this is dropped.
pub struct PgSchema {
    pub url: String,
    pub name: String,
}

impl PgSchema {
    /// A new schema name under `prefix` (created by the job's writer on first connect).
    pub fn new(prefix: &str) -> PgSchema {
        use rand::Rng;
        let url = std::env::var("HOTLIST_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgresql://postgres@127.0.0.1:5432/test".into());
        let name = format!("{prefix}_{:08x}", rand::rng().random::<u32>());
        PgSchema { url, name }
    }

    /// The config's `[sink]` section for this schema.
    pub fn sink(&self) -> String {
        format!(
            "[sink]\nkind = \"postgres\"\nurl = \"{}\"\nschema = \"{}\"\n",
            self.url, self.name
        )
    }

    /// A client whose `search_path` is this schema.
    pub fn client(&self) -> postgres::Client {
        let mut c = postgres::Client::connect(&self.url, postgres::NoTls).expect("connect postgres");
        c.batch_execute(&format!("SET search_path TO \"{}\"", self.name))
            .expect("search path");
        c
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let _ = hotlist_sinks::postgres::drop_schema(&self.url, &self.name);
    }
}
