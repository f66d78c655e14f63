//! The OpenAI-compatible mode of `tollgate-echo`: `POST /v1/chat/completions` answers a chat
//! completion (JSON), or with `"stream": true` a Server-Sent Events stream of chunks, ending with
//! a chunk that carries `usage` when `stream_options.include_usage` is true, then `data: [DONE]`.
//!
//! The usage it states is `--usage` (default 20), or the request header `x-echo-usage`, written
//! verbatim as `usage.total_tokens` (so tests can send `-5`, `NaN` or `"abc"`). `x-echo-usage-in:
//! header` states it in the response header `x-usage-tokens` instead of the body (`both`: in
//! both). Query parameters: `chunks=N` content chunks in a stream (default 3), `chunk_delay_ms=N`
//! before each chunk, and the common `status=N` and `delay_ms=N`.
//!
//! With `--gzip`, a request whose `Accept-Encoding` lists `gzip` gets its answer gzip-coded, as
//! nginx's gzip module or Starlette's `GZipMiddleware` would (a stream flushed event by event).
//! `x-echo-content-encoding: <coding>` labels the answer with that `Content-Encoding` without
//! coding it (a body no reader can decode).

use super::EchoBody;
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use std::io::Write;
use std::time::Duration;

/// What one completion request asked for.
pub struct Ask {
    pub model: String,
    pub stream: bool,
    pub include_usage: bool,
    /// `usage.total_tokens` as written in the answer.
    pub usage: String,
    /// State the usage in the `x-usage-tokens` header / in the body.
    pub in_header: bool,
    pub in_body: bool,
    pub chunks: u64,
    pub chunk_delay_ms: u64,
    /// Gzip the answer (`--gzip` and the request accepts it).
    pub gzip: bool,
    /// `x-echo-content-encoding`: the `Content-Encoding` to state without coding.
    pub label: Option<HeaderValue>,
}

impl Ask {
    /// Reads the request: its JSON body (at most what the caller kept), headers and query;
    /// `gzip`: the server may gzip its answers.
    pub fn read(
        body: &[u8],
        headers: &HeaderMap,
        query: &str,
        default_usage: &str,
        gzip: bool,
    ) -> Ask {
        let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let place = header("x-echo-usage-in").unwrap_or("body");
        let param = |name: &str| {
            query
                .split('&')
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| *k == name)
                .and_then(|(_, v)| v.parse::<u64>().ok())
        };
        Ask {
            model: json["model"].as_str().unwrap_or("echo").to_string(),
            stream: json["stream"].as_bool().unwrap_or(false),
            include_usage: json["stream_options"]["include_usage"]
                .as_bool()
                .unwrap_or(false),
            usage: header("x-echo-usage").unwrap_or(default_usage).to_string(),
            in_header: matches!(place, "header" | "both"),
            in_body: matches!(place, "body" | "both"),
            chunks: param("chunks").unwrap_or(3),
            chunk_delay_ms: param("chunk_delay_ms").unwrap_or(0),
            gzip: gzip
                && headers
                    .get_all(header::ACCEPT_ENCODING)
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .flat_map(|v| v.split(','))
                    .any(|c| c.split(';').next().unwrap_or("").trim() == "gzip"),
            label: headers.get("x-echo-content-encoding").cloned(),
        }
    }

    fn usage_json(&self) -> String {
        format!(
            "{{\"prompt_tokens\":0,\"completion_tokens\":0,\"total_tokens\":{}}}",
            self.usage
        )
    }
}

/// The answer to `ask`, with `status`.
pub fn answer(ask: Ask, status: StatusCode) -> Response<EchoBody> {
    let mut resp = if ask.stream {
        stream(&ask)
    } else {
        let usage = if ask.in_body {
            ask.usage_json()
        } else {
            "null".into()
        };
        let body = format!(
            "{{\"id\":\"chatcmpl-echo\",\"object\":\"chat.completion\",\"created\":0,\
             \"model\":{model},\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\
             \"content\":\"echo\"}},\"finish_reason\":\"stop\"}}],\"usage\":{usage}}}",
            model = serde_json::Value::from(ask.model.as_str()),
        );
        let body = match ask.gzip {
            true => {
                let mut e = gzip_encoder();
                let _ = e.write_all(body.as_bytes());
                Bytes::from(e.finish().unwrap_or_default())
            }
            false => Bytes::from(body),
        };
        let mut r = Response::new(EchoBody::full(body));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    };
    *resp.status_mut() = status;
    let coding = match (&ask.label, ask.gzip) {
        (Some(label), _) => Some(label.clone()),
        (None, true) => Some(HeaderValue::from_static("gzip")),
        (None, false) => None,
    };
    if let Some(coding) = coding {
        resp.headers_mut().insert(header::CONTENT_ENCODING, coding);
    }
    if ask.in_header {
        if let Ok(v) = HeaderValue::from_str(&ask.usage) {
            resp.headers_mut().insert("x-usage-tokens", v);
        }
    }
    resp
}

/// An SSE stream of `ask.chunks` content chunks, sent by a task (one `chunk_delay_ms` before
/// each), then the usage chunk (when asked for) and `[DONE]`.
fn stream(ask: &Ask) -> Response<EchoBody> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
    let model = serde_json::Value::from(ask.model.as_str());
    let chunk = move |delta: &str, usage: &str| {
        Bytes::from(format!(
            "data: {{\"id\":\"chatcmpl-echo\",\"object\":\"chat.completion.chunk\",\"created\":0,\
             \"model\":{model},\"choices\":[{delta}],\"usage\":{usage}}}\n\n"
        ))
    };
    let mut events = Vec::new();
    for i in 0..ask.chunks {
        let delta =
            format!("{{\"index\":0,\"delta\":{{\"content\":\"tok{i} \"}},\"finish_reason\":null}}");
        events.push(chunk(&delta, "null"));
    }
    let done = "{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}";
    events.push(chunk(done, "null"));
    if ask.include_usage && ask.in_body {
        events.push(chunk("", &ask.usage_json()));
    }
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    let delay = Duration::from_millis(ask.chunk_delay_ms);
    let mut gzip = ask.gzip.then(gzip_encoder);
    tokio::spawn(async move {
        let last = events.len().saturating_sub(1);
        for (i, e) in events.into_iter().enumerate() {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            // Gzipped: each event flushed on its own (a sync flush), the trailer with the last.
            let e = match gzip.as_mut() {
                None => e,
                Some(z) => {
                    let _ = z.write_all(&e);
                    let _ = z.flush();
                    if i == last {
                        let _ = z.try_finish();
                    }
                    Bytes::from(std::mem::take(z.get_mut()))
                }
            };
            if tx.send(e).await.is_err() {
                return;
            }
        }
    });
    let mut r = Response::new(EchoBody::Channel(rx));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    r
}

fn gzip_encoder() -> flate2::write::GzEncoder<Vec<u8>> {
    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast())
}
