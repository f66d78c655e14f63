use super::*;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};

fn self_signed(host: &str, ca: bool, days: (i64, i64)) -> CertificateDer<'static> {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(vec![host.to_string()]).unwrap();
    p.is_ca = if ca {
        IsCa::Ca(BasicConstraints::Unconstrained)
    } else {
        IsCa::ExplicitNoCa
    };
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now + time::Duration::days(days.0);
    p.not_after = now + time::Duration::days(days.1);
    p.self_signed(&key).unwrap().der().clone()
}

fn sha(c: &CertificateDer) -> Vec<u8> {
    Sha256::digest(c.as_ref()).to_vec()
}

#[test]
fn a_file_of_self_signed_certificates_naming_hosts_is_a_pin_list() {
    let (ca_true, ca_false) = (
        self_signed("a.test", true, (-1, 30)),
        self_signed("b.test", false, (-1, 30)),
    );
    assert!(Pins::of(&[ca_true.clone(), ca_false.clone()]).is_some());
    // A CA root (no subject alternative name) makes the file a CA bundle.
    let key = KeyPair::generate().unwrap();
    let mut root = CertificateParams::new(Vec::<String>::new()).unwrap();
    root.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let root = root.self_signed(&key).unwrap().der().clone();
    assert!(Pins::of(&[ca_true, root]).is_none());
}

#[test]
fn only_a_pinned_certificate_valid_now_and_for_the_name_passes() {
    let good = self_signed("backend.test", true, (-1, 30));
    let expired = self_signed("backend.test", true, (-30, -1));
    let early = self_signed("backend.test", true, (2, 30));
    let other = self_signed("backend.test", true, (-1, 30));
    let pins = Pins::of(&[good.clone(), expired.clone(), early.clone()]).unwrap();
    assert_eq!(pins.check(&sha(&good), "backend.test"), Ok(()));
    assert_eq!(pins.check(&sha(&good), "BACKEND.test"), Ok(()));
    let wrong_name = pins.check(&sha(&good), "elsewhere.test").unwrap_err();
    assert!(wrong_name.contains("not valid for name"), "{wrong_name}");
    for c in [&expired, &early] {
        let e = pins.check(&sha(c), "backend.test").unwrap_err();
        assert!(e.contains("expired or not yet valid"), "{e}");
    }
    let e = pins.check(&sha(&other), "backend.test").unwrap_err();
    assert!(e.contains("none of those pinned"), "{e}");
    assert!(pins.check(&[], "backend.test").is_err());
}
