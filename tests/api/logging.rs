//! Logs written to a file or a pipe (not a terminal) are plain text: no colour codes.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-harbor"))
        .arg("serve")
        .env_remove("MCP_HARBOR_CONFIG")
        .env_remove("RUST_LOG")
        .env("MCP_HARBOR__SERVER__PORT", "0")
        .env("MCP_HARBOR__STORAGE__DATA_DIR", dir.path())
        .env("MCP_HARBOR__LOG__FILTER", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut serving = false;
    for line in stdout.lines() {
        if line.unwrap().contains("serving MCP at") {
            serving = true;
            break;
        }
    }
    let _ = child.kill();
    let mut stderr = Vec::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    let _ = child.wait();
    assert!(
        serving,
        "the server started: {}",
        String::from_utf8_lossy(&stderr)
    );
    let text = String::from_utf8_lossy(&stderr);
    assert!(text.contains("INFO"), "info lines were logged: {text}");
    assert!(!stderr.contains(&0x1b), "no ANSI escape codes: {text:?}");
}
