//! `fs`: read, write, edit, list and search files inside the workspace.
//!
//! Every path from the model goes through [`confine::resolve_in_workspace`] and every
//! file is opened through `confine`'s no-follow openers; nothing here builds a path
//! from the model's input any other way. Walks never follow symlinks (they are listed
//! with a trailing `@` and skipped by search). Everything is bounded: the output cap,
//! entry and match counts, the size of a searched file, so a huge tree or file never
//! sits in memory whole.
//!
//! The work is blocking file I/O, so each call runs on tokio's blocking pool with a
//! deadline of its own: when the engine's timeout drops the future it cannot stop a
//! blocking thread, but the walk stops itself at the same deadline.
//!
//! With a `data_scope` in force ([`ToolContext::scope`]), a path must also match one of
//! the scopes' `paths` patterns (see [`check_path_scope`]): both the workspace and the
//! scope must hold. Walks skip entries outside the scope.
//!
//! What must not live here: confinement decisions (those are `confine`'s) and policy
//! evaluation (which scopes apply is decided by the engine).

use std::io::{BufRead, BufReader, Read, Write};
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Instant;

use agentplane_core::{ToolErrorKind, ToolSpec};
use agentplane_engine::ports::{Ensemble, ToolContext, ToolError, ToolOutput};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use crate::text;
use agentplane_process::confine::{self, Access, resolve_in_workspace};

mod edit;
mod paths;
mod walk;

pub use walk::MAX_SCANNED_ENTRIES;
use walk::{EntryKind, walk};

pub use edit::MAX_EDIT_FILE_BYTES;
pub(crate) use paths::canonical_workspace;
pub use paths::{DATA_SCOPE_DENIED, check_path_scope, path_in_scopes};
use paths::{entry_in_scope, failed, writable_path};

/// Entries `list_files` shows before it stops.
pub const MAX_LIST_ENTRIES: usize = 1000;
/// Matching lines `search_text` reports before it stops.
pub const MAX_SEARCH_MATCHES: usize = 200;
/// Files larger than this are skipped by `search_text`.
pub const MAX_SEARCH_FILE_BYTES: u64 = 1024 * 1024;
/// Characters of a matching line shown by `search_text`.
const MAX_MATCH_LINE_CHARS: usize = 240;

/// The builtin `fs` ensemble. Stateless: everything a call may touch comes from its
/// [`ToolContext`], so one value serves every turn.
#[derive(Debug, Clone, Copy, Default)]
pub struct FsEnsemble;

#[async_trait]
impl Ensemble for FsEnsemble {
    fn name(&self) -> &str {
        "fs"
    }

    fn tools(&self) -> Vec<ToolSpec> {
        vec![
            ToolSpec {
                name: "read_file".into(),
                description: "Read a whole text file in the workspace. Only for a file too \
                    long to read at once: `offset` is the first line to show (lines are \
                    numbered from 1) and `limit` the number of lines. Long output is cut \
                    and says which offset to read on from."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "Path relative to the workspace."},
                        "offset": {"type": "integer", "minimum": 1, "description": "First line to show; leave it out to read from the start."},
                        "limit": {"type": "integer", "minimum": 1, "description": "Lines to show at most; leave it out to read the whole file."}
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }),
                side_effects: false,
            },
            ToolSpec {
                name: "write_file".into(),
                description: "Create or replace a file in the workspace; `content` is its \
                    complete new text, written as it is (nothing in it is run or expanded). \
                    Missing parent directories are created."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "Path relative to the workspace."},
                        "content": {"type": "string", "description": "The complete new content."}
                    },
                    "required": ["path", "content"],
                    "additionalProperties": false
                }),
                side_effects: true,
            },
            ToolSpec {
                name: "edit_file".into(),
                description: "Change part of a file in the workspace: replace `old_text`, \
                    copied exactly from the file, with `new_text`; the rest of the file \
                    stays as it is. `old_text` must occur once unless `replace_all`."
                    .into(),
                parameters: edit::parameters(),
                side_effects: true,
            },
            ToolSpec {
                name: "list_files".into(),
                description: "List a directory of the workspace, sorted, one path per line \
                    relative to the workspace. Directories end with '/', symlinks with '@' \
                    (never followed). `recursive` descends into subdirectories (not .git)."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "Directory relative to the workspace (default \".\")."},
                        "recursive": {"type": "boolean", "description": "Descend into subdirectories (default false)."}
                    },
                    "additionalProperties": false
                }),
                side_effects: false,
            },
            ToolSpec {
                name: "search_text".into(),
                description: "Find lines containing a plain, case-sensitive substring in the \
                    text files under a path. Results are `path:line:text`. Binary files, \
                    files over 1 MiB, symlinks and .git are skipped."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "pattern": {"type": "string", "minLength": 1, "description": "The exact text to find."},
                        "path": {"type": "string", "description": "File or directory relative to the workspace (default \".\")."}
                    },
                    "required": ["pattern"],
                    "additionalProperties": false
                }),
                side_effects: false,
            },
        ]
    }

    async fn call(
        &self,
        tool: &str,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let request = match tool {
            "read_file" => Request::Read(crate::call::parse_args(tool, args)?),
            "write_file" => Request::Write(crate::call::parse_args(tool, args)?),
            "edit_file" => Request::Edit(crate::call::parse_args(tool, args)?),
            "list_files" => Request::List(crate::call::parse_args(tool, args)?),
            "search_text" => Request::Search(crate::call::parse_args(tool, args)?),
            _ => return Err(crate::call::unknown_tool(self.name(), tool)),
        };
        let ctx = ctx.clone();
        tokio::task::spawn_blocking(move || request.run(&ctx))
            .await
            .map_err(|e| {
                ToolError::new(
                    ToolErrorKind::ExecutionFailed,
                    format!("the fs call did not complete: {e}"),
                )
            })?
    }
}

/// One parsed call, ready to move onto the blocking pool.
enum Request {
    Read(ReadArgs),
    Write(WriteArgs),
    Edit(edit::EditArgs),
    List(ListArgs),
    Search(SearchArgs),
}

impl Request {
    fn run(self, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let deadline = Instant::now() + ctx.timeout;
        match self {
            Self::Read(args) => read_file(&args, ctx),
            Self::Write(args) => write_file(&args, ctx),
            Self::Edit(args) => edit::edit_file(&args, ctx),
            Self::List(args) => list_files(&args, ctx, deadline),
            Self::Search(args) => search_text(&args, ctx, deadline),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    #[serde(default)]
    offset: Option<u64>,
    #[serde(default)]
    limit: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    #[serde(default = "workspace_root")]
    path: String,
    #[serde(default)]
    recursive: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    pattern: String,
    #[serde(default = "workspace_root")]
    path: String,
}

fn workspace_root() -> String {
    ".".to_string()
}

fn read_file(args: &ReadArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let path = resolve_in_workspace(&ctx.workspace, &args.path, Access::Read)?;
    check_path_scope(ctx, &path, &args.path)?;
    let file = confine::open_regular_file(&ctx.workspace, &path, &args.path)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = BufReader::with_capacity(text::SNIFF_BYTES, file);
    let head = reader.fill_buf().map_err(|e| failed(&args.path, &e))?;
    if text::looks_binary(head) {
        return Ok(ToolOutput::text(format!(
            "{} is a binary file ({size} bytes); not shown as text",
            args.path
        )));
    }

    let start = args.offset.unwrap_or(1).max(1);
    let excerpt = take_lines(&mut reader, start, args.limit, ctx.output_cap)
        .map_err(|e| failed(&args.path, &e))?;
    let mut content = String::from_utf8_lossy(&excerpt.bytes).into_owned();
    match excerpt.end {
        ExcerptEnd::EndOfFile if excerpt.bytes.is_empty() => {
            content = if start == 1 {
                format!("{} is empty", args.path)
            } else {
                format!("{} has no line {start}; it ends before it", args.path)
            };
        }
        ExcerptEnd::EndOfFile => {}
        ExcerptEnd::Limit => {
            content.push_str(&format!(
                "\n[read_file showed {} line(s) of {}; more lines follow: read on with offset={}]",
                excerpt.line.saturating_sub(start),
                args.path,
                excerpt.line
            ));
        }
        ExcerptEnd::Cap => {
            content.push_str(&format!(
                "\n[truncated at {} bytes inside line {}; read on with offset={}]",
                ctx.output_cap, excerpt.line, excerpt.line
            ));
        }
    }
    Ok(ToolOutput {
        content,
        truncated: excerpt.end == ExcerptEnd::Cap,
        security: Vec::new(),
        egress: Vec::new(),
    })
}

/// Why [`take_lines`] stopped.
#[derive(Debug, PartialEq, Eq)]
enum ExcerptEnd {
    EndOfFile,
    /// `limit` lines were taken and more follow.
    Limit,
    /// The byte cap was reached.
    Cap,
}

struct Excerpt {
    bytes: Vec<u8>,
    /// The line being read when it stopped (1-based).
    line: u64,
    end: ExcerptEnd,
}

/// Lines `start..` of `reader`, at most `limit` lines and `cap` bytes. Skipped lines
/// are scanned, never stored, so a file with one enormous line costs no memory.
fn take_lines(
    reader: &mut impl BufRead,
    start: u64,
    limit: Option<u64>,
    cap: usize,
) -> std::io::Result<Excerpt> {
    let mut bytes = Vec::new();
    let mut line = 1u64;
    let mut taken = 0u64;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(Excerpt {
                bytes,
                line,
                end: ExcerptEnd::EndOfFile,
            });
        }
        let newline = buf.iter().position(|&b| b == b'\n');
        if line < start {
            let used = newline.map_or(buf.len(), |i| i + 1);
            reader.consume(used);
            if newline.is_some() {
                line += 1;
            }
            continue;
        }
        if limit.is_some_and(|limit| taken >= limit) {
            return Ok(Excerpt {
                bytes,
                line,
                end: ExcerptEnd::Limit,
            });
        }
        let chunk = newline.map_or(buf.len(), |i| i + 1);
        let room = cap.saturating_sub(bytes.len());
        if chunk > room {
            let end = text::char_boundary(&buf[..chunk], room);
            bytes.extend_from_slice(&buf[..end]);
            return Ok(Excerpt {
                bytes,
                line,
                end: ExcerptEnd::Cap,
            });
        }
        bytes.extend_from_slice(&buf[..chunk]);
        reader.consume(chunk);
        if newline.is_some() {
            line += 1;
            taken += 1;
        }
    }
}

fn write_file(args: &WriteArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let path = writable_path(ctx, &args.path)?;
    let mut file = confine::create_regular_file(&ctx.workspace, &path, &args.path)?;
    file.write_all(args.content.as_bytes())
        .and_then(|()| file.flush())
        .map_err(|e| failed(&args.path, &e))?;
    Ok(ToolOutput::text(format!(
        "wrote {} bytes to {}",
        args.content.len(),
        args.path
    )))
}

fn list_files(
    args: &ListArgs,
    ctx: &ToolContext,
    deadline: Instant,
) -> Result<ToolOutput, ToolError> {
    let dir = resolve_in_workspace(&ctx.workspace, &args.path, Access::List)?;
    check_path_scope(ctx, &dir, &args.path)?;
    if !dir.is_dir() {
        return Err(ToolError::new(
            ToolErrorKind::ExecutionFailed,
            format!("{} is not a directory; use read_file", args.path),
        ));
    }
    let root = canonical_workspace(ctx)?;

    let mut lines = Vec::new();
    let mut bytes = 0usize;
    let mut cut = false;
    let walk = walk(&root, &dir, args.recursive, deadline, &mut |path, kind| {
        if !entry_in_scope(ctx, path) {
            return ControlFlow::Continue(());
        }
        let mut line = relative(&root, path);
        match kind {
            EntryKind::Dir => line.push('/'),
            EntryKind::Symlink => line.push('@'),
            EntryKind::File | EntryKind::Other => {}
        }
        if lines.len() >= MAX_LIST_ENTRIES || bytes + line.len() + 1 > ctx.output_cap {
            cut = true;
            return ControlFlow::Break(());
        }
        bytes += line.len() + 1;
        lines.push(line);
        ControlFlow::Continue(())
    })?;

    if lines.is_empty() && !cut {
        return Ok(ToolOutput::text(format!("{} is empty", args.path)));
    }
    lines.sort();
    let mut content = lines.join("\n");
    if cut || walk.budget_exhausted {
        content.push_str(&format!(
            "\n[listing stopped after {} entries; list a subdirectory to see more]",
            lines.len()
        ));
    }
    Ok(ToolOutput {
        content,
        truncated: cut || walk.budget_exhausted,
        security: Vec::new(),
        egress: Vec::new(),
    })
}

fn search_text(
    args: &SearchArgs,
    ctx: &ToolContext,
    deadline: Instant,
) -> Result<ToolOutput, ToolError> {
    if args.pattern.is_empty() {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            "the pattern is empty",
        ));
    }
    let start = resolve_in_workspace(&ctx.workspace, &args.path, Access::Read)?;
    check_path_scope(ctx, &start, &args.path)?;
    let root = canonical_workspace(ctx)?;
    let mut search = Search {
        root: &root,
        pattern: &args.pattern,
        cap: ctx.output_cap,
        matches: Vec::new(),
        bytes: 0,
        cut: false,
        skipped_binary: 0,
        skipped_large: 0,
    };

    let mut budget_exhausted = false;
    if start.is_dir() {
        let walk = walk(&root, &start, true, deadline, &mut |path, kind| {
            if kind == EntryKind::File && entry_in_scope(ctx, path) {
                search.file(path, &relative(&root, path))
            } else {
                ControlFlow::Continue(())
            }
        })?;
        budget_exhausted = walk.budget_exhausted;
    } else {
        let _ = search.file(&start, &relative(&root, &start));
    }
    Ok(search.into_output(budget_exhausted))
}

/// The state of one `search_text` call.
struct Search<'a> {
    /// The canonical workspace, which every file is opened beneath.
    root: &'a Path,
    pattern: &'a str,
    cap: usize,
    matches: Vec<String>,
    bytes: usize,
    cut: bool,
    skipped_binary: usize,
    skipped_large: usize,
}

impl Search<'_> {
    /// Searches one file; `Break` once the match or byte limit is reached. Files that
    /// cannot be opened (permissions, swapped for a symlink) are skipped.
    fn file(&mut self, path: &Path, shown: &str) -> ControlFlow<()> {
        let Ok(file) = confine::open_regular_file(self.root, path, shown) else {
            return ControlFlow::Continue(());
        };
        if file
            .metadata()
            .map_or(true, |m| m.len() > MAX_SEARCH_FILE_BYTES)
        {
            self.skipped_large += 1;
            return ControlFlow::Continue(());
        }
        let mut bytes = Vec::new();
        if file
            .take(MAX_SEARCH_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .is_err()
        {
            return ControlFlow::Continue(());
        }
        if text::looks_binary(&bytes) {
            self.skipped_binary += 1;
            return ControlFlow::Continue(());
        }
        let text = String::from_utf8_lossy(&bytes);
        for (index, line) in text.lines().enumerate() {
            if !line.contains(self.pattern) {
                continue;
            }
            let mut shown_line: String = line.chars().take(MAX_MATCH_LINE_CHARS).collect();
            if shown_line.len() < line.len() {
                shown_line.push('…');
            }
            let entry = format!("{shown}:{}:{shown_line}", index + 1);
            if self.matches.len() >= MAX_SEARCH_MATCHES || self.bytes + entry.len() + 1 > self.cap {
                self.cut = true;
                return ControlFlow::Break(());
            }
            self.bytes += entry.len() + 1;
            self.matches.push(entry);
        }
        ControlFlow::Continue(())
    }

    fn into_output(self, budget_exhausted: bool) -> ToolOutput {
        let mut content = if self.matches.is_empty() {
            format!("no matches for {:?}", self.pattern)
        } else {
            self.matches.join("\n")
        };
        if self.cut {
            content.push_str(&format!(
                "\n[stopped after {} matches; narrow the path or the pattern]",
                self.matches.len()
            ));
        }
        if budget_exhausted {
            content.push_str(&format!(
                "\n[stopped after scanning {MAX_SCANNED_ENTRIES} entries]"
            ));
        }
        if self.skipped_binary > 0 || self.skipped_large > 0 {
            content.push_str(&format!(
                "\n[skipped {} binary files and {} files over {} bytes]",
                self.skipped_binary, self.skipped_large, MAX_SEARCH_FILE_BYTES
            ));
        }
        ToolOutput {
            content,
            truncated: self.cut || budget_exhausted,
            security: Vec::new(),
            egress: Vec::new(),
        }
    }
}

/// `path` relative to the workspace root with `/` separators, as the model should
/// pass it back; the root itself is `.`.
fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    if rel.as_os_str().is_empty() {
        return ".".to_string();
    }
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_lines_skips_without_storing_and_stops_at_each_bound() {
        let data = b"one\ntwo\nthree\nfour";
        let all = take_lines(&mut &data[..], 1, None, 1000).unwrap();
        assert_eq!(all.bytes, data);
        assert_eq!(all.end, ExcerptEnd::EndOfFile);

        let middle = take_lines(&mut &data[..], 2, Some(2), 1000).unwrap();
        assert_eq!(middle.bytes, b"two\nthree\n");
        assert_eq!((middle.end, middle.line), (ExcerptEnd::Limit, 4));

        let capped = take_lines(&mut &data[..], 1, None, 6).unwrap();
        assert_eq!(capped.bytes, b"one\ntw");
        assert_eq!((capped.end, capped.line), (ExcerptEnd::Cap, 2));

        let past = take_lines(&mut &data[..], 9, None, 1000).unwrap();
        assert!(past.bytes.is_empty());
        assert_eq!(past.end, ExcerptEnd::EndOfFile);
    }
}
