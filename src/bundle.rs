//! Session bundles: every row of one session from a set of workspace tables, plus the
//! schema version it was read under, as one portable JSON document.
//!
//! `replay --export` writes one and `replay --bundle` reads it; the format is general
//! (any table, any columns) so whole-session set-aside can reuse it. Values keep
//! their SQLite storage class exactly:
//!
//! | SQLite        | JSON                                                     |
//! |---------------|----------------------------------------------------------|
//! | NULL          | `null`                                                   |
//! | INTEGER       | a JSON integer (exact 64-bit)                            |
//! | REAL          | `{"real": 1.5}` (`"Infinity"` / `"-Infinity"` if infinite) |
//! | TEXT (UTF-8)  | a JSON string                                            |
//! | TEXT (other)  | `{"text_hex": "…"}` (the stored bytes, not valid UTF-8)   |
//! | BLOB          | `{"blob_hex": "…"}`                                      |
//!
//! Pure: values in, values out.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// `format` of a session bundle.
pub const FORMAT: &str = "wsledger.session-bundle";
/// `version` of the bundle format this build writes and reads.
pub const VERSION: u64 = 1;

/// One stored value, with its SQLite storage class.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Null,
    Integer(i64),
    Real(f64),
    /// TEXT, as stored (normally UTF-8).
    Text(Vec<u8>),
    Blob(Vec<u8>),
}

impl Cell {
    /// Text of a TEXT value (lossy for bytes that are not UTF-8).
    pub fn text_lossy(&self) -> Option<String> {
        match self {
            Cell::Text(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }
}

/// One row: its columns in table order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row {
    pub columns: Vec<(String, Cell)>,
}

impl Row {
    /// The value of a column, if the row has it.
    pub fn get(&self, column: &str) -> Option<&Cell> {
        self.columns
            .iter()
            .find(|(c, _)| c == column)
            .map(|(_, v)| v)
    }
}

/// Schema version facts of the source workspace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaInfo {
    /// `PRAGMA user_version` (Maka's runtime schema version).
    pub user_version: i64,
    /// `operational_schema_migrations` (scope → version), if the table exists.
    pub registry: Option<BTreeMap<String, i64>>,
    /// `runtime_capabilities` (capability → version), if the table exists.
    pub capabilities: Option<BTreeMap<String, i64>>,
}

/// A session bundle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bundle {
    pub session_id: String,
    pub schema: SchemaInfo,
    /// Table name → rows, in the order the tables were written. A table the source
    /// workspace does not have is absent.
    pub tables: Vec<(String, Vec<Row>)>,
    /// Set by `doctor quarantine`: how the session was set aside (reasons, rowids,
    /// the tombstone and catalog generation it changed), for `doctor restore`.
    /// Written under the top-level key `quarantine`; replay ignores it.
    pub quarantine: Option<Value>,
    /// `kind`: `quarantine` (a whole session set aside) or `excise` (single damaged
    /// facts removed); absent in bundles written before excision existed, which
    /// `doctor restore` reads as quarantine bundles, and in replay exports.
    pub kind: Option<String>,
    /// Set by `doctor excise`: the excised events and rowids, for `doctor restore`.
    /// Written under the top-level key `excise`; replay ignores it.
    pub excise: Option<Value>,
    /// Set by `doctor rederive` (`kind: "rederive"`): the schema objects it put back and
    /// the registry rows it added, for `doctor restore`. Written under the top-level key
    /// `rederive`; its `tables` are the rows it wrote.
    pub rederive: Option<Value>,
}

/// Why a document is not a readable session bundle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleError {
    #[error("not JSON: {0}")]
    Json(String),
    #[error("not a wsledger session bundle: {0}")]
    Shape(String),
    #[error("bundle format version {0} is not supported (this build reads version {VERSION})")]
    Version(u64),
}

impl Bundle {
    /// The rows of a table (empty when the table is absent).
    pub fn rows(&self, table: &str) -> &[Row] {
        self.tables
            .iter()
            .find(|(t, _)| t == table)
            .map_or(&[], |(_, rows)| rows.as_slice())
    }

    /// Whether the bundle carries the table (possibly with no rows).
    pub fn has_table(&self, table: &str) -> bool {
        self.tables.iter().any(|(t, _)| t == table)
    }

    /// The bundle as a JSON value (key order as documented).
    pub fn to_json(&self) -> Value {
        let mut doc = Map::new();
        doc.insert("format".into(), Value::from(FORMAT));
        doc.insert("version".into(), Value::from(VERSION));
        if let Some(k) = &self.kind {
            doc.insert("kind".into(), Value::from(k.clone()));
        }
        doc.insert("session_id".into(), Value::from(self.session_id.clone()));
        let versions = |m: &Option<BTreeMap<String, i64>>| match m {
            None => Value::Null,
            Some(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), Value::from(*v)))
                    .collect(),
            ),
        };
        let mut schema = Map::new();
        schema.insert("user_version".into(), Value::from(self.schema.user_version));
        schema.insert("registry".into(), versions(&self.schema.registry));
        schema.insert("capabilities".into(), versions(&self.schema.capabilities));
        doc.insert("schema".into(), Value::Object(schema));
        let mut tables = Map::new();
        for (name, rows) in &self.tables {
            let rows: Vec<Value> = rows
                .iter()
                .map(|r| {
                    Value::Object(
                        r.columns
                            .iter()
                            .map(|(c, v)| (c.clone(), cell_to_json(v)))
                            .collect(),
                    )
                })
                .collect();
            tables.insert(name.clone(), Value::Array(rows));
        }
        doc.insert("tables".into(), Value::Object(tables));
        if let Some(q) = &self.quarantine {
            doc.insert("quarantine".into(), q.clone());
        }
        if let Some(x) = &self.excise {
            doc.insert("excise".into(), x.clone());
        }
        if let Some(x) = &self.rederive {
            doc.insert("rederive".into(), x.clone());
        }
        Value::Object(doc)
    }

    /// The bundle as pretty-printed JSON text with a final newline.
    pub fn to_json_text(&self) -> String {
        let mut s = serde_json::to_string_pretty(&self.to_json()).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Reads a bundle from JSON text.
    pub fn from_json_text(text: &str) -> Result<Bundle, BundleError> {
        let v: Value = serde_json::from_str(text).map_err(|e| BundleError::Json(e.to_string()))?;
        Bundle::from_json(&v)
    }

    /// Reads a bundle from a JSON value.
    pub fn from_json(v: &Value) -> Result<Bundle, BundleError> {
        let shape = |m: &str| BundleError::Shape(m.to_owned());
        let doc = v
            .as_object()
            .ok_or_else(|| shape("the document is not an object"))?;
        match doc.get("format").and_then(Value::as_str) {
            Some(FORMAT) => {}
            Some(other) => {
                return Err(BundleError::Shape(format!(
                    "`format` is `{other}`, expected `{FORMAT}`"
                )))
            }
            None => return Err(shape("`format` is missing")),
        }
        let version = doc
            .get("version")
            .and_then(Value::as_u64)
            .ok_or_else(|| shape("`version` is missing or not an integer"))?;
        if version != VERSION {
            return Err(BundleError::Version(version));
        }
        let session_id = doc
            .get("session_id")
            .and_then(Value::as_str)
            .ok_or_else(|| shape("`session_id` is missing or not a string"))?
            .to_owned();
        let schema = doc
            .get("schema")
            .and_then(Value::as_object)
            .ok_or_else(|| shape("`schema` is missing or not an object"))?;
        let user_version = schema
            .get("user_version")
            .and_then(Value::as_i64)
            .ok_or_else(|| shape("`schema.user_version` is missing or not an integer"))?;
        let versions = |key: &str| -> Result<Option<BTreeMap<String, i64>>, BundleError> {
            match schema.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Object(m)) => m
                    .iter()
                    .map(|(k, v)| {
                        v.as_i64().map(|n| (k.clone(), n)).ok_or_else(|| {
                            BundleError::Shape(format!("`schema.{key}.{k}` is not an integer"))
                        })
                    })
                    .collect::<Result<BTreeMap<_, _>, _>>()
                    .map(Some),
                Some(_) => Err(BundleError::Shape(format!(
                    "`schema.{key}` is not an object"
                ))),
            }
        };
        let schema = SchemaInfo {
            user_version,
            registry: versions("registry")?,
            capabilities: versions("capabilities")?,
        };
        let tables_obj = doc
            .get("tables")
            .and_then(Value::as_object)
            .ok_or_else(|| shape("`tables` is missing or not an object"))?;
        let mut tables = Vec::new();
        for (name, rows) in tables_obj {
            let rows = rows.as_array().ok_or_else(|| {
                BundleError::Shape(format!("`tables.{name}` is not an array of rows"))
            })?;
            let mut out = Vec::with_capacity(rows.len());
            for (i, row) in rows.iter().enumerate() {
                let obj = row.as_object().ok_or_else(|| {
                    BundleError::Shape(format!("`tables.{name}[{i}]` is not an object"))
                })?;
                let mut columns = Vec::with_capacity(obj.len());
                for (col, value) in obj {
                    let cell = cell_from_json(value).map_err(|m| {
                        BundleError::Shape(format!("`tables.{name}[{i}].{col}`: {m}"))
                    })?;
                    columns.push((col.clone(), cell));
                }
                out.push(Row { columns });
            }
            tables.push((name.clone(), out));
        }
        let quarantine = match doc.get("quarantine") {
            None | Some(Value::Null) => None,
            Some(q @ Value::Object(_)) => Some(q.clone()),
            Some(_) => return Err(shape("`quarantine` is not an object")),
        };
        let kind = match doc.get("kind") {
            None | Some(Value::Null) => None,
            Some(Value::String(k)) => Some(k.clone()),
            Some(_) => return Err(shape("`kind` is not a string")),
        };
        let excise = match doc.get("excise") {
            None | Some(Value::Null) => None,
            Some(x @ Value::Object(_)) => Some(x.clone()),
            Some(_) => return Err(shape("`excise` is not an object")),
        };
        let rederive = match doc.get("rederive") {
            None | Some(Value::Null) => None,
            Some(x @ Value::Object(_)) => Some(x.clone()),
            Some(_) => return Err(shape("`rederive` is not an object")),
        };
        Ok(Bundle {
            session_id,
            schema,
            tables,
            quarantine,
            kind,
            excise,
            rederive,
        })
    }
}

fn cell_to_json(c: &Cell) -> Value {
    let tagged = |k: &str, v: Value| {
        let mut m = Map::new();
        m.insert(k.to_owned(), v);
        Value::Object(m)
    };
    match c {
        Cell::Null => Value::Null,
        Cell::Integer(n) => Value::from(*n),
        Cell::Real(f) => {
            let v = if f.is_finite() {
                serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
            } else if *f > 0.0 {
                Value::from("Infinity")
            } else {
                Value::from("-Infinity")
            };
            tagged("real", v)
        }
        Cell::Text(b) => match std::str::from_utf8(b) {
            Ok(s) => Value::from(s),
            Err(_) => tagged("text_hex", Value::from(hex::encode(b))),
        },
        Cell::Blob(b) => tagged("blob_hex", Value::from(hex::encode(b))),
    }
}

fn cell_from_json(v: &Value) -> Result<Cell, String> {
    match v {
        Value::Null => Ok(Cell::Null),
        Value::String(s) => Ok(Cell::Text(s.as_bytes().to_vec())),
        Value::Number(n) => n.as_i64().map(Cell::Integer).ok_or_else(|| {
            "a bare number must be a 64-bit integer (write reals as {\"real\": …})".to_owned()
        }),
        Value::Object(m) if m.len() == 1 => {
            let (k, v) = m.iter().next().expect("one entry");
            let hex_bytes = |v: &Value| -> Result<Vec<u8>, String> {
                let s = v.as_str().ok_or("expected a hex string")?;
                hex::decode(s).map_err(|e| format!("bad hex: {e}"))
            };
            match k.as_str() {
                "real" => match v {
                    Value::Number(n) => n.as_f64().map(Cell::Real).ok_or("bad real".into()),
                    Value::String(s) if s == "Infinity" => Ok(Cell::Real(f64::INFINITY)),
                    Value::String(s) if s == "-Infinity" => Ok(Cell::Real(f64::NEG_INFINITY)),
                    _ => Err("`real` must be a number, \"Infinity\" or \"-Infinity\"".into()),
                },
                "text_hex" => hex_bytes(v).map(Cell::Text),
                "blob_hex" => hex_bytes(v).map(Cell::Blob),
                other => Err(format!("unknown value tag `{other}`")),
            }
        }
        _ => Err(
            "expected null, an integer, a string, or {\"real\"|\"text_hex\"|\"blob_hex\": …}"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Bundle {
        Bundle {
            session_id: "s-1".into(),
            schema: SchemaInfo {
                user_version: 12,
                registry: Some([("runtime".to_owned(), 12)].into_iter().collect()),
                capabilities: None,
            },
            tables: vec![
                (
                    "t".into(),
                    vec![Row {
                        columns: vec![
                            ("a".into(), Cell::Null),
                            ("b".into(), Cell::Integer(i64::MAX)),
                            ("c".into(), Cell::Integer(-3)),
                            ("d".into(), Cell::Real(2.0)),
                            ("e".into(), Cell::Real(f64::NEG_INFINITY)),
                            ("f".into(), Cell::Text(b"caf\xc3\xa9 \"q\"".to_vec())),
                            ("g".into(), Cell::Text(vec![0x66, 0xff, 0x00])),
                            ("h".into(), Cell::Blob(vec![0, 1, 254])),
                            ("i".into(), Cell::Text("7".into())),
                        ],
                    }],
                ),
                ("empty".into(), vec![]),
            ],
            quarantine: Some(serde_json::json!({"sessions": ["s-1"]})),
            kind: Some("quarantine".into()),
            excise: None,
            rederive: None,
        }
    }

    #[test]
    fn round_trips_every_storage_class_exactly() {
        let b = sample();
        let text = b.to_json_text();
        let back = Bundle::from_json_text(&text).unwrap();
        assert_eq!(back, b);
        // Integer 7 and text "7" stay apart; real 2.0 is tagged.
        assert!(text.contains("\"i\": \"7\""));
        assert!(text.contains("\"real\": 2.0"));
        assert!(text.contains("\"text_hex\": \"66ff00\""));
        assert!(text.contains("\"blob_hex\": \"0001fe\""));
        // Column order is kept.
        let cols: Vec<&str> = back.rows("t")[0]
            .columns
            .iter()
            .map(|(c, _)| c.as_str())
            .collect();
        assert_eq!(cols, ["a", "b", "c", "d", "e", "f", "g", "h", "i"]);
        assert!(back.has_table("empty") && !back.has_table("nope"));
    }

    #[test]
    fn refuses_what_it_cannot_read_exactly() {
        let err = |s: &str| Bundle::from_json_text(s).unwrap_err();
        assert!(matches!(err("{"), BundleError::Json(_)));
        assert!(matches!(err("[]"), BundleError::Shape(_)));
        assert!(matches!(
            err(r#"{"format":"other","version":1}"#),
            BundleError::Shape(_)
        ));
        assert_eq!(
            err(r#"{"format":"wsledger.session-bundle","version":2}"#),
            BundleError::Version(2)
        );
        let base = |tables: &str| {
            format!(
                r#"{{"format":"wsledger.session-bundle","version":1,"session_id":"s","schema":{{"user_version":12}},"tables":{tables}}}"#
            )
        };
        assert!(Bundle::from_json_text(&base("{}")).is_ok());
        for bad in [
            r#"{"t":[{"a":1.5}]}"#,
            r#"{"t":[{"a":true}]}"#,
            r#"{"t":[{"a":{"blob_hex":"zz"}}]}"#,
            r#"{"t":[{"a":{"what":1}}]}"#,
            r#"{"t":{}}"#,
        ] {
            assert!(
                matches!(
                    Bundle::from_json_text(&base(bad)),
                    Err(BundleError::Shape(_))
                ),
                "{bad}"
            );
        }
    }
}
