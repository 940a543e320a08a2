//! Checking a capability's input against its `input_schema`: the common JSON Schema subset
//! agents publish — `type` (one or a list; `integer` is a number without a fraction), `enum`,
//! `const`, `required`, `properties`, `additionalProperties`, `items`, `minItems`/`maxItems`,
//! `minLength`/`maxLength`, `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum`. Other
//! keywords (`$ref`, `pattern`, `oneOf`, formats…) are not checked: the agent still judges its
//! input. No schema is ever fetched.

use serde_json::{Map, Value};

use crate::domain::FieldError;

/// Schemas nested deeper than this are not descended into.
const MAX_DEPTH: usize = 32;
/// Errors reported at most.
const MAX_ERRORS: usize = 50;

/// Every way `value` breaks `schema`, each at its path below `root` (`input.city`,
/// `input.days[2]`).
pub fn validate(schema: &Value, value: &Value, root: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    check(schema, value, root, 0, &mut errors);
    errors.truncate(MAX_ERRORS);
    errors
}

fn check(schema: &Value, value: &Value, path: &str, depth: usize, errors: &mut Vec<FieldError>) {
    if depth > MAX_DEPTH || errors.len() >= MAX_ERRORS {
        return;
    }
    let schema = match schema {
        Value::Bool(false) => {
            errors.push(FieldError::new(path, "is not allowed"));
            return;
        }
        Value::Object(schema) => schema,
        _ => return,
    };
    if let Some(expected) = schema.get("type") {
        let names: Vec<&str> = match expected {
            Value::String(name) => vec![name.as_str()],
            Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.is_empty() && !names.iter().any(|name| has_type(value, name)) {
            errors.push(FieldError::new(
                path,
                format!("must be {}, not {}", names.join(" or "), type_of(value)),
            ));
            return;
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        let shown: Vec<String> = allowed.iter().take(20).map(Value::to_string).collect();
        errors.push(FieldError::new(
            path,
            format!("must be one of {}", shown.join(", ")),
        ));
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        errors.push(FieldError::new(path, format!("must be {constant}")));
    }
    match value {
        Value::Object(object) => check_object(schema, object, path, depth, errors),
        Value::Array(items) => check_array(schema, items, path, depth, errors),
        Value::String(text) => check_length(schema, text.chars().count(), path, errors),
        Value::Number(number) => {
            if let Some(n) = number.as_f64() {
                check_range(schema, n, path, errors);
            }
        }
        _ => {}
    }
}

fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value
            .as_f64()
            .is_some_and(|n| n.fract() == 0.0 && n.is_finite()),
        // An unknown type name constrains nothing.
        _ => true,
    }
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn check_object(
    schema: &Map<String, Value>,
    object: &Map<String, Value>,
    path: &str,
    depth: usize,
    errors: &mut Vec<FieldError>,
) {
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(Value::Array(required)) = schema.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            if !object.contains_key(name) {
                errors.push(FieldError::new(format!("{path}.{name}"), "is required"));
            }
        }
    }
    for (name, item) in object {
        let item_path = format!("{path}.{name}");
        match properties.and_then(|p| p.get(name)) {
            Some(item_schema) => check(item_schema, item, &item_path, depth + 1, errors),
            None => match schema.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    errors.push(FieldError::new(item_path, "is not an accepted field"));
                }
                Some(extra @ Value::Object(_)) => check(extra, item, &item_path, depth + 1, errors),
                _ => {}
            },
        }
    }
}

fn check_array(
    schema: &Map<String, Value>,
    items: &[Value],
    path: &str,
    depth: usize,
    errors: &mut Vec<FieldError>,
) {
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
        && (items.len() as u64) < min
    {
        errors.push(FieldError::new(
            path,
            format!("must have at least {min} items"),
        ));
    }
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
        && items.len() as u64 > max
    {
        errors.push(FieldError::new(
            path,
            format!("must have at most {max} items"),
        ));
    }
    if let Some(item_schema) = schema
        .get("items")
        .filter(|s| s.is_object() || s.is_boolean())
    {
        for (index, item) in items.iter().enumerate() {
            check(
                item_schema,
                item,
                &format!("{path}[{index}]"),
                depth + 1,
                errors,
            );
        }
    }
}

fn check_length(
    schema: &Map<String, Value>,
    chars: usize,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && (chars as u64) < min
    {
        errors.push(FieldError::new(
            path,
            format!("must be at least {min} characters"),
        ));
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && chars as u64 > max
    {
        errors.push(FieldError::new(
            path,
            format!("must be at most {max} characters"),
        ));
    }
}

fn check_range(schema: &Map<String, Value>, n: f64, path: &str, errors: &mut Vec<FieldError>) {
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    if let Some(min) = bound("minimum").filter(|min| n < *min) {
        errors.push(FieldError::new(path, format!("must be at least {min}")));
    }
    if let Some(max) = bound("maximum").filter(|max| n > *max) {
        errors.push(FieldError::new(path, format!("must be at most {max}")));
    }
    if let Some(min) = bound("exclusiveMinimum").filter(|min| n <= *min) {
        errors.push(FieldError::new(path, format!("must be greater than {min}")));
    }
    if let Some(max) = bound("exclusiveMaximum").filter(|max| n >= *max) {
        errors.push(FieldError::new(path, format!("must be less than {max}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(schema: Value, value: Value) -> Vec<String> {
        validate(&schema, &value, "input")
            .into_iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn types_required_and_properties_are_checked() {
        let schema = json!({"type": "object", "required": ["city", "days"],
            "properties": {"city": {"type": "string", "minLength": 1},
                           "days": {"type": "integer", "minimum": 1, "maximum": 14},
                           "units": {"enum": ["metric", "imperial"]}}});
        assert!(fields(schema.clone(), json!({"city": "Paris", "days": 3})).is_empty());
        assert!(fields(schema.clone(), json!({"city": "Paris", "days": 3.0})).is_empty());
        assert_eq!(fields(schema.clone(), json!({"days": 3})), ["input.city"]);
        assert_eq!(
            fields(
                schema.clone(),
                json!({"city": 3, "days": 2.5, "units": "kelvin"})
            ),
            ["input.city", "input.days", "input.units"]
        );
        assert_eq!(
            fields(schema, json!({"city": "", "days": 30})),
            ["input.city", "input.days"]
        );
    }

    #[test]
    fn arrays_nested_objects_and_extra_fields_are_checked() {
        let schema = json!({"type": "object", "additionalProperties": false,
            "properties": {"tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                           "where": {"type": "object", "properties": {"lat": {"type": "number"}}}}});
        assert_eq!(
            fields(
                schema.clone(),
                json!({"tags": ["a", 1], "where": {"lat": "x"}, "x": 1})
            ),
            ["input.tags[1]", "input.where.lat", "input.x"]
        );
        assert_eq!(
            fields(schema, json!({"tags": ["a", "b", "c"]})),
            ["input.tags"]
        );
    }

    #[test]
    fn schemas_that_say_nothing_accept_everything() {
        for schema in [
            json!({}),
            json!(true),
            json!("junk"),
            json!({"type": "whatever"}),
        ] {
            assert!(fields(schema, json!({"anything": [1, 2]})).is_empty());
        }
        assert_eq!(fields(json!(false), json!({})), ["input"]);
    }

    #[test]
    fn deep_schemas_stop_at_the_depth_limit() {
        let mut schema = json!({"type": "string"});
        let mut value = json!(1);
        for _ in 0..100 {
            schema = json!({"type": "object", "properties": {"a": schema}});
            value = json!({"a": value});
        }
        assert!(fields(schema, value).is_empty());
    }
}
