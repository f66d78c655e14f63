use super::*;
use crate::response::rpc_status::{RetryInfo, Status, RETRY_INFO_TYPE_URL};
use prost::Message;

#[test]
fn problem_types_decide_before_the_status() {
    // A quota refusal is RESOURCE_EXHAUSTED even when `response.status` makes it a 503.
    assert_eq!(code_for(429, QUOTA_EXCEEDED), Code::ResourceExhausted);
    assert_eq!(code_for(503, QUOTA_EXCEEDED), Code::ResourceExhausted);
    assert_eq!(code_for(503, REDUCED_CAPACITY), Code::Unavailable);
}

#[test]
fn statuses_map_as_the_table_says() {
    let table = [
        (400, Code::InvalidArgument),
        (401, Code::Unauthenticated),
        (403, Code::PermissionDenied),
        (404, Code::Unimplemented),
        (408, Code::DeadlineExceeded),
        (413, Code::ResourceExhausted),
        (429, Code::ResourceExhausted),
        (431, Code::ResourceExhausted),
        (500, Code::Unknown),
        (502, Code::Unavailable),
        (503, Code::Unavailable),
        (504, Code::DeadlineExceeded),
    ];
    for (status, code) in table {
        assert_eq!(code_for(status, "about:blank"), code, "{status}");
    }
    assert_eq!(Code::Unauthenticated.as_str(), "16");
    assert_eq!(Code::ResourceExhausted as i32, 8);
}

#[test]
fn grpc_content_types() {
    for yes in [
        &b"application/grpc"[..],
        b"application/grpc+proto",
        b"Application/GRPC+json",
        b"application/grpc-web+proto",
        b"application/grpc; charset=utf-8",
    ] {
        assert!(is_grpc(yes), "{}", String::from_utf8_lossy(yes));
    }
    for no in [
        &b"application/json"[..],
        b"application/grpcx",
        b"",
        b"application/grp",
    ] {
        assert!(!is_grpc(no), "{}", String::from_utf8_lossy(no));
    }
}

#[test]
fn message_is_percent_encoded() {
    assert_eq!(encode_message("plain text: ok"), "plain text: ok");
    assert_eq!(encode_message("100% \"x\"\n"), "100%25 \"x\"%0A");
    assert_eq!(encode_message("caf\u{e9}"), "caf%C3%A9");
}

#[test]
fn details_carry_the_status_and_the_retry_delay() {
    let p = Problem::typed(429, QUOTA_EXCEEDED, "Quota exceeded", "1 of 5 left".into());
    let s = GrpcStatus::of(&p, Some(7));
    let [status, message, details] = s.fields();
    assert_eq!(status, ("grpc-status", "8".to_string()));
    assert_eq!(message, ("grpc-message", "1 of 5 left".to_string()));
    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(&details.1)
        .unwrap();
    let decoded = Status::decode(bytes.as_slice()).unwrap();
    assert_eq!(decoded.code, 8);
    assert_eq!(decoded.message, "1 of 5 left");
    assert_eq!(decoded.details.len(), 1);
    assert_eq!(decoded.details[0].type_url, RETRY_INFO_TYPE_URL);
    let info = RetryInfo::decode(decoded.details[0].value.as_slice()).unwrap();
    assert_eq!(info.retry_delay.unwrap().seconds, 7);
}

#[test]
fn no_wait_means_no_retry_info_and_an_empty_detail_uses_the_title() {
    let p = Problem::status(401, "");
    let s = GrpcStatus::of(&p, None);
    assert_eq!(s.code, Code::Unauthenticated);
    assert_eq!(s.message, "Unauthorized");
    let [_, _, details] = s.fields();
    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(&details.1)
        .unwrap();
    assert!(Status::decode(bytes.as_slice()).unwrap().details.is_empty());
}
