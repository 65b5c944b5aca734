//! Typed scalars only: a number or a boolean is read only from a scalar the YAML reader
//! itself types as one (`mdts: 5`, `shared: true`), never from quoted text (`mdts: "5"`),
//! which some readers turn into the number it spells.
//!
//! [`Strict`] wraps the type a file is read into; every number and boolean below it is
//! asked of the reader as "any value" and accepted only when that value is a number or a
//! boolean. Text where one is expected is an error the reader locates at the value,
//! saying the value is text and what is expected. Everything else (text, lists, maps,
//! enums, options, the reader's span wrappers) passes through unchanged.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};
use serde::Deserialize;

/// A document read with typed scalars only: `reader::from_str::<Strict<File>>(text)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Strict<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Strict<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(Deser(deserializer)).map(Strict)
    }
}

/// A deserializer whose numbers and booleans must come typed.
struct Deser<D>(D);

/// A visitor whose nested values are read through [`Deser`].
struct Vis<V>(V);

/// A visitor for a number or boolean: text is refused.
struct Typed<V> {
    inner: V,
    expected: &'static str,
}

/// A seed whose value is read through [`Deser`].
struct Seed<S>(S);

/// Sequence, map and enum access whose elements are read through [`Deser`].
struct Access<A>(A);

macro_rules! typed {
    ($($method:ident => $expected:literal,)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
                self.0.deserialize_any(Typed { inner: visitor, expected: $expected })
            }
        )*
    };
}

macro_rules! passed {
    ($($method:ident,)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
                self.0.$method(Vis(visitor))
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Deser<D> {
    type Error = D::Error;

    typed! {
        deserialize_bool => "true or false",
        deserialize_i8 => "a whole number (i8)",
        deserialize_i16 => "a whole number (i16)",
        deserialize_i32 => "a whole number (i32)",
        deserialize_i64 => "a whole number (i64)",
        deserialize_i128 => "a whole number (i128)",
        deserialize_u8 => "a whole number (u8)",
        deserialize_u16 => "a whole number (u16)",
        deserialize_u32 => "a whole number (u32)",
        deserialize_u64 => "a whole number (u64)",
        deserialize_u128 => "a whole number (u128)",
        deserialize_f32 => "a number",
        deserialize_f64 => "a number",
    }

    passed! {
        deserialize_any,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
        deserialize_identifier,
        deserialize_ignored_any,
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit_struct(name, Vis(visitor))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_newtype_struct(name, Vis(visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, Vis(visitor))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple_struct(name, len, Vis(visitor))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_struct(name, fields, Vis(visitor))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_enum(name, variants, Vis(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// Forwards the scalar `visit_*` methods of a visitor wrapper to its inner visitor.
macro_rules! forward_scalars {
    ($inner:tt; $($method:ident($ty:ty),)*) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
                self.$inner.$method(v)
            }
        )*
    };
}

/// Forwards the nested `visit_*` methods (whose contents are read through [`Deser`]).
macro_rules! forward_nested {
    ($inner:tt) => {
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            self.$inner.visit_none()
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            self.$inner.visit_unit()
        }

        fn visit_some<D2: Deserializer<'de>>(self, deserializer: D2) -> Result<Self::Value, D2::Error> {
            self.$inner.visit_some(Deser(deserializer))
        }

        fn visit_newtype_struct<D2: Deserializer<'de>>(self, deserializer: D2) -> Result<Self::Value, D2::Error> {
            self.$inner.visit_newtype_struct(Deser(deserializer))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            self.$inner.visit_seq(Access(seq))
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            self.$inner.visit_map(Access(map))
        }

        fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
            self.$inner.visit_enum(Access(data))
        }
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Vis<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.expecting(f)
    }

    forward_scalars! { 0;
        visit_bool(bool), visit_i8(i8), visit_i16(i16), visit_i32(i32), visit_i64(i64), visit_i128(i128),
        visit_u8(u8), visit_u16(u16), visit_u32(u32), visit_u64(u64), visit_u128(u128),
        visit_f32(f32), visit_f64(f64), visit_char(char), visit_str(&str), visit_borrowed_str(&'de str),
        visit_string(String), visit_bytes(&[u8]), visit_borrowed_bytes(&'de [u8]), visit_byte_buf(Vec<u8>),
    }

    forward_nested!(0);
}

/// The error for text where a number or boolean is expected: quoted text that spells one
/// (plain text that spells one would have been read as one) is told to lose its quotes.
fn text<E: de::Error>(text: &str, expected: &'static str) -> E {
    let spells_one = if expected.starts_with("true") {
        matches!(text.trim(), "true" | "false")
    } else {
        let t = text.trim();
        t.parse::<f64>().is_ok() || (t.starts_with("0x") && t[2..].chars().all(|c| c.is_ascii_hexdigit()))
    };
    // Errors are one line: a value over several lines is shown with its breaks escaped,
    // and a long one cut.
    let shown = one_line(text);
    if spells_one {
        E::custom(format_args!(
            "\"{shown}\" is quoted text; {expected} is written without quotes: {}",
            one_line(text.trim())
        ))
    } else {
        E::custom(format_args!("`{shown}` is text; expected {expected}"))
    }
}

/// `text` on one line: line breaks and tabs escaped, cut after 60 characters.
fn one_line(text: &str) -> String {
    let escaped = super::one_line(text);
    match escaped.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &escaped[..at]),
        None => escaped,
    }
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Typed<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expected)
    }

    forward_scalars! { inner;
        visit_bool(bool), visit_i8(i8), visit_i16(i16), visit_i32(i32), visit_i64(i64), visit_i128(i128),
        visit_u8(u8), visit_u16(u16), visit_u32(u32), visit_u64(u64), visit_u128(u128),
        visit_f32(f32), visit_f64(f64), visit_char(char),
        visit_bytes(&[u8]), visit_borrowed_bytes(&'de [u8]), visit_byte_buf(Vec<u8>),
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Err(text(v, self.expected))
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Err(text(v, self.expected))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Err(text(&v, self.expected))
    }

    forward_nested!(inner);
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Deser(deserializer))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Access<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Access<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(Seed(seed))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.0.next_value_seed(Seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for Access<A> {
    type Error = A::Error;
    type Variant = Access<A::Variant>;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self::Variant), A::Error> {
        self.0.variant_seed(Seed(seed)).map(|(value, variant)| (value, Access(variant)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Access<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Seed(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Vis(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, Vis(visitor))
    }
}
