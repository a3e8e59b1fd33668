//! `mcp-harbor admin …` against a real server: the built binary, run as a user would, with its
//! stdout, stderr and exit code checked.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::helpers::{spawn_app, TestApp, ADMIN_TOKEN};
use serde_json::{json, Value};

/// What one run of the binary produced.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }

    #[track_caller]
    fn ok(self) -> Run {
        assert_eq!(self.code, 0, "expected success: {self:?}");
        self
    }

    #[track_caller]
    fn fails(self, code: i32) -> Run {
        assert_eq!(self.code, code, "expected exit code {code}: {self:?}");
        assert!(
            self.stdout.is_empty(),
            "nothing on stdout on failure: {self:?}"
        );
        assert!(
            self.stderr.starts_with("error: "),
            "an error line on stderr: {self:?}"
        );
        self
    }
}

/// Runs `mcp-harbor <args>` with exactly `env` (plus PATH) from a blocking thread: the server
/// runs on this test's runtime. Every run is checked never to print the admin token.
async fn harbor(args: &[&str], env: &[(&str, &str)]) -> Run {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let run = actix_rt::task::spawn_blocking(move || {
        let output = Command::new(env!("CARGO_BIN_EXE_mcp-harbor"))
            .args(&args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env)
            .stdin(Stdio::null())
            .output()
            .expect("the binary runs");
        Run {
            code: output.status.code().expect("exited, not killed"),
            stdout: String::from_utf8(output.stdout).unwrap(),
            stderr: String::from_utf8(output.stderr).unwrap(),
        }
    })
    .await
    .unwrap();
    assert!(
        !run.stdout.contains(ADMIN_TOKEN) && !run.stderr.contains(ADMIN_TOKEN),
        "the token leaked: {run:?}"
    );
    run
}

/// `mcp-harbor admin <args>` against `app`, URL and token from the environment.
async fn admin(app: &TestApp, args: &[&str]) -> Run {
    let mut full = vec!["admin"];
    full.extend_from_slice(args);
    harbor(
        &full,
        &[
            ("MCP_HARBOR_ADMIN_URL", &app.base),
            ("MCP_HARBOR_ADMIN_TOKEN", ADMIN_TOKEN),
        ],
    )
    .await
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[actix_rt::test]
async fn tenant_lifecycle() {
    let app = spawn_app().await;

    let created = admin(
        &app,
        &[
            "tenant",
            "create",
            "acme",
            "--display-name",
            "Acme Corp",
            "--catalog",
            "demo",
            "--max-sessions",
            "5",
            "--requests-per-minute",
            "120",
            "--allowed-origin",
            "https://app.acme.example",
        ],
    )
    .await
    .ok();
    let tenant = created.json();
    assert_eq!(tenant["slug"], "acme");
    assert_eq!(tenant["display_name"], "Acme Corp");
    assert_eq!(tenant["status"], "active");
    assert_eq!(tenant["catalogs"], json!(["demo"]));
    assert_eq!(
        tenant["limits"],
        json!({ "max_sessions": 5, "requests_per_minute": 120, "allowed_origins": ["https://app.acme.example"] })
    );
    assert_eq!(tenant["mcp_path"], "/t/acme/mcp");
    assert!(
        created.stdout.contains("\n  \"slug\": \"acme\""),
        "pretty-printed: {}",
        created.stdout
    );

    // The new tenant serves MCP.
    app.open_session("acme", "2025-06-18", json!({})).await;

    let listed = admin(&app, &["tenant", "list"]).await.ok().json();
    let slugs: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["slug"].as_str().unwrap())
        .collect();
    assert_eq!(slugs, ["acme", "demo", "other"]);

    let got = admin(&app, &["tenant", "get", "acme"]).await.ok().json();
    assert_eq!(got, tenant);

    let suspended = admin(&app, &["tenant", "suspend", "acme"])
        .await
        .ok()
        .json();
    assert_eq!(suspended["status"], "suspended");
    assert_eq!(
        admin(&app, &["tenant", "get", "acme"]).await.ok().json()["status"],
        "suspended"
    );
    let mcp = app
        .post(
            "acme",
            None,
            &crate::helpers::initialize_body("2025-06-18", json!({})),
        )
        .send()
        .await
        .unwrap();
    assert_ne!(mcp.status(), 200, "a suspended tenant does not serve");

    let resumed = admin(&app, &["tenant", "resume", "acme"]).await.ok().json();
    assert_eq!(resumed["status"], "active");
    app.open_session("acme", "2025-06-18", json!({})).await;

    let deleted = admin(&app, &["tenant", "delete", "acme"]).await.ok();
    assert_eq!(deleted.stdout, "");
    assert_eq!(deleted.stderr.trim(), "deleted tenant acme");

    let gone = admin(&app, &["tenant", "get", "acme"]).await.fails(1);
    assert_eq!(
        gone.stderr.trim(),
        "error: no tenant \"acme\" (HTTP 404 not_found)"
    );
    admin(&app, &["tenant", "delete", "acme"]).await.fails(1);

    // The API's validation errors come through with their field.
    let invalid = admin(&app, &["tenant", "create", "bad", "--max-sessions", "0"])
        .await
        .fails(1);
    assert_eq!(invalid.stderr.trim(), "error: limits.max_sessions: must be at least 1 (HTTP 422 invalid, field limits.max_sessions)");
    let taken = admin(&app, &["tenant", "create", "demo"]).await.fails(1);
    assert!(
        taken.stderr.contains("already exists") && taken.stderr.contains("HTTP 409 conflict"),
        "{taken:?}"
    );
}

#[actix_rt::test]
async fn lists_follow_every_page() {
    let app = spawn_app().await;
    for slug in ["t1", "t2", "t3", "t4"] {
        admin(&app, &["tenant", "create", slug]).await.ok();
    }
    let everything = admin(&app, &["tenant", "list"]).await.ok().json();
    let paged = admin(&app, &["--page-size", "1", "tenant", "list"])
        .await
        .ok()
        .json();
    assert_eq!(everything.as_array().unwrap().len(), 6);
    assert_eq!(paged, everything);
    let paged = admin(&app, &["tenant", "list", "--page-size", "4"])
        .await
        .ok()
        .json();
    assert_eq!(paged, everything);
}

#[actix_rt::test]
async fn catalog_entries_from_json_and_yaml_files() {
    let app = spawn_app().await;
    let dir = tempfile::tempdir().unwrap();
    admin(&app, &["tenant", "create", "shop"]).await.ok();

    // A tool from JSON: the generated secret shows once.
    let tool = write(
        dir.path(),
        "lookup.json",
        &json!({
            "name": "lookup_order",
            "description": "Finds an order.",
            "input_schema": { "type": "object", "properties": { "order": { "type": "string" } } },
            "webhook": { "url": "http://127.0.0.1:9/hook", "timeout_ms": 2000 }
        })
        .to_string(),
    );
    let added = admin(&app, &["tool", "add", "shop", "--file", &tool])
        .await
        .ok()
        .json();
    assert_eq!(added["name"], "lookup_order");
    assert_eq!(added["webhook"]["url"], "http://127.0.0.1:9/hook");
    let secret = added["webhook"]["secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_") && secret.len() > 20, "{added}");

    let listed = admin(&app, &["tool", "list", "shop"]).await.ok().json();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["name"], "lookup_order");
    assert_eq!(listed[0]["webhook"]["secret"], "whsec_…");
    assert_eq!(
        admin(&app, &["tool", "get", "shop", "lookup_order"])
            .await
            .ok()
            .json(),
        listed[0]
    );

    // It reaches MCP clients.
    let mut client = app.open_session("shop", "2025-06-18", json!({})).await;
    let tools = client.result("tools/list", json!({})).await;
    assert!(
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "lookup_order"),
        "{tools}"
    );

    // Adding it again conflicts; --replace updates it (keeping the secret).
    let again = admin(&app, &["tool", "add", "shop", "-f", &tool])
        .await
        .fails(1);
    assert!(
        again
            .stderr
            .contains("tool \"lookup_order\" already exists"),
        "{again:?}"
    );
    let revised = write(
        dir.path(),
        "lookup-v2.yaml",
        "name: lookup_order\ndescription: Finds an order (v2).\nwebhook:\n  url: http://127.0.0.1:9/hook\n",
    );
    let replaced = admin(
        &app,
        &["tool", "add", "shop", "--file", &revised, "--replace"],
    )
    .await
    .ok()
    .json();
    assert_eq!(replaced["description"], "Finds an order (v2).");
    assert_eq!(replaced["webhook"]["secret"], "whsec_…");

    let removed = admin(&app, &["tool", "remove", "shop", "lookup_order"])
        .await
        .ok();
    assert_eq!(removed.stdout, "");
    assert_eq!(
        removed.stderr.trim(),
        "removed tool lookup_order from tenant shop"
    );
    assert_eq!(
        admin(&app, &["tool", "list", "shop"]).await.ok().json(),
        json!([])
    );
    admin(&app, &["tool", "remove", "shop", "lookup_order"])
        .await
        .fails(1);

    // A prompt from YAML.
    let prompt = write(
        dir.path(),
        "summarize.yaml",
        r#"
name: summarize
description: Summarize a text.
arguments:
  - name: text
    description: What to summarize
    required: true
messages:
  - role: user
    text: |
      Summarize this in three sentences:

      {{text}}
"#,
    );
    let added = admin(&app, &["prompt", "add", "shop", "--file", &prompt])
        .await
        .ok()
        .json();
    assert_eq!(added["name"], "summarize");
    assert_eq!(
        added["arguments"],
        json!([{ "name": "text", "description": "What to summarize", "required": true }])
    );
    assert_eq!(
        added["messages"][0]["text"],
        "Summarize this in three sentences:\n\n{{text}}\n"
    );
    let listed = admin(&app, &["prompt", "list", "shop"]).await.ok().json();
    assert_eq!(listed, json!([added]));
    let got = client
        .result(
            "prompts/get",
            json!({ "name": "summarize", "arguments": { "text": "Rust" } }),
        )
        .await;
    assert_eq!(
        got["messages"][0]["content"]["text"],
        "Summarize this in three sentences:\n\nRust\n"
    );
    admin(&app, &["prompt", "remove", "shop", "summarize"])
        .await
        .ok();
    assert_eq!(
        admin(&app, &["prompt", "list", "shop"]).await.ok().json(),
        json!([])
    );

    // A resource (.yml) and a resource template (JSON without an extension).
    let resource = write(
        dir.path(),
        "intro.yml",
        "name: intro\nuri: docs://handbook/intro\nmime_type: text/markdown\ntext: \"# Welcome\"\n",
    );
    admin(&app, &["resource", "add", "shop", "--file", &resource])
        .await
        .ok();
    let listed = admin(&app, &["resource", "list", "shop"]).await.ok().json();
    assert_eq!(
        listed,
        json!([{ "name": "intro", "uri": "docs://handbook/intro", "mime_type": "text/markdown", "text": "# Welcome" }])
    );
    let template = write(
        dir.path(),
        "ticket",
        &json!({ "name": "ticket", "uri_template": "tickets://{id}", "mime_type": "text/plain",
                 "resolver": { "type": "text", "text": "Ticket {id}" } })
        .to_string(),
    );
    admin(
        &app,
        &["resource-template", "add", "shop", "--file", &template],
    )
    .await
    .ok();
    let read = client
        .result("resources/read", json!({ "uri": "tickets://42" }))
        .await;
    assert_eq!(read["contents"][0]["text"], "Ticket 42");
    admin(&app, &["resource-template", "remove", "shop", "ticket"])
        .await
        .ok();
    admin(&app, &["resource", "remove", "shop", "intro"])
        .await
        .ok();
    assert_eq!(
        admin(&app, &["resource", "list", "shop"]).await.ok().json(),
        json!([])
    );
    assert_eq!(
        admin(&app, &["resource-template", "list", "shop"])
            .await
            .ok()
            .json(),
        json!([])
    );

    // An invalid definition: the API names the field.
    let bad = write(
        dir.path(),
        "bad.json",
        r#"{"name": "x", "webhook": {"url": "http://127.0.0.1:9/hook"}}"#,
    );
    let refused = admin(&app, &["tool", "add", "shop", "--file", &bad])
        .await
        .fails(1);
    assert!(
        refused.stderr.contains("description: is required")
            && refused.stderr.contains("field description"),
        "{refused:?}"
    );
    let bad_url = write(
        dir.path(),
        "bad-url.yaml",
        "name: x\ndescription: d\nwebhook:\n  url: ftp://example.com/hook\n",
    );
    let refused = admin(&app, &["tool", "add", "shop", "--file", &bad_url])
        .await
        .fails(1);
    assert!(refused.stderr.contains("field webhook.url"), "{refused:?}");

    // Local problems with the file exit 2 without calling the API.
    let missing = dir.path().join("nope.json").display().to_string();
    let unreadable = admin(&app, &["tool", "add", "shop", "--file", &missing])
        .await
        .fails(2);
    assert!(
        unreadable.stderr.contains("cannot read the tool file"),
        "{unreadable:?}"
    );
    let broken = write(dir.path(), "broken.yaml", "name: [unclosed\n");
    let unparsable = admin(&app, &["prompt", "add", "shop", "--file", &broken])
        .await
        .fails(2);
    assert!(
        unparsable.stderr.contains("is not valid YAML"),
        "{unparsable:?}"
    );
    let list = write(dir.path(), "list.json", "[1, 2]");
    admin(&app, &["prompt", "add", "shop", "--file", &list])
        .await
        .fails(2);

    // Entries of a missing tenant.
    let gone = admin(&app, &["tool", "list", "nobody"]).await.fails(1);
    assert_eq!(
        gone.stderr.trim(),
        "error: no tenant \"nobody\" (HTTP 404 not_found)"
    );
}

#[actix_rt::test]
async fn credentials_and_connection_failures() {
    let app = spawn_app().await;

    // No token: exit 2 before any request.
    let none = harbor(&["admin", "--url", &app.base, "tenant", "list"], &[])
        .await
        .fails(2);
    assert!(none.stderr.contains("no admin token"), "{none:?}");

    // A wrong token: the API's 401, exit 1.
    let wrong = harbor(
        &[
            "admin",
            "--url",
            &app.base,
            "--token",
            "not-the-token",
            "tenant",
            "list",
        ],
        &[],
    )
    .await
    .fails(1);
    assert_eq!(
        wrong.stderr.trim(),
        "error: a valid admin bearer token is required (HTTP 401 unauthorized)"
    );
    assert!(!wrong.stderr.contains("not-the-token"));

    // --token and --url work as flags too, after the subcommand as well.
    let listed = harbor(
        &[
            "admin",
            "tenant",
            "list",
            "--url",
            &app.base,
            "--token",
            ADMIN_TOKEN,
        ],
        &[],
    )
    .await
    .ok()
    .json();
    assert_eq!(listed.as_array().unwrap().len(), 2);
    // The API's URL is accepted as well as the server's.
    let api_url = format!("{}/admin/v1/", app.base);
    harbor(
        &[
            "admin",
            "--url",
            &api_url,
            "--token",
            ADMIN_TOKEN,
            "tenant",
            "get",
            "demo",
        ],
        &[],
    )
    .await
    .ok();

    // Nothing listening: exit 2 with a clear message.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let closed = format!("http://127.0.0.1:{port}");
    let down = harbor(
        &["admin", "tenant", "list"],
        &[
            ("MCP_HARBOR_ADMIN_URL", &closed),
            ("MCP_HARBOR_ADMIN_TOKEN", ADMIN_TOKEN),
        ],
    )
    .await
    .fails(2);
    assert!(
        down.stderr
            .starts_with(&format!("error: cannot reach the admin API at {closed}: ")),
        "{down:?}"
    );
    assert!(down.stderr.to_lowercase().contains("refused"), "{down:?}");

    // A malformed --url: exit 2.
    let elsewhere = harbor(
        &[
            "admin",
            "--url",
            "not a url",
            "--token",
            ADMIN_TOKEN,
            "tenant",
            "list",
        ],
        &[],
    )
    .await
    .fails(2);
    assert!(elsewhere.stderr.contains("is not a URL"), "{elsewhere:?}");

    // Help never shows the token from the environment.
    let help = harbor(
        &["admin", "--help"],
        &[("MCP_HARBOR_ADMIN_TOKEN", ADMIN_TOKEN)],
    )
    .await
    .ok();
    assert!(
        help.stdout.contains("MCP_HARBOR_ADMIN_TOKEN") && help.stdout.contains("tenant"),
        "{help:?}"
    );
}

#[actix_rt::test]
async fn sealing_keys_are_generated_counted_and_rotated() {
    // `keys generate` needs no server nor token, and prints a key the server accepts.
    let generated = harbor(&["admin", "keys", "generate", "--id", "k2"], &[])
        .await
        .ok();
    let spec = generated.stdout.trim().to_string();
    assert!(spec.starts_with("k2:"), "{generated:?}");
    assert!(mcp_harbor::auth::Sealer::from_specs(&[&spec]).is_ok());
    harbor(&["admin", "keys", "generate", "--id", "a.b"], &[])
        .await
        .fails(2);

    let old = mcp_harbor::auth::Sealer::generate_spec("k1");
    let keys = vec![secrecy::SecretString::from(old)];
    let app = crate::helpers::spawn_app_with(move |c| c.auth.sealing_keys = keys).await;
    app.create_tenant(json!({ "slug": "acme" })).await;
    let tool = json!({ "name": "hook", "description": "d",
        "webhook": { "url": "http://127.0.0.1:9/hook" } });
    let r = app
        .admin(reqwest::Method::POST, "/tenants/acme/tools")
        .json(&tool)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let status = admin(&app, &["keys", "status"]).await.ok().json();
    assert_eq!(status["sealing_key"], "k1");
    assert_eq!(status["keys"][0]["values"], 1, "{status}");
    // Already under the first key: the job finds nothing to re-seal, and --wait prints the counts.
    let rotated = admin(&app, &["keys", "rotate", "--wait"]).await.ok().json();
    assert_eq!(rotated["rotation"]["state"], "finished", "{rotated}");
    assert_eq!(rotated["rotation"]["resealed"], 0);
    assert_eq!(rotated["keys"][0]["values"], 1);
    app.handle.stop(false).await;
}

#[actix_rt::test]
async fn a_rotation_that_leaves_values_under_an_old_key_exits_1() {
    // A webhook secret sealed under k1; the server then runs with k2 alone (k1 dropped too
    // early): the rotation cannot re-seal it, and `--wait` must not report success (a script's
    // next step removes the old key).
    let shared = tempfile::tempdir().unwrap();
    let dir = shared.path().display().to_string();
    let with_key = |spec: String| {
        let dir = dir.clone();
        move |c: &mut mcp_harbor::config::Config| {
            c.storage.data_dir = dir;
            c.auth.sealing_keys = vec![secrecy::SecretString::from(spec)];
        }
    };
    let first =
        crate::helpers::spawn_app_with(with_key(mcp_harbor::auth::Sealer::generate_spec("k1")))
            .await;
    first
        .admin(reqwest::Method::POST, "/tenants")
        .json(&json!({ "slug": "acme" }))
        .send()
        .await
        .unwrap();
    let r = first
        .admin(reqwest::Method::POST, "/tenants/acme/tools")
        .json(&json!({ "name": "hook", "description": "d",
            "webhook": { "url": "http://127.0.0.1:9/hook" } }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    first.handle.stop(false).await;
    let second =
        crate::helpers::spawn_app_with(with_key(mcp_harbor::auth::Sealer::generate_spec("k2")))
            .await;
    let run = admin(&second, &["keys", "rotate", "--wait"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("old keys"), "{run:?}");
    let status: Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(
        status["keys"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["id"] == "k1" && k["values"] == 1),
        "{status}"
    );
    second.handle.stop(false).await;
}
