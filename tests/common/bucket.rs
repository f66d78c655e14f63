//! Token bucket keys as the scripts store them (`lua/lib/refill.lua`): one string
//! `<level> <scale> <stamp>`, optionally followed by the lease holders' records
//! ` <capacity> <limit>` then ` <holder> <tokens> <until ms>` per holder (`lua/lease.lua`).
//! Tests read them as the field pairs the earlier hash layout had (`l`, `s`, `t`, `c`, `k`,
//! `h:<holder>`, `x:<holder>`), so an assertion reads the same either way.

/// The fields of the bucket string `raw` as sorted pairs (empty when it is not a bucket).
pub fn bucket_pairs(raw: &str) -> Vec<(String, String)> {
    let words: Vec<&str> = raw.split(' ').collect();
    if words.len() < 3 {
        return Vec::new();
    }
    let mut pairs: Vec<(String, String)> = ["l", "s", "t"]
        .iter()
        .zip(&words)
        .map(|(f, v)| (f.to_string(), v.to_string()))
        .collect();
    if words.len() >= 5 {
        pairs.push(("c".into(), words[3].into()));
        pairs.push(("k".into(), words[4].into()));
        for r in words[5..].chunks(3) {
            if let [holder, tokens, until] = r {
                pairs.push((format!("h:{holder}"), tokens.to_string()));
                pairs.push((format!("x:{holder}"), until.to_string()));
            }
        }
    }
    pairs.sort();
    pairs
}

/// The fields of `key`: a token bucket string's (as [`bucket_pairs`]), or a hash's; sorted
/// pairs, empty when the key does not exist.
pub fn key_fields(con: &mut dyn redis::ConnectionLike, key: &str) -> Vec<(String, String)> {
    let kind: String = redis::cmd("TYPE").arg(key).query(con).expect("TYPE");
    match kind.as_str() {
        "string" => {
            // None: expired between the two reads.
            let raw: Option<String> = redis::cmd("GET").arg(key).query(con).expect("GET");
            raw.map(|r| bucket_pairs(&r)).unwrap_or_default()
        }
        "hash" => {
            let mut pairs: Vec<(String, String)> =
                redis::cmd("HGETALL").arg(key).query(con).expect("HGETALL");
            pairs.sort();
            pairs
        }
        _ => Vec::new(),
    }
}

/// One field of `key` (see [`key_fields`]), `None` when absent.
pub fn key_field(con: &mut dyn redis::ConnectionLike, key: &str, field: &str) -> Option<String> {
    key_fields(con, key)
        .into_iter()
        .find(|(f, _)| f == field)
        .map(|(_, v)| v)
}

/// Writes `key` as a token bucket script would: `level` at `scale` stamped `stamp` (Redis ms),
/// no TTL.
pub fn set_bucket(
    con: &mut dyn redis::ConnectionLike,
    key: &str,
    level: i64,
    scale: u64,
    stamp: u64,
) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(format!("{level} {scale} {stamp}"))
        .query(con)
        .expect("SET bucket");
}
