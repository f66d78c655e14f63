//! A request's cost read from the request itself (`routes[].cost` and `limits[].cost` written as
//! `{ from: request_bytes }`, `{ header: X-Units }`, `{ json: "batch.length" }` or
//! `{ query: units }`, docs/rules.md#costs-read-from-the-request).

/// Where a cost is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CostSource {
    /// `from: request_bytes`: the request body's length in bytes (`Content-Length`, or the
    /// bytes of a body without one, read up to the replay buffer).
    RequestBytes,
    /// `header: <name>`: a header field holding a non-negative decimal integer (name lower case).
    Header(http::HeaderName),
    /// `json: <path>`: a field of the JSON body, by dotted path (`batch.size`); a last segment
    /// `length` on an array is the array's length.
    Json(Vec<String>),
    /// `query: <name>`: a query parameter holding a non-negative decimal integer.
    Query(String),
}

impl CostSource {
    /// The source as written in the file (`request_bytes`, `header:X-Units`, `json:batch.length`,
    /// `query:units`), for metrics and problem bodies.
    pub fn spelling(&self) -> String {
        match self {
            CostSource::RequestBytes => "request_bytes".into(),
            CostSource::Header(h) => format!("header:{h}"),
            CostSource::Json(path) => format!("json:{}", path.join(".")),
            CostSource::Query(q) => format!("query:{q}"),
        }
    }

    /// True when reading the cost may need the request body.
    pub fn reads_body(&self) -> bool {
        matches!(self, CostSource::RequestBytes | CostSource::Json(_))
    }
}

/// A cost read from the request, bounded: values below `min` count as `min`, values above `max`
/// are refused (413), an absent or malformed value counts as `default`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CostFrom {
    pub source: CostSource,
    /// Tokens charged when the value is absent or malformed (default: 1, or `min` when larger).
    pub default: u64,
    /// Least tokens charged (default 1; `min: 0` lets a request stating `0` through free).
    pub min: u64,
    /// Largest value accepted; a request stating more is refused. `None`: bounded only by the
    /// bursts of the policies it is charged to.
    pub max: Option<u64>,
}

/// A limit rule's own cost (`limits[].cost`), charged to that rule instead of the route's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleCost {
    /// `cost: 5`: fixed tokens per request.
    Fixed(u64),
    /// `cost: { from: .., default, min, max }`: read from each request.
    From(CostFrom),
}
