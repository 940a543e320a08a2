//! JSON written by hand where a hot path writes it (a page of search results): strings copied
//! whole when they need no escape, which one vectorised pass tells, else escaped by
//! `serde_json`, so the bytes are always `serde_json`'s.

/// `value` as a JSON string. Most listing strings need no escape, and telling so takes one
/// pass the compiler vectorises, so those are copied whole; the rest go to `serde_json`.
/// Either way the bytes are `serde_json`'s, which escapes exactly the control characters,
/// `"` and the backslash.
pub fn json_str(out: &mut Vec<u8>, value: &str) -> serde_json::Result<()> {
    let bytes = value.as_bytes();
    let needs_escape = bytes.iter().fold(false, |any, &b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if needs_escape {
        return serde_json::to_writer(out, value);
    }
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    out.extend_from_slice(bytes);
    out.push(b'"');
    Ok(())
}

pub fn json_opt_str(out: &mut Vec<u8>, value: Option<&str>) -> serde_json::Result<()> {
    match value {
        Some(value) => json_str(out, value),
        None => {
            out.extend_from_slice(b"null");
            Ok(())
        }
    }
}

pub fn json_strs<'a>(
    out: &mut Vec<u8>,
    values: impl Iterator<Item = &'a str>,
) -> serde_json::Result<()> {
    out.push(b'[');
    for (i, value) in values.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json_str(out, value)?;
    }
    out.push(b']');
    Ok(())
}
