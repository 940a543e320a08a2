//! The audit log's request context: who is writing, from where. The HTTP layer opens a
//! context around every write request (`scope`); authentication names the actor in it
//! (`set_actor`); the store reads it (`current`) when it writes, so the audit row goes into the
//! same transaction as the change it describes. Outside a request (the mirrors, the prober,
//! the CLI on a local database) there is no context and no row.

use std::sync::{Arc, Mutex};

/// Who made a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditActor {
    /// The owner name it acts as (`admin` for the master key).
    pub owner: String,
    /// `master`, `token` or `session`.
    pub kind: &'static str,
    pub token_id: Option<String>,
    pub session_id: Option<String>,
}

/// One request's context.
#[derive(Debug, Default)]
pub struct AuditContext {
    actor: Mutex<Option<AuditActor>>,
    /// The client's address, as the rate limit sees it.
    pub client: Option<String>,
}

impl AuditContext {
    pub fn new(client: Option<String>) -> Arc<Self> {
        Arc::new(Self {
            actor: Mutex::new(None),
            client,
        })
    }

    /// The actor authentication named, if it did.
    pub fn actor(&self) -> Option<AuditActor> {
        self.actor.lock().ok().and_then(|actor| actor.clone())
    }
}

tokio::task_local! {
    static CONTEXT: Arc<AuditContext>;
}

/// Run `future` inside `context`.
pub async fn scope<F: std::future::Future>(context: Arc<AuditContext>, future: F) -> F::Output {
    CONTEXT.scope(context, future).await
}

/// Name the request's actor (authentication calls this); outside a write request (every read)
/// `actor` is not even made.
pub fn set_actor(actor: impl FnOnce() -> AuditActor) {
    let _ = CONTEXT.try_with(|context| {
        if let Ok(mut slot) = context.actor.lock() {
            *slot = Some(actor());
        }
    });
}

/// The current request's context, if the code runs inside one.
pub fn current() -> Option<Arc<AuditContext>> {
    CONTEXT.try_with(Arc::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_actor_is_seen_inside_the_request_and_nowhere_else() {
        assert!(current().is_none());
        set_actor(|| AuditActor {
            owner: "nobody".to_owned(),
            kind: "token",
            token_id: None,
            session_id: None,
        });
        let context = AuditContext::new(Some("192.0.2.1".to_owned()));
        let seen = scope(Arc::clone(&context), async {
            assert!(current().is_some_and(|c| c.actor().is_none()));
            set_actor(|| AuditActor {
                owner: "alice".to_owned(),
                kind: "token",
                token_id: Some("tok_1".to_owned()),
                session_id: None,
            });
            current().and_then(|c| c.actor())
        })
        .await;
        assert_eq!(seen.map(|actor| actor.owner), Some("alice".to_owned()));
        assert!(current().is_none());
        assert_eq!(context.client.as_deref(), Some("192.0.2.1"));
    }
}
