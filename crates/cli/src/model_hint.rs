//! The next step when no model server answers: the command from the README's quick start
//! that starts a small real model where agentplane looks. Text only; whether a server
//! answers is the runtime's to find out.

/// The command that starts `scripts/local-model.sh` on `base_url`'s port, when `error`
/// says that `base_url` could not be reached and `base_url` is a port of this machine
/// (anything else is not ours to start).
pub fn local_model_command(base_url: &str, error: &str) -> Option<String> {
    if !error.contains(&format!("cannot reach the model server at {base_url}")) {
        return None;
    }
    let rest = base_url
        .strip_prefix("http://127.0.0.1:")
        .or_else(|| base_url.strip_prefix("http://localhost:"))?;
    let port: u16 = rest
        .trim_end_matches('/')
        .strip_suffix("/v1")?
        .parse()
        .ok()?;
    // The script's default port is agentplane's default model server (Ollama's port).
    Some(if port == 11434 {
        "./scripts/local-model.sh".to_owned()
    } else {
        format!("AGENTPLANE_LOCAL_MODEL_PORT={port} ./scripts/local-model.sh")
    })
}

/// One line for a person: the command, what it starts, and where it is explained.
pub fn describe(command: &str) -> String {
    format!(
        "start a small local model there: {command} (from agentplane's clone; see the \
         README's quick start)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const REFUSED: &str = "cannot reach the model server at http://127.0.0.1:11434/v1: \
                           tcp connect error: Connection refused";

    #[test]
    fn the_default_server_gets_the_plain_command() {
        assert_eq!(
            local_model_command("http://127.0.0.1:11434/v1", REFUSED).as_deref(),
            Some("./scripts/local-model.sh")
        );
    }

    #[test]
    fn another_local_port_is_passed_to_the_script() {
        let error = "cannot reach the model server at http://localhost:8690/v1: refused";
        assert_eq!(
            local_model_command("http://localhost:8690/v1", error).as_deref(),
            Some("AGENTPLANE_LOCAL_MODEL_PORT=8690 ./scripts/local-model.sh")
        );
    }

    #[test]
    fn no_hint_for_other_errors_or_remote_servers() {
        let answered = "the model server answered 500: boom";
        assert_eq!(
            local_model_command("http://127.0.0.1:11434/v1", answered),
            None
        );
        let remote = "cannot reach the model server at https://api.example.com/v1: dns";
        assert_eq!(
            local_model_command("https://api.example.com/v1", remote),
            None
        );
        // The error names another server than the configured one.
        assert_eq!(
            local_model_command("http://127.0.0.1:9999/v1", REFUSED),
            None
        );
    }
}
