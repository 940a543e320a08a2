//! The publisher's side of the API: `agent-registry login`, `whoami` and `publish` against a
//! registry over HTTP. A token comes from `--token` (or `REGISTRY_TOKEN`), from the credentials
//! `login` stored, or, with `--oidc` in a GitHub Actions job, from trusted publishing: the job's
//! ID token for the registry's audience, exchanged at `POST /api/auth/oidc`.
//! See docs/publishing.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use reqwest::{Client, Method, StatusCode};
use serde_json::{Value, json};
use url::Url;

use crate::domain::{AgentDraft, FieldError};

/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer read from a registry or a token service.
const MAX_BODY: usize = 4 * 1024 * 1024;

/// A registry at `base` (its public URL, no trailing slash).
pub struct Remote {
    base: String,
    client: Client,
}

/// A registry's answer: its status and JSON body (`Null` when it had none or was not JSON).
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

impl Answer {
    /// The problem's `detail` (or the body) for a message, with its `code`.
    pub fn problem(&self) -> String {
        let code = self.body["code"].as_str().unwrap_or("error");
        let detail = self.body["detail"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| self.body.to_string());
        let mut message = format!("{} {code}: {detail}", self.status.as_u16());
        if let Some(errors) = self.body["errors"].as_array() {
            for error in errors {
                message.push_str(&format!(
                    "\n  {}: {}",
                    error["field"].as_str().unwrap_or(""),
                    error["message"].as_str().unwrap_or("")
                ));
            }
        }
        message
    }
}

impl Remote {
    pub fn new(registry: &Url) -> anyhow::Result<Self> {
        if !matches!(registry.scheme(), "http" | "https") {
            bail!("--registry must be an http(s) URL, not {registry}");
        }
        let client = Client::builder()
            .timeout(TIMEOUT)
            .user_agent(concat!("agent-registry/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            base: registry.as_str().trim_end_matches('/').to_owned(),
            client,
        })
    }

    /// The registry's URL, which trusted publishing uses as the ID token's audience.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `method path` with `token` and `body`.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> anyhow::Result<Answer> {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("cannot reach the registry at {}", self.base))?;
        read_answer(response).await
    }

    /// `GET /api/me`.
    pub async fn whoami(&self, token: &str) -> anyhow::Result<Value> {
        let answer = self.call(Method::GET, "/api/me", Some(token), None).await?;
        if answer.status != StatusCode::OK {
            bail!("the registry refused the token: {}", answer.problem());
        }
        Ok(answer.body)
    }

    /// Sign in with GitHub's device flow through the registry's GitHub app (its client id from
    /// `GET /api/auth/providers`): print where to enter the code, wait for the person, and
    /// exchange GitHub's access token for a registry token (`POST /api/auth/github`).
    pub async fn github_device_login(&self) -> anyhow::Result<String> {
        use oauth2::{
            AuthType, ClientId, DeviceAuthorizationUrl, Scope, StandardDeviceAuthorizationResponse,
            TokenResponse, TokenUrl,
        };
        let providers = self
            .call(Method::GET, "/api/auth/providers", None, None)
            .await?;
        let github = providers.body["providers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|provider| provider["kind"] == "github")
            .ok_or_else(|| anyhow!("{} has no GitHub sign-in configured", self.base))?;
        let field = |name: &str| {
            github[name]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| anyhow!("the registry's GitHub provider has no {name}"))
        };
        let client = oauth2::basic::BasicClient::new(ClientId::new(field("client_id")?))
            .set_device_authorization_url(DeviceAuthorizationUrl::new(field(
                "device_authorization_url",
            )?)?)
            .set_token_uri(TokenUrl::new(field("token_url")?)?)
            .set_auth_type(AuthType::RequestBody);
        // OAuth requests must not follow redirects.
        let http = crate::signin::http::Client::Direct(
            Client::builder()
                .timeout(TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .build()?,
        );
        let details: StandardDeviceAuthorizationResponse = client
            .exchange_device_code()
            .add_scope(Scope::new("read:user".to_owned()))
            .add_scope(Scope::new("read:org".to_owned()))
            .request_async(&http)
            .await
            .map_err(|err| anyhow!("GitHub refused to start the device flow: {err}"))?;
        eprintln!(
            "Open {} and enter the code {}",
            details.verification_uri().as_str(),
            details.user_code().secret()
        );
        let token = client
            .exchange_device_access_token(&details)
            .request_async(&http, tokio::time::sleep, None)
            .await
            .map_err(|err| anyhow!("GitHub sign-in did not complete: {err}"))?;
        let answer = self
            .call(
                Method::POST,
                "/api/auth/github",
                None,
                Some(&json!({"access_token": token.access_token().secret()})),
            )
            .await?;
        if answer.status != StatusCode::CREATED {
            bail!(
                "the registry refused the GitHub sign-in: {}",
                answer.problem()
            );
        }
        answer.body["token"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("the registry's answer has no token"))
    }

    /// Trusted publishing: `id_token` exchanged for a registry token.
    pub async fn exchange(&self, id_token: &str) -> anyhow::Result<String> {
        let answer = self
            .call(
                Method::POST,
                "/api/auth/oidc",
                None,
                Some(&json!({"token": id_token})),
            )
            .await?;
        if answer.status != StatusCode::CREATED {
            bail!("the registry refused the ID token: {}", answer.problem());
        }
        answer.body["token"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("the registry's exchange answer has no token"))
    }

    /// Publish `body`, or update the agent of its package name when it exists (and the
    /// token's owner has it); with `go_live`, then make it ACTIVE. The agent as it stands.
    pub async fn publish(&self, token: &str, body: &Value, go_live: bool) -> anyhow::Result<Value> {
        let created = self
            .call(Method::POST, "/api/agents/publish", Some(token), Some(body))
            .await?;
        let mut agent = match created.status {
            StatusCode::CREATED => created.body,
            StatusCode::CONFLICT if created.body["code"] == "conflict" => {
                let package = body["package_name"].as_str().unwrap_or_default();
                let updated = self
                    .call(
                        Method::PUT,
                        &format!("/api/agents/{}", path_segment(package)),
                        Some(token),
                        Some(body),
                    )
                    .await?;
                if updated.status != StatusCode::OK {
                    bail!("updating {package} failed: {}", updated.problem());
                }
                updated.body
            }
            _ => bail!("publishing failed: {}", created.problem()),
        };
        if go_live && agent["state"] == "STAGE" {
            let id = agent["id"].as_str().unwrap_or_default().to_owned();
            let live = self
                .call(
                    Method::POST,
                    &format!("/api/agents/{}/go-live", path_segment(&id)),
                    Some(token),
                    None,
                )
                .await?;
            if live.status != StatusCode::OK {
                bail!("going live failed: {}", live.problem());
            }
            agent = live.body;
        }
        Ok(agent)
    }
}

async fn read_answer(mut response: reqwest::Response) -> anyhow::Result<Answer> {
    let status = response.status();
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if bytes.len() + chunk.len() > MAX_BODY {
            bail!("the answer is larger than {MAX_BODY} bytes");
        }
        bytes.extend_from_slice(&chunk);
    }
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok(Answer { status, body })
}

/// `segment` escaped for a URL path.
fn path_segment(segment: &str) -> String {
    url::form_urlencoded::byte_serialize(segment.as_bytes()).collect()
}

/// The publish body in `path`, checked as the registry would check it: every problem at once.
pub fn read_body(path: &Path) -> anyhow::Result<Result<Value, Vec<FieldError>>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let body: Value = match serde_json::from_str(&text) {
        Ok(body) => body,
        Err(err) => {
            return Ok(Err(vec![FieldError::new(
                "",
                format!("invalid JSON: {err}"),
            )]));
        }
    };
    // An MCP Registry server.json reads as the publish body it describes.
    let body = crate::domain::server_json::publish_body(&body).unwrap_or(body);
    Ok(AgentDraft::parse(&body).map(|_| body))
}

/// A GitHub Actions job's OIDC ID token for `audience`: from the job's token service
/// (`ACTIONS_ID_TOKEN_REQUEST_URL`, `ACTIONS_ID_TOKEN_REQUEST_TOKEN`; the job needs
/// `permissions: id-token: write`).
pub async fn actions_id_token(audience: &str) -> anyhow::Result<String> {
    let variable = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                anyhow!(
                    "{name} is not set: --oidc runs in a GitHub Actions job with \
                 `permissions: id-token: write`"
                )
            })
    };
    let mut url = Url::parse(&variable("ACTIONS_ID_TOKEN_REQUEST_URL")?)
        .context("ACTIONS_ID_TOKEN_REQUEST_URL is not a URL")?;
    url.query_pairs_mut().append_pair("audience", audience);
    let client = Client::builder().timeout(TIMEOUT).build()?;
    let response = client
        .get(url)
        .bearer_auth(variable("ACTIONS_ID_TOKEN_REQUEST_TOKEN")?)
        .send()
        .await
        .context("cannot reach the Actions token service")?;
    let answer = read_answer(response).await?;
    if answer.status != StatusCode::OK {
        bail!(
            "the Actions token service answered HTTP {}",
            answer.status.as_u16()
        );
    }
    answer.body["value"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("the Actions token service's answer has no `value`"))
}

/// Where `login` keeps tokens: `$XDG_CONFIG_HOME/agent-registry/credentials.json` (or
/// `~/.config/…`), a JSON object from registry URL to token, readable by its owner only.
pub fn credentials_path() -> anyhow::Result<PathBuf> {
    let from_env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let config = from_env("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| from_env("HOME").map(|home| PathBuf::from(home).join(".config")))
        .ok_or_else(|| anyhow!("neither XDG_CONFIG_HOME nor HOME is set"))?;
    Ok(config.join("agent-registry").join("credentials.json"))
}

/// The stored token for `registry`, if `login` stored one.
pub fn stored_token(path: &Path, registry: &str) -> anyhow::Result<Option<String>> {
    Ok(read_credentials(path)?.remove(registry))
}

/// Store `token` for `registry` (mode 0600 from its creation on Unix).
pub fn store_token(path: &Path, registry: &str, token: &str) -> anyhow::Result<()> {
    let mut credentials = read_credentials(path)?;
    credentials.insert(registry.to_owned(), token.to_owned());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&credentials)?;
    let temporary = path.with_extension("json.tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(&temporary)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

fn read_credentials(path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .with_context(|| format!("{} is not a credentials file", path.display())),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(err) => Err(err).with_context(|| format!("cannot read {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_stored_per_registry_readable_by_the_owner_only() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("agent-registry").join("credentials.json");
        assert_eq!(stored_token(&path, "https://a.test").expect("read"), None);
        store_token(&path, "https://a.test", "ar_one").expect("store");
        store_token(&path, "https://b.test", "ar_two").expect("store");
        store_token(&path, "https://a.test", "ar_three").expect("replace");
        assert_eq!(
            stored_token(&path, "https://a.test")
                .expect("read")
                .as_deref(),
            Some("ar_three")
        );
        assert_eq!(
            stored_token(&path, "https://b.test")
                .expect("read")
                .as_deref(),
            Some("ar_two")
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, "not json").expect("write");
        assert!(stored_token(&path, "https://a.test").is_err());
    }

    #[test]
    fn a_body_is_checked_whole_before_anything_is_sent() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("agent.json");
        std::fs::write(&path, r#"{"package_name": "Not A Name", "tags": 7}"#).expect("write");
        let errors = read_body(&path).expect("read").expect_err("invalid");
        let fields: Vec<&str> = errors.iter().map(|error| error.field.as_str()).collect();
        assert!(fields.contains(&"package_name"), "{fields:?}");
        assert!(fields.len() >= 3, "every problem at once: {fields:?}");
        std::fs::write(&path, "{").expect("write");
        assert!(read_body(&path).expect("read").is_err());
        assert!(read_body(&dir.path().join("missing.json")).is_err());
    }
}
