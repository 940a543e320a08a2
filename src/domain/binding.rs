//! Publishing bindings: a package name or namespace bound to the CI repository (and, on GitHub,
//! the workflow) allowed to publish it by trusted publishing, as PyPI's and crates.io's trusted
//! publishers are. Once a binding covers a package, a token minted from any other CI identity
//! may not write it, even one whose namespace holds it.

use serde_json::Value;

use super::trusted_issuer::IssuerKind;

/// Where GitHub keeps workflow files.
const WORKFLOWS: &str = ".github/workflows/";

/// What a binding asks of a CI identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingRule {
    pub kind: IssuerKind,
    /// GitHub: `owner/repo`; GitLab: the project path `group/project`; generic: the `sub`.
    pub repository: String,
    /// GitHub only: the workflow file, `.github/workflows/publish.yml`; `None`: any workflow.
    pub workflow: Option<String>,
}

impl BindingRule {
    /// Checks a rule as a request gives it; the error names the field and what is wrong.
    pub fn new(
        kind: IssuerKind,
        repository: &str,
        workflow: Option<&str>,
    ) -> Result<Self, (&'static str, String)> {
        let repository = repository.trim();
        let printable = |c: char| c.is_ascii_graphic();
        if repository.is_empty() || repository.len() > 200 || !repository.chars().all(printable) {
            return Err((
                "repository",
                "must be 1 to 200 printable ASCII characters without spaces".to_owned(),
            ));
        }
        let segments: Vec<&str> = repository.split('/').collect();
        if kind == IssuerKind::Github && (segments.len() != 2 || segments.contains(&"")) {
            return Err(("repository", "must be owner/name on GitHub".to_owned()));
        }
        let workflow = match workflow.map(str::trim) {
            None | Some("") => None,
            Some(_) if kind != IssuerKind::Github => {
                return Err(("workflow", "applies to GitHub Actions only".to_owned()));
            }
            Some(path)
                if path.len() <= 200
                    && path.len() > WORKFLOWS.len()
                    && path.starts_with(WORKFLOWS)
                    && path.chars().all(|c| printable(c) && c != '@') =>
            {
                Some(path.to_owned())
            }
            Some(_) => {
                return Err((
                    "workflow",
                    "must be a workflow file, .github/workflows/NAME.yml (printable ASCII, no \
                     '@', at most 200 characters)"
                        .to_owned(),
                ));
            }
        };
        Ok(Self {
            kind,
            repository: repository.to_owned(),
            workflow,
        })
    }

    /// Whether the CI identity a token was minted for (its `kind` and kept claims) is this one.
    pub fn matches(&self, identity: &Value) -> bool {
        let claim = |name: &str| identity.get(name).and_then(Value::as_str);
        if claim("kind") != Some(self.kind.as_str()) {
            return false;
        }
        let repository = match self.kind {
            IssuerKind::Github => claim("repository"),
            IssuerKind::Gitlab => claim("project_path"),
            IssuerKind::Generic => claim("sub"),
        };
        if !repository.is_some_and(|repository| repository.eq_ignore_ascii_case(&self.repository)) {
            return false;
        }
        let Some(workflow) = &self.workflow else {
            return true;
        };
        // `owner/repo/.github/workflows/publish.yml@refs/heads/main`: the reusable workflow
        // that runs the job when there is one (`job_workflow_ref`), else the caller's.
        let reference = claim("job_workflow_ref").or_else(|| claim("workflow_ref"));
        reference.is_some_and(|reference| {
            let path = reference.split('@').next().unwrap_or_default();
            path.strip_suffix(workflow.as_str())
                .and_then(|head| head.strip_suffix('/'))
                .is_some_and(|head| head.eq_ignore_ascii_case(&self.repository))
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn github(workflow: Option<&str>) -> BindingRule {
        BindingRule::new(IssuerKind::Github, "Acme/Weather", workflow).expect("valid")
    }

    fn identity(repository: &str, workflow_ref: &str) -> Value {
        json!({"kind": "github", "repository": repository, "workflow_ref": workflow_ref})
    }

    #[test]
    fn a_repository_binding_matches_that_repository_only() {
        let rule = github(None);
        let main = "acme/weather/.github/workflows/publish.yml@refs/heads/main";
        assert!(rule.matches(&identity("acme/weather", main)));
        assert!(!rule.matches(&identity("acme/weather-fork", main)));
        assert!(!rule.matches(&json!({"kind": "gitlab", "project_path": "acme/weather"})));
        assert!(!rule.matches(&json!({"kind": "github"})));
    }

    #[test]
    fn a_workflow_binding_matches_that_file_of_that_repository() {
        let rule = github(Some(".github/workflows/publish.yml"));
        let at = |workflow: &str| format!("acme/weather/{workflow}@refs/tags/v1");
        assert!(rule.matches(&identity(
            "acme/weather",
            &at(".github/workflows/publish.yml")
        )));
        assert!(!rule.matches(&identity("acme/weather", &at(".github/workflows/test.yml"))));
        assert!(!rule.matches(&identity(
            "acme/weather",
            "evil/weather/.github/workflows/publish.yml@refs/heads/main"
        )));
        // A reusable workflow that runs the job is what `job_workflow_ref` names.
        let reusable = json!({"kind": "github", "repository": "acme/weather",
            "workflow_ref": "acme/weather/.github/workflows/release.yml@refs/heads/main",
            "job_workflow_ref": "acme/weather/.github/workflows/publish.yml@refs/heads/main"});
        assert!(rule.matches(&reusable));
    }

    #[test]
    fn bad_rules_are_refused_naming_the_field() {
        let refused = |kind, repository, workflow| {
            BindingRule::new(kind, repository, workflow)
                .expect_err("refused")
                .0
        };
        assert_eq!(refused(IssuerKind::Github, "", None), "repository");
        assert_eq!(refused(IssuerKind::Github, "weather", None), "repository");
        assert_eq!(
            refused(IssuerKind::Github, "acme/weather", Some("publish.yml")),
            "workflow"
        );
        assert_eq!(
            refused(
                IssuerKind::Gitlab,
                "acme/weather",
                Some(".github/workflows/a.yml")
            ),
            "workflow"
        );
        assert!(BindingRule::new(IssuerKind::Gitlab, "group/sub/project", None).is_ok());
    }
}
