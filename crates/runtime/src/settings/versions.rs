//! `[versions]`: who may change agent versions (ADR 0016), and the `version` key of a
//! configured agent (its baseline version number).

use agentplane_core::version::{DEFAULT_VERSION, parse_version};
use serde::Deserialize;

use super::SettingError;

/// `[versions]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileVersions {
    admins: Option<Vec<String>>,
}

/// `[versions] admins`: the client ids that may create, edit, promote versions and
/// change traffic and shadows. `None` (the key left out): any client that passes
/// authentication may. An empty list: nobody may (versions are read-only).
pub fn admins(file: &FileVersions) -> Result<Option<Vec<String>>, SettingError> {
    let Some(admins) = &file.admins else {
        return Ok(None);
    };
    for admin in admins {
        if admin.trim().is_empty() || admin.len() > 200 || admin.chars().any(char::is_control) {
            return Err((
                "admins".into(),
                format!("{admin:?} is not a client id (1 to 200 printable characters)"),
            ));
        }
    }
    Ok(Some(admins.clone()))
}

/// A configured agent's `version`: a semantic version, `1.0.0` when left out.
pub fn baseline_version(version: Option<&str>) -> Result<String, String> {
    match version {
        None => Ok(DEFAULT_VERSION.to_owned()),
        Some(text) => parse_version(text).map(|_| text.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admins_and_baseline_versions_are_checked() {
        let file: FileVersions = toml::from_str("admins = [\"ops\"]").unwrap_or_default();
        assert_eq!(admins(&file), Ok(Some(vec!["ops".to_owned()])));
        let blank: FileVersions = toml::from_str("admins = [\" \"]").unwrap_or_default();
        assert!(admins(&blank).is_err());
        assert_eq!(admins(&FileVersions::default()), Ok(None));
        assert!(toml::from_str::<FileVersions>("admin = []").is_err());
        assert_eq!(baseline_version(None).as_deref(), Ok("1.0.0"));
        assert_eq!(baseline_version(Some("2.1.0")).as_deref(), Ok("2.1.0"));
        assert!(baseline_version(Some("two")).is_err());
    }
}
