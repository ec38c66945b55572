//! A small bounded memo for what tools compile from their input on every
//! call (a regex, a glob, a file-type set): models repeat the same patterns
//! within a session and across sessions, and compiling one costs more than
//! searching a small tree.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

use crate::sync::MutexExt;

/// Remembers up to `cap` values by key; when full, it starts over (no
/// bookkeeping per hit, and a bound on memory).
pub struct Memo<K, V> {
    cap: usize,
    map: Mutex<HashMap<K, V>>,
}

impl<K: Eq + Hash, V: Clone> Memo<K, V> {
    /// An empty memo of at most `cap` entries.
    pub fn new(cap: usize) -> Self {
        Memo { cap: cap.max(1), map: Mutex::new(HashMap::new()) }
    }

    /// The value for `key`, made by `make` if it is not remembered.
    /// Errors are not remembered.
    pub fn get_or_try<E>(&self, key: K, make: impl FnOnce() -> Result<V, E>) -> Result<V, E> {
        if let Some(v) = self.lock().get(&key) {
            return Ok(v.clone());
        }
        let v = make()?;
        let mut map = self.lock();
        if map.len() >= self.cap {
            map.clear();
        }
        map.insert(key, v.clone());
        Ok(v)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, V>> {
        self.map.locked()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_values_not_errors_within_its_bound() {
        let memo: Memo<u32, String> = Memo::new(2);
        let mut made = 0;
        for _ in 0..3 {
            let v = memo.get_or_try(1, || -> Result<_, ()> {
                made += 1;
                Ok("one".to_owned())
            });
            assert_eq!(v.unwrap(), "one");
        }
        assert_eq!(made, 1);
        assert!(memo.get_or_try(2, || Err::<String, _>("bad")).is_err());
        assert!(memo.lock().get(&2).is_none());
        memo.get_or_try(2, || Ok::<_, ()>("two".into())).unwrap();
        memo.get_or_try(3, || Ok::<_, ()>("three".into())).unwrap();
        assert!(memo.lock().len() <= 2);
    }
}
