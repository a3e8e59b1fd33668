//! JSON Schema as MCP uses it (basic/index.mdx, "JSON Schema Usage"). Every schema the platform
//! validates with — a tool's `inputSchema` and `outputSchema`, an elicitation's
//! `requestedSchema`, each written by a tenant or sent by its endpoint — is compiled by
//! [`compile`], which holds it to bounds first:
//!
//! - no `$ref` is fetched: the `jsonschema` crate is built without its resolvers, so a schema
//!   referring to a network URI does not compile ("`$ref` Resolution": MUST NOT dereference;
//!   SHOULD reject rather than treat as permissive);
//! - "Composition-Keyword Resource Use": validating costs about one step per subschema applied,
//!   and `$ref` applies its target again wherever it is used. A definition that is `anyOf` two
//!   references to one that is `anyOf` two references … doubles at every step: twenty such
//!   definitions (a schema of 2 KB) cost seconds per validation, thirty hours. So a schema is
//!   refused when its expansion — every `$ref` counted as its target, where it is used — exceeds
//!   [`MAX_SUBSCHEMAS`], or when it refers back into itself (a recursive `$ref`: expanded without
//!   end, and validated again through every branch at every level of the instance);
//! - a `pattern` the `regex` engine cannot run in linear time (a backreference, a lookaround)
//!   runs on `fancy-regex` with at most [`PATTERN_BACKTRACK_LIMIT`] backtracking steps per
//!   match (the crate's default, a million, costs tens of ms for `^(a|a)+\1$` against thirty
//!   characters — per string the client sends); beyond it the string does not match.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// The most subschemas a schema may expand to (each `$ref` counted as its target). The
/// reference catalog's largest tool schema expands to a few dozen.
pub const MAX_SUBSCHEMAS: usize = 2_000;

/// The deepest a schema may nest, each `$ref` counted as its target (a schema written out
/// without references nests less: JSON is read at most 128 levels deep).
pub const MAX_DEPTH: usize = 128;

/// The most backtracking steps one `pattern` match may take.
pub const PATTERN_BACKTRACK_LIMIT: usize = 10_000;

/// Why a schema is not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("is not a valid JSON Schema: {0}")]
    Invalid(String),
    #[error(
        "refers back into itself ($ref {0:?} is part of the schema it refers to); \
         recursive schemas are not accepted"
    )]
    Recursive(String),
    #[error(
        "expands to more than {MAX_SUBSCHEMAS} subschemas (each $ref counted where it is \
         used); validating against it could cost without bound"
    )]
    TooLarge,
    #[error("nests more than {MAX_DEPTH} subschemas deep (each $ref counted as its target)")]
    TooDeep,
    #[error(
        "has a $ref this server does not follow: {0:?} (only references inside the schema: \
         \"#/...\", \"#anchor\" or an \"$id\" it declares)"
    )]
    ForeignRef(String),
}

/// `schema` compiled for validation, when it is a valid JSON Schema within the bounds above.
pub fn compile(schema: &Value) -> Result<jsonschema::Validator, SchemaError> {
    let patterns =
        jsonschema::PatternOptions::fancy_regex().backtrack_limit(PATTERN_BACKTRACK_LIMIT);
    let validator = jsonschema::options()
        .with_pattern_options(patterns)
        .build(schema)
        .map_err(|e| SchemaError::Invalid(e.to_string()))?;
    check_bounds(schema)?;
    Ok(validator)
}

/// Keywords whose value is one subschema (or, for `items` before 2020-12, a list of them).
const SUBSCHEMA: &[&str] = &[
    "not",
    "if",
    "then",
    "else",
    "items",
    "additionalItems",
    "contains",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
    "allOf",
    "anyOf",
    "oneOf",
    "prefixItems",
];
/// Keywords whose value maps names to subschemas that are applied.
const SUBSCHEMA_MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
];
/// Keywords holding subschemas that apply only where a `$ref` names them.
const DEFINITIONS: &[&str] = &["$defs", "definitions"];
/// Keywords that apply another schema by reference.
const REFERENCES: &[&str] = &["$ref", "$dynamicRef", "$recursiveRef"];

/// The subschemas `schema` holds under `keywords` (one, or a list of them).
fn subschemas<'a>(
    schema: &'a Map<String, Value>,
    keywords: &'static [&'static str],
) -> impl Iterator<Item = &'a Value> {
    keywords
        .iter()
        .filter_map(|k| schema.get(*k))
        .flat_map(|v| match v {
            Value::Array(list) => list.as_slice(),
            v => std::slice::from_ref(v),
        })
}

/// The subschemas `schema` holds by name under `keywords`.
fn named_subschemas<'a>(
    schema: &'a Map<String, Value>,
    keywords: &'static [&'static str],
) -> impl Iterator<Item = &'a Value> {
    keywords
        .iter()
        .filter_map(|k| schema.get(*k).and_then(Value::as_object))
        .flat_map(Map::values)
}

fn check_bounds(schema: &Value) -> Result<(), SchemaError> {
    let mut expansion = Expansion {
        root: schema,
        ids: Vec::new(),
        anchors: Vec::new(),
        resource_of: HashMap::new(),
        sizes: HashMap::new(),
        path: Vec::new(),
    };
    expansion.index(schema, schema);
    expansion.size(schema).map(|_| ())
}

type Key = *const Value;

/// The expansion of one schema document: what its references can name, and the size of each
/// subschema reached so far (each computed once, so the count costs one pass over the schema).
struct Expansion<'a> {
    root: &'a Value,
    /// Every `$id` naming a resource, and that resource.
    ids: Vec<(&'a str, &'a Value)>,
    /// Every `$anchor` and `$dynamicAnchor` (and `$id: "#name"` of earlier drafts) with its schema.
    anchors: Vec<(&'a str, &'a Value)>,
    /// The resource (the nearest schema with an `$id`, else the document) of each subschema
    /// (of each place where a subschema is expected; a `$ref` may name any other place).
    resource_of: HashMap<Key, &'a Value>,
    sizes: HashMap<Key, usize>,
    /// The subschemas being expanded, outermost first.
    path: Vec<Key>,
}

impl<'a> Expansion<'a> {
    /// Records the ids, anchors and resources of `node` and every subschema under it.
    fn index(&mut self, node: &'a Value, resource: &'a Value) {
        let Value::Object(map) = node else { return };
        let mut resource = resource;
        match map.get("$id").and_then(Value::as_str) {
            Some(anchor) if anchor.starts_with('#') => {
                self.anchors.push((&anchor[1..], node));
            }
            Some(id) => {
                self.ids.push((id.trim_end_matches('#'), node));
                resource = node;
            }
            None => {}
        }
        for key in ["$anchor", "$dynamicAnchor"] {
            if let Some(name) = map.get(key).and_then(Value::as_str) {
                self.anchors.push((name, node));
            }
        }
        self.resource_of.insert(node as Key, resource);
        let children: Vec<&'a Value> = subschemas(map, SUBSCHEMA)
            .chain(named_subschemas(map, SUBSCHEMA_MAP))
            .chain(named_subschemas(map, DEFINITIONS))
            .collect();
        for child in children {
            self.index(child, resource);
        }
    }

    /// How many subschemas `node` expands to.
    fn size(&mut self, node: &'a Value) -> Result<usize, SchemaError> {
        let Value::Object(map) = node else {
            return Ok(1);
        };
        let key = node as Key;
        if let Some(&size) = self.sizes.get(&key) {
            return Ok(size);
        }
        if self.path.len() >= MAX_DEPTH {
            return Err(SchemaError::TooDeep);
        }
        self.path.push(key);
        let mut total = 1usize;
        for child in subschemas(map, SUBSCHEMA).chain(named_subschemas(map, SUBSCHEMA_MAP)) {
            total = total.saturating_add(self.size(child)?);
            if total > MAX_SUBSCHEMAS {
                return Err(SchemaError::TooLarge);
            }
        }
        for keyword in REFERENCES {
            let Some(reference) = map.get(*keyword).and_then(Value::as_str) else {
                continue;
            };
            for target in self.resolve(node, reference)? {
                if self.path.contains(&(target as Key)) {
                    return Err(SchemaError::Recursive(reference.to_string()));
                }
                total = total.saturating_add(self.size(target)?);
                if total > MAX_SUBSCHEMAS {
                    return Err(SchemaError::TooLarge);
                }
            }
        }
        self.path.pop();
        self.sizes.insert(key, total);
        Ok(total)
    }

    /// The schemas `reference` (found in `from`) can name: one for a JSON pointer or an id,
    /// every schema with that anchor for an anchor (`$dynamicRef` picks one as it validates).
    fn resolve(&self, from: &'a Value, reference: &str) -> Result<Vec<&'a Value>, SchemaError> {
        let foreign = || SchemaError::ForeignRef(reference.to_string());
        let (base, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let resource = if base.is_empty() {
            self.resource_of
                .get(&(from as Key))
                .copied()
                .unwrap_or(self.root)
        } else {
            let relative = !base.contains(':');
            self.ids
                .iter()
                .find(|(id, _)| {
                    *id == base
                        || (relative
                            && id.len() > base.len()
                            && id.ends_with(base)
                            && id.as_bytes()[id.len() - base.len() - 1] == b'/')
                })
                .map(|(_, resource)| *resource)
                .ok_or_else(foreign)?
        };
        if fragment.is_empty() {
            return Ok(vec![resource]);
        }
        if fragment.starts_with('/') {
            let pointer = super::percent_decode(fragment).ok_or_else(foreign)?;
            return resource
                .pointer(&pointer)
                .map(|target| vec![target])
                .ok_or_else(|| {
                    SchemaError::Invalid(format!("$ref {reference:?} points at nothing"))
                });
        }
        let named: Vec<&'a Value> = self
            .anchors
            .iter()
            .filter(|(name, _)| *name == fragment)
            .map(|(_, schema)| *schema)
            .collect();
        if named.is_empty() {
            return Err(foreign());
        }
        Ok(named)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `n` definitions, each `keyword` of two references to the next: 2^n when expanded.
    fn doubling(keyword: &str, n: usize) -> Value {
        let mut defs = Map::new();
        for i in 0..n {
            let next = format!("#/$defs/d{}", i + 1);
            defs.insert(
                format!("d{i}"),
                json!({ keyword: [{ "$ref": next }, { "$ref": next }] }),
            );
        }
        defs.insert(format!("d{n}"), json!({ "type": "string" }));
        json!({ "type": "object", "$defs": defs, "properties": { "x": { "$ref": "#/$defs/d0" } } })
    }

    #[test]
    fn schemas_that_expand_without_bound_are_refused() {
        // 2^9 * 3 subschemas: within the bound, and it validates.
        let fine = compile(&doubling("anyOf", 8)).unwrap();
        assert!(fine.is_valid(&json!({ "x": "s" })));
        assert!(!fine.is_valid(&json!({ "x": 1 })));
        for keyword in ["anyOf", "allOf", "oneOf"] {
            assert_eq!(
                compile(&doubling(keyword, 20)).err(),
                Some(SchemaError::TooLarge),
                "{keyword}"
            );
        }
        // So does a chain of references, each to the next.
        let mut chain = Map::new();
        for i in 0..MAX_DEPTH {
            chain.insert(
                format!("d{i}"),
                json!({ "$ref": format!("#/$defs/d{}", i + 1) }),
            );
        }
        chain.insert(format!("d{MAX_DEPTH}"), json!({ "type": "string" }));
        let schema = json!({ "type": "object", "$defs": chain,
                             "properties": { "x": { "$ref": "#/$defs/d0" } } });
        assert_eq!(compile(&schema).err(), Some(SchemaError::TooDeep));
        // Plain width counts too.
        let wide: Map<String, Value> = (0..MAX_SUBSCHEMAS)
            .map(|i| (format!("p{i}"), json!({ "type": "string" })))
            .collect();
        assert_eq!(
            compile(&json!({ "type": "object", "properties": wide })).err(),
            Some(SchemaError::TooLarge)
        );
        // Definitions no reference uses cost nothing; each use of one costs its size.
        let unused: Map<String, Value> = (0..MAX_SUBSCHEMAS)
            .map(|i| (format!("d{i}"), json!({ "type": "string" })))
            .collect();
        assert!(compile(&json!({ "type": "object", "$defs": unused })).is_ok());
    }

    #[test]
    fn patterns_that_backtrack_give_up_and_do_not_match() {
        let v = compile(&json!({ "type": "object", "properties": {
            "s": { "type": "string", "pattern": "^(a|a)+\\1$" } } }))
        .unwrap();
        assert!(v.is_valid(&json!({ "s": "aa" })));
        let long = format!("{}!", "a".repeat(14));
        let errors: Vec<String> = v
            .iter_errors(&json!({ "s": long }))
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            errors,
            ["Error executing regex: Max limit for backtracking count exceeded"]
        );
    }

    #[test]
    fn recursive_references_are_refused() {
        for (schema, reference) in [
            (
                json!({ "type": "object", "properties": { "c": { "$ref": "#" } } }),
                "#",
            ),
            (
                json!({ "$defs": { "n": { "anyOf": [
                    { "type": "object", "properties": { "c": { "$ref": "#/$defs/n" } } },
                    { "type": "string" } ] } },
                    "type": "object", "properties": { "x": { "$ref": "#/$defs/n" } } }),
                "#/$defs/n",
            ),
            (
                json!({ "$defs": { "a": { "$ref": "#/$defs/b" }, "b": { "items": { "$ref": "#/$defs/a" } } },
                        "type": "object", "properties": { "x": { "$ref": "#/$defs/a" } } }),
                "#/$defs/a",
            ),
            (
                json!({ "$defs": { "n": { "$anchor": "node", "type": "object",
                                          "properties": { "c": { "$ref": "#node" } } } },
                        "type": "object", "properties": { "x": { "$ref": "#node" } } }),
                "#node",
            ),
        ] {
            assert_eq!(
                compile(&schema).err(),
                Some(SchemaError::Recursive(reference.into())),
                "{schema}"
            );
        }
        // A recursive definition nothing uses is never applied.
        let unused = json!({ "type": "object", "$defs": { "n": { "properties": { "c": { "$ref": "#/$defs/n" } } } } });
        assert!(compile(&unused).is_ok());
    }

    #[test]
    fn references_resolve_by_pointer_anchor_and_id() {
        let schema = json!({
            "type": "object",
            "$defs": {
                "a b": { "type": "string" },
                "tagged": { "$anchor": "tag", "type": "integer" },
                "other": { "$id": "https://example.com/schemas/other", "type": "boolean",
                           "$defs": { "inner": { "type": "null" } } }
            },
            "properties": {
                "p": { "$ref": "#/$defs/a%20b" },
                "t": { "$ref": "#tag" },
                "o": { "$ref": "https://example.com/schemas/other" },
                "i": { "$ref": "https://example.com/schemas/other#/$defs/inner" }
            }
        });
        let v = compile(&schema).unwrap();
        assert!(v.is_valid(&json!({ "p": "s", "t": 1, "o": true, "i": null })));
        assert!(!v.is_valid(&json!({ "t": "x" })));
        // What the validator would fetch from elsewhere does not compile; a pointer at nothing
        // is refused.
        for schema in [
            json!({ "type": "object", "properties": { "x": { "$ref": "https://example.com/x.json" } } }),
            json!({ "type": "object", "properties": { "x": { "$ref": "#/$defs/missing" } } }),
        ] {
            assert!(
                matches!(compile(&schema), Err(SchemaError::Invalid(_))),
                "{schema}"
            );
        }
        // Schemas under data keywords or properties named like keywords are what they are.
        let named = json!({ "type": "object", "properties": {
            "enum": { "type": "string" }, "$ref": { "type": "string" } },
            "default": { "$ref": "#" } });
        assert!(compile(&named).is_ok());
    }
}
