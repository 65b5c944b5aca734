//! The YAML reader's (serde-saphyr) terse messages, rewritten as "what is wrong; what is
//! allowed" — the part every nvtest file (suite, topology, expected findings) shares.

/// Where the YAML reader located `error` (1-based line and column; the file's start when it
/// says nothing) and its message, without the reader's snippet, rewritten by [`clarify`]
/// when it is one any file may get.
pub fn located(error: &serde_saphyr::Error) -> (u64, u64, String) {
    use serde_saphyr::MessageFormatter;
    let (line, column) = error.location().map(|l| (l.line().max(1), l.column().max(1))).unwrap_or((1, 1));
    let message = serde_saphyr::UserMessageFormatter.format_message(error.without_snippet()).into_owned();
    let message = message.trim();
    (line, column, clarify(message).unwrap_or_else(|| message.to_string()))
}

/// The rewrite of a message any YAML file may get, or `None` for a message the caller
/// words for its own kind of file. `message` is trimmed.
pub fn clarify(message: &str) -> Option<String> {
    for (ty, max) in [("u8", u64::from(u8::MAX)), ("u16", u16::MAX.into()), ("u32", u32::MAX.into()), ("u64", u64::MAX)]
    {
        if message == format!("invalid {ty}") {
            return Some(format!("not a valid {ty}; expected a whole number from 0 to {max}"));
        }
    }
    if let Some(rest) = message.strip_prefix("duplicate mapping key") {
        let key = rest.split('`').nth(1).map(|k| format!(" `{k}`")).unwrap_or_default();
        return Some(format!("duplicate key{key}; a key may appear only once in a mapping"));
    }
    if let Some(field) = message.strip_prefix("missing field ") {
        return Some(format!("missing key {field}; it is required here"));
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        return Some(format!("unknown name {}", rest.replacen(", expected one of ", "; expected one of: ", 1)));
    }
    if let Some(rest) = message.strip_prefix("unknown field ") {
        return Some(format!("unknown key {}", rest.replacen(", expected one of ", "; allowed here: ", 1)));
    }
    let known = match message {
        "expected sequence start" => "expected a list here (`[a, b]` or lines starting with `- `)",
        "expected mapping start" => "expected a mapping here (`{key: value}` or `key: value` lines)",
        "expected string scalar" => "expected text here",
        _ => return None,
    };
    Some(known.to_string())
}

#[cfg(test)]
mod tests {
    use super::clarify;

    #[test]
    fn common_messages_say_what_is_allowed() {
        assert_eq!(clarify("invalid u8").unwrap(), "not a valid u8; expected a whole number from 0 to 255");
        assert_eq!(
            clarify("duplicate mapping key `a`").unwrap(),
            "duplicate key `a`; a key may appear only once in a mapping"
        );
        assert_eq!(
            clarify("unknown field `x`, expected one of `a`, `b`").unwrap(),
            "unknown key `x`; allowed here: `a`, `b`"
        );
        assert_eq!(
            clarify("unknown variant `x`, expected one of `a`").unwrap(),
            "unknown name `x`; expected one of: `a`"
        );
        assert_eq!(clarify("something else"), None);
    }
}
