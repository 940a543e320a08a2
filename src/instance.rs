//! Who this process is, for the leases it takes in shared storage (mirror sources, probes).
//!
//! A lease names its holder. A process that holds a lease when it dies (`kill -9`, a crash, a
//! lost machine) leaves it behind until it runs out; if the process that starts next on the
//! same data knows the lease as its own, it takes its work back at once instead of waiting.
//! So a process is named by what stays the same across its restarts: `--instance-id` when the
//! operator gives one (a container whose host name changes on every start, a pod of a stateful
//! set), otherwise its host name and its data directory.
//!
//! Two live processes must never share a name, or both would think they hold the same lease.
//! A process without `--instance-id` therefore locks its data directory (`instance.lock`, an
//! advisory lock the operating system drops when the process dies): a second process on the
//! same directory (a sibling server, the command line beside a running server) cannot take the
//! lock and names itself uniquely, so it resumes nothing that is not its own. An operator who
//! gives `--instance-id` promises that no two live processes share it.

use std::fs::{File, TryLockError};
use std::path::Path;

use crate::config::StorageConfig;

/// The lock file in the data directory.
pub const LOCK_FILE: &str = "instance.lock";

/// This process's name for leases, and the lock that keeps it its own.
#[derive(Debug)]
pub struct Instance {
    id: String,
    /// Whether the name is the same across restarts (given, or the data directory's lock held).
    stable: bool,
    /// Held for the life of the process: dropping it (or dying) frees the name.
    _lock: Option<File>,
}

impl Instance {
    /// The name `storage` gives this process (see the module's notes).
    pub fn resolve(storage: &StorageConfig) -> Self {
        if let Some(id) = storage
            .instance_id
            .as_deref()
            .map(str::trim)
            .filter(|id| !id.is_empty())
        {
            return Self {
                id: id.to_owned(),
                stable: true,
                _lock: None,
            };
        }
        let host = rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned();
        match lock(&storage.data_dir) {
            Ok((directory, Some(lock))) => Self {
                id: format!("{host}:{directory}"),
                stable: true,
                _lock: Some(lock),
            },
            Ok((directory, None)) => {
                tracing::info!(
                    data_dir = %directory,
                    "another process holds this data directory: this one's leases are its own \
                     and are not resumed after a restart"
                );
                Self::unique(format!("{host}:{directory}"))
            }
            Err(err) => {
                tracing::warn!(
                    error = %err,
                    "cannot lock the data directory: this process's leases are not resumed after a restart"
                );
                Self::unique(host)
            }
        }
    }

    /// A name no other process has, not kept across restarts.
    fn unique(prefix: String) -> Self {
        Self {
            id: format!("{prefix}#{}", ulid::Ulid::new()),
            stable: false,
            _lock: None,
        }
    }

    /// The name leases are taken under.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether a later start of this process gets the same name (and so resumes its leases).
    pub fn is_stable(&self) -> bool {
        self.stable
    }
}

/// The data directory's canonical path, and its lock when no other process holds it.
fn lock(data_dir: &Path) -> std::io::Result<(String, Option<File>)> {
    std::fs::create_dir_all(data_dir)?;
    let directory = data_dir.canonicalize()?.to_string_lossy().into_owned();
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(data_dir.join(LOCK_FILE))?;
    match file.try_lock() {
        Ok(()) => Ok((directory, Some(file))),
        Err(TryLockError::WouldBlock) => Ok((directory, None)),
        Err(TryLockError::Error(err)) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn storage(dir: &Path) -> StorageConfig {
        StorageConfig {
            data_dir: dir.to_owned(),
            database_url: None,
            instance_id: None,
        }
    }

    #[test]
    fn a_process_is_named_by_its_host_and_data_directory_across_restarts() {
        let dir = tempfile::tempdir().expect("temp dir");
        let first = Instance::resolve(&storage(dir.path()));
        assert!(first.is_stable());
        let canonical = dir.path().canonicalize().expect("canonical");
        assert!(
            first.id().ends_with(&*canonical.to_string_lossy()),
            "{}",
            first.id()
        );
        let id = first.id().to_owned();
        drop(first);
        let restarted = Instance::resolve(&storage(dir.path()));
        assert_eq!(restarted.id(), id, "the same name after a restart");
    }

    #[test]
    fn a_second_live_process_on_the_same_data_gets_a_name_of_its_own() {
        let dir = tempfile::tempdir().expect("temp dir");
        let first = Instance::resolve(&storage(dir.path()));
        let second = Instance::resolve(&storage(dir.path()));
        assert!(!second.is_stable());
        assert_ne!(first.id(), second.id());
        assert!(second.id().starts_with(first.id()), "{}", second.id());
        let third = Instance::resolve(&storage(dir.path()));
        assert_ne!(second.id(), third.id());
    }

    #[test]
    fn a_given_instance_id_is_used_as_it_is() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = storage(dir.path());
        config.instance_id = Some(" web-0 ".to_owned());
        let given = Instance::resolve(&config);
        assert_eq!(given.id(), "web-0");
        assert!(given.is_stable());
        config.instance_id = Some("  ".to_owned());
        assert!(
            Instance::resolve(&config).id().contains(':'),
            "blank: the default"
        );
    }
}
