//! Sessions of the handshake revisions over HTTP: opened by `initialize`, named by
//! `Mcp-Session-Id`, ended by `DELETE`. Bounded in number (opening one more ends the one idle
//! the longest) and in idle time, so clients that never say goodbye cost a fixed amount.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::protocol::Revision;

/// One session: what `initialize` negotiated, and whose it is.
#[derive(Debug, Clone)]
struct Session {
    revision: Revision,
    /// The token owner that opened it; `None` for anonymous clients. Only the same caller may
    /// use it (a session id is not a credential).
    owner: Option<String>,
    last_used: Instant,
}

/// The open sessions of one process.
pub struct Sessions {
    open: Mutex<HashMap<String, Session>>,
    max: usize,
    idle: Duration,
}

impl Sessions {
    pub fn new(max: usize, idle: Duration) -> Self {
        Self {
            open: Mutex::new(HashMap::new()),
            max: max.max(1),
            idle,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Open a session and return its id: expired sessions are dropped first, then, at the cap,
    /// the one idle the longest.
    pub fn open(&self, revision: Revision, owner: Option<String>) -> String {
        let now = Instant::now();
        let id = crate::auth::random_secret("mcp_");
        let mut open = self.lock();
        open.retain(|_, session| now.duration_since(session.last_used) < self.idle);
        while open.len() >= self.max {
            let Some(oldest) = open
                .iter()
                .min_by_key(|(_, session)| session.last_used)
                .map(|(id, _)| id.clone())
            else {
                break;
            };
            open.remove(&oldest);
        }
        open.insert(
            id.clone(),
            Session {
                revision,
                owner,
                last_used: now,
            },
        );
        id
    }

    /// The revision of a live session of `owner`, marking it used; `None` when it is unknown,
    /// expired, ended, or another caller's.
    pub fn touch(&self, id: &str, owner: Option<&str>) -> Option<Revision> {
        let now = Instant::now();
        let mut open = self.lock();
        let session = open.get_mut(id)?;
        if now.duration_since(session.last_used) >= self.idle {
            open.remove(id);
            return None;
        }
        if session.owner.as_deref() != owner {
            return None;
        }
        session.last_used = now;
        Some(session.revision)
    }

    /// End a session of `owner`; `false` when there was no such live session.
    pub fn close(&self, id: &str, owner: Option<&str>) -> bool {
        if self.touch(id, owner).is_none() {
            return false;
        }
        self.lock().remove(id).is_some()
    }

    /// How many sessions are held (expired ones included until the next `open`).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_past_the_cap_ends_the_session_idle_the_longest() {
        let sessions = Sessions::new(3, Duration::from_secs(60));
        let first = sessions.open(Revision::V2025_11_25, None);
        let second = sessions.open(Revision::V2025_06_18, None);
        let third = sessions.open(Revision::V2025_11_25, None);
        assert_eq!(
            sessions.touch(&first, None),
            Some(Revision::V2025_11_25),
            "used again: now the second is the oldest"
        );

        let fourth = sessions.open(Revision::V2025_11_25, None);

        assert_eq!(sessions.len(), 3);
        assert_eq!(sessions.touch(&second, None), None);
        for id in [&first, &third, &fourth] {
            assert!(sessions.touch(id, None).is_some());
        }
    }

    #[test]
    fn idle_sessions_expire() {
        let sessions = Sessions::new(10, Duration::from_millis(20));
        let id = sessions.open(Revision::V2025_11_25, None);
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(sessions.touch(&id, None), None);
        sessions.open(Revision::V2025_11_25, None);
        assert_eq!(sessions.len(), 1, "the expired one is gone");
    }

    #[test]
    fn a_session_is_its_openers_only_and_ends_once() {
        let sessions = Sessions::new(10, Duration::from_secs(60));
        let id = sessions.open(Revision::V2025_11_25, Some("alice".to_owned()));
        assert_eq!(sessions.touch(&id, None), None);
        assert_eq!(sessions.touch(&id, Some("bob")), None);
        assert!(!sessions.close(&id, Some("bob")));
        assert!(sessions.close(&id, Some("alice")));
        assert!(!sessions.close(&id, Some("alice")));
        assert!(sessions.is_empty());
    }
}
