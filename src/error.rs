//! The error a user sees: one `error:` line and one `hint:` line. Every room that
//! refuses or fails on the user's behalf returns it; `cli` prints it and exits 2.

/// An error the user can act on: one `error:` line and one `hint:` line.
#[derive(Debug)]
pub struct UserError {
    pub message: String,
    pub hint: String,
}

impl UserError {
    pub fn new(message: impl Into<String>, hint: impl Into<String>) -> UserError {
        UserError {
            message: message.into(),
            hint: hint.into(),
        }
    }
}

impl From<crate::db::DbError> for UserError {
    fn from(e: crate::db::DbError) -> Self {
        UserError {
            hint: e.hint(),
            message: e.to_string(),
        }
    }
}

impl From<crate::db::write::WriteError> for UserError {
    fn from(e: crate::db::write::WriteError) -> Self {
        UserError::new(e.to_string(), e.hint())
    }
}
