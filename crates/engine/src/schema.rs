//! JSON Schema validation of tool arguments and of `finish_task` results.
//!
//! Schemas come from agent definitions and, later, from MCP servers, so a schema that
//! does not compile is a clear error of its source, never a panic. Validation messages
//! go back to the model, so they name the failing location and stay short.

use serde_json::Value;

/// A compiled schema.
pub struct Schema {
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Schema")
    }
}

impl Schema {
    /// Compiles a schema; the error names what is wrong with it.
    pub fn compile(schema: &Value) -> Result<Self, String> {
        jsonschema::validator_for(schema)
            .map(|validator| Self { validator })
            .map_err(|e| format!("invalid JSON Schema: {e}"))
    }

    /// Checks an instance; on failure, one line per problem (at most 8).
    pub fn check(&self, instance: &Value) -> Result<(), String> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(instance)
            .take(8)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("at {at}: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_missing_and_mistyped_fields() {
        let schema = Schema::compile(&json!({
            "type": "object",
            "properties": {"summary": {"type": "string"}},
            "required": ["summary"]
        }))
        .expect("compiles");
        assert!(schema.check(&json!({"summary": "ok"})).is_ok());
        let missing = schema.check(&json!({})).expect_err("missing");
        assert!(missing.contains("summary"), "{missing}");
        let mistyped = schema.check(&json!({"summary": 3})).expect_err("mistyped");
        assert!(mistyped.contains("/summary"), "{mistyped}");
    }

    #[test]
    fn a_broken_schema_is_an_error_not_a_panic() {
        assert!(Schema::compile(&json!({"type": 12})).is_err());
    }
}
