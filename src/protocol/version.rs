//! MCP protocol revisions served: the four of the session era (negotiated by `initialize`) and
//! 2026-07-28, the stateless revision (named by every request), with the negotiation rules.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProtocolVersion {
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    /// Stateless: no initialize, no session; every request names it in `_meta`.
    V2026_07_28,
}

impl ProtocolVersion {
    /// The session-era revisions (what `initialize` negotiates and a session holds).
    pub const ALL: [ProtocolVersion; 4] = [
        ProtocolVersion::V2024_11_05,
        ProtocolVersion::V2025_03_26,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_11_25,
    ];
    pub const LATEST: ProtocolVersion = ProtocolVersion::V2025_11_25;
    /// The stateless revisions (requests carry their version in `_meta`).
    pub const MODERN: [ProtocolVersion; 1] = [ProtocolVersion::V2026_07_28];
    /// Every revision served, newest first (what `UnsupportedProtocolVersionError` and
    /// `server/discover` list).
    pub const SUPPORTED: [&'static str; 5] = [
        "2026-07-28",
        "2025-11-25",
        "2025-06-18",
        "2025-03-26",
        "2024-11-05",
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2024_11_05 => "2024-11-05",
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2026_07_28 => "2026-07-28",
        }
    }

    /// A session-era revision.
    pub fn parse(s: &str) -> Option<ProtocolVersion> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// A stateless revision.
    pub fn parse_modern(s: &str) -> Option<ProtocolVersion> {
        Self::MODERN.into_iter().find(|v| v.as_str() == s)
    }

    /// Stateless (2026-07-28 and later): no sessions, MRTR instead of server→client requests.
    pub fn is_modern(self) -> bool {
        self >= ProtocolVersion::V2026_07_28
    }

    /// The version to answer an `initialize` with: the client's when we serve it, else our latest.
    pub fn negotiate(requested: Option<&str>) -> ProtocolVersion {
        requested.and_then(Self::parse).unwrap_or(Self::LATEST)
    }

    /// JSON-RPC batches exist only in 2025-03-26 (added then, removed in 2025-06-18).
    pub fn allows_batches(self) -> bool {
        self == ProtocolVersion::V2025_03_26
    }

    /// Elicitation, structured tool output and `title` fields arrived in 2025-06-18.
    pub fn has_elicitation(self) -> bool {
        self >= ProtocolVersion::V2025_06_18
    }

    /// SSE polling (priming events, `retry:`, server-side close) arrived in 2025-11-25.
    pub fn has_sse_polling(self) -> bool {
        self >= ProtocolVersion::V2025_11_25
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_supported_and_falls_back_to_latest() {
        for v in ProtocolVersion::ALL {
            assert_eq!(ProtocolVersion::negotiate(Some(v.as_str())), v);
        }
        assert_eq!(
            ProtocolVersion::negotiate(Some("1999-01-01")),
            ProtocolVersion::LATEST
        );
        assert_eq!(ProtocolVersion::negotiate(None), ProtocolVersion::LATEST);
    }

    #[test]
    fn supported_lists_every_revision_once() {
        let mut all: Vec<&str> = ProtocolVersion::ALL.iter().map(|v| v.as_str()).collect();
        all.extend(ProtocolVersion::MODERN.iter().map(|v| v.as_str()));
        all.sort_unstable();
        let mut listed = ProtocolVersion::SUPPORTED.to_vec();
        listed.sort_unstable();
        assert_eq!(all, listed);
        assert_eq!(ProtocolVersion::parse("2026-07-28"), None);
        assert_eq!(
            ProtocolVersion::parse_modern("2026-07-28"),
            Some(ProtocolVersion::V2026_07_28)
        );
        assert!(ProtocolVersion::V2026_07_28.is_modern() && !ProtocolVersion::LATEST.is_modern());
    }

    #[test]
    fn only_2025_03_26_takes_batches() {
        let with: Vec<_> = ProtocolVersion::ALL
            .into_iter()
            .filter(|v| v.allows_batches())
            .collect();
        assert_eq!(with, vec![ProtocolVersion::V2025_03_26]);
    }
}
