//! `listen:`: plain `"ip:port"` strings or `{ addr, tls, h2 }` maps (docs/DESIGN.md 4b).

use super::common::Check;
use super::tls;
use crate::config::model::ListenSettings;
use crate::config::raw::{RawListen, RawListenFull, RawListenTls};

/// `listen:`: at least one entry; addresses must be unique.
pub(super) fn settings(c: &mut Check, raw: &[RawListen]) -> Vec<ListenSettings> {
    if raw.is_empty() {
        c.err("listen", "needs at least one address");
    }
    let mut out: Vec<ListenSettings> = Vec::new();
    for (i, entry) in raw.iter().enumerate() {
        let path = format!("listen[{i}]");
        let (addr_path, addr, tls, h2) = match entry {
            RawListen::Addr(a) => (path.clone(), a, None, false),
            RawListen::Full(value) => {
                match serde_yaml::from_value::<RawListenFull>(value.clone()) {
                    Ok(f) => (
                        format!("{path}.addr"),
                        &f.addr.clone(),
                        f.tls,
                        f.h2.unwrap_or(false),
                    ),
                    Err(e) => {
                        // serde_yaml prefixes a nested path ("tls: unknown field ...").
                        let text = e.to_string();
                        match text.split_once(": ") {
                            Some((p, why)) if !p.contains(' ') => c.err(format!("{path}.{p}"), why),
                            _ => c.err(&path, text),
                        }
                        continue;
                    }
                }
            }
        };
        let Some(addr) = c.socket_addr(&addr_path, addr) else {
            continue;
        };
        if out.iter().any(|l| l.addr == addr) {
            c.err(&addr_path, format!("duplicate listen address {addr}"));
        }
        let tls = tls.and_then(|value| {
            let tls_path = format!("{path}.tls");
            match serde_yaml::from_value::<RawListenTls>(value) {
                Ok(t) => tls::listen_tls(c, &tls_path, &t),
                Err(e) => {
                    c.err(tls_path, e.to_string());
                    None
                }
            }
        });
        out.push(ListenSettings { addr, tls, h2 });
    }
    out
}
