//! `Db`: one pooled connection or one open transaction, whichever a query runs on.
//! Every statement is prepared once per connection (deadpool's statement cache), so a
//! hot query costs one round trip. No SQL of the domain lives here.

use deadpool_postgres::{ClientWrapper, Transaction};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

/// Where a query runs: a connection in autocommit (reads), or a transaction (writes).
#[derive(Clone, Copy)]
pub(crate) enum Db<'a> {
    Conn(&'a ClientWrapper),
    Tx(&'a Transaction<'a>),
}

/// Parameters as tokio-postgres takes them.
pub(crate) type Params<'p> = [&'p (dyn ToSql + Sync)];

impl<'a> Db<'a> {
    async fn statement(
        &self,
        sql: &str,
    ) -> Result<tokio_postgres::Statement, tokio_postgres::Error> {
        match self {
            Db::Conn(c) => c.prepare_cached(sql).await,
            Db::Tx(t) => t.prepare_cached(sql).await,
        }
    }

    /// Every row `sql` returns.
    pub(crate) async fn query(
        &self,
        sql: &str,
        params: &Params<'_>,
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        let statement = self.statement(sql).await?;
        match self {
            Db::Conn(c) => c.query(&statement, params).await,
            Db::Tx(t) => t.query(&statement, params).await,
        }
    }

    /// The one row `sql` returns, if any.
    pub(crate) async fn query_opt(
        &self,
        sql: &str,
        params: &Params<'_>,
    ) -> Result<Option<Row>, tokio_postgres::Error> {
        let statement = self.statement(sql).await?;
        match self {
            Db::Conn(c) => c.query_opt(&statement, params).await,
            Db::Tx(t) => t.query_opt(&statement, params).await,
        }
    }

    /// How many rows `sql` changed.
    pub(crate) async fn execute(
        &self,
        sql: &str,
        params: &Params<'_>,
    ) -> Result<u64, tokio_postgres::Error> {
        let statement = self.statement(sql).await?;
        match self {
            Db::Conn(c) => c.execute(&statement, params).await,
            Db::Tx(t) => t.execute(&statement, params).await,
        }
    }
}
