//! Reading a JSON-RPC body in one pass. Everything is read as serde_json's `Value` would read
//! it (the same syntax, depth limit, number and string rules, duplicate keys: the last wins),
//! except the keys of `params._meta` the stateless revision defines: those are read into a
//! [`WireMeta`] as they come, and `clientInfo` is checked and not kept. A stateless request then
//! costs no `_meta` map and no copies of its long key names (~40 bytes each).
//!
//! One oddity of serde_json is kept too: with its `raw_value` feature (on, for sqlx), an object
//! whose first key is [`RAW_VALUE_KEY`] reads as the JSON text in that key's string value. Such
//! an object is read through `Value` and split afterwards, exactly as `classify` does.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::jsonrpc::{holds_raw_value_key, RAW_VALUE_KEY};
use super::modern::{MetaKey, WireMeta};

/// The scalar visits of a visitor whose answer does not depend on the scalar.
macro_rules! scalars {
    ($answer:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($answer)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($answer)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($answer)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($answer)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($answer)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($answer)
        }
    };
}

/// The visits of a visitor that reads anything but an object as the `Value` it is (as `Value`
/// reads it), wrapped by `$wrap`.
macro_rules! value_visits {
    ($wrap:expr) => {
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Ok($wrap(Value::Bool(v)))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok($wrap(Value::from(v)))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok($wrap(Value::from(v)))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok($wrap(Value::from(v)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok($wrap(Value::String(v.to_owned())))
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok($wrap(Value::String(v)))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($wrap(Value::Null))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut items = Vec::new();
            while let Some(item) = seq.next_element()? {
                items.push(item);
            }
            Ok($wrap(Value::Array(items)))
        }
    };
}

/// A whole body.
pub(super) enum Body {
    One(Element),
    Batch(Vec<Element>),
    /// Read through `Value` (the raw-value oddity at the top level).
    Value(Value),
}

/// One message of a body.
pub(super) enum Element {
    Object {
        /// Every member but `params`.
        fields: Map<String, Value>,
        params: Option<Value>,
        meta: Option<Box<WireMeta>>,
        /// A reserved key ([`RAW_VALUE_KEY`]) somewhere in the message.
        reserved: bool,
    },
    /// Read through `Value`: `classify` it.
    Value(Value),
    /// Valid JSON, not an object.
    NotObject,
}

impl<'de> Deserialize<'de> for Body {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Body;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Body, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Element>()? {
                    items.push(item);
                }
                Ok(Body::Batch(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Body, A::Error> {
                Ok(match message(map)? {
                    Element::Value(v) => Body::Value(v),
                    element => Body::One(element),
                })
            }
            scalars!(Body::One(Element::NotObject));
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Element {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Element;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Element, A::Error> {
                skip_seq(seq).map(|_| Element::NotObject)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Element, A::Error> {
                message(map)
            }
            scalars!(Element::NotObject);
        }
        d.deserialize_any(V)
    }
}

/// A message object: `params` read by [`Params`], the rest as `Value`s.
fn message<'de, A: MapAccess<'de>>(mut map: A) -> Result<Element, A::Error> {
    let mut fields = Map::new();
    let mut params: Option<Params> = None;
    let mut first = true;
    while let Some(key) = map.next_key::<String>()? {
        if std::mem::take(&mut first) && key == RAW_VALUE_KEY {
            return raw_value(&mut map).map(Element::Value);
        }
        if key == "params" {
            params = Some(map.next_value()?);
        } else {
            let value = map.next_value()?;
            fields.insert(key, value);
        }
    }
    let mut reserved =
        fields.contains_key(RAW_VALUE_KEY) || fields.values().any(holds_raw_value_key);
    let (params, meta) = match params {
        None => (None, None),
        Some(p) => {
            reserved |= p.reserved || holds_raw_value_key(&p.value);
            if let Some(meta) = &p.meta {
                reserved |= meta.values().any(holds_raw_value_key);
            }
            (Some(p.value), p.meta)
        }
    };
    Ok(Element::Object {
        fields,
        params,
        meta,
        reserved,
    })
}

/// A message's `params`: any value; in an object, `_meta` read by [`MetaObject`].
struct Params {
    value: Value,
    meta: Option<Box<WireMeta>>,
    /// A reserved key in the `clientInfo` that was skipped.
    reserved: bool,
}

impl<'de> Deserialize<'de> for Params {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl V {
            fn plain(value: Value) -> Params {
                Params {
                    value,
                    meta: None,
                    reserved: false,
                }
            }
        }
        impl<'de> Visitor<'de> for V {
            type Value = Params;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            value_visits!(Self::plain);
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Params, A::Error> {
                let mut rest = Map::new();
                // The last `_meta` read as an object: its other keys, this revision's keys and
                // whether its skipped `clientInfo` held a reserved key.
                let mut meta: Option<(Map<String, Value>, WireMeta, bool)> = None;
                let mut first = true;
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    if std::mem::take(&mut first) && key.0 == RAW_VALUE_KEY {
                        let mut value = raw_value(&mut map)?;
                        let meta = match &mut value {
                            Value::Object(params) => WireMeta::split(params).map(Box::new),
                            _ => None,
                        };
                        return Ok(Params {
                            value,
                            meta,
                            reserved: false,
                        });
                    }
                    if key.0 == "_meta" {
                        match map.next_value::<MetaObject>()? {
                            MetaObject::Object {
                                other,
                                wire,
                                reserved,
                            } => {
                                rest.remove("_meta");
                                meta = Some((other, wire, reserved));
                            }
                            MetaObject::Value(value) => {
                                // Not an object (or the raw-value oddity): kept as it is and,
                                // if it is an object after all, split below.
                                meta = None;
                                rest.insert(key.0.into_owned(), value);
                            }
                        }
                    } else {
                        let value = map.next_value()?;
                        rest.insert(key.0.into_owned(), value);
                    }
                }
                let (meta, reserved) = match meta {
                    Some((other, wire, reserved)) => {
                        if !other.is_empty() {
                            rest.insert("_meta".into(), Value::Object(other));
                        }
                        (Some(Box::new(wire)), reserved)
                    }
                    None => (WireMeta::split(&mut rest).map(Box::new), false),
                };
                Ok(Params {
                    value: Value::Object(rest),
                    meta,
                    reserved,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A `params._meta` value.
enum MetaObject {
    Object {
        other: Map<String, Value>,
        wire: WireMeta,
        reserved: bool,
    },
    Value(Value),
}

impl<'de> Deserialize<'de> for MetaObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MetaObject;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MetaObject, A::Error> {
                let mut other = Map::new();
                let mut wire = WireMeta::default();
                let mut reserved = false;
                let mut first = true;
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    if std::mem::take(&mut first) && key.0 == RAW_VALUE_KEY {
                        return raw_value(&mut map).map(MetaObject::Value);
                    }
                    match MetaKey::of(&key.0) {
                        MetaKey::Other => {
                            let value = map.next_value()?;
                            other.insert(key.0.into_owned(), value);
                        }
                        // The last one counts, as in a `Value`.
                        MetaKey::ClientInfo => reserved = map.next_value::<Skip>()?.reserved,
                        known => {
                            let value = map.next_value()?;
                            if let Some(slot) = wire.slot(&known) {
                                *slot = Some(value);
                            }
                        }
                    }
                }
                Ok(MetaObject::Object {
                    other,
                    wire,
                    reserved,
                })
            }
            // Anything else is read as the `Value` it is.
            value_visits!(MetaObject::Value);
        }
        d.deserialize_any(V)
    }
}

/// A map key, borrowed from the body when it holds no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// Any JSON value, checked as a `Value` would be read (strings, numbers, depth) but not kept;
/// `reserved`: it would hold [`RAW_VALUE_KEY`] as a key once read.
struct Skip {
    reserved: bool,
}

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Skip;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            scalars!(Skip { reserved: false });
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Skip, A::Error> {
                skip_seq(seq)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
                // Keys whose last value holds a reserved key (duplicates: the last one wins).
                let mut holding: Vec<Cow<'de, str>> = Vec::new();
                let mut reserved_key = false;
                let mut first = true;
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    if std::mem::take(&mut first) && key.0 == RAW_VALUE_KEY {
                        let value = raw_value(&mut map)?;
                        return Ok(Skip {
                            reserved: holds_raw_value_key(&value),
                        });
                    }
                    reserved_key |= key.0 == RAW_VALUE_KEY;
                    let value: Skip = map.next_value()?;
                    match holding.iter().position(|k| *k == key.0) {
                        Some(i) if !value.reserved => {
                            holding.swap_remove(i);
                        }
                        None if value.reserved => holding.push(key.0),
                        _ => {}
                    }
                }
                Ok(Skip {
                    reserved: reserved_key || !holding.is_empty(),
                })
            }
        }
        d.deserialize_any(V)
    }
}

fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Skip, A::Error> {
    let mut reserved = false;
    while let Some(item) = seq.next_element::<Skip>()? {
        reserved |= item.reserved;
    }
    Ok(Skip { reserved })
}

/// After a first key [`RAW_VALUE_KEY`]: its string value read as JSON (what `Value` does).
fn raw_value<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Value, A::Error> {
    let text: Key<'de> = map.next_value()?;
    serde_json::from_str(&text.0).map_err(de::Error::custom)
}
