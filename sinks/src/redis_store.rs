//! `RedisStore`: the serving fan-out. Redis holds each window's LATEST list (the instance with
//! the greatest start) so that a home page reads it in milliseconds. It is not the primary
//! store: it keeps no older instances (no history) and no dead letters; those live in the
//! primary store (SQLite or PostgreSQL), which the job commits to as well.
//!
//! # Keys
//!
//! - `{prefix}:{job}:{window}:latest` — sorted set: member = item_id, score = count;
//! - `{prefix}:{job}:{window}:latest:meta` — hash: window, window_start (ms), window_end (ms),
//!   revision, state (open|closed|final), final (0|1), as_of (ms), watermark (ms), item_count,
//!   epoch;
//! - `{prefix}:{job}:windows` — a string holding JSON `[{"name","size_ms","slide_ms","k"}…]` in
//!   configured order (written by `prepare`);
//! - `{prefix}:{job}:commit` — hash: epoch, watermark (ms), committed_at (ms).
//!
//! `prefix` defaults to [`DEFAULT_PREFIX`] (`hotlist`). Times are decimal milliseconds since the
//! Unix epoch. `epoch` in the meta hash is the commit that wrote the list. Job ids and window
//! names must not contain `:` (it would make two different keys collide); such names are
//! refused as invalid input.
//!
//! # Writing
//!
//! Each [`commit`](SinkStore::commit) is ONE Lua script, so it is atomic and idempotent:
//! 1. if the batch's epoch is at or below the stored `commit` epoch, nothing is written and the
//!    commit returns `Ok(false)` (a checkpoint number lower than the stored one is refused);
//! 2. for each window in the batch, the list of the instance with the greatest start (its
//!    highest revision in the batch) is written only if its start is at or after the stored
//!    meta's `window_start`: a newer instance (or a new revision of the same one) replaces the
//!    list, an older instance's correction does not clobber it. Writing deletes the sorted set
//!    and the meta hash, adds every member and sets the meta hash, so no member of an earlier
//!    list survives;
//! 3. the `commit` hash gets the batch's epoch and watermark and the wall-clock time.
//!
//! The script checks every key's type and every stored number before its first write, so it
//! either fails before writing anything or runs to its end (Redis does not roll scripts back).
//! Dead letters in a batch are ignored: Redis holds no dead letters, the primary store does.
//! Scores are doubles, so a count above 2^53 ([`MAX_EXACT_COUNT`]) is refused as invalid input
//! rather than stored inexactly.
//!
//! # Reading
//!
//! [`latest`](StoreReader::latest) reads the meta hash and the sorted set in one MULTI/EXEC
//! transaction, so both are of the same revision; it checks that the member count equals
//! `item_count` and orders the items by the ranking (count descending, then item id ascending
//! bytewise) on the client side, since Redis orders ties differently.
//! [`instance`](StoreReader::instance) can only return the latest instance: Redis holds no
//! other. After a connection, I/O or protocol failure the connection is dropped and the next
//! call reconnects, so retrying a retryable error is meaningful.

use crate::error::SinkError;
use crate::store::{SinkStore, StoreReader};
use crate::types::{check_batch, check_prepare, latest_revisions, CommitBatch, StoredList, StoredWindow};
use hotlist_operators::record::{ItemId, ListState, PublishedList, RankedItem};
use hotlist_operators::time::{Millis, Span};
use hotlist_operators::window::WindowSpec;
use redis::{Client, Connection, ConnectionLike, RedisError, RedisResult, Script};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Duration;

/// The key prefix used when none is configured.
pub const DEFAULT_PREFIX: &str = "hotlist";

/// How long connecting (TCP connect and handshake) may take before failing (retryable).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one request may wait for its reply (or to be sent) before failing (retryable).
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest count stored exactly: sorted-set scores are doubles.
pub const MAX_EXACT_COUNT: u64 = 1 << 53;

/// Error code the commit script uses for data it finds damaged (mapped to `SinkError::Corrupt`).
const CORRUPT_CODE: &str = "HOTLIST_CORRUPT";

/// The commit script; see the module documentation for what it does.
///
/// KEYS[1] is the job's commit hash; KEYS[2i] and KEYS[2i+1] are list i's sorted set and meta
/// hash. ARGV[1..4] are epoch, watermark, committed_at and the number of lists; then, per list:
/// window, window_start, window_end, revision, state, final, as_of, watermark, item_count,
/// followed by item_count (score, member) pairs. Returns 1 when committed, 0 when skipped.
const COMMIT_LUA: &str = r#"
local function corrupt(msg)
  return redis.error_reply('HOTLIST_CORRUPT ' .. msg)
end
local function is_int(s)
  return string.match(s, '^%-?%d+$') ~= nil
end
-- Compares canonical decimal integers exactly (Lua numbers are doubles).
local function cmp(a, b)
  local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if na ~= nb then
    if na then return -1 else return 1 end
  end
  local r = 0
  if #a ~= #b then
    if #a < #b then r = -1 else r = 1 end
  elseif a ~= b then
    if a < b then r = -1 else r = 1 end
  end
  if na then r = -r end
  return r
end
local function bad_type(key, want)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= want then
    return key .. ' is a ' .. t .. ', not a ' .. want
  end
  return nil
end

-- Phase 1: checks and decisions, no writes.
local err = bad_type(KEYS[1], 'hash')
if err then return corrupt(err) end
local stored = redis.call('HGET', KEYS[1], 'epoch')
if stored then
  if not is_int(stored) then return corrupt(KEYS[1] .. ' field epoch is not an integer') end
  if cmp(ARGV[1], stored) <= 0 then return 0 end
end
local n = tonumber(ARGV[4])
local writes = {}
local p = 5
for i = 1, n do
  local zkey, mkey = KEYS[2 * i], KEYS[2 * i + 1]
  err = bad_type(zkey, 'zset') or bad_type(mkey, 'hash')
  if err then return corrupt(err) end
  local old = redis.call('HGET', mkey, 'window_start')
  local newer = true
  if old then
    if not is_int(old) then return corrupt(mkey .. ' field window_start is not an integer') end
    newer = cmp(ARGV[p + 1], old) >= 0
  end
  if newer then writes[#writes + 1] = {i, p} end
  p = p + 9 + 2 * tonumber(ARGV[p + 8])
end

-- Phase 2: writes.
for _, w in ipairs(writes) do
  local i, q = w[1], w[2]
  local zkey, mkey = KEYS[2 * i], KEYS[2 * i + 1]
  redis.call('DEL', zkey, mkey)
  local count = tonumber(ARGV[q + 8])
  local first = q + 9
  local j = 0
  while j < count do
    local m = math.min(count - j, 1000)
    local args = {}
    for x = 0, m - 1 do
      args[2 * x + 1] = ARGV[first + 2 * (j + x)]
      args[2 * x + 2] = ARGV[first + 2 * (j + x) + 1]
    end
    redis.call('ZADD', zkey, unpack(args))
    j = j + m
  end
  redis.call('HSET', mkey, 'window', ARGV[q], 'window_start', ARGV[q + 1],
    'window_end', ARGV[q + 2], 'revision', ARGV[q + 3], 'state', ARGV[q + 4],
    'final', ARGV[q + 5], 'as_of', ARGV[q + 6], 'watermark', ARGV[q + 7],
    'item_count', ARGV[q + 8], 'epoch', ARGV[1])
end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'watermark', ARGV[2], 'committed_at', ARGV[3])
return 1
"#;

static COMMIT_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(COMMIT_LUA));

/// A Redis sink store and reader: one connection, re-established after a connection failure.
pub struct RedisStore {
    client: Client,
    conn: Option<Connection>,
    /// The URL without credentials, for messages.
    url: String,
    prefix: String,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not derived: the client's connection info holds the password.
        f.debug_struct("RedisStore")
            .field("url", &self.url)
            .field("prefix", &self.prefix)
            .field("connected", &self.conn.is_some())
            .finish()
    }
}

/// `url` with the password and the query string (which may carry one) masked.
fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let (rest, query) = match rest.find(['?', '#']) {
        Some(i) => (&rest[..i], "?***"),
        None => (rest, ""),
    };
    let rest = match rest.rfind('@') {
        Some(at) => {
            let (userinfo, host) = rest.split_at(at);
            match userinfo.find(':') {
                Some(colon) => format!("{}:***{host}", &userinfo[..colon]),
                None => rest.to_string(),
            }
        }
        None => rest.to_string(),
    };
    format!("{scheme}{rest}{query}")
}

/// The error's class word (see [`SinkError::Redis`]) followed by its message.
fn describe(e: &RedisError) -> String {
    if e.is_io_error() {
        return format!("IO {e}");
    }
    match e.code() {
        Some(code) => match e.detail() {
            Some(detail) => format!("{code} {detail}"),
            None => format!("{code} {e}"),
        },
        None => format!("CLIENT {e}"),
    }
}

fn invalid(job: &str, detail: String) -> SinkError {
    SinkError::Invalid {
        job: job.to_string(),
        detail,
    }
}

/// Refuses a job id or window name that would make keys ambiguous.
fn check_key_part(job: &str, what: &str, name: &str) -> Result<(), SinkError> {
    if name.contains(':') {
        return Err(invalid(
            job,
            format!("{what} {name:?} contains ':', which the Redis key layout does not allow"),
        ));
    }
    Ok(())
}

/// Checks what `check_batch` does not: names fit the key layout, counts are exact as scores and
/// a list holds no item twice (a sorted set would merge them).
fn check_list(job: &str, l: &PublishedList) -> Result<(), SinkError> {
    check_key_part(job, "window name", &l.window)?;
    let mut seen = HashSet::with_capacity(l.items.len());
    for item in &l.items {
        if item.count > MAX_EXACT_COUNT {
            return Err(invalid(
                job,
                format!(
                    "list {:?}@{}: count {} of {:?} exceeds 2^53, which Redis scores cannot hold exactly",
                    l.window, l.start.0, item.count, item.item_id
                ),
            ));
        }
        if !seen.insert(item.item_id.as_str()) {
            return Err(invalid(
                job,
                format!(
                    "list {:?}@{}: item {:?} appears twice",
                    l.window, l.start.0, item.item_id
                ),
            ));
        }
    }
    Ok(())
}

/// Orders items by the ranking: count descending, then item id ascending bytewise.
fn sort_by_rank(items: &mut [RankedItem]) {
    items.sort_unstable_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.item_id.as_bytes().cmp(b.item_id.as_bytes()))
    });
}

fn open_connection(client: &Client) -> RedisResult<Connection> {
    let conn = client.get_connection_with_timeout(CONNECT_TIMEOUT)?;
    conn.set_read_timeout(Some(RESPONSE_TIMEOUT))?;
    conn.set_write_timeout(Some(RESPONSE_TIMEOUT))?;
    Ok(conn)
}

/// Writes `s` as a JSON string literal.
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c < ' ' => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The `windows` key's JSON.
fn windows_json(windows: &[WindowSpec]) -> String {
    let mut out = String::from("[");
    for (i, w) in windows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"name\":");
        push_json_string(&mut out, &w.name);
        out.push_str(&format!(
            ",\"size_ms\":{},\"slide_ms\":{},\"k\":{}}}",
            w.size.as_millis(),
            w.slide.as_millis(),
            w.k
        ));
    }
    out.push(']');
    out
}

/// A JSON value of the `windows` document: only strings and non-negative integers occur.
enum JsonScalar {
    Str(String),
    Int(u64),
}

/// A minimal reader for the `windows` JSON document.
struct JsonReader<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> JsonReader<'a> {
    fn skip_ws(&mut self) {
        while matches!(self.text.as_bytes().get(self.pos), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.pos += 1;
        }
    }

    /// Consumes `c` (after white space) if it comes next.
    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.text.as_bytes().get(self.pos) == Some(&c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", char::from(c), self.pos))
        }
    }

    fn hex4(chars: &mut std::str::CharIndices<'_>) -> Result<u32, String> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = chars.next().and_then(|(_, c)| c.to_digit(16)).ok_or("bad \\u escape")?;
            v = v * 16 + d;
        }
        Ok(v)
    }

    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let start = self.pos;
        let mut out = String::new();
        let mut chars = self.text[start..].char_indices();
        loop {
            let Some((i, c)) = chars.next() else {
                return Err(format!("unterminated string at byte {start}"));
            };
            match c {
                '"' => {
                    self.pos = start + i + 1;
                    return Ok(out);
                }
                '\\' => {
                    let e = chars.next().map(|(_, e)| e);
                    match e {
                        Some('"') => out.push('"'),
                        Some('\\') => out.push('\\'),
                        Some('/') => out.push('/'),
                        Some('b') => out.push('\u{8}'),
                        Some('f') => out.push('\u{c}'),
                        Some('n') => out.push('\n'),
                        Some('r') => out.push('\r'),
                        Some('t') => out.push('\t'),
                        Some('u') => {
                            let hi = Self::hex4(&mut chars)?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                let lo = match (chars.next(), chars.next()) {
                                    (Some((_, '\\')), Some((_, 'u'))) => Self::hex4(&mut chars)?,
                                    _ => return Err("unpaired surrogate in \\u escape".into()),
                                };
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err("unpaired surrogate in \\u escape".into());
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            out.push(char::from_u32(code).ok_or("bad \\u escape")?);
                        }
                        _ => return Err(format!("bad escape in string at byte {}", start + i)),
                    }
                }
                c if c < ' ' => return Err(format!("control character in string at byte {}", start + i)),
                c => out.push(c),
            }
        }
    }

    fn scalar(&mut self) -> Result<JsonScalar, String> {
        self.skip_ws();
        if self.text.as_bytes().get(self.pos) == Some(&b'"') {
            return self.string().map(JsonScalar::Str);
        }
        let start = self.pos;
        while self.text.as_bytes().get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
        self.text[start..self.pos]
            .parse()
            .map(JsonScalar::Int)
            .map_err(|_| format!("expected a string or a non-negative integer at byte {start}"))
    }

    fn window(&mut self) -> Result<StoredWindow, String> {
        self.expect(b'{')?;
        let (mut name, mut size, mut slide, mut k) = (None, None, None, None);
        if !self.eat(b'}') {
            loop {
                let key = self.string()?;
                self.expect(b':')?;
                let value = self.scalar()?;
                let slot = match (key.as_str(), value) {
                    ("name", JsonScalar::Str(s)) => name.replace(s).is_some(),
                    ("size_ms", JsonScalar::Int(v)) => size.replace(v).is_some(),
                    ("slide_ms", JsonScalar::Int(v)) => slide.replace(v).is_some(),
                    ("k", JsonScalar::Int(v)) => k.replace(v).is_some(),
                    ("name" | "size_ms" | "slide_ms" | "k", _) => {
                        return Err(format!("field {key:?} has the wrong type"))
                    }
                    _ => false, // an unknown field: ignored
                };
                if slot {
                    return Err(format!("field {key:?} appears twice"));
                }
                if self.eat(b'}') {
                    break;
                }
                self.expect(b',')?;
            }
        }
        let name = name.ok_or("a window has no name")?;
        let ms = |v: Option<u64>, what: &str| -> Result<Span, String> {
            let v = v.ok_or_else(|| format!("window {name:?} has no {what}"))?;
            if i64::try_from(v).is_err() {
                return Err(format!("window {name:?}: {what} {v} is too large"));
            }
            Ok(Span::from_millis(v))
        };
        let size = ms(size, "size_ms")?;
        let slide = ms(slide, "slide_ms")?;
        let k = k.ok_or_else(|| format!("window {name:?} has no k"))?;
        let k = usize::try_from(k).map_err(|_| format!("window {name:?}: k {k} is too large"))?;
        Ok(StoredWindow { name, size, slide, k })
    }

    /// Parses a whole `windows` document.
    fn windows(text: &'a str) -> Result<Vec<StoredWindow>, String> {
        let mut r = JsonReader { text, pos: 0 };
        r.expect(b'[')?;
        let mut out = Vec::new();
        if !r.eat(b']') {
            loop {
                out.push(r.window()?);
                if r.eat(b']') {
                    break;
                }
                r.expect(b',')?;
            }
        }
        r.skip_ws();
        if r.pos != text.len() {
            return Err(format!("trailing data at byte {}", r.pos));
        }
        Ok(out)
    }
}

impl RedisStore {
    /// Connects to the Redis server at `url` (e.g. `redis://127.0.0.1:6379/`, or
    /// `redis://:password@host:6379/0`) with keys under `prefix` (normally [`DEFAULT_PREFIX`]).
    /// Fails with [`SinkError::Redis`] if the URL does not parse or the server cannot be reached
    /// within [`CONNECT_TIMEOUT`], and with [`SinkError::Invalid`] on an empty prefix. Error
    /// messages show the URL without its password.
    pub fn connect(url: &str, prefix: &str) -> Result<RedisStore, SinkError> {
        let shown = redact_url(url);
        if prefix.is_empty() {
            return Err(invalid("", format!("the Redis key prefix for {shown} is empty")));
        }
        let client = Client::open(url).map_err(|e| SinkError::Redis {
            url: shown.clone(),
            op: "parsing the Redis URL".into(),
            cause: describe(&e),
        })?;
        let conn = open_connection(&client).map_err(|e| SinkError::Redis {
            url: shown.clone(),
            op: "connecting".into(),
            cause: describe(&e),
        })?;
        Ok(RedisStore {
            client,
            conn: Some(conn),
            url: shown,
            prefix: prefix.to_string(),
        })
    }

    /// The server URL, without its password.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn list_key(&self, job: &str, window: &str) -> String {
        format!("{}:{job}:{window}:latest", self.prefix)
    }

    fn meta_key(&self, job: &str, window: &str) -> String {
        format!("{}:{job}:{window}:latest:meta", self.prefix)
    }

    fn windows_key(&self, job: &str) -> String {
        format!("{}:{job}:windows", self.prefix)
    }

    fn commit_key(&self, job: &str) -> String {
        format!("{}:{job}:commit", self.prefix)
    }

    fn corrupt(&self, detail: String) -> SinkError {
        SinkError::Corrupt {
            path: PathBuf::from(&self.url),
            detail,
        }
    }

    /// Runs `f` on the connection (reconnecting first if an earlier failure dropped it). After
    /// any failure other than an error reply from the server, the connection may be out of step
    /// with the server, so it is dropped.
    fn run<T>(
        &mut self,
        op: impl FnOnce() -> String,
        f: impl FnOnce(&mut Connection) -> RedisResult<T>,
    ) -> Result<T, SinkError> {
        let attempt = match self.conn.take() {
            Some(conn) => Ok(conn),
            None => open_connection(&self.client),
        }
        .and_then(|mut conn| {
            let result = f(&mut conn);
            match &result {
                Err(e) if e.code().is_none() || !conn.is_open() => {}
                _ => self.conn = Some(conn),
            }
            result
        });
        attempt.map_err(|e| {
            if e.code() == Some(CORRUPT_CODE) {
                return self.corrupt(e.detail().unwrap_or("").to_string());
            }
            SinkError::Redis {
                url: self.url.clone(),
                op: op(),
                cause: describe(&e),
            }
        })
    }

    /// Reads the latest list of a window: meta hash and sorted set in one transaction.
    fn read_latest(&mut self, job: &str, window: &str) -> Result<Option<StoredList>, SinkError> {
        check_key_part(job, "job id", job)?;
        check_key_part(job, "window name", window)?;
        let (zkey, mkey) = (self.list_key(job, window), self.meta_key(job, window));
        type Reply = (HashMap<String, String>, Vec<(Vec<u8>, f64)>);
        let (meta, members): Reply = self.run(
            || format!("reading the latest list of job {job:?} window {window:?}"),
            |c| {
                redis::pipe()
                    .atomic()
                    .cmd("HGETALL")
                    .arg(&mkey)
                    .cmd("ZRANGE")
                    .arg(&zkey)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(c)
            },
        )?;
        if meta.is_empty() {
            if members.is_empty() {
                return Ok(None);
            }
            return Err(self.corrupt(format!("{zkey} has {} members but {mkey} is missing", members.len())));
        }
        let field = |name: &str| {
            meta.get(name)
                .map(String::as_str)
                .ok_or_else(|| self.corrupt(format!("{mkey} has no field {name}")))
        };
        let int = |name: &str| -> Result<i64, SinkError> {
            let v = field(name)?;
            v.parse()
                .map_err(|_| self.corrupt(format!("{mkey} field {name} is not an integer: {v:?}")))
        };
        if field("window")? != window {
            return Err(self.corrupt(format!("{mkey} names window {:?}", field("window")?)));
        }
        let revision = int("revision")?;
        let revision =
            u32::try_from(revision).map_err(|_| self.corrupt(format!("{mkey} revision {revision} out of range")))?;
        let state = field("state")?;
        let state =
            ListState::parse(state).ok_or_else(|| self.corrupt(format!("{mkey} has unknown state {state:?}")))?;
        let is_final = field("final")?;
        if is_final != if state == ListState::Final { "1" } else { "0" } {
            return Err(self.corrupt(format!(
                "{mkey} final {is_final:?} disagrees with state {}",
                state.as_str()
            )));
        }
        let item_count = int("item_count")?;
        if usize::try_from(item_count).ok() != Some(members.len()) {
            return Err(self.corrupt(format!(
                "{zkey} has {} members but {mkey} item_count is {item_count}",
                members.len()
            )));
        }
        let mut items = Vec::with_capacity(members.len());
        for (member, score) in members {
            let item_id = String::from_utf8(member)
                .map_err(|e| self.corrupt(format!("{zkey} has a member that is not UTF-8: {e}")))?;
            if !(score >= 0.0 && score.fract() == 0.0 && score <= MAX_EXACT_COUNT as f64) {
                return Err(self.corrupt(format!("{zkey} member {item_id:?} has score {score}, not a count")));
            }
            items.push(RankedItem {
                item_id: ItemId::from(item_id),
                count: score as u64,
            });
        }
        sort_by_rank(&mut items);
        Ok(Some(StoredList {
            window: window.to_string(),
            start: Millis(int("window_start")?),
            end: Millis(int("window_end")?),
            revision,
            state,
            watermark: Millis(int("watermark")?),
            as_of: Millis(int("as_of")?),
            items,
        }))
    }
}

impl SinkStore for RedisStore {
    /// Records the job's windows in `{prefix}:{job}:windows` (replacing a previous definition).
    fn prepare(&mut self, job: &str, windows: &[WindowSpec]) -> Result<(), SinkError> {
        check_prepare(job, windows)?;
        check_key_part(job, "job id", job)?;
        for w in windows {
            check_key_part(job, "window name", &w.name)?;
        }
        let key = self.windows_key(job);
        let json = windows_json(windows);
        self.run(
            || format!("recording the windows of job {job:?}"),
            |c| redis::cmd("SET").arg(&key).arg(&json).exec(c),
        )
    }

    /// Commits the batch with one Lua script: see the module documentation.
    fn commit(&mut self, batch: &CommitBatch) -> Result<bool, SinkError> {
        check_batch(batch)?;
        let job = batch.job.as_str();
        check_key_part(job, "job id", job)?;
        for l in &batch.lists {
            check_list(job, l)?;
        }
        // Per window, the highest revision of the instance with the greatest start.
        let mut chosen: Vec<&PublishedList> = Vec::new();
        let mut slot: HashMap<&str, usize> = HashMap::new();
        for l in latest_revisions(&batch.lists) {
            match slot.get(l.window.as_str()) {
                Some(&i) => {
                    if l.start > chosen[i].start {
                        chosen[i] = l;
                    }
                }
                None => {
                    slot.insert(l.window.as_str(), chosen.len());
                    chosen.push(l);
                }
            }
        }
        let mut call = COMMIT_SCRIPT.prepare_invoke();
        call.key(self.commit_key(job))
            .arg(batch.epoch)
            .arg(batch.watermark.0)
            .arg(Millis::now().0)
            .arg(chosen.len() as u64);
        for l in &chosen {
            call.key(self.list_key(job, &l.window))
                .key(self.meta_key(job, &l.window))
                .arg(l.window.as_str())
                .arg(l.start.0)
                .arg(l.end.0)
                .arg(l.revision)
                .arg(l.state.as_str())
                .arg(i64::from(l.state == ListState::Final))
                .arg(l.as_of.0)
                .arg(l.watermark.0)
                .arg(l.items.len() as u64);
            for item in &l.items {
                call.arg(item.count).arg(item.item_id.as_str());
            }
        }
        let op = || format!("commit of job {job:?} epoch {}", batch.epoch);
        let done: i64 = self.run(op, |c| call.invoke(c))?;
        match done {
            1 => Ok(true),
            0 => Ok(false),
            other => Err(SinkError::Redis {
                url: self.url.clone(),
                op: op(),
                cause: format!("CLIENT the commit script returned {other}, expected 0 or 1"),
            }),
        }
    }

    fn committed_epoch(&mut self, job: &str) -> Result<Option<u64>, SinkError> {
        Ok(self.last_commit(job)?.map(|(epoch, _)| epoch))
    }
}

impl StoreReader for RedisStore {
    /// The windows `prepare` recorded, from the JSON in `{prefix}:{job}:windows`.
    fn windows(&mut self, job: &str) -> Result<Vec<StoredWindow>, SinkError> {
        check_key_part(job, "job id", job)?;
        let key = self.windows_key(job);
        let json: Option<String> = self.run(
            || format!("reading the windows of job {job:?}"),
            |c| redis::cmd("GET").arg(&key).query(c),
        )?;
        match json {
            None => Ok(Vec::new()),
            Some(json) => JsonReader::windows(&json).map_err(|e| self.corrupt(format!("{key}: {e}"))),
        }
    }

    /// The window's latest list, read atomically (meta and members of one revision).
    fn latest(&mut self, job: &str, window: &str) -> Result<Option<StoredList>, SinkError> {
        self.read_latest(job, window)
    }

    /// The list of the instance starting at `start`, if it is the latest one: Redis holds only
    /// the latest instance of each window, so an older instance is `None` even if the primary
    /// store has it.
    fn instance(&mut self, job: &str, window: &str, start: Millis) -> Result<Option<StoredList>, SinkError> {
        Ok(self.read_latest(job, window)?.filter(|l| l.start == start))
    }

    fn last_commit(&mut self, job: &str) -> Result<Option<(u64, Millis)>, SinkError> {
        check_key_part(job, "job id", job)?;
        let key = self.commit_key(job);
        let (epoch, watermark): (Option<String>, Option<String>) = self.run(
            || format!("reading the last commit of job {job:?}"),
            |c| redis::cmd("HMGET").arg(&key).arg("epoch").arg("watermark").query(c),
        )?;
        match (epoch, watermark) {
            (None, None) => Ok(None),
            (Some(epoch), Some(watermark)) => {
                let epoch = epoch
                    .parse::<u64>()
                    .map_err(|_| self.corrupt(format!("{key} field epoch is not an epoch: {epoch:?}")))?;
                let watermark = watermark
                    .parse::<i64>()
                    .map_err(|_| self.corrupt(format!("{key} field watermark is not an integer: {watermark:?}")))?;
                Ok(Some((epoch, Millis(watermark))))
            }
            _ => Err(self.corrupt(format!("{key} lacks epoch or watermark"))),
        }
    }
}

#[cfg(test)]
mod tests {
    //! These tests need a real Redis (default `redis://127.0.0.1:6379/`, or
    //! `HOTLIST_TEST_REDIS_URL`); they fail, never skip, when it is unreachable. Each test uses
    //! its own random key prefix and deletes its keys when it ends, even on failure.

    use super::*;
    use crate::test_fixtures::{batch, items, list_with, not_json, race_commits_and_reads, rows_for, windows, JOB};
    use std::sync::atomic::{AtomicU64, Ordering};

    fn test_url() -> String {
        std::env::var("HOTLIST_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_string())
    }

    /// A random key prefix and a raw connection; deletes every key under the prefix on drop.
    struct Fixture {
        prefix: String,
        raw: Connection,
    }

    impl Fixture {
        fn new() -> Fixture {
            static SEQ: AtomicU64 = AtomicU64::new(0);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos();
            let prefix = format!(
                "hotlist-test-{}-{nanos:x}-{}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            );
            let url = test_url();
            let raw = Client::open(url.as_str())
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
                .unwrap_or_else(|e| {
                    panic!(
                        "these tests need a Redis server at {url} but it is not reachable ({e}); start one with \
                         `redis-server --daemonize yes` (or `docker run -d -p 6379:6379 redis:7`), or set \
                         HOTLIST_TEST_REDIS_URL to a running server"
                    )
                });
            Fixture { prefix, raw }
        }

        fn store(&self) -> RedisStore {
            RedisStore::connect(&test_url(), &self.prefix).unwrap()
        }

        fn keys(&mut self) -> Vec<String> {
            let mut keys = Vec::new();
            let mut cursor = 0u64;
            loop {
                let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(format!("{}:*", self.prefix))
                    .arg("COUNT")
                    .arg(1000)
                    .query(&mut self.raw)
                    .unwrap();
                keys.extend(batch);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
            keys.sort();
            keys
        }

        fn key(&self, rest: &str) -> String {
            format!("{}:{JOB}:{rest}", self.prefix)
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let mut cursor = 0u64;
            loop {
                let Ok((next, keys)) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(format!("{}:*", self.prefix))
                    .arg("COUNT")
                    .arg(1000)
                    .query::<(u64, Vec<String>)>(&mut self.raw)
                else {
                    return;
                };
                if !keys.is_empty() {
                    let _ = redis::cmd("DEL").arg(&keys).exec(&mut self.raw);
                }
                if next == 0 {
                    return;
                }
                cursor = next;
            }
        }
    }

    /// Revision `revision` of the `1m` instance at `start` with `n` items: ids name the
    /// revision and every count is `revision * 1000 + (n - i)`, so both identify the revision.
    fn list(start: i64, revision: u32, n: usize) -> PublishedList {
        let count = |i| u64::from(revision) * 1000 + (n - i) as u64;
        list_with(start, revision, items(n, |i| format!("r{revision}-item{i:03}"), count))
    }

    #[test]
    fn latest_list_round_trips_with_ties_in_the_ranking() {
        let mut fx = Fixture::new();
        let mut store = fx.store();
        let mut l = list(120_000, 2, 0);
        // The ranking: count descending, then item id ascending bytewise ("Z" < "a" < "b" < "ä").
        l.items = [
            ("top", 9),
            ("Zed", 5),
            ("a", 5),
            ("b", 5),
            ("ä", 5),
            ("x", 1),
            ("y", 1),
            ("", 0),
        ]
        .iter()
        .map(|&(id, count)| RankedItem {
            item_id: id.into(),
            count,
        })
        .collect();
        assert_eq!(store.latest(JOB, "1m").unwrap(), None);
        assert!(store.commit(&batch(1, vec![l.clone()])).unwrap());
        assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(l.clone())));
        // A second reader on its own connection sees the same.
        assert_eq!(fx.store().latest(JOB, "1m").unwrap(), Some(StoredList::from(l.clone())));
        assert_eq!(
            store.instance(JOB, "1m", Millis(120_000)).unwrap(),
            Some(StoredList::from(l))
        );
        assert_eq!(store.instance(JOB, "1m", Millis(60_000)).unwrap(), None);
        assert_eq!(store.latest(JOB, "5m").unwrap(), None);
        assert_eq!(store.latest("other", "1m").unwrap(), None);
        // The key layout the module documents.
        let meta: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(fx.key("1m:latest:meta"))
            .query(&mut fx.raw)
            .unwrap();
        let want: HashMap<String, String> = [
            ("window", "1m"),
            ("window_start", "120000"),
            ("window_end", "180000"),
            ("revision", "2"),
            ("state", "open"),
            ("final", "0"),
            ("as_of", "1700000000000"),
            ("watermark", "120001"),
            ("item_count", "8"),
            ("epoch", "1"),
        ]
        .iter()
        .map(|&(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(meta, want);
        let score: f64 = redis::cmd("ZSCORE")
            .arg(fx.key("1m:latest"))
            .arg("top")
            .query(&mut fx.raw)
            .unwrap();
        assert_eq!(score, 9.0);
        let keys = fx.keys();
        let want = vec![fx.key("1m:latest"), fx.key("1m:latest:meta"), fx.key("commit")];
        assert_eq!(keys, want);
    }

    #[test]
    fn a_newer_instance_replaces_an_older_instances_correction_does_not() {
        let fx = Fixture::new();
        let mut store = fx.store();
        assert!(store.commit(&batch(1, vec![list(0, 1, 4)])).unwrap());
        // A new revision of the same instance replaces it.
        assert!(store.commit(&batch(2, vec![list(0, 2, 3)])).unwrap());
        assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 2, 3))));
        // A newer instance replaces it.
        assert!(store.commit(&batch(3, vec![list(60_000, 1, 5)])).unwrap());
        assert_eq!(
            store.latest(JOB, "1m").unwrap(),
            Some(StoredList::from(list(60_000, 1, 5)))
        );
        // A correction of the older instance does not clobber the latest list, but the commit
        // itself goes through.
        assert!(store.commit(&batch(4, vec![list(0, 7, 2)])).unwrap());
        assert_eq!(
            store.latest(JOB, "1m").unwrap(),
            Some(StoredList::from(list(60_000, 1, 5)))
        );
        assert_eq!(store.instance(JOB, "1m", Millis(0)).unwrap(), None);
        assert_eq!(store.committed_epoch(JOB).unwrap(), Some(4));
        // Within one batch: per window, the greatest start wins, and its highest revision.
        let mut five = list(0, 1, 2);
        five.window = "5m".into();
        let b = batch(
            5,
            vec![
                list(180_000, 3, 2),
                list(120_000, 9, 9),
                five.clone(),
                list(180_000, 2, 6),
            ],
        );
        assert!(store.commit(&b).unwrap());
        assert_eq!(
            store.latest(JOB, "1m").unwrap(),
            Some(StoredList::from(list(180_000, 3, 2)))
        );
        assert_eq!(store.latest(JOB, "5m").unwrap(), Some(StoredList::from(five)));
        // Negative starts compare as numbers, not strings.
        let mut neg = list(-120_000, 1, 1);
        neg.window = "neg".into();
        assert!(store.commit(&batch(6, vec![neg])).unwrap());
        let mut later = list(-60_000, 1, 2);
        later.window = "neg".into();
        assert!(store.commit(&batch(7, vec![later.clone()])).unwrap());
        let mut earlier = list(-180_000, 1, 3);
        earlier.window = "neg".into();
        assert!(store.commit(&batch(8, vec![earlier])).unwrap());
        assert_eq!(store.latest(JOB, "neg").unwrap(), Some(StoredList::from(later)));
    }

    #[test]
    fn epochs_at_or_below_the_committed_one_are_skipped() {
        let fx = Fixture::new();
        let mut store = fx.store();
        assert_eq!(store.committed_epoch(JOB).unwrap(), None);
        assert!(store.commit(&batch(5, vec![list(0, 1, 3)])).unwrap());
        for epoch in [5, 4, 0] {
            assert!(!store.commit(&batch(epoch, vec![list(60_000, 9, 1)])).unwrap());
        }
        assert_eq!(store.committed_epoch(JOB).unwrap(), Some(5));
        assert_eq!(store.last_commit(JOB).unwrap(), Some((5, Millis(5000))));
        assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 3))));
        // Epochs are per job; 10 > 9 although "10" < "9" as strings.
        let mut other = batch(9, vec![]);
        other.job = "other".into();
        assert!(store.commit(&other).unwrap());
        other.epoch = 10;
        assert!(store.commit(&other).unwrap());
        other.epoch = 9;
        assert!(!store.commit(&other).unwrap());
        assert_eq!(store.committed_epoch("other").unwrap(), Some(10));
        assert_eq!(store.committed_epoch(JOB).unwrap(), Some(5));
    }

    #[test]
    fn replacing_with_fewer_members_leaves_no_stale_ones() {
        let mut fx = Fixture::new();
        let mut store = fx.store();
        assert!(store.commit(&batch(1, vec![list(0, 1, 2500)])).unwrap());
        assert_eq!(store.latest(JOB, "1m").unwrap().unwrap().items.len(), 2500);
        assert!(store.commit(&batch(2, vec![list(0, 2, 3)])).unwrap());
        let zcard: u64 = redis::cmd("ZCARD").arg(fx.key("1m:latest")).query(&mut fx.raw).unwrap();
        assert_eq!(zcard, 3);
        assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 2, 3))));
        // An empty list: no sorted set at all, the meta says 0 items.
        assert!(store.commit(&batch(3, vec![list(0, 3, 0)])).unwrap());
        let got = store.latest(JOB, "1m").unwrap().unwrap();
        assert_eq!((got.revision, got.state, got.items.len()), (3, ListState::Final, 0));
        let exists: u64 = redis::cmd("EXISTS")
            .arg(fx.key("1m:latest"))
            .query(&mut fx.raw)
            .unwrap();
        assert_eq!(exists, 0);
    }

    #[test]
    fn windows_round_trip() {
        let mut fx = Fixture::new();
        let mut store = fx.store();
        let m = Span::from_millis;
        let mut windows = windows();
        windows.push(WindowSpec::tumbling("q\"\\/\u{1}ü😀", m(86_400_000), 1));
        assert!(store.windows(JOB).unwrap().is_empty());
        store.prepare(JOB, &windows).unwrap();
        assert_eq!(
            store.windows(JOB).unwrap(),
            windows.iter().map(StoredWindow::from).collect::<Vec<_>>()
        );
        // Re-preparing replaces the definition; the JSON is the documented one.
        store.prepare(JOB, &windows[1..2]).unwrap();
        let json: String = redis::cmd("GET").arg(fx.key("windows")).query(&mut fx.raw).unwrap();
        assert_eq!(json, r#"[{"name":"1m","size_ms":60000,"slide_ms":30000,"k":3}]"#);
        assert_eq!(store.windows(JOB).unwrap(), vec![StoredWindow::from(&windows[1])]);
        // Invalid windows change nothing.
        assert!(store.prepare(JOB, &[WindowSpec::tumbling("x", m(0), 1)]).is_err());
        let err = store
            .prepare(JOB, &[WindowSpec::tumbling("a:b", m(1000), 1)])
            .unwrap_err();
        assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
        assert_eq!(store.windows(JOB).unwrap().len(), 1);
        // A damaged document is reported as corrupt, naming the key.
        redis::cmd("SET")
            .arg(fx.key("windows"))
            .arg("[{\"name\":1}]")
            .exec(&mut fx.raw)
            .unwrap();
        let err = store.windows(JOB).unwrap_err();
        assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains(&fx.key("windows")), "{err}");
    }

    #[test]
    fn last_commit_and_dead_letters_ignored() {
        let mut fx = Fixture::new();
        let mut store = fx.store();
        assert_eq!(store.last_commit(JOB).unwrap(), None);
        let mut b = batch(7, vec![]);
        b.watermark = Millis(-5);
        b.dead_letters = vec![not_json(1, &[0xff])];
        let before = Millis::now().0;
        assert!(store.commit(&b).unwrap());
        assert_eq!(store.last_commit(JOB).unwrap(), Some((7, Millis(-5))));
        let commit: HashMap<String, i64> = redis::cmd("HGETALL").arg(fx.key("commit")).query(&mut fx.raw).unwrap();
        assert_eq!(commit.len(), 3);
        assert_eq!((commit["epoch"], commit["watermark"]), (7, -5));
        assert!(commit["committed_at"] >= before);
        // Only the commit hash: Redis holds no dead letters.
        assert_eq!(fx.keys(), vec![fx.key("commit")]);
        b.epoch = 8;
        b.watermark = Millis::MAX;
        assert!(store.commit(&b).unwrap());
        assert_eq!(store.last_commit(JOB).unwrap(), Some((8, Millis::MAX)));
    }

    #[test]
    fn invalid_input_and_corrupt_data() {
        let mut fx = Fixture::new();
        let mut store = fx.store();
        assert!(store.commit(&batch(1, vec![list(0, 1, 3)])).unwrap());
        let invalid_batches = [
            {
                let mut l = list(0, 2, 1);
                l.items[0].count = MAX_EXACT_COUNT + 1;
                batch(2, vec![l])
            },
            {
                let mut l = list(0, 2, 2);
                l.items[1].item_id = l.items[0].item_id.clone();
                batch(2, vec![l])
            },
            {
                let mut l = list(0, 2, 1);
                l.window = "1:m".into();
                batch(2, vec![l])
            },
            {
                let mut b = batch(2, vec![]);
                b.job = "a:b".into();
                b
            },
        ];
        for b in &invalid_batches {
            let err = store.commit(b).unwrap_err();
            assert!(matches!(err, SinkError::Invalid { .. }), "{err}");
            assert!(!err.retryable());
        }
        assert_eq!(store.committed_epoch(JOB).unwrap(), Some(1));
        assert!(matches!(store.latest("a:b", "1m"), Err(SinkError::Invalid { .. })));
        // item_count disagreeing with the members.
        redis::cmd("HSET")
            .arg(fx.key("1m:latest:meta"))
            .arg("item_count")
            .arg(4)
            .exec(&mut fx.raw)
            .unwrap();
        let err = store.latest(JOB, "1m").unwrap_err();
        assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("item_count is 4"), "{err}");
        assert!(!err.retryable());
        // A key of the wrong type: the commit script refuses before writing anything.
        redis::cmd("SET")
            .arg(fx.key("5m:latest"))
            .arg("x")
            .exec(&mut fx.raw)
            .unwrap();
        let mut five = list(0, 1, 1);
        five.window = "5m".into();
        let err = store.commit(&batch(2, vec![list(60_000, 1, 1), five])).unwrap_err();
        assert!(matches!(err, SinkError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("is a string, not a zset"), "{err}");
        assert_eq!(store.committed_epoch(JOB).unwrap(), Some(1));
        assert_eq!(
            store.latest(JOB, "1m").unwrap_err().to_string(),
            err_string_of_count(&fx)
        );
    }

    /// The message `latest` gives for the damaged `1m` meta above (unchanged by the refused
    /// commit).
    fn err_string_of_count(fx: &Fixture) -> String {
        format!(
            "corrupt data in {}: {} has 3 members but {} item_count is 4",
            test_url(),
            fx.key("1m:latest"),
            fx.key("1m:latest:meta")
        )
    }

    #[test]
    fn connection_errors_are_retryable_and_hide_the_password() {
        let err = RedisStore::connect("redis://alice:s3cret@127.0.0.1:1/", "p").unwrap_err();
        assert!(err.retryable(), "{err}");
        let msg = err.to_string();
        assert!(
            msg.starts_with("connecting on redis://alice:***@127.0.0.1:1/ failed: IO "),
            "{msg}"
        );
        assert!(!msg.contains("s3cret"), "{msg}");
        assert!(!format!("{err:?}").contains("s3cret"));
        let err = RedisStore::connect("nonsense://x", "p").unwrap_err();
        assert!(!err.retryable(), "{err}");
        assert!(RedisStore::connect(&test_url(), "").is_err());
        let store = RedisStore::connect(&test_url(), DEFAULT_PREFIX).unwrap();
        assert!(!format!("{store:?}").contains("s3cret"));
        assert_eq!(store.prefix(), "hotlist");
    }

    #[test]
    fn a_lost_connection_is_retryable_and_reestablished() {
        let mut fx = Fixture::new();
        let mut store = fx.store();
        assert!(store.commit(&batch(1, vec![list(0, 1, 2)])).unwrap());
        let id: u64 = store
            .run(|| "CLIENT ID".into(), |c| redis::cmd("CLIENT").arg("ID").query(c))
            .unwrap();
        redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(id)
            .exec(&mut fx.raw)
            .unwrap();
        let err = store.latest(JOB, "1m").unwrap_err();
        assert!(err.retryable(), "{err}");
        assert!(
            err.to_string().starts_with(&format!(
                "reading the latest list of job \"hotlist\" window \"1m\" on {}",
                test_url()
            )),
            "{err}"
        );
        // Retrying the same call reconnects and succeeds.
        assert_eq!(store.latest(JOB, "1m").unwrap(), Some(StoredList::from(list(0, 1, 2))));
    }

    #[test]
    fn redis_errors_are_classified() {
        let err = |cause: &str| SinkError::Redis {
            url: "redis://h/".into(),
            op: "commit".into(),
            cause: cause.into(),
        };
        for cause in [
            "IO Connection refused (os error 111)",
            "BUSY Redis is busy",
            "TRYAGAIN x",
            "LOADING y",
        ] {
            assert!(err(cause).retryable(), "{cause}");
        }
        for cause in [
            "ERR wrong number of arguments",
            "NOPERM no",
            "CLIENT type error",
            "IOX",
            "",
        ] {
            assert!(!err(cause).retryable(), "{cause}");
        }
        assert_eq!(err("ERR x").to_string(), "commit on redis://h/ failed: ERR x");
    }

    #[test]
    fn ranking_breaks_ties_by_item_id_bytewise() {
        let item = |id: &str, count| RankedItem {
            item_id: id.into(),
            count,
        };
        let mut items = vec![
            item("ä", 5),
            item("b", 5),
            item("x", 1),
            item("a", 5),
            item("Zed", 5),
            item("top", 9),
        ];
        sort_by_rank(&mut items);
        let ids: Vec<&str> = items.iter().map(|i| i.item_id.as_str()).collect();
        assert_eq!(ids, ["top", "Zed", "a", "b", "ä", "x"]);
    }

    #[test]
    fn urls_are_redacted() {
        let cases = [
            ("redis://127.0.0.1:6379/", "redis://127.0.0.1:6379/"),
            ("redis://:pw@host:6379/0", "redis://:***@host:6379/0"),
            ("redis://user:p@ss/w@host/", "redis://user:***@host/"),
            ("rediss://user@host/", "rediss://user@host/"),
            ("redis+unix:///tmp/r.sock?db=1&pass=pw", "redis+unix:///tmp/r.sock?***"),
        ];
        for (url, want) in cases {
            assert_eq!(redact_url(url), want, "{url}");
        }
    }

    #[test]
    fn windows_json_parser() {
        let ok = JsonReader::windows(" [ {\"k\" : 2, \"extra\": \"x\", \"name\":\"a\\u00e9\\ud83d\\ude00\\n\", \"size_ms\":10,\"slide_ms\":5} ] ").unwrap();
        assert_eq!(
            ok,
            vec![StoredWindow {
                name: "aé😀\n".into(),
                size: Span::from_millis(10),
                slide: Span::from_millis(5),
                k: 2
            }]
        );
        assert!(JsonReader::windows("[]").unwrap().is_empty());
        for bad in [
            "",
            "[",
            "[{}]",
            "[{\"name\":\"a\",\"size_ms\":-1,\"slide_ms\":1,\"k\":1}]",
            "[{\"name\":\"a\",\"size_ms\":1.5,\"slide_ms\":1,\"k\":1}]",
            "[{\"name\":\"a\",\"name\":\"b\",\"size_ms\":1,\"slide_ms\":1,\"k\":1}]",
            "[{\"name\":\"a\",\"size_ms\":9223372036854775808,\"slide_ms\":1,\"k\":1}]",
            "[{\"name\":\"\\ud83d\",\"size_ms\":1,\"slide_ms\":1,\"k\":1}]",
            "[] x",
        ] {
            assert!(JsonReader::windows(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn concurrent_reader_never_sees_a_mix_of_revisions() {
        const REVISIONS: u32 = 200;
        let fx = Fixture::new();
        let mut writer = fx.store();
        let mut reader = fx.store();
        assert!(writer.commit(&batch(1, vec![list(0, 1, rows_for(1))])).unwrap());
        let (reads, last) = race_commits_and_reads(REVISIONS, writer, list, move |last| {
            // `latest` itself fails if the member count differs from item_count.
            let l = reader.latest(JOB, "1m").unwrap().unwrap();
            assert!(l.revision >= last, "revisions went backwards");
            assert_eq!(l.items.len(), rows_for(l.revision));
            let prefix = format!("r{}-", l.revision);
            for item in &l.items {
                assert_eq!(item.count / 1000, u64::from(l.revision), "{item:?}");
                assert!(item.item_id.starts_with(&prefix), "{item:?}");
            }
            assert_eq!(l, StoredList::from(list(0, l.revision, rows_for(l.revision))));
            l.revision
        });
        assert_eq!(last, REVISIONS);
        assert!(reads >= 1);
        eprintln!("{reads} consistent reads during {REVISIONS} commits");
    }
}
