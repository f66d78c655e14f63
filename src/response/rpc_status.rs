//! The protobuf messages of `grpc-status-details-bin`, as prost messages with the field numbers
//! of their `.proto` sources: `google.rpc.Status` (googleapis `google/rpc/status.proto`) carrying
//! one `google.rpc.RetryInfo` (`google/rpc/error_details.proto`) packed in a `google.protobuf.Any`,
//! its delay a `google.protobuf.Duration`. Hand-declared rather than generated: four small
//! messages, no `protoc` in the build.

use prost::Message;

/// `type_url` of a packed `RetryInfo` (the `Any` convention: `type.googleapis.com/<full name>`).
pub const RETRY_INFO_TYPE_URL: &str = "type.googleapis.com/google.rpc.RetryInfo";

/// `google.rpc.Status`: the gRPC status code, the developer-facing message (the same text as
/// `grpc-message`, which clients such as `grpcio-status` check) and typed details.
#[derive(Clone, PartialEq, Message)]
pub struct Status {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<Any>,
}

/// `google.protobuf.Any`: a message's type URL and its encoding.
#[derive(Clone, PartialEq, Message)]
pub struct Any {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `google.rpc.RetryInfo`: how long a client should wait before retrying.
#[derive(Clone, PartialEq, Message)]
pub struct RetryInfo {
    #[prost(message, optional, tag = "1")]
    pub retry_delay: Option<ProtoDuration>,
}

/// `google.protobuf.Duration`: whole seconds and nanoseconds (0 to 999 999 999).
#[derive(Clone, PartialEq, Message)]
pub struct ProtoDuration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// The encoded `google.rpc.Status` of `code` and `message`, with a `RetryInfo` of
/// `retry_after_s` seconds when a wait is known.
pub fn encode_status(code: i32, message: &str, retry_after_s: Option<u64>) -> Vec<u8> {
    let details = retry_after_s.map(|s| Any {
        type_url: RETRY_INFO_TYPE_URL.to_string(),
        value: RetryInfo {
            retry_delay: Some(ProtoDuration {
                seconds: i64::try_from(s).unwrap_or(i64::MAX),
                nanos: 0,
            }),
        }
        .encode_to_vec(),
    });
    Status {
        code,
        message: message.to_string(),
        details: details.into_iter().collect(),
    }
    .encode_to_vec()
}
