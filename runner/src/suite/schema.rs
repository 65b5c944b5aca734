//! What the suite JSON Schema says beyond the shapes of the types in [`super::model`]: the
//! rules [`super::validate`] and [`super::params`] apply to a typed suite, said in JSON
//! Schema wherever JSON Schema can say them, so that `nvtest schema` accepts exactly what
//! the loader accepts.
//!
//! Each rule is one schema-only type (used with `#[schemars(with = ...)]` on a field of the
//! model), one transform (`#[schemars(transform = ...)]`) or, for integer widths, the pass
//! [`integer_widths`] over the whole schema. Names come from the vocabulary's types and
//! from [`nvme::spec::Status`], never from a second list of spellings.
//!
//! What no JSON Schema can see (a name used twice across cases, a `$name` declared in one
//! place and used in another, the size of the namespace set the steps before a step build)
//! stays the loader's alone; `runner/tests/malformed-semantic/README.md` lists it.

use std::borrow::Cow;

use nvme::spec::Status;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

use super::model::{BlocksName, NsName, Param};
use super::validate::MAX_EXPANSION;

/// A matrix parameter's name: a lowercase letter or `_`, then a-z, 0-9, `_`.
const PARAM_NAME: &str = r"^[a-z_][a-z0-9_]*$";

/// A version component the loader reads as a u32 of at most 65535 (major) or 255.
const MAJOR: &str = r"\+?0*(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}|0)";
const BYTE: &str = r"\+?0*(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";

/// Steps a `destructive: false` case may use (they only read from the drive), and the
/// `op`s of `io` that only read. Mirrors `validate::reads_only`.
const READ_ONLY_STEPS: &[&str] = &["existing_namespaces", "identify", "check", "verify", "compare"];
const READ_ONLY_IO_OPS: &[&str] = &["read", "compare", "flush"];

/// The serde spelling of a unit variant (`NsName::BeyondNn` is `beyond_nn`).
fn spelling<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Declares a schema-only type: its name, what it documents, and its schema.
macro_rules! schema_only {
    ($(#[$doc:meta])* $name:ident, |$generator:ident| $body:expr) => {
        $(#[$doc])*
        pub struct $name;

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema($generator: &mut SchemaGenerator) -> Schema {
                $body
            }
        }
    };
}

schema_only!(
    /// `$name`: a matrix parameter of the case.
    Var,
    |_generator| json_schema!({
        "description": "`$name`: a matrix parameter of the case",
        "type": "string",
        "pattern": r"^\$[a-z_][a-z0-9_]*$"
    })
);

schema_only!(
    /// An LBA data size in bytes: a power of two of at least 512 that fits a u32.
    DataSizeValue,
    |_generator| {
        let sizes: Vec<u64> = (9..32).map(|shift| 1u64 << shift).collect();
        json_schema!({
            "description": "An LBA data size in bytes: a power of two of at least 512 (512, 4096)",
            "type": "integer",
            "enum": sizes
        })
    }
);

schema_only!(
    /// An LBA data size, or `$name`.
    DataSize,
    |generator| json_schema!({
        "anyOf": [generator.subschema_for::<DataSizeValue>(), generator.subschema_for::<Var>()]
    })
);

schema_only!(
    /// `use_namespaces` `count`: at least one namespace, or `$name`.
    SetCount,
    |generator| json_schema!({
        "anyOf": [
            {"type": "integer", "minimum": 1, "maximum": u32::MAX},
            generator.subschema_for::<Var>()
        ]
    })
);

schema_only!(
    /// A 1-based index into the namespace set, or `$name`.
    SetIndex,
    |generator| json_schema!({
        "description": "A 1-based position in the namespace set (`ns: zero` names NSID 0)",
        "anyOf": [
            {"type": "integer", "minimum": 1, "maximum": u32::MAX},
            generator.subschema_for::<Var>()
        ]
    })
);

/// An [`NsName`] other than `excluded`, keeping `NsName` the one list of names.
fn ns_names_except(generator: &mut SchemaGenerator, excluded: &[NsName]) -> Value {
    let excluded: Vec<Value> = excluded.iter().map(spelling).collect();
    json!({"allOf": [generator.subschema_for::<NsName>(), {"not": {"enum": excluded}}]})
}

schema_only!(
    /// The `ns` of a step that takes one namespace: an index, `$name`, or any name but `all`.
    OneNamespace,
    |generator| {
        let names = ns_names_except(generator, &[NsName::All]);
        json_schema!({"anyOf": [generator.subschema_for::<SetIndex>(), names]})
    }
);

schema_only!(
    /// The `ns` of a step that works on the set (write, verify): an index, `$name`, `last`, `all`.
    SetMembers,
    |generator| {
        let names =
            ns_names_except(generator, &[NsName::Unallocated, NsName::BeyondNn, NsName::Broadcast, NsName::Zero]);
        json_schema!({"anyOf": [generator.subschema_for::<SetIndex>(), names]})
    }
);

/// A block count, `$name`, or a [`BlocksName`] other than `excluded`.
fn blocks_except(generator: &mut SchemaGenerator, excluded: &[BlocksName]) -> Schema {
    let excluded: Vec<Value> = excluded.iter().map(spelling).collect();
    json_schema!({
        "anyOf": [
            generator.subschema_for::<Param<u64>>(),
            {"allOf": [generator.subschema_for::<BlocksName>(), {"not": {"enum": excluded}}]}
        ]
    })
}

schema_only!(
    /// The size of a new namespace: a count, `$name`, `remaining` or `more_than_remaining`.
    NewNamespaceBlocks,
    |generator| blocks_except(generator, &[BlocksName::Whole])
);

schema_only!(
    /// A range's block count: a count, `$name` or `whole`.
    RangeBlocks,
    |generator| blocks_except(generator, &[BlocksName::Remaining, BlocksName::MoreThanRemaining])
);

schema_only!(
    /// A requirement's version, as the loader reads it: `MAJOR[.MINOR[.TERTIARY]]` text, or a
    /// YAML number (`version: 1.4`), whose spelling JSON does not keep.
    VersionText,
    |_generator| json_schema!({
        "description": "MAJOR[.MINOR[.TERTIARY]] (major up to 65535, the others up to 255); \
                        a number (1.4) is read as the text it is written as",
        "anyOf": [
            {"type": "string", "pattern": format!(r"^{MAJOR}(?:\.{BYTE}(?:\.{BYTE})?)?$")},
            {"type": "number", "minimum": 0, "exclusiveMaximum": 65536}
        ]
    })
);

schema_only!(
    /// A status an `expect` names: `success` or an NVMe status name, in any letter case.
    StatusName,
    |_generator| json_schema!({
        "description": "`success` or an NVMe status name such as `LBA Out of Range`, in any letter case",
        "type": "string",
        "pattern": status_pattern()
    })
);

schema_only!(
    /// A case's `matrix`: named lists of distinct whole numbers. Only whole numbers can be
    /// values: every parameter must be used, and every place a `$name` stands is numeric.
    Matrix,
    |_generator| json_schema!({
        "type": "object",
        "propertyNames": {"pattern": PARAM_NAME},
        "additionalProperties": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_EXPANSION,
            "uniqueItems": true,
            "items": {"type": "integer", "minimum": 0, "maximum": u64::MAX}
        },
        "default": {}
    })
);

impl JsonSchema for super::model::Expect {
    fn schema_name() -> Cow<'static, str> {
        "Expect".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let name = generator.subschema_for::<StatusName>();
        json_schema!({
            "description": "A status a step expects: a spec status name (\"LBA Out of Range\"), `success`, \
                            or a list of acceptable ones",
            "anyOf": [name.clone(), {"type": "array", "minItems": 1, "items": name}]
        })
    }
}

/// `^\s*(success|NAME|...)\s*$`, each letter matching either case, as the loader compares.
fn status_pattern() -> String {
    let names = ["success"].into_iter().chain(Status::all_named().filter_map(|s| s.name()));
    let alternatives: Vec<String> = names.map(any_case).collect();
    format!(r"^\s*(?:{})\s*$", alternatives.join("|"))
}

/// A regular expression matching `text` with ASCII letters in either case.
fn any_case(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphabetic() {
            out.push('[');
            out.push(c.to_ascii_uppercase());
            out.push(c.to_ascii_lowercase());
            out.push(']');
        } else if "^$\\.*+?()[]{}|/".contains(c) {
            out.push('\\');
            out.push(c);
        } else {
            out.push(c);
        }
    }
    out
}

/// The body of a one-key step (`{create_namespace: {...}}` → the `{...}`).
fn step_body(schema: &mut Schema) -> Option<&mut Map<String, Value>> {
    let properties = schema.get_mut("properties")?.as_object_mut()?;
    if properties.len() != 1 {
        return None;
    }
    properties.values_mut().next()?.as_object_mut()
}

/// `create_namespace` and `format` take exactly one of `lbads` and `lbaf` (a `null` one is
/// not given).
pub fn one_format(schema: &mut Schema) {
    let given = |field: &str| json!({"required": [field], "properties": {field: {"not": {"type": "null"}}}});
    if let Some(body) = step_body(schema) {
        body.insert("oneOf".into(), json!([given("lbads"), given("lbaf")]));
    }
}

/// A case with `destructive: false` has only steps that read.
pub fn read_only_unless_destructive(schema: &mut Schema) {
    let mut reading: Vec<Value> = READ_ONLY_STEPS.iter().map(|name| json!({"required": [name]})).collect();
    reading.push(json!({"required": ["io"], "properties": {"io": {"properties": {"op": {"enum": READ_ONLY_IO_OPS}}}}}));
    schema.insert("if".into(), json!({"required": ["destructive"], "properties": {"destructive": {"const": false}}}));
    schema.insert("then".into(), json!({"properties": {"steps": {"items": {"anyOf": reading}}}}));
}

/// Gives every integer schemars marks with a width (`"format": "uint32"`) the maximum of
/// that width, which schemars states only for some.
pub fn integer_widths(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let max = match map.get("format").and_then(Value::as_str) {
                Some("uint8") => Some(u64::from(u8::MAX)),
                Some("uint16") => Some(u64::from(u16::MAX)),
                Some("uint32") => Some(u64::from(u32::MAX)),
                Some("uint64") => Some(u64::MAX),
                _ => None,
            };
            if let Some(max) = max {
                map.entry("maximum").or_insert(json!(max));
                map.entry("minimum").or_insert(json!(0));
            }
            map.values_mut().for_each(integer_widths);
        }
        Value::Array(items) => items.iter_mut().for_each(integer_widths),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_match_in_any_case() {
        assert_eq!(any_case("LBA (x)"), r"[Ll][Bb][Aa] \([Xx]\)");
        assert!(status_pattern().contains("[Ll][Bb][Aa] [Oo][Uu][Tt] [Oo][Ff] [Rr][Aa][Nn][Gg][Ee]"));
    }

    #[test]
    fn read_only_steps_are_steps_of_the_vocabulary() {
        let schema: Value = serde_json::from_str(&super::super::json_schema()).unwrap();
        let steps = schema["$defs"]["Step"].to_string();
        for name in READ_ONLY_STEPS {
            assert!(steps.contains(&format!("\"{name}\"")), "{name} is not a step");
        }
    }
}
