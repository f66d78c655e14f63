//! Decoding a response body's content coding as it passes (RFC 9110 8.4 `Content-Encoding`):
//! `gzip` (`x-gzip`), `deflate` (the zlib format, RFC 9110 8.4.1.2), `br` (RFC 7932) and
//! `zstd` (RFC 8878, with the 8 MiB window RFC 9659 sets for HTTP), one coding per body.
//!
//! A [`Decoding`] is a push decoder: each piece of the coded body is written in, and the decoded
//! bytes go straight to the sink it wraps (any [`Write`]). Memory is bounded by the coding's
//! window (32 KiB for gzip and deflate, at most 16 MiB for brotli, 8 MiB for zstd), never by
//! the body's length; decoded output beyond [`MAX_RATIO`] times the coded input plus
//! [`SLACK`] bytes is refused as a decompression bomb.

use std::io::{self, Write};

/// The most decoded bytes per coded byte accepted (gzip's own limit is about 1032).
pub const MAX_RATIO: u64 = 1100;
/// Decoded bytes always accepted beyond [`MAX_RATIO`] (small bodies, headers of a stream).
pub const SLACK: u64 = 1 << 20;
/// zstd's largest window accepted, as a power of two (8 MiB, RFC 9659 section 3).
const ZSTD_WINDOW_LOG_MAX: u32 = 23;
/// The brotli decoder's input buffer.
const BROTLI_BUFFER: usize = 4096;

/// What a `Content-Encoding` field asks of a reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    /// No coding (absent, empty or `identity`).
    Identity,
    Gzip,
    Deflate,
    Brotli,
    Zstd,
    /// A coding this module does not decode, or several codings stacked.
    Unsupported,
}

impl Coding {
    /// The coding a response's `Content-Encoding` values state (case-insensitive; `identity`
    /// entries ignored).
    pub fn of<'a>(values: impl Iterator<Item = &'a [u8]>) -> Coding {
        let mut found = Coding::Identity;
        for value in values {
            for item in value.split(|b| *b == b',') {
                let item = item.trim_ascii();
                let coding = match item.to_ascii_lowercase().as_slice() {
                    b"" | b"identity" => continue,
                    b"gzip" | b"x-gzip" => Coding::Gzip,
                    b"deflate" => Coding::Deflate,
                    b"br" => Coding::Brotli,
                    b"zstd" => Coding::Zstd,
                    _ => return Coding::Unsupported,
                };
                if found != Coding::Identity {
                    return Coding::Unsupported;
                }
                found = coding;
            }
        }
        found
    }
}

/// A push decoder of one coded body into the sink `W`.
pub struct Decoding<W: Write> {
    inner: Inner<W>,
    coded: u64,
}

enum Inner<W: Write> {
    Gzip(flate2::write::GzDecoder<Counted<W>>),
    Deflate(flate2::write::ZlibDecoder<Counted<W>>),
    Brotli(Box<brotli::DecompressorWriter<Counted<W>>>),
    Zstd(zstd::stream::write::Decoder<'static, Counted<W>>),
}

/// The sink with a count of what was decoded into it.
struct Counted<W> {
    sink: W,
    decoded: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.sink.write(buf)?;
        self.decoded += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.sink.flush()
    }
}

impl<W: Write> Decoding<W> {
    /// A decoder of `coding` into `sink`; `None` for [`Coding::Identity`] and
    /// [`Coding::Unsupported`] (the sink is handed back).
    pub fn new(coding: Coding, sink: W) -> Result<Decoding<W>, W> {
        let out = Counted { sink, decoded: 0 };
        let inner = match coding {
            Coding::Gzip => Inner::Gzip(flate2::write::GzDecoder::new(out)),
            Coding::Deflate => Inner::Deflate(flate2::write::ZlibDecoder::new(out)),
            Coding::Brotli => Inner::Brotli(Box::new(brotli::DecompressorWriter::new(
                out,
                BROTLI_BUFFER,
            ))),
            Coding::Zstd => match zstd_decoder() {
                Ok(raw) => Inner::Zstd(zstd::stream::write::Decoder::with_decoder(out, raw)),
                Err(_) => return Err(out.sink),
            },
            Coding::Identity | Coding::Unsupported => return Err(out.sink),
        };
        Ok(Decoding { inner, coded: 0 })
    }

    /// Decodes the next piece of the coded body into the sink. Errors: the body is not in its
    /// coding, or it decodes to more than [`MAX_RATIO`] times its size (plus [`SLACK`]); the
    /// decoder is then of no further use.
    pub fn write(&mut self, coded: &[u8]) -> io::Result<()> {
        self.coded += coded.len() as u64;
        match &mut self.inner {
            Inner::Gzip(d) => d.write_all(coded)?,
            Inner::Deflate(d) => d.write_all(coded)?,
            Inner::Brotli(d) => d.write_all(coded)?,
            Inner::Zstd(d) => d.write_all(coded)?,
        }
        if self.decoded() > self.coded.saturating_mul(MAX_RATIO).saturating_add(SLACK) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "decoded body too large for its coded size",
            ));
        }
        Ok(())
    }

    /// Ends the body: flushes what the decoder still holds into the sink. Errors: the body
    /// ended before its coding did (truncated), or was not in its coding.
    pub fn finish(&mut self) -> io::Result<()> {
        match &mut self.inner {
            Inner::Gzip(d) => d.try_finish(),
            Inner::Deflate(d) => d.try_finish(),
            Inner::Brotli(d) => d.close(),
            Inner::Zstd(d) => d.do_finish(),
        }
    }

    /// Decoded bytes so far.
    fn decoded(&self) -> u64 {
        self.counted().decoded
    }

    fn counted(&self) -> &Counted<W> {
        match &self.inner {
            Inner::Gzip(d) => d.get_ref(),
            Inner::Deflate(d) => d.get_ref(),
            Inner::Brotli(d) => d.get_ref(),
            Inner::Zstd(d) => d.get_ref(),
        }
    }

    /// The sink.
    pub fn sink(&self) -> &W {
        &self.counted().sink
    }

    /// The sink, to change it.
    pub fn sink_mut(&mut self) -> &mut W {
        match &mut self.inner {
            Inner::Gzip(d) => &mut d.get_mut().sink,
            Inner::Deflate(d) => &mut d.get_mut().sink,
            Inner::Brotli(d) => &mut d.get_mut().sink,
            Inner::Zstd(d) => &mut d.get_mut().sink,
        }
    }
}

fn zstd_decoder() -> io::Result<zstd::stream::raw::Decoder<'static>> {
    let mut raw = zstd::stream::raw::Decoder::new()?;
    raw.set_parameter(zstd::stream::raw::DParameter::WindowLogMax(
        ZSTD_WINDOW_LOG_MAX,
    ))?;
    Ok(raw)
}

#[cfg(test)]
mod tests;
