//! Pages of a client's threads (`GET /v1/threads?limit=&cursor=`, issue 17): one
//! answer never holds every thread a client ever made.
//!
//! The cursor is the id of the last thread of the previous page; the order is the
//! store's (newest first). What must not live here: the HTTP query's parsing (the
//! server's handler).

use std::path::Path;

use agentplane_core::ThreadId;

use super::{Hub, HubError};
use crate::identity::{Access, AsCaller};
use crate::ports::{NewThread, ThreadRecord};

/// Longest accepted thread title, in characters.
pub const MAX_TITLE_CHARS: usize = 200;

/// A thread to create.
#[derive(Debug, Clone)]
pub struct CreateThread {
    pub agent: String,
    /// An absolute, existing directory: the workspace of the thread's turns.
    pub cwd: String,
    pub title: Option<String>,
}

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
        caller: &(impl AsCaller + ?Sized),
        limit: usize,
        after: Option<&ThreadId>,
    ) -> Result<ThreadPage, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Read, "listing threads")?;
        let client = caller.client();
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

impl Hub {
    /// Creates a thread owned by `client`, pinned to a version of its agent drawn by
    /// the traffic weights.
    pub async fn create_thread(
        &self,
        caller: &(impl AsCaller + ?Sized),
        request: CreateThread,
    ) -> Result<ThreadRecord, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Operate, "creating a thread")?;
        let client = caller.client();
        self.create_thread_on(client, request, None).await
    }

    /// Creates a thread pinned to `version` (a staging or production version of its
    /// agent), or, with `None`, to one drawn by the traffic weights.
    pub async fn create_thread_on(
        &self,
        caller: &(impl AsCaller + ?Sized),
        request: CreateThread,
        version: Option<&str>,
    ) -> Result<ThreadRecord, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Operate, "creating a thread")?;
        let client = caller.client();
        self.agent(&request.agent)?;
        let cwd = self.check_cwd(&caller, &request.cwd)?;
        if let Some(title) = &request.title
            && title.chars().count() > MAX_TITLE_CHARS
        {
            return Err(HubError::InvalidArgument(format!(
                "title is longer than {MAX_TITLE_CHARS} characters"
            )));
        }
        let id = ThreadId::new();
        let version = self
            .versions
            .version_for_new_thread(&request.agent, &id, version)
            .await?;
        // Pinned in the same write that creates it, where versions are kept; without a
        // version store the same draw is made again at each turn.
        Ok(self
            .deps
            .store
            .create_thread(NewThread {
                id,
                client_id: client.to_owned(),
                agent: request.agent,
                cwd,
                title: request.title,
                agent_version: self.versions.stored().then_some(version),
            })
            .await?)
    }

    /// A client's threads, newest first.
    pub async fn list_threads(
        &self,
        caller: &(impl AsCaller + ?Sized),
    ) -> Result<Vec<ThreadRecord>, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Read, "listing threads")?;
        let client = caller.client();
        Ok(self.deps.store.list_threads(client).await?)
    }

    /// A thread of this client; another client's thread is `NotFound`.
    pub async fn thread(
        &self,
        caller: &(impl AsCaller + ?Sized),
        id: &ThreadId,
    ) -> Result<ThreadRecord, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Read, "reading a thread")?;
        let client = caller.client();
        match self.deps.store.thread(id).await? {
            Some(thread) if thread.client_id == client => Ok(thread),
            _ => Err(HubError::NotFound(format!("thread {id}"))),
        }
    }

    /// Deletes a thread (kept for audit, gone for the client). `Conflict` while a turn runs.
    pub async fn delete_thread(
        &self,
        caller: &(impl AsCaller + ?Sized),
        id: &ThreadId,
    ) -> Result<(), HubError> {
        let caller = self
            .identity
            .require(caller, Access::Operate, "deleting a thread")?;
        let client = caller.client();
        self.thread(client, id).await?;
        self.deps.store.delete_thread(id).await?;
        Ok(())
    }
}

/// An absolute, existing directory, canonicalized.
pub(super) fn canonical_cwd(cwd: &str) -> Result<String, HubError> {
    let path = Path::new(cwd);
    if cwd.is_empty() || !path.is_absolute() {
        return Err(HubError::InvalidArgument(format!(
            "cwd must be an absolute path, got {cwd:?}"
        )));
    }
    let canonical = path
        .canonicalize()
        .map_err(|e| HubError::InvalidArgument(format!("cwd {cwd:?} cannot be used: {e}")))?;
    if !canonical.is_dir() {
        return Err(HubError::InvalidArgument(format!(
            "cwd {cwd:?} is not a directory"
        )));
    }
    Ok(canonical.display().to_string())
}
