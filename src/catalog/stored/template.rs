//! URI templates (RFC 6570 level 1: `{variable}`) of published resource templates, and the
//! rendering of prompt and template text with placeholders, bounded in size.

use super::*;

/// One segment of a parsed URI template.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(String),
    Var(String),
}

/// A parsed RFC 6570 level-1 template (`{var}` simple expansion only).
#[derive(Debug, Clone, PartialEq)]
pub struct UriTemplate {
    parts: Vec<Part>,
}

impl UriTemplate {
    pub fn parse(template: &str) -> Result<UriTemplate, String> {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            if rest[..open].contains('}') {
                return Err("unmatched '}'".into());
            }
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_string()));
            }
            let close = rest[open..].find('}').ok_or("unclosed '{'")? + open;
            let name = &rest[open + 1..close];
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(format!(
                    "{{{name}}} is not a level-1 variable (letters, digits and _ only)"
                ));
            }
            if matches!(parts.last(), Some(Part::Var(_))) {
                return Err("two variables must be separated by literal text".into());
            }
            parts.push(Part::Var(name.to_string()));
            rest = &rest[close + 1..];
        }
        if rest.contains('}') {
            return Err("unmatched '}'".into());
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_string()));
        }
        if !parts.iter().any(|p| matches!(p, Part::Var(_))) {
            return Err("a template needs at least one {variable}".into());
        }
        Ok(UriTemplate { parts })
    }

    pub fn variables(&self) -> Vec<&str> {
        self.parts
            .iter()
            .filter_map(|p| {
                if let Part::Var(v) = p {
                    Some(v.as_str())
                } else {
                    None
                }
            })
            .collect()
    }

    /// The variables of `uri` when it matches (values percent-decoded; never empty, never `/`).
    pub fn matches(&self, uri: &str) -> Option<HashMap<String, String>> {
        let mut vars = HashMap::new();
        let mut rest = uri;
        for (i, part) in self.parts.iter().enumerate() {
            match part {
                Part::Literal(lit) => rest = rest.strip_prefix(lit.as_str())?,
                Part::Var(name) => {
                    let end = match self.parts.get(i + 1) {
                        Some(Part::Literal(next)) => rest.find(next.as_str())?,
                        _ => rest.len(),
                    };
                    let raw = &rest[..end];
                    if raw.is_empty() || raw.contains('/') {
                        return None;
                    }
                    vars.insert(name.clone(), crate::protocol::percent_decode(raw)?);
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(vars)
    }
}

/// The most one `prompts/get` (all its messages) or one templated `resources/read` renders to,
/// in bytes. A client's values fill the placeholders, and a text may repeat one: without a cap,
/// a 4 MB argument in a prompt naming it a thousand times would build 4 GB.
pub const MAX_RENDERED_BYTES: usize = 8 * 1024 * 1024;

/// `text` with each `open name close` placeholder whose name `value` knows replaced by its value,
/// in one pass: a value is never read for placeholders (a client's `{{b}}` in argument `a`
/// stays as sent), and a placeholder it does not know stays as written. A name holds no `{`
/// (`{{{a}}}` fills `{{a}}`). `None` when the result would take more than `room` bytes; else
/// `room` is what is left. Each character of `text` is looked at a bounded number of times.
fn render<'v>(
    text: &str,
    (open, close): (&str, &str),
    value: impl Fn(&str) -> Option<Cow<'v, str>>,
    room: &mut usize,
) -> Option<String> {
    let mut out = String::with_capacity(text.len().min(*room));
    let mut rest = text;
    while let Some(at) = rest.find(open) {
        let after = &rest[at + open.len()..];
        // Nothing closes past here: the rest is text.
        let Some(len) = after.find(close) else { break };
        let name = &after[..len];
        if let Some(inner) = name.rfind('{') {
            // A placeholder opens nearer the close: what comes before it is text.
            let brace = at + open.len() + inner;
            let next = (brace + 1)
                .checked_sub(open.len())
                .filter(|&n| n > at && rest.get(n..).is_some_and(|r| r.starts_with(open)))
                .unwrap_or(brace);
            push(&mut out, &rest[..next], room)?;
            rest = &rest[next..];
            continue;
        }
        let end = at + open.len() + len + close.len();
        match value(name) {
            Some(v) => {
                push(&mut out, &rest[..at], room)?;
                push(&mut out, &v, room)?;
            }
            None => push(&mut out, &rest[..end], room)?,
        }
        rest = &rest[end..];
    }
    push(&mut out, rest, room)?;
    Some(out)
}

fn push(out: &mut String, piece: &str, room: &mut usize) -> Option<()> {
    *room = room.checked_sub(piece.len())?;
    out.push_str(piece);
    Some(())
}

/// Invalid Params: what `what` (`name`) renders to with the request's values is over the cap.
pub(super) fn too_large(what: &str, name: &str) -> RpcError {
    RpcError::invalid_params(format!(
        "{what} {name:?} rendered with these values would exceed {} MiB",
        MAX_RENDERED_BYTES / (1024 * 1024)
    ))
}

/// Fills a prompt's `{{name}}` placeholders with the call's arguments (strings as they are,
/// other values as JSON).
pub(super) fn render_prompt_text(
    text: &str,
    args: &Map<String, Value>,
    room: &mut usize,
) -> Option<String> {
    let value = |name: &str| {
        args.get(name).map(|v| match v {
            Value::String(s) => Cow::Borrowed(s.as_str()),
            v => Cow::Owned(v.to_string()),
        })
    };
    render(text, ("{{", "}}"), value, room)
}

/// Fills a resource template's `{name}` placeholders with the URI's variables.
pub(super) fn render_template_text(
    text: &str,
    vars: &HashMap<String, String>,
    room: &mut usize,
) -> Option<String> {
    let value = |name: &str| vars.get(name).map(|v| Cow::Borrowed(v.as_str()));
    render(text, ("{", "}"), value, room)
}
