//! Gateway YAML for tests: one builder, [`GatewayConfig`], for every integration test.
//!
//! The builder holds the document by top-level section and renders it as text with the harness
//! placeholders `{listen}` and `{admin}` (replaced by `Gateway::start` with free addresses).
//! Section values are YAML fragments as the config reference writes them
//! (`"{ limit: 1, per: 1d, burst: 3 }"`), so a test reads like the config it runs; API keys are
//! given in clear and stored as their SHA-256. What the typed setters do not cover goes in
//! through [`section`](GatewayConfig::section) or [`raw`](GatewayConfig::raw). Documents that
//! must be broken on purpose (syntax errors for `tollgate check`) stay literal text in their test.
//!
//! ```text
//! GatewayConfig::echo(&backend.addr(), "required")      // upstream `echo`, catch-all route
//!     .redis(&redis.url(), STRICT_REDIS)
//!     .tier("T", "{ limit: 1, per: 1d, burst: 3 }")
//!     .api_key("key-of-acme", "acme", "T")               // stored as its SHA-256
//!     .yaml()
//! ```

/// The six algorithms of `algorithm:`, by their config names.
pub const ALGORITHMS: [&str; 6] = [
    "token_bucket",
    "gcra",
    "fixed_window",
    "sliding_window_log",
    "sliding_window_counter",
    "leaky_bucket",
];

/// Generous Redis settings: a 2 s timeout, a breaker that does not open, and `closed` as the
/// failure policy, so that any Redis fault is a visible 503 instead of a different count.
pub const STRICT_REDIS: &str =
    "timeout: 2s, circuit_breaker: { min_calls: 1000 }, on_failure: closed";

/// SHA-256 hex digest, as stored in `identity.api_keys.keys[].sha256`.
pub fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// `text` as a YAML double-quoted scalar (JSON string syntax, which YAML reads the same).
pub fn yaml_str(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// The `redis:` section: a URL and further options, or a whole flow mapping.
#[derive(Clone, Debug)]
enum Redis {
    Url { url: String, opts: String },
    Spec(String),
}

/// One entry of `identity.api_keys.keys`.
#[derive(Clone, Debug)]
struct ApiKey {
    sha256: String,
    tenant: String,
    tier: Option<String>,
}

/// A gateway YAML document in parts; [`yaml`](Self::yaml) renders it.
///
/// Sections are rendered in a fixed order (listen, admin, server, redis, edge, identity, tiers,
/// tenants, upstreams, routes, then [`section`](Self::section)s in the order added, then
/// [`raw`](Self::raw) text); empty ones are left out.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    listen: Vec<String>,
    admin: Option<String>,
    server: Option<String>,
    redis: Option<Redis>,
    edge: Option<String>,
    jwt: Option<String>,
    default_tier: Option<String>,
    identity_lines: Vec<String>,
    api_key_header: Option<String>,
    api_keys: Vec<ApiKey>,
    api_keys_always: bool,
    tiers: Vec<(String, String)>,
    tenants: Vec<(String, String)>,
    upstreams: Vec<(String, String)>,
    routes: Vec<String>,
    sections: Vec<(String, String)>,
    raw: String,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self::new()
    }
}

/// Sets the value of `name` in an ordered list of named entries, or appends it.
fn set_named(list: &mut Vec<(String, String)>, name: &str, value: String) {
    match list.iter_mut().find(|(n, _)| n == name) {
        Some(entry) => entry.1 = value,
        None => list.push((name.to_string(), value)),
    }
}

impl GatewayConfig {
    /// `listen: ["{listen}"]`, `admin: { listen: "{admin}" }`,
    /// `server: { threads: 2, grace_period: 1s }` and nothing else.
    pub fn new() -> Self {
        GatewayConfig {
            listen: vec!["\"{listen}\"".to_string()],
            admin: Some("{ listen: \"{admin}\" }".to_string()),
            server: Some("{ threads: 2, grace_period: 1s }".to_string()),
            redis: None,
            edge: None,
            jwt: None,
            default_tier: None,
            identity_lines: Vec::new(),
            api_key_header: None,
            api_keys: Vec::new(),
            api_keys_always: false,
            tiers: Vec::new(),
            tenants: Vec::new(),
            upstreams: Vec::new(),
            routes: Vec::new(),
            sections: Vec::new(),
            raw: String::new(),
        }
    }

    /// [`new`](Self::new) with upstream `echo` → `backend` ("127.0.0.1:P") behind one catch-all
    /// route `{ path_prefix: "/", upstream: echo, auth: <auth> }`.
    pub fn echo(backend: &str, auth: &str) -> Self {
        Self::new().upstream("echo", backend).route(&format!(
            "{{ path_prefix: \"/\", upstream: echo, auth: {auth} }}"
        ))
    }

    /// Replaces the `listen:` list items (each a YAML scalar, e.g. `"\"{listen}\""`).
    pub fn listen(mut self, items: &[&str]) -> Self {
        self.listen = items.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Replaces the `admin:` value (a flow map; keep `listen: "{admin}"` for `Gateway`).
    pub fn admin(mut self, flow_map: &str) -> Self {
        self.admin = Some(flow_map.to_string());
        self
    }

    /// Leaves `admin:` out: for documents parsed in-process or checked, never run by
    /// `Gateway` (which waits for the admin listener).
    pub fn no_admin(mut self) -> Self {
        self.admin = None;
        self
    }

    /// `server: <flow_map>`.
    pub fn server(mut self, flow_map: &str) -> Self {
        self.server = Some(flow_map.to_string());
        self
    }

    /// Leaves `server:` out (the gateway's defaults).
    pub fn no_server(mut self) -> Self {
        self.server = None;
        self
    }

    /// `redis: { url: "<url>", <opts> }` (`opts` may be empty).
    pub fn redis(mut self, url: &str, opts: &str) -> Self {
        self.redis = Some(Redis::Url {
            url: url.to_string(),
            opts: opts.to_string(),
        });
        self
    }

    /// Replaces the options after `url` of [`redis`](Self::redis).
    pub fn redis_opts(mut self, opts: &str) -> Self {
        match &mut self.redis {
            Some(Redis::Url { opts: o, .. }) => *o = opts.to_string(),
            _ => panic!("redis_opts needs redis(url, ..) first"),
        }
        self
    }

    /// `redis: <flow_map>` as given (cluster and sentinel modes, which take `urls`).
    pub fn redis_spec(mut self, flow_map: &str) -> Self {
        self.redis = Some(Redis::Spec(flow_map.to_string()));
        self
    }

    /// `edge: <flow_map>`.
    pub fn edge(mut self, flow_map: &str) -> Self {
        self.edge = Some(flow_map.to_string());
        self
    }

    /// `identity.jwt: <flow_map>`.
    pub fn jwt(mut self, flow_map: &str) -> Self {
        self.jwt = Some(flow_map.to_string());
        self
    }

    /// `identity.default_tier: <tier>`.
    pub fn default_tier(mut self, tier: &str) -> Self {
        self.default_tier = Some(tier.to_string());
        self
    }

    /// A further `identity:` line, e.g. `"tenant_header: x-tenant"` (indented for you).
    pub fn identity_line(mut self, line: &str) -> Self {
        self.identity_lines.push(line.to_string());
        self
    }

    /// `identity.api_keys.header: <name>`.
    pub fn api_key_header(mut self, name: &str) -> Self {
        self.api_key_header = Some(name.to_string());
        self
    }

    /// An API key: `{ sha256: <sha256_hex(key)>, tenant: "<tenant>", tier: "<tier>" }`.
    pub fn api_key(self, key: &str, tenant: &str, tier: &str) -> Self {
        self.api_key_with(key, tenant, Some(tier))
    }

    /// An API key without a tier when `tier` is `None` (resolved by `tenants:`/`default_tier`).
    pub fn api_key_with(mut self, key: &str, tenant: &str, tier: Option<&str>) -> Self {
        self.api_keys.push(ApiKey {
            sha256: sha256_hex(key),
            tenant: tenant.to_string(),
            tier: tier.map(str::to_string),
        });
        self
    }

    /// Removes every API key of `tenant`.
    pub fn without_api_keys_of(mut self, tenant: &str) -> Self {
        self.api_keys.retain(|k| k.tenant != tenant);
        self
    }

    /// Renders `identity.api_keys.keys:` even while there are no keys (an empty list).
    pub fn api_keys_always(mut self) -> Self {
        self.api_keys_always = true;
        self
    }

    /// Sets (or adds) tier `name` to `flow_map`, e.g. `"{ limit: 1, per: 1d, burst: 3 }"`.
    pub fn tier(mut self, name: &str, flow_map: &str) -> Self {
        set_named(&mut self.tiers, name, flow_map.to_string());
        self
    }

    /// [`tier`](Self::tier) for each `name: flow_map` line of `lines` (the body of a `tiers:`
    /// section as written in YAML, e.g. `"  T: { limit: 1, per: 1d }\n  P: { .. }\n"`).
    pub fn tier_lines(mut self, lines: &str) -> Self {
        for (name, spec) in entry_lines(lines) {
            self = self.tier(name, spec);
        }
        self
    }

    /// Sets (or adds) `tenants.<name>: <flow_map>`.
    pub fn tenant(mut self, name: &str, flow_map: &str) -> Self {
        set_named(&mut self.tenants, name, flow_map.to_string());
        self
    }

    /// Sets (or adds) upstream `name` → `{ backends: ["<addr>"] }`.
    pub fn upstream(self, name: &str, addr: &str) -> Self {
        self.upstream_with(name, addr, "")
    }

    /// Upstream `name` → `{ backends: ["<addr>"], <settings> }` (`settings` may be empty).
    pub fn upstream_with(self, name: &str, addr: &str, settings: &str) -> Self {
        let spec = if settings.is_empty() {
            format!("{{ backends: [\"{addr}\"] }}")
        } else {
            format!("{{ backends: [\"{addr}\"], {settings} }}")
        };
        self.upstream_spec(name, &spec)
    }

    /// Sets (or adds) upstream `name` → `flow_map` as given.
    pub fn upstream_spec(mut self, name: &str, flow_map: &str) -> Self {
        set_named(&mut self.upstreams, name, flow_map.to_string());
        self
    }

    /// [`upstream_spec`](Self::upstream_spec) for each `name: flow_map` line of `lines` (the body
    /// of an `upstreams:` section as written in YAML, one upstream a line).
    pub fn upstream_lines(mut self, lines: &str) -> Self {
        for (name, spec) in entry_lines(lines) {
            self = self.upstream_spec(name, spec);
        }
        self
    }

    /// [`route`](Self::route) for each `- flow_map` line of `lines` (the body of a `routes:`
    /// section as written in YAML, one route a line).
    pub fn route_lines(mut self, lines: &str) -> Self {
        for line in lines.lines().filter(|l| !l.trim().is_empty()) {
            let route = line
                .trim()
                .strip_prefix("- ")
                .unwrap_or_else(|| panic!("route line without `- `: {line:?}"));
            self = self.route(route);
        }
        self
    }

    /// Appends a route (`flow_map`, e.g. `{ path_prefix: "/a", upstream: a, auth: none }`).
    pub fn route(mut self, flow_map: &str) -> Self {
        self.routes.push(flow_map.to_string());
        self
    }

    /// Removes every route.
    pub fn no_routes(mut self) -> Self {
        self.routes.clear();
        self
    }

    /// Sets (or adds) a further top-level section: `name: <value>` where `value` is a flow
    /// value, or a block (starting with a newline, lines indented) for `name:\n<block>`.
    pub fn section(mut self, name: &str, value: &str) -> Self {
        set_named(&mut self.sections, name, value.to_string());
        self
    }

    /// Appends YAML text verbatim after everything else (whole lines, ending in a newline).
    pub fn raw(mut self, text: &str) -> Self {
        self.raw.push_str(text);
        self
    }

    /// The YAML text.
    pub fn yaml(&self) -> String {
        let mut y = format!("listen: [{}]\n", self.listen.join(", "));
        if let Some(admin) = &self.admin {
            y += &format!("admin: {admin}\n");
        }
        if let Some(server) = &self.server {
            y += &format!("server: {server}\n");
        }
        match &self.redis {
            Some(Redis::Url { url, opts }) if opts.is_empty() => {
                y += &format!("redis: {{ url: \"{url}\" }}\n");
            }
            Some(Redis::Url { url, opts }) => {
                y += &format!("redis: {{ url: \"{url}\", {opts} }}\n");
            }
            Some(Redis::Spec(spec)) => y += &format!("redis: {spec}\n"),
            None => {}
        }
        if let Some(edge) = &self.edge {
            y += &format!("edge: {edge}\n");
        }
        y += &self.identity_yaml();
        y += &named_block("tiers", &self.tiers);
        y += &named_block("tenants", &self.tenants);
        y += &named_block("upstreams", &self.upstreams);
        if !self.routes.is_empty() {
            y += "routes:\n";
            for route in &self.routes {
                y += &format!("  - {route}\n");
            }
        }
        for (name, value) in &self.sections {
            if value.starts_with('\n') {
                y += &format!("{name}:{value}");
                if !value.ends_with('\n') {
                    y.push('\n');
                }
            } else {
                y += &format!("{name}: {value}\n");
            }
        }
        y + &self.raw
    }

    fn identity_yaml(&self) -> String {
        let keys = !self.api_keys.is_empty() || self.api_keys_always;
        if self.jwt.is_none()
            && self.default_tier.is_none()
            && self.identity_lines.is_empty()
            && self.api_key_header.is_none()
            && !keys
        {
            return String::new();
        }
        let mut y = "identity:\n".to_string();
        if let Some(jwt) = &self.jwt {
            y += &format!("  jwt: {jwt}\n");
        }
        if let Some(tier) = &self.default_tier {
            y += &format!("  default_tier: {tier}\n");
        }
        for line in &self.identity_lines {
            y += &format!("  {line}\n");
        }
        if keys || self.api_key_header.is_some() {
            y += "  api_keys:\n";
            if let Some(header) = &self.api_key_header {
                y += &format!("    header: {header}\n");
            }
            if self.api_keys.is_empty() {
                y += "    keys: []\n";
            } else {
                y += "    keys:\n";
            }
            for k in &self.api_keys {
                let tier = k
                    .tier
                    .as_deref()
                    .map(|t| format!(", tier: {}", yaml_str(t)))
                    .unwrap_or_default();
                y += &format!(
                    "      - {{ sha256: \"{}\", tenant: {}{tier} }}\n",
                    k.sha256,
                    yaml_str(&k.tenant)
                );
            }
        }
        y
    }
}

/// `name:` followed by `  key: value` lines, or nothing when `entries` is empty.
fn named_block(name: &str, entries: &[(String, String)]) -> String {
    if entries.is_empty() {
        return String::new();
    }
    let mut y = format!("{name}:\n");
    for (key, value) in entries {
        y += &format!("  {key}: {value}\n");
    }
    y
}

/// The `(name, value)` of each non-blank `name: value` line of `lines`, trimmed.
fn entry_lines(lines: &str) -> impl Iterator<Item = (&str, &str)> {
    lines.lines().filter(|l| !l.trim().is_empty()).map(|line| {
        let (name, value) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("line without `name:`: {line:?}"));
        (name.trim(), value.trim())
    })
}
