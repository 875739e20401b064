//! The request methods this server answers: one [`Method`] per method, its wire name, and
//! which revisions ([`Era`]) serve it.
//!
//! Adding a method is one variant here (with its name and eras) and one handler in the
//! dispatcher (`session::dispatch`); the transports and the "Method not found" answers
//! consult this list, so they cannot drift from what the dispatcher routes.

/// The two families of protocol revisions, which answer different sets of methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Era {
    /// 2024-11-05 to 2025-11-25: a session opened by `initialize`.
    Session,
    /// 2026-07-28: no session; every request declares itself in its `_meta`.
    Stateless,
}

/// A request method this server answers, in one revision or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Method {
    /// `initialize` (sessions only: the stateless revision has no handshake).
    Initialize,
    /// `ping` (sessions only).
    Ping,
    /// `tools/list`.
    ToolsList,
    /// `tools/call`.
    ToolsCall,
    /// `logging/setLevel` (sessions only: a stateless request sets its level in `_meta`).
    LoggingSetLevel,
    /// `server/discover` (stateless only): what the server is.
    ServerDiscover,
    /// `prompts/list`.
    PromptsList,
    /// `prompts/get`.
    PromptsGet,
    /// `resources/list`.
    ResourcesList,
    /// `resources/templates/list`.
    ResourceTemplatesList,
    /// `resources/read`.
    ResourcesRead,
    /// `resources/subscribe` (sessions only: a stateless client listens instead).
    ResourcesSubscribe,
    /// `resources/unsubscribe` (sessions only).
    ResourcesUnsubscribe,
    /// `completion/complete`.
    CompletionComplete,
    /// `subscriptions/listen` (stateless only): a long-lived request carrying
    /// notifications, opened by the transport (see `session::Subscription`).
    SubscriptionsListen,
}

impl Method {
    /// Every method, in no particular order.
    #[cfg(test)]
    pub const ALL: [Method; 15] = [
        Method::Initialize,
        Method::Ping,
        Method::ToolsList,
        Method::ToolsCall,
        Method::LoggingSetLevel,
        Method::ServerDiscover,
        Method::PromptsList,
        Method::PromptsGet,
        Method::ResourcesList,
        Method::ResourceTemplatesList,
        Method::ResourcesRead,
        Method::ResourcesSubscribe,
        Method::ResourcesUnsubscribe,
        Method::CompletionComplete,
        Method::SubscriptionsListen,
    ];

    /// The method's name on the wire.
    pub const fn name(self) -> &'static str {
        match self {
            Method::Initialize => "initialize",
            Method::Ping => "ping",
            Method::ToolsList => "tools/list",
            Method::ToolsCall => "tools/call",
            Method::LoggingSetLevel => "logging/setLevel",
            Method::ServerDiscover => "server/discover",
            Method::PromptsList => "prompts/list",
            Method::PromptsGet => "prompts/get",
            Method::ResourcesList => "resources/list",
            Method::ResourceTemplatesList => "resources/templates/list",
            Method::ResourcesRead => "resources/read",
            Method::ResourcesSubscribe => "resources/subscribe",
            Method::ResourcesUnsubscribe => "resources/unsubscribe",
            Method::CompletionComplete => "completion/complete",
            Method::SubscriptionsListen => "subscriptions/listen",
        }
    }

    /// The method a wire name names, in whichever revision serves it; `None` for a name
    /// this server answers nowhere.
    pub fn from_name(name: &str) -> Option<Method> {
        Some(match name {
            "initialize" => Method::Initialize,
            "ping" => Method::Ping,
            "tools/list" => Method::ToolsList,
            "tools/call" => Method::ToolsCall,
            "logging/setLevel" => Method::LoggingSetLevel,
            "server/discover" => Method::ServerDiscover,
            "prompts/list" => Method::PromptsList,
            "prompts/get" => Method::PromptsGet,
            "resources/list" => Method::ResourcesList,
            "resources/templates/list" => Method::ResourceTemplatesList,
            "resources/read" => Method::ResourcesRead,
            "resources/subscribe" => Method::ResourcesSubscribe,
            "resources/unsubscribe" => Method::ResourcesUnsubscribe,
            "completion/complete" => Method::CompletionComplete,
            "subscriptions/listen" => Method::SubscriptionsListen,
            _ => return None,
        })
    }

    /// Whether revisions of `era` answer this method.
    pub const fn served_in(self, era: Era) -> bool {
        match self {
            Method::ToolsList
            | Method::ToolsCall
            | Method::PromptsList
            | Method::PromptsGet
            | Method::ResourcesList
            | Method::ResourceTemplatesList
            | Method::ResourcesRead
            | Method::CompletionComplete => true,
            Method::Initialize
            | Method::Ping
            | Method::LoggingSetLevel
            | Method::ResourcesSubscribe
            | Method::ResourcesUnsubscribe => matches!(era, Era::Session),
            Method::ServerDiscover | Method::SubscriptionsListen => matches!(era, Era::Stateless),
        }
    }

    /// The method `name` names if revisions of `era` answer it; `None` is "Method not
    /// found" in that era.
    pub fn served(name: &str, era: Era) -> Option<Method> {
        Method::from_name(name).filter(|method| method.served_in(era))
    }

    /// 2026-07-28 over HTTP: the field of `params` that the `Mcp-Name` header mirrors for
    /// this method (`name` for a tool call or a prompt, `uri` for a read), if it has one.
    pub const fn routing_name_field(self) -> Option<&'static str> {
        match self {
            Method::ToolsCall | Method::PromptsGet => Some("name"),
            Method::ResourcesRead => Some("uri"),
            _ => None,
        }
    }

    /// Whether a session must be initialized before this method is answered (everything
    /// but the handshake and `ping`).
    pub const fn needs_initialized_session(self) -> bool {
        !matches!(self, Method::Initialize | Method::Ping)
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        for method in Method::ALL {
            assert_eq!(Method::from_name(method.name()), Some(method));
        }
        let mut names: Vec<_> = Method::ALL.iter().map(|m| m.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Method::ALL.len());
        assert_eq!(Method::from_name("resources/write"), None);
        assert_eq!(Method::from_name("Ping"), None);
    }

    #[test]
    fn the_mcp_name_header_mirrors_a_name_or_a_uri() {
        let fields: Vec<_> = Method::ALL
            .into_iter()
            .filter_map(|m| Some((m.name(), m.routing_name_field()?)))
            .collect();
        assert_eq!(
            fields,
            [
                ("tools/call", "name"),
                ("prompts/get", "name"),
                ("resources/read", "uri")
            ]
        );
        assert_eq!(
            crate::protocol::routing_name_field("resources/read"),
            Some("uri")
        );
        assert_eq!(crate::protocol::routing_name_field("tools/list"), None);
        assert_eq!(crate::protocol::routing_name_field("unknown/method"), None);
    }

    /// The lists each revision answers, as the specifications give them.
    #[test]
    fn each_era_serves_its_own_methods() {
        let served = |era| -> Vec<&str> {
            Method::ALL
                .into_iter()
                .filter(|m| m.served_in(era))
                .map(Method::name)
                .collect()
        };
        assert_eq!(
            served(Era::Session),
            [
                "initialize",
                "ping",
                "tools/list",
                "tools/call",
                "logging/setLevel",
                "prompts/list",
                "prompts/get",
                "resources/list",
                "resources/templates/list",
                "resources/read",
                "resources/subscribe",
                "resources/unsubscribe",
                "completion/complete",
            ]
        );
        assert_eq!(
            served(Era::Stateless),
            [
                "tools/list",
                "tools/call",
                "server/discover",
                "prompts/list",
                "prompts/get",
                "resources/list",
                "resources/templates/list",
                "resources/read",
                "completion/complete",
                "subscriptions/listen",
            ]
        );
        assert_eq!(Method::served("ping", Era::Stateless), None);
        assert_eq!(Method::served("ping", Era::Session), Some(Method::Ping));
    }
}
