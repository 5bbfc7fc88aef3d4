//! A blocking PostgreSQL client whose every wait has a deadline: `tokio_postgres` on a
//! current-thread runtime of the store's own, each call under `tokio::time::timeout`.
//!
//! Why not the `postgres` crate's blocking client: it waits for a reply forever. A server that
//! is frozen (SIGSTOP, a hung host or proxy that still holds the TCP connection) answers no
//! query, and neither TCP keepalives (the peer's kernel answers them) nor the server's
//! `statement_timeout` (the server is not running) end the wait: the writer, the server's
//! refresher and its history thread hung with no error. Here a call that gets no reply within
//! the deadline fails with the client's timeout error (a transient one, `error.rs`) and drops
//! the connection, so the next call reconnects.
//!
//! The API is the subset of the `postgres` crate's the store uses, with the same names, so the
//! rest of the store reads as before.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;
use tokio::runtime::Runtime;
use tokio::task::AbortHandle;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Error, IsolationLevel, NoTls, Row, Statement, ToStatement};

/// The runtime that drives the connection and the deadline of every wait.
struct Driver {
    runtime: Runtime,
    /// How long a reply may take.
    reply: Duration,
    /// The task that drives the connection (aborted on a timeout: that closes the socket).
    connection: AbortHandle,
    /// A call timed out: the connection is being dropped.
    broken: AtomicBool,
}

impl Driver {
    /// Runs `f` to its end or until the deadline; on the deadline the connection is dropped.
    fn wait<T>(&self, f: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
        if self.broken.load(Relaxed) {
            return Err(Error::__private_api_timeout());
        }
        // the timer is made inside the runtime (it needs its context)
        match self
            .runtime
            .block_on(async { tokio::time::timeout(self.reply, f).await })
        {
            Ok(r) => r,
            Err(_) => {
                self.broken.store(true, Relaxed);
                self.connection.abort();
                Err(Error::__private_api_timeout())
            }
        }
    }
}

/// A connection to the server (see the module documentation).
pub(super) struct Client {
    driver: Driver,
    client: tokio_postgres::Client,
}

impl Client {
    /// The runtime a client runs on (one per connection).
    pub(super) fn runtime() -> std::io::Result<Runtime> {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    }

    /// Connects with `config` (its `connect_timeout` bounds the TCP connect) on `runtime`, the
    /// whole handshake within `connect`, every later reply within `reply`.
    pub(super) fn connect(
        runtime: Runtime,
        config: &tokio_postgres::Config,
        connect: Duration,
        reply: Duration,
    ) -> Result<Client, Error> {
        let handshake = async { tokio::time::timeout(connect, config.connect(NoTls)).await };
        let (client, connection) = match runtime.block_on(handshake) {
            Ok(r) => r?,
            Err(_) => return Err(Error::__private_api_timeout()),
        };
        // Spawned on the current-thread runtime, the connection makes progress while a call
        // waits in `block_on`.
        let connection = runtime
            .spawn(async move {
                let _ = connection.await;
            })
            .abort_handle();
        Ok(Client {
            driver: Driver {
                runtime,
                reply,
                connection,
                broken: AtomicBool::new(false),
            },
            client,
        })
    }

    /// Whether the connection is lost (closed by the server, failed, or dropped after a
    /// timeout).
    pub(super) fn is_closed(&self) -> bool {
        self.driver.broken.load(Relaxed) || self.client.is_closed()
    }

    /// The `tokio_postgres` client.
    fn open(&self) -> &tokio_postgres::Client {
        &self.client
    }

    /// Prepares a statement.
    pub(super) fn prepare(&mut self, sql: &str) -> Result<Statement, Error> {
        self.driver.wait(self.client.prepare(sql))
    }

    /// A transaction of the server's default isolation level.
    pub(super) fn transaction(&mut self) -> Result<Transaction<'_>, Error> {
        self.build_transaction().start()
    }

    /// A transaction with options.
    pub(super) fn build_transaction(&mut self) -> TransactionBuilder<'_> {
        TransactionBuilder {
            client: self,
            isolation: None,
            read_only: false,
        }
    }
}

/// Options of a transaction to start.
pub(super) struct TransactionBuilder<'a> {
    client: &'a mut Client,
    isolation: Option<IsolationLevel>,
    read_only: bool,
}

impl<'a> TransactionBuilder<'a> {
    /// Sets the isolation level.
    pub(super) fn isolation_level(mut self, level: IsolationLevel) -> Self {
        self.isolation = Some(level);
        self
    }

    /// Makes the transaction read-only.
    pub(super) fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Begins the transaction.
    pub(super) fn start(self) -> Result<Transaction<'a>, Error> {
        let Client { driver, client } = self.client;
        let mut b = client.build_transaction().read_only(self.read_only);
        if let Some(level) = self.isolation {
            b = b.isolation_level(level);
        }
        let tx = driver.wait(b.start())?;
        Ok(Transaction { driver, tx: Some(tx) })
    }
}

/// An open transaction: rolled back when dropped without [`Transaction::commit`] (at once, as
/// the `postgres` crate does: the connection runs only while a call waits, so a rollback left
/// queued would hold the transaction's locks until the handle's next call).
pub(super) struct Transaction<'a> {
    driver: &'a Driver,
    tx: Option<tokio_postgres::Transaction<'a>>,
}

impl Transaction<'_> {
    /// Commits it.
    pub(super) fn commit(mut self) -> Result<(), Error> {
        match self.tx.take() {
            Some(tx) => self.driver.wait(tx.commit()),
            None => Ok(()),
        }
    }

    /// Rolls it back.
    pub(super) fn rollback(mut self) -> Result<(), Error> {
        match self.tx.take() {
            Some(tx) => self.driver.wait(tx.rollback()),
            None => Ok(()),
        }
    }

    /// The open transaction (taken only by commit, rollback and drop).
    fn open(&self) -> &tokio_postgres::Transaction<'_> {
        match &self.tx {
            Some(tx) => tx,
            None => unreachable!("a transaction is taken only when it ends"),
        }
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = self.driver.wait(tx.rollback());
        }
    }
}

/// The queries a connection and a transaction both run.
pub(super) trait Queries {
    /// Runs a statement; the number of rows it changed.
    fn execute<T: ?Sized + ToStatement>(&mut self, q: &T, p: &[&(dyn ToSql + Sync)]) -> Result<u64, Error>;
    /// Runs a query; its rows.
    fn query<T: ?Sized + ToStatement>(&mut self, q: &T, p: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, Error>;
    /// Runs a query of at most one row.
    fn query_opt<T: ?Sized + ToStatement>(&mut self, q: &T, p: &[&(dyn ToSql + Sync)]) -> Result<Option<Row>, Error>;
    /// Runs a query of exactly one row.
    fn query_one<T: ?Sized + ToStatement>(&mut self, q: &T, p: &[&(dyn ToSql + Sync)]) -> Result<Row, Error>;
    /// Runs statements separated by `;` (no parameters).
    fn batch_execute(&mut self, sql: &str) -> Result<(), Error>;
}

/// Implements [`Queries`] for a type with a `driver` and an `open()` client or transaction.
macro_rules! queries {
    ($ty:ty) => {
        impl Queries for $ty {
            fn execute<T: ?Sized + ToStatement>(&mut self, q: &T, p: &[&(dyn ToSql + Sync)]) -> Result<u64, Error> {
                self.driver.wait(self.open().execute(q, p))
            }
            fn query<T: ?Sized + ToStatement>(&mut self, q: &T, p: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, Error> {
                self.driver.wait(self.open().query(q, p))
            }
            fn query_opt<T: ?Sized + ToStatement>(
                &mut self,
                q: &T,
                p: &[&(dyn ToSql + Sync)],
            ) -> Result<Option<Row>, Error> {
                self.driver.wait(self.open().query_opt(q, p))
            }
            fn query_one<T: ?Sized + ToStatement>(&mut self, q: &T, p: &[&(dyn ToSql + Sync)]) -> Result<Row, Error> {
                self.driver.wait(self.open().query_one(q, p))
            }
            fn batch_execute(&mut self, sql: &str) -> Result<(), Error> {
                self.driver.wait(self.open().batch_execute(sql))
            }
        }
    };
}

queries!(Client);
queries!(Transaction<'_>);
