//! How names appear in SQL and in messages: a quoted identifier, and the connection string
//! without credentials.

/// `name` as a quoted SQL identifier.
pub(super) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The connection string without user name and password, for messages.
pub(super) fn redact(conn: &str) -> String {
    if let Some((scheme, rest)) = conn.split_once("://") {
        // Userinfo ends at the last '@' (an unencoded '@', '/' or '?' in a password still
        // comes before it); anything that looks like userinfo goes, even if it over-redacts.
        let rest = rest.rfind('@').map_or(rest, |i| &rest[i + 1..]);
        let (base, query) = match rest.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (rest, None),
        };
        let mut out = format!("{scheme}://{base}");
        if let Some(q) = query {
            let kept: Vec<&str> = q
                .split('&')
                .filter(|kv| {
                    let key = kv.split('=').next().unwrap_or("");
                    !key.eq_ignore_ascii_case("password") && !key.eq_ignore_ascii_case("user")
                })
                .collect();
            if !kept.is_empty() {
                out.push('?');
                out.push_str(&kept.join("&"));
            }
        }
        return out;
    }
    redact_key_values(conn).unwrap_or_else(|| "<unparsable connection string>".to_string())
}

/// `key=value` connection strings (`host=x password='a b'`) without `password` and `user`.
fn redact_key_values(conn: &str) -> Option<String> {
    let mut out: Vec<String> = Vec::new();
    let mut it = conn.chars().peekable();
    loop {
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        if it.peek().is_none() {
            break;
        }
        let mut key = String::new();
        while let Some(c) = it.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        it.next_if_eq(&'=')?;
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if it.next_if_eq(&'\'').is_some() {
            value.push('\'');
            loop {
                match it.next()? {
                    '\\' => {
                        value.push('\\');
                        value.push(it.next()?);
                    }
                    '\'' => break,
                    c => value.push(c),
                }
            }
            value.push('\'');
        } else {
            while let Some(c) = it.next_if(|c| !c.is_whitespace()) {
                value.push(c);
            }
        }
        if !key.eq_ignore_ascii_case("password") && !key.eq_ignore_ascii_case("user") {
            out.push(format!("{key}={value}"));
        }
    }
    Some(out.join(" "))
}
