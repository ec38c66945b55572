//! Locks that outlive a panic. A thread that panicked while holding one of
//! the daemon's locks poisons it; the data behind every such lock is kept
//! consistent step by step (no invariant spans a panic point), so the
//! daemon goes on with it rather than failing every later call. This is
//! the one place that says so.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// [`Mutex::lock`] and [`Mutex::into_inner`], poisoned or not.
pub(crate) trait MutexExt<T> {
    fn locked(&self) -> MutexGuard<'_, T>;
    fn into_held(self) -> T;
}

impl<T> MutexExt<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn into_held(self) -> T {
        self.into_inner().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`RwLock::read`] and [`RwLock::write`], poisoned or not.
pub(crate) trait RwLockExt<T: ?Sized> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T>;
    fn write_locked(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RwLockExt<T> for RwLock<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}
