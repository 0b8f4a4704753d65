//! `edit_file`: replace a piece of text in a file of the workspace, keeping the rest as
//! it is. A model that changes one line of a file it has not read, or has read only in
//! part, cannot rewrite the whole file from a guess through this tool: it names the text
//! to change and the text to put there, and an edit whose text is not in the file is
//! refused with what to do instead. The path checks are `write_file`'s
//! ([`super::paths::writable_path`]), for a file that must already exist.

use std::io::{Read, Write};
use std::path::Path;

use agentplane_core::ToolErrorKind;
use agentplane_engine::ports::{ToolContext, ToolError, ToolOutput};
use serde::Deserialize;

use super::paths::{failed, inside_git_dir, refuse_git_dir, writable_path};
use crate::text;
use agentplane_process::confine::{self, Access, resolve_in_workspace};

/// Files larger than this are not edited (`write_file` replaces them whole).
pub const MAX_EDIT_FILE_BYTES: u64 = 4 * 1024 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EditArgs {
    path: String,
    old_text: String,
    new_text: String,
    #[serde(default)]
    replace_all: bool,
}

/// The tool's parameters, for its [`agentplane_core::ToolSpec`].
pub(super) fn parameters() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path relative to the workspace."},
            "old_text": {"type": "string", "minLength": 1, "description": "The exact text to replace, as it is in the file."},
            "new_text": {"type": "string", "description": "The text to put in its place."},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence (default: old_text must occur once)."}
        },
        "required": ["path", "old_text", "new_text"],
        "additionalProperties": false
    })
}

pub(super) fn edit_file(args: &EditArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    if args.old_text.is_empty() {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            "old_text is empty; to create or replace a whole file use write_file",
        ));
    }
    // `.git/` is refused before anything is looked up; then the file must exist (no
    // parent directory is created for a failed edit); then the checks of a write,
    // which never goes through a symlink.
    if inside_git_dir(Path::new(&args.path)) {
        return Err(refuse_git_dir(&args.path));
    }
    resolve_in_workspace(&ctx.workspace, &args.path, Access::Read)?;
    let path = writable_path(ctx, &args.path)?;
    let mut file = confine::open_regular_file(&ctx.workspace, &path, &args.path)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size > MAX_EDIT_FILE_BYTES {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!(
                "{} is {size} bytes, over the {MAX_EDIT_FILE_BYTES} bytes edit_file changes; \
                 use write_file",
                args.path
            ),
        ));
    }
    let mut bytes = Vec::new();
    Read::by_ref(&mut file)
        .take(MAX_EDIT_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| failed(&args.path, &e))?;
    drop(file);
    // Grown past the bound since its size was read: never write back a cut copy.
    if bytes.len() as u64 > MAX_EDIT_FILE_BYTES {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!(
                "{} grew over {MAX_EDIT_FILE_BYTES} bytes; use write_file",
                args.path
            ),
        ));
    }
    if text::looks_binary(&bytes) {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!("{} is a binary file; edit_file changes text", args.path),
        ));
    }
    let Ok(content) = String::from_utf8(bytes) else {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!("{} is not UTF-8 text; edit_file changes text", args.path),
        ));
    };
    let (edited, count) = replace(&content, args)?;
    let mut file = confine::create_regular_file(&ctx.workspace, &path, &args.path)?;
    file.write_all(edited.as_bytes())
        .and_then(|()| file.flush())
        .map_err(|e| failed(&args.path, &e))?;
    let times = if count == 1 {
        "1 occurrence".to_owned()
    } else {
        format!("{count} occurrences")
    };
    Ok(ToolOutput::text(format!(
        "replaced {times} in {}; it is now {} bytes",
        args.path,
        edited.len()
    )))
}

/// `content` with `old_text` replaced, and how many times. The text must be there
/// exactly, once unless `replace_all`. When it is not, the same text without the
/// surrounding blank space a model often adds (a trailing newline) is tried.
fn replace(content: &str, args: &EditArgs) -> Result<(String, usize), ToolError> {
    let trimmed = args.old_text.trim();
    let (old, new) = match content.matches(args.old_text.as_str()).count() {
        0 if !trimmed.is_empty() && trimmed != args.old_text && content.contains(trimmed) => {
            (trimmed, args.new_text.trim())
        }
        0 => {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArguments,
                format!(
                    "old_text is not in {}: read_file it and copy the text to change exactly",
                    args.path
                ),
            ));
        }
        _ => (args.old_text.as_str(), args.new_text.as_str()),
    };
    let count = content.matches(old).count();
    if count > 1 && !args.replace_all {
        return Err(ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!(
                "old_text occurs {count} times in {}: include more of the text around it, \
                 or set replace_all to change every one",
                args.path
            ),
        ));
    }
    Ok((content.replace(old, new), count))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(old: &str, new: &str, all: bool) -> EditArgs {
        EditArgs {
            path: "f.txt".into(),
            old_text: old.into(),
            new_text: new.into(),
            replace_all: all,
        }
    }

    #[test]
    fn one_occurrence_is_replaced_and_the_rest_kept() {
        let (out, n) = replace(
            "a=1\nport=8080\nb=2\n",
            &args("port=8080", "port=9090", false),
        )
        .expect("edited");
        assert_eq!((out.as_str(), n), ("a=1\nport=9090\nb=2\n", 1));
    }

    #[test]
    fn several_occurrences_need_replace_all() {
        let err = replace("x x x", &args("x", "y", false)).expect_err("ambiguous");
        assert!(err.message.contains("occurs 3 times"), "{}", err.message);
        let (out, n) = replace("x x x", &args("x", "y", true)).expect("all");
        assert_eq!((out.as_str(), n), ("y y y", 3));
    }

    #[test]
    fn missing_text_is_refused_and_a_trailing_newline_forgiven() {
        let err = replace("a=1\n", &args("b=2", "b=3", false)).expect_err("absent");
        assert!(err.message.contains("not in f.txt"), "{}", err.message);
        let (out, _) = replace("a=1 b=2", &args("b=2\n", "b=3\n", false)).expect("trimmed");
        assert_eq!(out, "a=1 b=3");
    }
}
