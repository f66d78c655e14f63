use super::*;

fn encode(coding: Coding, plain: &[u8]) -> Vec<u8> {
    match coding {
        Coding::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(plain).unwrap();
            e.finish().unwrap()
        }
        Coding::Deflate => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(plain).unwrap();
            e.finish().unwrap()
        }
        Coding::Brotli => {
            let mut out = Vec::new();
            {
                let mut e = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
                e.write_all(plain).unwrap();
            }
            out
        }
        Coding::Zstd => zstd::encode_all(plain, 3).unwrap(),
        _ => unreachable!(),
    }
}

const CODED: [Coding; 4] = [Coding::Gzip, Coding::Deflate, Coding::Brotli, Coding::Zstd];

fn plain() -> Vec<u8> {
    let mut p = Vec::new();
    for i in 0..2000 {
        p.extend_from_slice(format!("data: {{\"i\":{i}}}\n\n").as_bytes());
    }
    p
}

#[test]
fn every_coding_decodes_in_any_pieces() {
    let plain = plain();
    for coding in CODED {
        let coded = encode(coding, &plain);
        for piece in [1, 7, 4096, coded.len()] {
            let mut d = Decoding::new(coding, Vec::new()).ok().unwrap();
            for chunk in coded.chunks(piece) {
                d.write(chunk).unwrap();
            }
            d.finish().unwrap();
            assert_eq!(d.sink(), &plain, "{coding:?} in pieces of {piece}");
        }
    }
}

#[test]
fn a_truncated_or_foreign_body_is_an_error() {
    let plain = plain();
    for coding in CODED {
        let coded = encode(coding, &plain);
        let mut d = Decoding::new(coding, Vec::new()).ok().unwrap();
        d.write(&coded[..coded.len() / 2]).unwrap();
        assert!(d.finish().is_err(), "{coding:?} truncated");

        let mut d = Decoding::new(coding, Vec::new()).ok().unwrap();
        let garbage = d.write(b"{\"usage\": {\"total_tokens\": 5}} not coded at all");
        assert!(
            garbage.is_err() || d.finish().is_err(),
            "{coding:?} foreign"
        );
    }
}

#[test]
fn a_decompression_bomb_is_refused() {
    let zeros = vec![0u8; 64 << 20];
    // gzip cannot go beyond about 1032:1; zstd and brotli can.
    let coded = encode(Coding::Zstd, &zeros);
    let mut d = Decoding::new(Coding::Zstd, io::sink()).ok().unwrap();
    let mut refused = false;
    for chunk in coded.chunks(1024) {
        if d.write(chunk).is_err() {
            refused = true;
            break;
        }
    }
    assert!(refused);
}

#[test]
fn content_encoding_values_name_one_coding() {
    let of = |v: &[&str]| Coding::of(v.iter().map(|s| s.as_bytes()));
    assert_eq!(of(&[]), Coding::Identity);
    assert_eq!(of(&["identity"]), Coding::Identity);
    assert_eq!(of(&["GZIP"]), Coding::Gzip);
    assert_eq!(of(&["x-gzip"]), Coding::Gzip);
    assert_eq!(of(&[" br "]), Coding::Brotli);
    assert_eq!(of(&["deflate"]), Coding::Deflate);
    assert_eq!(of(&["zstd"]), Coding::Zstd);
    assert_eq!(of(&["gzip, br"]), Coding::Unsupported);
    assert_eq!(of(&["gzip", "gzip"]), Coding::Unsupported);
    assert_eq!(of(&["compress"]), Coding::Unsupported);
    assert!(Decoding::new(Coding::Identity, Vec::new()).is_err());
}
