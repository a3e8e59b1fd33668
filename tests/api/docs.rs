//! The documentation checked against the code: every configuration key, metric and CLI flag the
//! docs name exists, and the two references (docs/configuration.md, docs/observability.md) list
//! every configuration key and every metric the server has. The truth comes from the code itself:
//! configuration keys from `Config::default()` serialised (and, for the secrets serialisation
//! skips, from deserialising a config that sets the key), metrics from the `# TYPE` lines a
//! running server's `/metrics` serves, CLI flags from the binary's `--help`.
//!
//! What is read, in README.md, CONTRIBUTING.md, docs/*.md and helm/mcp-harbor/README.md:
//! - configuration keys: the first backticked cell of each row of a table whose header starts
//!   with `| key |` in docs/configuration.md (and its default cell, when that is JSON, against
//!   the compiled-in default); and every `MCP_HARBOR__SECTION__KEY` variable anywhere (write
//!   placeholders as `MCP_HARBOR__<SECTION>__<KEY>`);
//! - metrics: the first backticked cell of each row of a table whose header starts with
//!   `| metric |` in docs/observability.md, named as PromQL uses them (counters with `_total`,
//!   the info metric with `_info`, histograms bare); and every `mcp_harbor_…` / `mcp_server_…`
//!   word anywhere, which must be a sample name (histograms' `_bucket`, `_sum`, `_count` too);
//! - CLI flags: commands in code (fenced blocks and inline code spans) that start with
//!   `mcp-harbor`, a path ending in `/mcp-harbor`, or `cargo run --release --` (after any
//!   `VAR=value` words): their subcommands must exist and each `--flag` must be in the `--help` of
//!   the subcommand it follows. A placeholder (`…`, `...`, `<x>`, `[x]`) where a subcommand would
//!   be ends the command.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::helpers::spawn_app_with;

const METRICS_TOKEN: &str = "docs-check-metrics-token-0123";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every documentation file, with its path relative to the repository.
fn doc_files() -> Vec<(String, String)> {
    let mut paths = vec![
        root().join("README.md"),
        root().join("CONTRIBUTING.md"),
        root().join("helm/mcp-harbor/README.md"),
    ];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let name = path
                .strip_prefix(root())
                .unwrap_or(&path)
                .display()
                .to_string();
            (name, text)
        })
        .collect()
}

fn read_doc(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The rows of the tables in `text` whose header's first cell is `header`: each row's cells,
/// trimmed (the header and separator rows left out).
fn table_rows(text: &str, header: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if !line.starts_with('|') {
            inside = false;
            continue;
        }
        let cells: Vec<String> = line
            .trim_matches('|')
            .split(" | ")
            .map(|c| c.trim().to_string())
            .collect();
        if cells.first().map(String::as_str) == Some(header) {
            inside = true;
            continue;
        }
        if inside && !cells[0].starts_with("---") {
            rows.push(cells);
        }
    }
    rows
}

/// The text between the first pair of backticks of `cell`.
fn first_code(cell: &str) -> Option<&str> {
    let start = cell.find('`')? + 1;
    let len = cell[start..].find('`')?;
    Some(&cell[start..start + len])
}

/// Words of `text` that start with `prefix` where a word may start (not after a letter, digit or
/// `_`), with the characters in `allowed` that follow.
fn words_after(text: &str, prefix: &str, allowed: fn(char) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices(prefix) {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let word: String = text[at..].chars().take_while(|c| allowed(*c)).collect();
        out.push(word);
    }
    out
}

// ---- configuration ------------------------------------------------------------------------

/// `section.key` → default, from `Config::default()` (lists, maps and `tenants` are leaves).
fn config_leaves() -> BTreeMap<String, Value> {
    let defaults = serde_json::to_value(mcp_harbor::Config::default()).expect("Config serialises");
    let mut leaves = BTreeMap::new();
    for (section, value) in defaults.as_object().expect("Config is an object") {
        match value {
            Value::Object(fields) => {
                for (field, default) in fields {
                    leaves.insert(format!("{section}.{field}"), default.clone());
                }
            }
            other => {
                leaves.insert(section.clone(), other.clone());
            }
        }
    }
    leaves
}

/// Whether `key` is a field of the configuration: a serialised leaf, or (for the secrets that
/// serialisation skips) a `section.field` the deserialiser does not call an unknown field.
fn config_key_exists(key: &str, leaves: &BTreeMap<String, Value>) -> bool {
    if leaves.contains_key(key) {
        return true;
    }
    let Some((section, field)) = key.split_once('.') else {
        return false;
    };
    let mut config = serde_json::to_value(mcp_harbor::Config::default()).unwrap();
    let Some(fields) = config.get_mut(section).and_then(Value::as_object_mut) else {
        return false;
    };
    if field.contains('.') {
        return false;
    }
    fields.insert(
        field.into(),
        Value::String("docs-check-value-0123456789".into()),
    );
    match serde_json::from_value::<mcp_harbor::Config>(config) {
        Ok(_) => true,
        Err(e) => !e.to_string().contains("unknown field"),
    }
}

#[test]
fn the_configuration_reference_documents_every_key_and_only_keys_that_exist() {
    let leaves = config_leaves();
    let reference = read_doc("docs/configuration.md");
    let rows = table_rows(&reference, "key");
    let mut documented = BTreeSet::new();
    let mut problems = Vec::new();
    for row in &rows {
        let Some(key) = first_code(&row[0]) else {
            problems.push(format!("a row without a backticked key: {row:?}"));
            continue;
        };
        documented.insert(key.to_string());
        if !config_key_exists(key, &leaves) {
            problems.push(format!(
                "docs/configuration.md documents `{key}`, which is no setting"
            ));
            continue;
        }
        // The default column, when it is JSON, is the compiled-in default.
        let written = row.get(1).map(String::as_str).and_then(first_code);
        if let (Some(default), Some(Ok(said))) =
            (leaves.get(key), written.map(serde_json::from_str::<Value>))
        {
            if &said != default {
                problems.push(format!(
                    "`{key}`: documented default {said}, compiled-in {default}"
                ));
            }
        }
    }
    for key in leaves.keys() {
        if !documented.contains(key) {
            problems.push(format!(
                "`{key}` is a setting docs/configuration.md does not document"
            ));
        }
    }
    assert!(
        rows.len() > 50,
        "found only {} rows in docs/configuration.md",
        rows.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_environment_variable_the_docs_name_is_a_setting() {
    let leaves = config_leaves();
    let mut problems = Vec::new();
    for (file, text) in doc_files() {
        let allowed = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_';
        for word in words_after(&text, "MCP_HARBOR__", allowed) {
            let rest = word["MCP_HARBOR__".len()..].trim_end_matches('_');
            if rest.is_empty() {
                continue; // MCP_HARBOR__<SECTION>__<KEY>
            }
            let parts: Vec<&str> = rest.split("__").collect();
            let key = parts.join(".").to_lowercase();
            if parts.len() != 2 || !config_key_exists(&key, &leaves) {
                problems.push(format!("{file}: MCP_HARBOR__{rest} names no setting"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---- metrics ------------------------------------------------------------------------------

/// Family name → type, from the `# TYPE` lines of a `/metrics` answer.
fn metric_families(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_once(' '))
        .map(|(name, kind)| (name.to_string(), kind.trim().to_string()))
        .collect()
}

/// The name the metrics reference uses for a family (what a PromQL query names).
fn documented_name(family: &str, kind: &str) -> String {
    match kind {
        "counter" => format!("{family}_total"),
        "info" => format!("{family}_info"),
        _ => family.to_string(),
    }
}

/// Every sample name of the families (histograms' series included).
fn sample_names(families: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (family, kind) in families {
        names.insert(documented_name(family, kind));
        if kind == "histogram" {
            for suffix in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{family}{suffix}"));
            }
        }
    }
    names
}

#[actix_rt::test]
async fn the_metrics_reference_is_what_the_server_exports() {
    // Every family the server registers, with its type.
    let families: BTreeMap<String, String> = mcp_harbor::observe::metrics::global()
        .families()
        .map(|(name, kind)| (name.to_string(), kind.to_string()))
        .collect();
    let app =
        spawn_app_with(|c| c.metrics.token = secrecy::SecretString::from(METRICS_TOKEN)).await;
    // `/metrics` lists every family, those with no sample yet too.
    let listed = metric_families(&app.metrics_text(METRICS_TOKEN).await);
    assert_eq!(
        listed, families,
        "the families in /metrics and those registered"
    );
    assert!(families.len() >= 15, "only {families:?} registered");
    let exported: BTreeMap<String, String> = families
        .iter()
        .map(|(family, kind)| (documented_name(family, kind), kind.clone()))
        .collect();
    let samples = sample_names(&families);

    let reference = read_doc("docs/observability.md");
    let mut problems = Vec::new();
    let mut documented = BTreeSet::new();
    for row in table_rows(&reference, "metric") {
        match first_code(&row[0]) {
            Some(name) if exported.contains_key(name) => {
                documented.insert(name.to_string());
            }
            Some(name) => problems.push(format!(
                "docs/observability.md documents `{name}`, which the server does not export"
            )),
            None => problems.push(format!("a metrics row without a backticked name: {row:?}")),
        }
    }
    for name in exported.keys() {
        if !documented.contains(name) {
            problems.push(format!(
                "`{name}` is exported but not in docs/observability.md"
            ));
        }
    }
    for (file, text) in doc_files() {
        let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
        let words = words_after(&text, "mcp_harbor_", allowed)
            .into_iter()
            .chain(words_after(&text, "mcp_server_", allowed));
        for word in words {
            if !samples.contains(&word) {
                problems.push(format!("{file}: `{word}` is no metric the server exports"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---- CLI ----------------------------------------------------------------------------------

/// What `mcp-harbor <path> --help` lists: subcommands, and flags with whether each takes a value.
struct Help {
    commands: BTreeSet<String>,
    flags: BTreeMap<String, bool>,
}

fn help_of(path: &[String]) -> Help {
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-harbor"))
        .args(path)
        .arg("--help")
        .output()
        .expect("the binary runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "mcp-harbor {} --help: {text}",
        path.join(" ")
    );
    let mut help = Help {
        commands: BTreeSet::new(),
        flags: BTreeMap::new(),
    };
    let mut in_commands = false;
    for line in text.lines() {
        if line.trim_end() == "Commands:" {
            in_commands = true;
            continue;
        }
        if line.trim().is_empty() || !line.starts_with(' ') {
            in_commands = false;
        }
        let indent = line.len() - line.trim_start().len();
        let first = line.split_whitespace().next().unwrap_or("");
        if in_commands && indent == 2 && first != "help" {
            help.commands.insert(first.to_string());
        }
        // An option's own line: `  -f, --file <FILE>` or `      --url <URL>`.
        let option = line.trim_start();
        let option = match option.split_once(", ") {
            Some((short, rest)) if short.len() == 2 && short.starts_with('-') => {
                help.flags.insert(short.to_string(), rest.contains('<'));
                rest
            }
            _ => option,
        };
        if option.starts_with("--") {
            let mut words = option.split_whitespace();
            let flag = words.next().unwrap_or("").to_string();
            let takes_value = words.next().is_some_and(|w| w.starts_with('<'));
            help.flags.insert(flag, takes_value);
        }
    }
    help
}

/// Shell-like words of a command line: quotes grouped and removed, `#` starting a comment.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, '#') if !started => break,
            (None, c) if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (None, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

/// The code of a Markdown file, as command lines: fenced blocks' lines (a trailing `\` joins
/// the next) and inline code spans.
fn code_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut fenced = false;
    let mut pending = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            match line.trim_end().strip_suffix('\\') {
                Some(head) => pending.push_str(head),
                None => lines.push(std::mem::take(&mut pending) + line),
            }
        } else {
            lines.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
        }
    }
    lines
}

/// The arguments of each `mcp-harbor` command in `line`.
fn invocations(line: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    // $(…) substitutions are commands of their own.
    for (at, _) in line.match_indices("$(") {
        let inner = &line[at + 2..];
        let end = inner.find(')').unwrap_or(inner.len());
        found.extend(invocations(&inner[..end]));
    }
    let words = shell_words(line);
    let separators = ["&&", "||", ";", "|"];
    for segment in words.split(|w| separators.contains(&w.as_str())) {
        let mut rest = segment
            .iter()
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .map(String::as_str);
        let command: Vec<&str> = rest.clone().take(4).collect();
        let args: Vec<String> = if command
            .first()
            .is_some_and(|w| *w == "mcp-harbor" || w.ends_with("/mcp-harbor"))
        {
            rest.next();
            rest.map(str::to_string).collect()
        } else if command == ["cargo", "run", "--release", "--"] {
            rest.skip(4).map(str::to_string).collect()
        } else {
            continue;
        };
        found.push(args.into_iter().filter(|a| !a.contains("$(")).collect());
    }
    found
}

/// What is wrong with `mcp-harbor <args>`, if anything.
fn check_invocation(args: &[String], helps: &mut BTreeMap<Vec<String>, Help>) -> Option<String> {
    let mut path: Vec<String> = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let help = helps.entry(path.clone()).or_insert_with(|| help_of(&path));
        if word.starts_with('-') && word.len() > 1 {
            let flag = word.split('=').next().unwrap_or(word);
            match help.flags.get(flag) {
                None => {
                    return Some(format!(
                        "`{flag}` is not an option of `mcp-harbor {}`",
                        path.join(" ")
                    ))
                }
                Some(true) if !word.contains('=') => {
                    words.next();
                }
                Some(_) => {}
            }
            continue;
        }
        if help.commands.is_empty() {
            continue; // a positional argument
        }
        let placeholder = word.starts_with(['<', '[', '…']) || word.starts_with("...");
        if placeholder {
            return None;
        }
        if !help.commands.contains(word.as_str()) {
            return Some(format!(
                "`{word}` is not a subcommand of `mcp-harbor {}`",
                path.join(" ")
            ));
        }
        path.push(word.clone());
    }
    None
}

#[test]
fn every_cli_command_and_flag_the_docs_use_exists() {
    let mut helps = BTreeMap::new();
    let mut problems = Vec::new();
    let mut checked = 0;
    for (file, text) in doc_files() {
        for line in code_lines(&text) {
            for args in invocations(&line) {
                checked += 1;
                if let Some(problem) = check_invocation(&args, &mut helps) {
                    problems.push(format!("{file}: `{}`: {problem}", line.trim()));
                }
            }
        }
    }
    assert!(
        checked >= 20,
        "only {checked} mcp-harbor commands found in the docs"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_help_parser_reads_the_binary() {
    let top = help_of(&[]);
    for command in ["serve", "migrate", "healthcheck", "admin"] {
        assert!(top.commands.contains(command), "{:?}", top.commands);
    }
    assert_eq!(top.flags.get("--config"), Some(&true));
    let create = help_of(&["admin".into(), "tenant".into(), "create".into()]);
    assert_eq!(create.flags.get("--auth"), Some(&true));
    assert_eq!(
        create.flags.get("--url"),
        Some(&true),
        "global flags show in subcommands"
    );
    assert!(create.commands.is_empty());
    let rotate = help_of(&["admin".into(), "keys".into(), "rotate".into()]);
    assert_eq!(rotate.flags.get("--wait"), Some(&false));
    assert!(Path::new(env!("CARGO_BIN_EXE_mcp-harbor")).is_file());
}
