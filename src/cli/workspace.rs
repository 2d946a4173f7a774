//! Finding the workspace database to open.

use std::path::{Path, PathBuf};

use super::CliError;

/// The platform's default Maka workspace root.
pub fn default_workspace() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if cfg!(target_os = "macos") {
        return home.map(|h| h.join("Library/Application Support/Maka/workspaces/default"));
    }
    if let Some(xdg) = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from) {
        // Maka only honours an absolute XDG_CONFIG_HOME.
        if xdg.is_absolute() {
            return Some(xdg.join("Maka/workspaces/default"));
        }
    }
    home.map(|h| h.join(".config/Maka/workspaces/default"))
}

/// The database path for `--workspace` (or the default workspace).
pub fn database_path(workspace: Option<&Path>) -> Result<PathBuf, CliError> {
    let root = match workspace {
        Some(p) => p.to_path_buf(),
        None => default_workspace().ok_or_else(|| {
            CliError::new(
                "no --workspace given and no home directory to find Maka's default workspace",
                "pass `--workspace PATH`",
            )
        })?,
    };
    Ok(crate::db::resolve_database_path(&root)?)
}
