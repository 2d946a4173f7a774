//! What we tell people about releases and upgrades, in one place, so every hint and
//! `explain` text says the same and none can lose data.
//!
//! Two facts shape every sentence here: a newer Maka migrates an older file in place,
//! one way (no release migrates a file back down), and the Maka 0.1.5 and 0.1.6 desktop
//! apps delete, at start, any workspace database whose schema and registry are not
//! exactly their own (`../shared/spec/releases/README.md`).

use super::Generation;

/// Said wherever upgrading is mentioned.
pub const ONE_WAY: &str = "Opening the file with a newer Maka migrates it in place, one way: \
no Maka release migrates it back, so take a copy of the workspace folder first.";

/// Said to users of any other release, where upgrading is mentioned.
pub const RESET_BY_015_016: &str = "The Maka 0.1.5 and 0.1.6 desktop apps delete, at start, \
any workspace database whose schema and registry are not exactly their own, older or newer: \
never open this workspace with them.";

/// Said to users of a file written by 0.1.5 or 0.1.6.
pub const RESET_OWN_APP: &str = "This file was written by Maka 0.1.5 or 0.1.6: once a newer \
Maka has migrated it, the 0.1.5 and 0.1.6 desktop apps delete it at their next start, so do \
not go back to them after upgrading.";

/// The deletion warning that fits a file of generation `g` (`None`: unknown writer).
pub fn reset_warning(g: Option<&Generation>) -> &'static str {
    match g {
        Some(g) if g.releases.iter().any(|r| r == "v0.1.5" || r == "v0.1.6") => RESET_OWN_APP,
        _ => RESET_BY_015_016,
    }
}

/// The full upgrade caveat for a file of generation `g`.
pub fn upgrade_caveat(g: Option<&Generation>) -> String {
    format!("{ONE_WAY} {}", reset_warning(g))
}

/// Words that would tell a user to change the schema by hand. No hint or explanation
/// may contain them (a test reads every text the tool can print).
pub const SCHEMA_SURGERY: &[&str] = &[
    "drop table",
    "drop index",
    "drop trigger",
    "drop view",
    "drop the",
    "drop it",
    "drop extra",
    "alter table",
    "create table",
    "create index",
    "create trigger",
    "add the missing",
    "recreate the",
    "downgrade",
    "install an older",
    "matching maka release",
    "version that wrote it",
];

/// Whether `text` advises schema surgery or a downgrade.
pub fn advises_schema_surgery(text: &str) -> bool {
    let lower = text.to_lowercase();
    SCHEMA_SURGERY.iter().any(|w| lower.contains(w))
}

/// What the owner lock proves for a file of generation `g`. Every release's runtime host
/// takes the same lock (`<home>/.cache/maka/runtime-hosts/<rootId>/owner.lock`, an OFD
/// lock), but until v0.1.8 the desktop app in its default embedded mode, and until
/// v0.1.6 the CLI, open the workspace without it.
pub fn owner_lock_note(g: &Generation) -> Option<String> {
    let rank = g.rank();
    let desktop_embedded = rank <= super::release_rank("v0.1.8").unwrap_or(0);
    if !desktop_embedded {
        return None;
    }
    let cli = rank <= super::release_rank("v0.1.6").unwrap_or(0);
    Some(format!(
        "Maka {}'s desktop app{} open the workspace without taking the owner lock: quit \
         Maka before --apply (wsledger also refuses while any process has the file open)",
        g.display(),
        if cli { " and CLI" } else { " (embedded mode)" }
    ))
}
