//! Header names that only look like the ones tollgate owns: `X_Tollgate_Tenant` for
//! `X-Tollgate-Tenant`. A backend that maps `_` to `-` (CGI, RFC 3875 4.1.18, and the frameworks
//! built on its `HTTP_*` variables) reads both names as one variable, so a client could pass it a
//! tenant, tier, request id, forwarded address or credential tollgate never set or verified.
//! nginx drops every name with `_` by default (`underscores_in_headers off`); tollgate drops only
//! these lookalikes, so other names with `_` still reach the backend.
//!
//! Pure: names in, a verdict out.

/// True when `name` (a lower-case field name, as [`http::HeaderName`] holds it) contains `_` and
/// equals `owned` (lower case) once every `_` is read as `-`.
pub fn reads_as(name: &[u8], owned: &str) -> bool {
    name.contains(&b'_') && same_once_underscores_read(name, owned.as_bytes())
}

/// True when `name` equals `canonical` (lower case, with `-`) once every `_` in `name` is read
/// as `-`; the name itself matches too.
pub fn same_once_underscores_read(name: &[u8], canonical: &[u8]) -> bool {
    name.len() == canonical.len()
        && name
            .iter()
            .zip(canonical)
            .all(|(&n, &c)| n == c || (n == b'_' && c == b'-'))
}

#[cfg(test)]
mod tests {
    use super::reads_as;

    #[test]
    fn underscores_read_as_hyphens() {
        assert!(reads_as(b"x_tollgate_tenant", "x-tollgate-tenant"));
        assert!(reads_as(b"x-tollgate_tenant", "x-tollgate-tenant"));
        assert!(reads_as(b"x_request_id", "x-request-id"));
    }

    #[test]
    fn the_owned_name_itself_and_other_names_are_not_lookalikes() {
        assert!(!reads_as(b"x-tollgate-tenant", "x-tollgate-tenant"));
        assert!(!reads_as(b"x_tollgate_tenants", "x-tollgate-tenant"));
        assert!(!reads_as(b"x_tollgate_tier", "x-tollgate-tenant"));
        assert!(!reads_as(b"x_custom", "x-request-id"));
        // A `-` in the client's name where tollgate's has `_` is another name.
        assert!(!reads_as(b"x-api-key", "x_api_key"));
        assert!(!reads_as(b"", ""));
    }
}
