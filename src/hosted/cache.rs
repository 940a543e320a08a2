//! A small time-to-live cache for upstream answers, so repeated questions do not hit the APIs.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries live `ttl`; at most `capacity` are kept (expired ones go first, then the oldest).
pub struct TtlCache<V> {
    ttl: Duration,
    capacity: usize,
    entries: Mutex<HashMap<String, (Instant, V)>>,
}

impl<V: Clone> TtlCache<V> {
    /// A cache whose entries live `ttl_secs` seconds; 0 disables it.
    pub fn new(ttl_secs: u64, capacity: usize) -> Self {
        Self {
            ttl: Duration::from_secs(ttl_secs),
            capacity,
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub fn get(&self, key: &str) -> Option<V> {
        if self.ttl.is_zero() {
            return None;
        }
        let entries = self.entries.lock().ok()?;
        let (stored, value) = entries.get(key)?;
        (stored.elapsed() < self.ttl).then(|| value.clone())
    }

    pub fn insert(&self, key: String, value: V) {
        if self.ttl.is_zero() || self.capacity == 0 {
            return;
        }
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= self.capacity {
            let ttl = self.ttl;
            entries.retain(|_, (stored, _)| stored.elapsed() < ttl);
        }
        if entries.len() >= self.capacity {
            let oldest = entries
                .iter()
                .min_by_key(|(_, (stored, _))| *stored)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                entries.remove(&oldest);
            }
        }
        entries.insert(key, (Instant::now(), value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_value_is_returned_until_it_expires() {
        let cache = TtlCache::new(60, 10);
        cache.insert("btc".to_owned(), 1);
        assert_eq!(cache.get("btc"), Some(1));
        assert_eq!(cache.get("eth"), None);
    }

    #[test]
    fn a_zero_ttl_disables_the_cache() {
        let cache = TtlCache::new(0, 10);
        cache.insert("btc".to_owned(), 1);
        assert_eq!(cache.get("btc"), None);
    }

    #[test]
    fn the_oldest_entry_makes_room_when_full() {
        let cache = TtlCache::new(60, 2);
        cache.insert("a".to_owned(), 1);
        std::thread::sleep(Duration::from_millis(2));
        cache.insert("b".to_owned(), 2);
        std::thread::sleep(Duration::from_millis(2));
        cache.insert("c".to_owned(), 3);
        assert_eq!(cache.get("a"), None);
        assert_eq!(cache.get("b"), Some(2));
        assert_eq!(cache.get("c"), Some(3));
    }
}
