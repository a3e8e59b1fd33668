//! Reading a JSON-RPC body in one pass. Everything is read as serde_json's `Value` would read
//! it (the same syntax, depth limit, number and string rules, duplicate keys: the last wins),
//! but not always kept as one:
//! - a message's members go into slots ([`Members`], `params`); any other member is checked and
//!   dropped, since nothing reads it: no map and no owned key per member;
//! - the keys of `params._meta` the stateless revision defines are read into a [`WireMeta`] as
//!   they come, and `clientInfo` is checked and not kept: a stateless request costs no `_meta`
//!   map and no copies of its long key names (~40 bytes each);
//! - whether a message holds [`RAW_VALUE_KEY`] as a key (it is then refused) is found while
//!   reading it, not by walking what was read.
//!
//! One oddity of serde_json is kept too: with its `raw_value` feature (on, for sqlx), an object
//! whose first key is [`RAW_VALUE_KEY`] reads as the JSON text in that key's string value. Such
//! an object is read through `Value` and split afterwards, exactly as `classify` does.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::meta::{MetaKey, WireMeta};

/// The object key serde_json's `raw_value` feature (turned on by sqlx) reads as "the string
/// that follows is raw JSON" when it comes first in an object. A message holding it anywhere
/// else would not read back as itself once written out (keys are written sorted): a session
/// snapshot holding its params could not be restored. Found by fuzzing (`fuzz/`).
pub const RAW_VALUE_KEY: &str = "$serde_json::private::RawValue";

pub(super) fn holds_raw_value_key(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.contains_key(RAW_VALUE_KEY) || m.values().any(holds_raw_value_key),
        Value::Array(items) => items.iter().any(holds_raw_value_key),
        _ => false,
    }
}

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
/// reads it), wrapped by `$wrap(value, reserved)`: `reserved`, an array holds
/// [`RAW_VALUE_KEY`] as a key somewhere.
macro_rules! value_visits {
    ($wrap:expr) => {
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Ok($wrap(Value::Bool(v), false))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok($wrap(Value::from(v), false))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok($wrap(Value::from(v), false))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok($wrap(Value::from(v), false))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok($wrap(Value::String(v.to_owned()), false))
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok($wrap(Value::String(v), false))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($wrap(Value::Null, false))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut items = Vec::new();
            let mut reserved = false;
            while let Some(item) = seq.next_element::<Checked>()? {
                reserved |= item.reserved;
                items.push(item.value);
            }
            Ok($wrap(Value::Array(items), reserved))
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
        /// The members that say what the message is (any other is checked and dropped).
        members: Members,
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

/// The members of a message object that say what it is: the last of each, as in a `Value`.
#[derive(Default)]
pub(super) struct Members {
    pub jsonrpc: Option<Value>,
    pub id: Option<Value>,
    pub method: Option<Value>,
    pub result: Option<Value>,
    pub error: Option<Value>,
}

impl Members {
    fn slot(&mut self, key: &str) -> Option<&mut Option<Value>> {
        match key {
            "jsonrpc" => Some(&mut self.jsonrpc),
            "id" => Some(&mut self.id),
            "method" => Some(&mut self.method),
            "result" => Some(&mut self.result),
            "error" => Some(&mut self.error),
            _ => None,
        }
    }

    /// Takes them out of an object read whole.
    pub(super) fn take(object: &mut Map<String, Value>) -> Members {
        let mut members = Members::default();
        for key in ["jsonrpc", "id", "method", "result", "error"] {
            if let (Some(value), Some(slot)) = (object.remove(key), members.slot(key)) {
                *slot = Some(value);
            }
        }
        members
    }
}

/// A message object: its [`Members`] as `Value`s, `params` read by [`Params`], any other
/// member checked as a `Value` would be read and dropped (nothing reads it): no map and no
/// owned key per member.
fn message<'de, A: MapAccess<'de>>(mut map: A) -> Result<Element, A::Error> {
    let mut members = Members::default();
    let mut params: Option<Params> = None;
    // Which members other than params hold a reserved key (or are one).
    let mut held = Reserved::default();
    let mut first = true;
    while let Some(key) = map.next_key::<Key<'de>>()? {
        if std::mem::take(&mut first) && key.0 == RAW_VALUE_KEY {
            return raw_value(&mut map).map(Element::Value);
        }
        if key.0 == "params" {
            params = Some(map.next_value()?);
        } else if let Some(slot) = members.slot(&key.0) {
            let value: Checked = map.next_value()?;
            held.note(&key.0, value.reserved);
            *slot = Some(value.value);
        } else {
            let value: Skip = map.next_value()?;
            held.note(&key.0, value.reserved);
        }
    }
    let mut reserved = held.any();
    let (params, meta) = match params {
        None => (None, None),
        Some(p) => {
            reserved |= p.reserved;
            (Some(p.value), p.meta)
        }
    };
    Ok(Element::Object {
        members,
        params,
        meta,
        reserved,
    })
}

/// A message's `params`: any value; in an object, `_meta` read by [`MetaObject`].
struct Params {
    value: Value,
    meta: Option<Box<WireMeta>>,
    /// [`RAW_VALUE_KEY`] is a key somewhere in the params as a `Value` would read them (this
    /// revision's `_meta` keys included), or in the `clientInfo` that was skipped.
    reserved: bool,
}

impl Params {
    /// Params read whole as a `Value`: this revision's `_meta` keys split off afterwards.
    fn whole(mut value: Value, reserved: bool) -> Params {
        let meta = match &mut value {
            Value::Object(params) => WireMeta::split(params).map(Box::new),
            _ => None,
        };
        Params {
            value,
            meta,
            reserved,
        }
    }
}

impl<'de> Deserialize<'de> for Params {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Params;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            value_visits!(Params::whole);
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Params, A::Error> {
                let mut rest = Map::new();
                // Which of `rest`'s members hold a reserved key.
                let mut held = Reserved::default();
                // The last `_meta` read as an object: its other keys, this revision's keys and
                // whether any of them (or its skipped `clientInfo`) held a reserved key.
                let mut meta: Option<(Map<String, Value>, WireMeta, bool)> = None;
                let mut first = true;
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    if std::mem::take(&mut first) && key.0 == RAW_VALUE_KEY {
                        let value = raw_value(&mut map)?;
                        let reserved = holds_raw_value_key(&value);
                        return Ok(Params::whole(value, reserved));
                    }
                    if key.0 == "_meta" {
                        match map.next_value::<MetaObject>()? {
                            MetaObject::Object {
                                other,
                                wire,
                                reserved,
                            } => {
                                rest.remove("_meta");
                                held.note(&key.0, false);
                                meta = Some((other, wire, reserved));
                            }
                            MetaObject::Value(value, reserved) => {
                                // Not an object (or the raw-value oddity): kept as it is and,
                                // if it is an object after all, split below.
                                meta = None;
                                held.note(&key.0, reserved);
                                rest.insert(key.0.into_owned(), value);
                            }
                        }
                    } else {
                        let value: Checked = map.next_value()?;
                        held.note(&key.0, value.reserved);
                        rest.insert(key.0.into_owned(), value.value);
                    }
                }
                let mut reserved = held.any();
                let meta = match meta {
                    Some((other, wire, meta_reserved)) => {
                        if !other.is_empty() {
                            rest.insert("_meta".into(), Value::Object(other));
                        }
                        reserved |= meta_reserved;
                        Some(Box::new(wire))
                    }
                    None => WireMeta::split(&mut rest).map(Box::new),
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
        /// A reserved key in `other`, in this revision's keys or in the skipped `clientInfo`.
        reserved: bool,
    },
    /// Not an object, or the raw-value oddity; `true`: it holds a reserved key.
    Value(Value, bool),
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
                let mut held = Reserved::default();
                let mut wire = WireMeta::default();
                // Which of this revision's keys hold a reserved key.
                let mut wire_held = Reserved::default();
                let mut client_info = false;
                let mut first = true;
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    if std::mem::take(&mut first) && key.0 == RAW_VALUE_KEY {
                        let value = raw_value(&mut map)?;
                        let reserved = holds_raw_value_key(&value);
                        return Ok(MetaObject::Value(value, reserved));
                    }
                    match MetaKey::of(&key.0) {
                        MetaKey::Other => {
                            let value: Checked = map.next_value()?;
                            held.note(&key.0, value.reserved);
                            other.insert(key.0.into_owned(), value.value);
                        }
                        // The last one counts, as in a `Value`.
                        MetaKey::ClientInfo => client_info = map.next_value::<Skip>()?.reserved,
                        known => {
                            let value: Checked = map.next_value()?;
                            if let Some(slot) = wire.slot(&known) {
                                *slot = Some(value.value);
                                wire_held.note(&key.0, value.reserved);
                            }
                        }
                    }
                }
                Ok(MetaObject::Object {
                    other,
                    wire,
                    reserved: held.any() || client_info || wire_held.any(),
                })
            }
            // Anything else is read as the `Value` it is.
            value_visits!(MetaObject::Value);
        }
        d.deserialize_any(V)
    }
}

/// A `Value`, read as serde_json reads one, and whether it holds [`RAW_VALUE_KEY`] as a key
/// (found while reading rather than by walking the value again).
struct Checked {
    value: Value,
    reserved: bool,
}

impl Checked {
    fn new(value: Value, reserved: bool) -> Checked {
        Checked { value, reserved }
    }
}

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Checked;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            value_visits!(Checked::new);
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
                let mut object = Map::new();
                let mut held = Reserved::default();
                let mut first = true;
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    if std::mem::take(&mut first) && key.0 == RAW_VALUE_KEY {
                        let value = raw_value(&mut map)?;
                        let reserved = holds_raw_value_key(&value);
                        return Ok(Checked::new(value, reserved));
                    }
                    let value: Checked = map.next_value()?;
                    held.note(&key.0, value.reserved);
                    object.insert(key.0.into_owned(), value.value);
                }
                Ok(Checked::new(Value::Object(object), held.any()))
            }
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
                let mut members = Reserved::default();
                let mut first = true;
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    if std::mem::take(&mut first) && key.0 == RAW_VALUE_KEY {
                        let value = raw_value(&mut map)?;
                        return Ok(Skip {
                            reserved: holds_raw_value_key(&value),
                        });
                    }
                    let value: Skip = map.next_value()?;
                    members.note(&key.0, value.reserved);
                }
                Ok(Skip {
                    reserved: members.any(),
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// Whether the members of an object read without keeping them would hold [`RAW_VALUE_KEY`]
/// once read: as a key (not the first: that one is read as raw JSON), or in the last value of
/// a key (duplicates: the last one wins, as in a `Value`).
#[derive(Default)]
struct Reserved {
    /// Keys whose last value holds a reserved key (rare: a key is copied only then).
    holding: Vec<String>,
    reserved_key: bool,
}

impl Reserved {
    /// The member `key` (read again: the last one wins) and whether its value holds a
    /// reserved key.
    fn note(&mut self, key: &str, value_reserved: bool) {
        self.reserved_key |= key == RAW_VALUE_KEY;
        if self.holding.is_empty() && !value_reserved {
            return;
        }
        match self.holding.iter().position(|k| k == key) {
            Some(i) if !value_reserved => {
                self.holding.swap_remove(i);
            }
            None if value_reserved => self.holding.push(key.to_owned()),
            _ => {}
        }
    }

    fn any(&self) -> bool {
        self.reserved_key || !self.holding.is_empty()
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
