//! The usage count a backend states in its response (docs/usage-cost.md): a header value, the
//! `usage.total_tokens` of a JSON body, or that of the last Server-Sent Events `data:` line
//! carrying `usage` (OpenAI's chat completions, with `stream_options.include_usage` when
//! streaming).
//!
//! The body scanners are fed the response chunks as they pass and keep only a bounded state
//! (the current container path up to [`MAX_DEPTH`], one short key or number), so the body is
//! never buffered and a value split across chunks reads the same as a whole one. They never
//! change or hold a byte.

/// Deepest JSON nesting tracked; deeper containers are counted but never hold the count.
pub const MAX_DEPTH: usize = 32;
/// Longest key or number kept while scanning; longer keys never match, longer numbers are huge.
const MAX_TOKEN: usize = 40;

/// What one stated count was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// A whole number of units, at most 2^53.
    Units(u64),
    /// A number larger than 2^53 (or than `u64`).
    Huge,
    /// A negative number.
    Negative,
    /// Not a whole number: text, `null`, a fraction, `NaN`, an infinity, an object.
    Invalid,
}

/// The largest count read as a number (exact in doubles).
const MAX_UNITS: u64 = 1 << 53;

/// Classifies a count as written (a header value or a JSON number token; surrounding white
/// space is ignored).
pub fn classify(raw: &[u8]) -> Count {
    let text = match std::str::from_utf8(raw) {
        Ok(t) => t.trim(),
        Err(_) => return Count::Invalid,
    };
    if text.is_empty() {
        return Count::Invalid;
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<u64>() {
            Ok(n) if n <= MAX_UNITS => Count::Units(n),
            _ => Count::Huge,
        };
    }
    let first = text.as_bytes()[0];
    if !(first.is_ascii_digit() || first == b'-') {
        // `NaN`, `inf`, `+5`, `"12"`, `null`: not a JSON number.
        return Count::Invalid;
    }
    match text.parse::<f64>() {
        Ok(v) if v.is_nan() || v.is_infinite() => Count::Invalid,
        Ok(v) if v < 0.0 => Count::Negative,
        Ok(v) if v.fract() != 0.0 => Count::Invalid,
        Ok(v) if v > MAX_UNITS as f64 => Count::Huge,
        Ok(v) => Count::Units(v as u64),
        Err(_) if first == b'-' && text[1..].bytes().all(|b| b.is_ascii_digit()) => Count::Negative,
        Err(_) => Count::Invalid,
    }
}

/// One open JSON container.
#[derive(Debug, Clone)]
struct Frame {
    object: bool,
    /// The last key read in it (an object), at most [`MAX_TOKEN`] bytes; `None` when longer.
    key: Option<Vec<u8>>,
    /// Before a key (or the end) rather than a value.
    expect_key: bool,
}

/// Finds `usage.total_tokens` of a top-level JSON object in a byte stream fed in any pieces.
#[derive(Debug, Clone, Default)]
pub struct JsonScan {
    stack: Vec<Frame>,
    /// Containers open beyond [`MAX_DEPTH`].
    deeper: usize,
    in_string: bool,
    escape: bool,
    text: Vec<u8>,
    text_long: bool,
    /// The count's value being read (a number or bare word).
    scalar: Option<Vec<u8>>,
    found: Option<Count>,
}

impl JsonScan {
    /// A scanner at the start of a document.
    pub fn new() -> Self {
        JsonScan::default()
    }

    /// The count found so far (the last one when stated twice).
    pub fn found(&self) -> Option<Count> {
        self.found
    }

    /// True when the next value is `usage.total_tokens` of the top-level object.
    fn at_count(&self) -> bool {
        self.deeper == 0
            && self.stack.len() == 2
            && self.stack[0].object
            && self.stack[0].key.as_deref() == Some(b"usage")
            && self.stack[1].object
            && !self.stack[1].expect_key
            && self.stack[1].key.as_deref() == Some(b"total_tokens")
    }

    fn end_scalar(&mut self) {
        if let Some(s) = self.scalar.take() {
            self.found = Some(if s.len() > MAX_TOKEN && s.iter().all(u8::is_ascii_digit) {
                Count::Huge
            } else {
                classify(&s)
            });
        }
    }

    fn end_string(&mut self) {
        let text = (!self.text_long).then(|| std::mem::take(&mut self.text));
        self.text.clear();
        self.text_long = false;
        let at_count = self.at_count();
        match self.stack.last_mut() {
            Some(f) if f.object && f.expect_key && self.deeper == 0 => f.key = text,
            // A string where the count belongs.
            _ if at_count => self.found = Some(Count::Invalid),
            _ => {}
        }
    }

    /// Feeds the next bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        if self.in_string {
            if self.escape {
                self.escape = false;
            } else if b == b'\\' {
                self.escape = true;
                return;
            } else if b == b'"' {
                self.in_string = false;
                self.end_string();
                return;
            }
            if self.text.len() < MAX_TOKEN {
                self.text.push(b);
            } else {
                self.text_long = true;
            }
            return;
        }
        match b {
            b'"' => {
                self.end_scalar();
                self.in_string = true;
            }
            b'{' | b'[' => {
                self.end_scalar();
                if self.at_count() {
                    self.found = Some(Count::Invalid);
                }
                if self.stack.len() < MAX_DEPTH && self.deeper == 0 {
                    self.stack.push(Frame {
                        object: b == b'{',
                        key: None,
                        expect_key: b == b'{',
                    });
                } else {
                    self.deeper += 1;
                }
            }
            b'}' | b']' => {
                self.end_scalar();
                if self.deeper > 0 {
                    self.deeper -= 1;
                } else {
                    self.stack.pop();
                }
            }
            b':' => {
                self.end_scalar();
                if let (Some(f), 0) = (self.stack.last_mut(), self.deeper) {
                    f.expect_key = false;
                }
            }
            b',' => {
                self.end_scalar();
                if let (Some(f), 0) = (self.stack.last_mut(), self.deeper) {
                    f.expect_key = f.object;
                }
            }
            b' ' | b'\t' | b'\r' | b'\n' => self.end_scalar(),
            _ => {
                if let Some(s) = &mut self.scalar {
                    if s.len() <= MAX_TOKEN {
                        s.push(b);
                    }
                } else if self.at_count() {
                    self.scalar = Some(vec![b]);
                }
            }
        }
    }

    /// Ends the document (a number at the very end is complete).
    pub fn finish(&mut self) {
        self.end_scalar();
    }
}

/// Finds the count in a Server-Sent Events stream: each `data:` line is scanned as one JSON
/// document, and the last line that states `usage.total_tokens` gives the count.
#[derive(Debug, Clone, Default)]
pub struct SseScan {
    /// The first bytes of the current line, until it is known to be a `data:` line.
    head: Vec<u8>,
    /// The current line is a `data:` line, scanned here.
    data: Option<JsonScan>,
    /// The current line is another field (or a comment): skipped.
    skip: bool,
    found: Option<Count>,
}

impl SseScan {
    /// A scanner at the start of a stream.
    pub fn new() -> Self {
        SseScan::default()
    }

    /// The count of the last event that stated one.
    pub fn found(&self) -> Option<Count> {
        self.found
    }

    /// Feeds the next bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' || b == b'\r' {
                self.end_line();
            } else if let Some(json) = &mut self.data {
                json.feed(&[b]);
            } else if !self.skip {
                self.head.push(b);
                if !b"data:".starts_with(&self.head) {
                    self.skip = true;
                } else if self.head.len() == 5 {
                    self.data = Some(JsonScan::new());
                }
            }
        }
    }

    /// Ends the stream (a last line without its newline counts).
    pub fn finish(&mut self) {
        self.end_line();
    }

    fn end_line(&mut self) {
        if let Some(mut json) = self.data.take() {
            json.finish();
            if let Some(c) = json.found() {
                self.found = Some(c);
            }
        }
        self.head.clear();
        self.skip = false;
    }
}

/// A response body's scanner, chosen by its `Content-Type`.
#[derive(Debug, Clone)]
pub enum BodyScan {
    Json(JsonScan),
    Sse(SseScan),
}

impl BodyScan {
    /// `text/event-stream` bodies are scanned as SSE, any other as JSON.
    pub fn for_content_type(content_type: Option<&[u8]>) -> BodyScan {
        let sse = content_type.is_some_and(|c| {
            let c = String::from_utf8_lossy(c).to_ascii_lowercase();
            c.trim_start().starts_with("text/event-stream")
        });
        if sse {
            BodyScan::Sse(SseScan::new())
        } else {
            BodyScan::Json(JsonScan::new())
        }
    }

    /// Feeds the next bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        match self {
            BodyScan::Json(j) => j.feed(bytes),
            BodyScan::Sse(s) => s.feed(bytes),
        }
    }

    /// Ends the body.
    pub fn finish(&mut self) {
        match self {
            BodyScan::Json(j) => j.finish(),
            BodyScan::Sse(s) => s.finish(),
        }
    }

    /// The count found so far.
    pub fn found(&self) -> Option<Count> {
        match self {
            BodyScan::Json(j) => j.found(),
            BodyScan::Sse(s) => s.found(),
        }
    }

    /// True for a Server-Sent Events scanner (a streamed response).
    pub fn is_stream(&self) -> bool {
        matches!(self, BodyScan::Sse(_))
    }
}

/// A scanner is a sink for a decoder ([`crate::http::content_coding`]): every byte written is
/// fed, none is kept.
impl std::io::Write for BodyScan {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.feed(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
