//! Background tasks tied to the lifetime of their owner.

use tokio::task::JoinHandle;

/// Aborts a background task when dropped, so the task lives exactly as long as its owner.
pub struct AbortOnDrop(tokio::task::AbortHandle);

impl AbortOnDrop {
    pub fn new<T>(task: JoinHandle<T>) -> Self {
        Self(task.abort_handle())
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
