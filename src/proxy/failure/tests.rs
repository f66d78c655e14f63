use super::*;

#[test]
fn each_kind_of_failure_gets_one_status() {
    let up = |t: ErrorType| failure_status(&Error::new_up(t)).0;
    let down = |t: ErrorType| failure_status(&Error::new_down(t)).0;
    assert_eq!(up(ErrorType::ConnectRefused), 502);
    assert_eq!(up(ErrorType::ConnectNoRoute), 502);
    assert_eq!(up(ErrorType::ConnectTimedout), 504);
    assert_eq!(up(ErrorType::ReadTimedout), 504);
    assert_eq!(up(ErrorType::ReadError), 502);
    assert_eq!(
        down(ErrorType::ConnectionClosed),
        0,
        "nobody left to answer"
    );
    assert_eq!(down(ErrorType::ReadError), 0);
    assert_eq!(down(ErrorType::InvalidHTTPHeader), 400);
    assert_eq!(
        down(ErrorType::ReadTimedout),
        408,
        "the client's body stopped"
    );
    assert_eq!(failure_status(&Error::new(ErrorType::InternalError)).0, 502);
}

#[test]
fn an_http_status_error_keeps_its_status_and_detail() {
    let e = Error::explain(ErrorType::HTTPStatus(413), "too big");
    assert_eq!(failure_status(&e), (413, "too big".to_string()));
}

#[test]
fn an_upstream_tls_failure_says_so() {
    let e = Error::explain(ErrorType::InvalidCert, "unknown issuer").into_up();
    let (status, detail) = failure_status(&e);
    assert_eq!(status, 502);
    assert!(
        detail.starts_with("TLS handshake with the upstream failed"),
        "{detail}"
    );
}
