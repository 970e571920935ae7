//! Reading a codec's metadata JSON: its name, configuration object and
//! `must_understand` flag, and typed access to configuration fields.

use super::*;

/// Name and configuration of a codec's JSON (short-hand names allowed).
///
/// # Errors
/// [`ZarrError::InvalidCodec`] for malformed JSON.
pub(crate) fn name_and_config(json: &Value) -> ZarrResult<(String, Map<String, Value>, bool)> {
    let bad = |reason: &str| ZarrError::InvalidCodec {
        codec: json.to_string(),
        reason: reason.to_string(),
    };
    match json {
        Value::String(s) => Ok((s.clone(), Map::new(), true)),
        Value::Object(o) => {
            let name = o
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("missing string member `name`"))?;
            let config = match o.get("configuration") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(c)) => c.clone(),
                Some(_) => return Err(bad("`configuration` must be an object")),
            };
            let must_understand = match o.get("must_understand") {
                None => true,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err(bad("`must_understand` must be a boolean")),
            };
            if let Some(k) = o
                .keys()
                .find(|k| !matches!(k.as_str(), "name" | "configuration" | "must_understand"))
            {
                return Err(bad(&format!("unknown member `{k}`")));
            }
            Ok((name.to_string(), config, must_understand))
        }
        _ => Err(bad("a codec must be an object or a name")),
    }
}

/// Helpers for reading codec configurations with typed errors.
pub(crate) struct Config<'a> {
    pub name: &'a str,
    pub map: &'a Map<String, Value>,
}

impl<'a> Config<'a> {
    pub(crate) fn new(name: &'a str, map: &'a Map<String, Value>) -> Self {
        Config { name, map }
    }

    pub(crate) fn err(&self, reason: impl Into<String>) -> ZarrError {
        ZarrError::InvalidCodec {
            codec: self.name.to_string(),
            reason: reason.into(),
        }
    }

    /// Fails on configuration keys not in `allowed`.
    pub(crate) fn only(&self, allowed: &[&str]) -> ZarrResult<()> {
        match self.map.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(self.err(format!("unknown configuration key `{k}`"))),
            None => Ok(()),
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub(crate) fn i64(&self, key: &str) -> ZarrResult<Option<i64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| self.err(format!("`{key}` must be an integer"))),
        }
    }

    pub(crate) fn u64(&self, key: &str) -> ZarrResult<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.err(format!("`{key}` must be a non-negative integer"))),
        }
    }

    pub(crate) fn str(&self, key: &str) -> ZarrResult<Option<&'a str>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| self.err(format!("`{key}` must be a string"))),
        }
    }

    pub(crate) fn bool(&self, key: &str) -> ZarrResult<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| self.err(format!("`{key}` must be a boolean"))),
        }
    }
}
