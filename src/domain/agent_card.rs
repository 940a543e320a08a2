//! `A2aCard`: an A2A v1.0 agent card with every field real clients need, checked
//! once when a card is fetched from an agent's `manifest_url`.

use serde_json::{Map, Value};

use super::FieldError;

/// A JSON object known to be a usable A2A v1.0 AgentCard; kept as given.
#[derive(Debug, Clone, PartialEq)]
pub struct A2aCard(Value);

impl A2aCard {
    /// Checks the required fields of an AgentCard, reporting every problem as `card.<path>`.
    pub fn parse(value: Value) -> Result<Self, Vec<FieldError>> {
        let Some(card) = value.as_object() else {
            return Err(vec![FieldError::new(
                "card",
                "must be a JSON object (an A2A agent card)",
            )]);
        };
        let mut errors = Vec::new();
        for key in ["name", "description", "version"] {
            non_empty_string(card, key, &format!("card.{key}"), &mut errors);
        }
        check_interfaces(card, &mut errors);
        check_capabilities(card.get("capabilities"), &mut errors);
        for key in ["defaultInputModes", "defaultOutputModes"] {
            string_array(card.get(key), &format!("card.{key}"), &mut errors);
        }
        check_skills(card.get("skills"), &mut errors);
        if errors.is_empty() {
            Ok(Self(value))
        } else {
            Err(errors)
        }
    }

    pub fn into_value(self) -> Value {
        self.0
    }
}

fn non_empty_string(
    object: &Map<String, Value>,
    key: &str,
    field: &str,
    errors: &mut Vec<FieldError>,
) {
    match object.get(key) {
        Some(Value::String(text)) if !text.trim().is_empty() => {}
        Some(Value::String(_)) => errors.push(FieldError::new(field, "must not be empty")),
        None | Some(Value::Null) => errors.push(FieldError::new(field, "is required")),
        Some(_) => errors.push(FieldError::new(field, "must be a string")),
    }
}

fn string_array(value: Option<&Value>, field: &str, errors: &mut Vec<FieldError>) {
    match value {
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {}
        Some(Value::Array(_)) => errors.push(FieldError::new(field, "must hold only strings")),
        None | Some(Value::Null) => errors.push(FieldError::new(field, "is required")),
        Some(_) => errors.push(FieldError::new(field, "must be an array of strings")),
    }
}

fn check_interfaces(card: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    let field = "card.supportedInterfaces";
    let interfaces = match card.get("supportedInterfaces") {
        Some(Value::Array(interfaces)) if !interfaces.is_empty() => interfaces,
        Some(Value::Array(_)) => {
            errors.push(FieldError::new(field, "must list at least one interface"));
            return;
        }
        None | Some(Value::Null) if card.get("url").is_some_and(Value::is_string) => {
            errors.push(FieldError::new(
                field,
                "is required; this looks like an A2A v0.3 card (top-level url), and the registry \
                 reads A2A v1.0 cards",
            ));
            return;
        }
        None | Some(Value::Null) => {
            errors.push(FieldError::new(field, "is required"));
            return;
        }
        Some(_) => {
            errors.push(FieldError::new(field, "must be an array of interfaces"));
            return;
        }
    };
    for (index, interface) in interfaces.iter().enumerate() {
        let at = format!("{field}[{index}]");
        let Some(interface) = interface.as_object() else {
            errors.push(FieldError::new(
                at,
                "must be an object {url, protocolBinding, protocolVersion}",
            ));
            continue;
        };
        non_empty_string(interface, "url", &format!("{at}.url"), errors);
        if let Some(Value::String(url)) = interface.get("url") {
            let absolute = url::Url::parse(url)
                .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.has_host());
            if !absolute && !url.trim().is_empty() {
                errors.push(FieldError::new(
                    format!("{at}.url"),
                    "must be an absolute http(s) URL",
                ));
            }
        }
        non_empty_string(
            interface,
            "protocolBinding",
            &format!("{at}.protocolBinding"),
            errors,
        );
        non_empty_string(
            interface,
            "protocolVersion",
            &format!("{at}.protocolVersion"),
            errors,
        );
    }
}

fn check_capabilities(value: Option<&Value>, errors: &mut Vec<FieldError>) {
    let field = "card.capabilities";
    let capabilities = match value {
        Some(Value::Object(capabilities)) => capabilities,
        Some(Value::Array(_)) => {
            errors.push(FieldError::new(
                field,
                "must be an object {streaming, pushNotifications, extensions…}, not an array",
            ));
            return;
        }
        None | Some(Value::Null) => {
            errors.push(FieldError::new(field, "is required"));
            return;
        }
        Some(_) => {
            errors.push(FieldError::new(field, "must be an object"));
            return;
        }
    };
    for key in ["streaming", "pushNotifications", "extendedAgentCard"] {
        if capabilities
            .get(key)
            .is_some_and(|value| !value.is_boolean() && !value.is_null())
        {
            errors.push(FieldError::new(
                format!("{field}.{key}"),
                "must be true or false",
            ));
        }
    }
    match capabilities.get("extensions") {
        None | Some(Value::Null) => {}
        Some(Value::Array(extensions)) => {
            for (index, extension) in extensions.iter().enumerate() {
                let has_uri = extension
                    .get("uri")
                    .and_then(Value::as_str)
                    .is_some_and(|uri| !uri.trim().is_empty());
                if !has_uri {
                    errors.push(FieldError::new(
                        format!("{field}.extensions[{index}].uri"),
                        "is required",
                    ));
                }
            }
        }
        Some(_) => errors.push(FieldError::new(
            format!("{field}.extensions"),
            "must be an array",
        )),
    }
}

fn check_skills(value: Option<&Value>, errors: &mut Vec<FieldError>) {
    let field = "card.skills";
    let skills = match value {
        Some(Value::Array(skills)) => skills,
        None | Some(Value::Null) => {
            errors.push(FieldError::new(field, "is required"));
            return;
        }
        Some(_) => {
            errors.push(FieldError::new(field, "must be an array of skills"));
            return;
        }
    };
    for (index, skill) in skills.iter().enumerate() {
        let at = format!("{field}[{index}]");
        let Some(skill) = skill.as_object() else {
            errors.push(FieldError::new(
                at,
                "must be an object {id, name, description, tags}",
            ));
            continue;
        };
        for key in ["id", "name", "description"] {
            non_empty_string(skill, key, &format!("{at}.{key}"), errors);
        }
        string_array(skill.get("tags"), &format!("{at}.tags"), errors);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn card() -> Value {
        json!({
            "name": "Weather Agent", "description": "Forecasts.", "version": "1.0.0",
            "supportedInterfaces": [{"url": "https://weather.example.com/a2a/v1",
                                     "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {"streaming": false, "extensions": []},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["application/json"],
            "skills": [{"id": "forecast", "name": "Forecast", "description": "Forecast for a city",
                        "tags": ["weather"]}]
        })
    }

    fn fields(value: Value) -> Vec<String> {
        A2aCard::parse(value)
            .expect_err("invalid")
            .into_iter()
            .map(|error| error.field)
            .collect()
    }

    #[test]
    fn a_complete_v1_card_parses() {
        assert!(A2aCard::parse(card()).is_ok());
    }

    #[test]
    fn every_missing_required_field_is_listed() {
        assert_eq!(
            fields(json!({})),
            [
                "card.name",
                "card.description",
                "card.version",
                "card.supportedInterfaces",
                "card.capabilities",
                "card.defaultInputModes",
                "card.defaultOutputModes",
                "card.skills"
            ]
        );
    }

    #[test]
    fn a_capabilities_array_and_bad_interfaces_and_skills_are_reported() {
        let mut bad = card();
        bad["capabilities"] = json!([{"name": "x"}]);
        bad["supportedInterfaces"] = json!([{"url": "/relative", "protocolBinding": "JSONRPC"}]);
        bad["skills"] = json!([{"id": "a", "name": "A"}]);
        assert_eq!(
            fields(bad),
            [
                "card.supportedInterfaces[0].url",
                "card.supportedInterfaces[0].protocolVersion",
                "card.capabilities",
                "card.skills[0].description",
                "card.skills[0].tags"
            ]
        );
    }

    #[test]
    fn a_v0_3_card_is_told_apart() {
        let mut old = card();
        old.as_object_mut()
            .map(|map| map.remove("supportedInterfaces"));
        old["url"] = json!("https://weather.example.com/a2a");
        let errors = A2aCard::parse(old).expect_err("invalid");
        assert!(errors[0].message.contains("v0.3"), "{errors:?}");
    }
}
