//! The stdio transport: one JSON-RPC message per line on standard input, one answer per line on
//! standard output (nothing else is written there; logs go to standard error). The process is
//! one client's: `initialize` sets its handshake revision, or each request names the stateless
//! revision in its `_meta`.

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::McpServer;
use super::protocol::{self, Message, Revision, RpcError, code};

/// The longest message read; a longer line is refused and skipped.
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// Serve `input` until it ends.
pub async fn serve(
    server: &McpServer,
    mut input: impl AsyncBufRead + Unpin,
    mut output: impl AsyncWrite + Unpin,
) -> anyhow::Result<()> {
    let mut handshake: Option<Revision> = None;
    loop {
        let mut line = Vec::new();
        let read = (&mut input)
            .take(MAX_MESSAGE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if read == 0 {
            return Ok(());
        }
        let answer = if line.len() > MAX_MESSAGE_BYTES && line.last() != Some(&b'\n') {
            skip_line(&mut input).await?;
            Some(
                RpcError::invalid_request(format!(
                    "a message is at most {MAX_MESSAGE_BYTES} bytes"
                ))
                .response(&Value::Null),
            )
        } else if line.iter().all(u8::is_ascii_whitespace) {
            None
        } else {
            answer_line(server, &line, &mut handshake).await
        };
        if let Some(answer) = answer {
            let mut bytes = answer.to_string().into_bytes();
            bytes.push(b'\n');
            output.write_all(&bytes).await?;
            output.flush().await?;
        }
    }
}

/// Read and drop the rest of an over-long line.
async fn skip_line(input: &mut (impl AsyncBufRead + Unpin)) -> std::io::Result<()> {
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(());
        }
        match buffer.iter().position(|byte| *byte == b'\n') {
            Some(at) => {
                input.consume(at + 1);
                return Ok(());
            }
            None => {
                let length = buffer.len();
                input.consume(length);
            }
        }
    }
}

async fn answer_line(
    server: &McpServer,
    line: &[u8],
    handshake: &mut Option<Revision>,
) -> Option<Value> {
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(err) => {
            let error = RpcError::new(code::PARSE_ERROR, format!("parse error: {err}"));
            return Some(error.response(&Value::Null));
        }
    };
    let (id, method, params) = match Message::parse(value) {
        Ok(Message::Request { id, method, params }) => (id, method, params),
        Ok(Message::Notification { .. } | Message::Response) => return None,
        Err((id, error)) => return Some(error.response(&id)),
    };
    let result = if protocol::request_meta(params.as_ref())
        .is_some_and(|meta| meta.contains_key(protocol::META_PROTOCOL_VERSION))
    {
        match protocol::modern_revision(params.as_ref()) {
            Ok(revision) => server.answer(&method, params.as_ref(), revision).await,
            Err(error) => Err(error),
        }
    } else if method == "initialize" {
        let requested = params
            .as_ref()
            .and_then(|params| params.get("protocolVersion"))
            .and_then(Value::as_str);
        let revision = Revision::negotiate(requested);
        *handshake = Some(revision);
        Ok(McpServer::initialize(revision))
    } else {
        match *handshake {
            Some(revision) => server.answer(&method, params.as_ref(), revision).await,
            None => Err(RpcError::invalid_request(
                "send initialize first, or a stateless request (params._meta with \
                 io.modelcontextprotocol/protocolVersion 2026-07-28)",
            )),
        }
    };
    Some(match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => error.response(&id),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;

    use super::*;
    use crate::error::ApiError;
    use crate::mcp::source::Source;

    /// A registry with one agent, `com.example.weather`.
    struct OneAgent;

    #[async_trait]
    impl Source for OneAgent {
        async fn search(&self, _body: &Value) -> Result<Value, ApiError> {
            Ok(json!({"agents": [], "total": 0, "limit": 5, "next_cursor": null}))
        }
        async fn record(&self, identifier: &str) -> Result<Value, ApiError> {
            match identifier {
                "com.example.weather" => Ok(json!({"id": "agt_1", "package_name": identifier})),
                _ => Err(ApiError::agent_not_found(identifier)),
            }
        }
        async fn card(&self, _identifier: &str) -> Result<Value, ApiError> {
            Ok(json!({"name": "Weather"}))
        }
        async fn server_json(&self, identifier: &str) -> Result<Value, ApiError> {
            Err(ApiError::agent_not_found(identifier))
        }
        async fn registry_card(&self) -> Result<Value, ApiError> {
            Ok(json!({"name": "Agent Registry"}))
        }
        fn base_url(&self) -> &str {
            "http://registry.test"
        }
    }

    async fn exchange(input: &str) -> Vec<Value> {
        let server = McpServer::new(Arc::new(OneAgent));
        let mut output = Vec::new();
        serve(&server, input.as_bytes(), &mut output)
            .await
            .expect("served");
        String::from_utf8(output)
            .expect("utf-8")
            .lines()
            .map(|line| serde_json::from_str(line).expect("one JSON message per line"))
            .collect()
    }

    #[tokio::test]
    async fn a_session_over_stdio_answers_each_request_on_its_own_line() {
        let answers = exchange(concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"agent://com.example.weather"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"agent://com.example.nope"}}"#,
            "\n",
        ))
        .await;

        assert_eq!(answers.len(), 3, "{answers:?}");
        assert_eq!(answers[0]["result"]["protocolVersion"], "2025-06-18");
        assert_eq!(answers[1]["id"], 2);
        assert!(
            answers[1]["result"]["contents"][0]["text"]
                .as_str()
                .is_some_and(|text| text.contains("agt_1"))
        );
        assert_eq!(answers[2]["error"]["code"], code::RESOURCE_NOT_FOUND);
    }

    #[tokio::test]
    async fn garbage_and_requests_before_initialize_get_errors_and_the_loop_goes_on() {
        let long = format!("{{\"x\": \"{}\"}}\n", "a".repeat(MAX_MESSAGE_BYTES));
        let input = format!(
            "not json\n{long}{}\n{}\n",
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":"b","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
        );

        let answers = exchange(&input).await;

        assert_eq!(answers.len(), 4, "{answers:?}");
        assert_eq!(answers[0]["error"]["code"], code::PARSE_ERROR);
        assert_eq!(answers[1]["error"]["code"], code::INVALID_REQUEST);
        assert_eq!(answers[2]["id"], "a");
        assert_eq!(answers[2]["error"]["code"], code::INVALID_REQUEST);
        assert_eq!(answers[3]["id"], "b");
        assert_eq!(answers[3]["result"]["resultType"], "complete");
        assert_eq!(answers[3]["result"]["tools"][0]["name"], "search_agents");
    }
}
