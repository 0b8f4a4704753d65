//! Pages of a client's threads (`GET /v1/threads?limit=&cursor=`, issue 17): one
//! answer never holds every thread a client ever made.
//!
//! The cursor is the id of the last thread of the previous page; the order is the
//! store's (newest first). What must not live here: the HTTP query's parsing (the
//! server's handler).

use agentplane_core::ThreadId;

use super::{Hub, HubError};
use crate::ports::ThreadRecord;

/// The most threads one page of [`Hub::list_threads_page`] holds.
pub const MAX_THREAD_PAGE: usize = 1000;

/// One page of a client's threads.
#[derive(Debug)]
pub struct ThreadPage {
    /// Newest first.
    pub threads: Vec<ThreadRecord>,
    /// The cursor of the next page (the last thread's id), `None` on the last page.
    pub next: Option<ThreadId>,
}

impl Hub {
    /// One page of this client's threads, newest first: at most `limit` (1 to
    /// [`MAX_THREAD_PAGE`]) after the thread `after` (the last of the previous page),
    /// and the cursor of the next page when there is one. A cursor that names no
    /// thread of this client (deleted since, or another client's) is `InvalidArgument`.
    pub async fn list_threads_page(
        &self,
        client: &str,
        limit: usize,
        after: Option<&ThreadId>,
    ) -> Result<ThreadPage, HubError> {
        if !(1..=MAX_THREAD_PAGE).contains(&limit) {
            return Err(HubError::InvalidArgument(format!(
                "`limit` must be 1 to {MAX_THREAD_PAGE}"
            )));
        }
        let threads = self.deps.store.list_threads(client).await?;
        let start = match after {
            None => 0,
            Some(cursor) => {
                threads
                    .iter()
                    .position(|t| &t.id == cursor)
                    .ok_or_else(|| {
                        HubError::InvalidArgument(
                            "`cursor` names none of your threads (deleted since?); list again \
                             from the start"
                                .into(),
                        )
                    })?
                    + 1
            }
        };
        let mut page: Vec<ThreadRecord> = threads.into_iter().skip(start).take(limit + 1).collect();
        let next = if page.len() > limit {
            page.truncate(limit);
            page.last().map(|t| t.id.clone())
        } else {
            None
        };
        Ok(ThreadPage {
            threads: page,
            next,
        })
    }
}
