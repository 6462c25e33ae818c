//! Helpers for enums tagged by a string field whose unknown tags must be kept, not rejected.

use serde::ser::{Impossible, SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

/// Serialize `value` (a struct) as a JSON object with `key: tag` placed first.
///
/// The value's fields are written straight into the object as they are serialized (no
/// intermediate `Value`: encoding a message costs one pass over its bytes). A field of the
/// value named `key` is left out; a unit or `None` value gives an object with the tag alone.
pub(crate) fn serialize_tagged<S: Serializer, T: Serialize>(
    s: S,
    key: &str,
    tag: &str,
    value: &T,
) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(None)?;
    map.serialize_entry(key, tag)?;
    value.serialize(Entries {
        map: &mut map,
        skip: key,
        skipping: false,
    })?;
    map.end()
}

/// A serializer that writes a struct's (or a map's) entries into an object being written.
struct Entries<'a, M> {
    map: &'a mut M,
    /// The tag's key: a field of that name is left out.
    skip: &'a str,
    /// The key just seen was `skip`: leave its value out.
    skipping: bool,
}

fn not_an_object<E: serde::ser::Error>() -> E {
    E::custom("tagged value is not an object")
}

impl<'a, M: SerializeMap> Serializer for Entries<'a, M> {
    type Ok = ();
    type Error = M::Error;
    type SerializeSeq = Impossible<(), M::Error>;
    type SerializeTuple = Impossible<(), M::Error>;
    type SerializeTupleStruct = Impossible<(), M::Error>;
    type SerializeTupleVariant = Impossible<(), M::Error>;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Impossible<(), M::Error>;

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, M::Error> {
        Ok(self)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self, M::Error> {
        Ok(self)
    }
    fn serialize_unit(self) -> Result<(), M::Error> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), M::Error> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), M::Error> {
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Result<(), M::Error> {
        v.serialize(self)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<(), M::Error> {
        v.serialize(self)
    }
    fn serialize_bool(self, _: bool) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_i64(self, _: i64) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_u64(self, _: u64) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_f64(self, _: f64) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_i8(self, v: i8) -> Result<(), M::Error> {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), M::Error> {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), M::Error> {
        self.serialize_i64(v.into())
    }
    fn serialize_u8(self, v: u8) -> Result<(), M::Error> {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), M::Error> {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<(), M::Error> {
        self.serialize_u64(v.into())
    }
    fn serialize_f32(self, v: f32) -> Result<(), M::Error> {
        self.serialize_f64(v.into())
    }
    fn serialize_char(self, _: char) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_str(self, _: &str) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), M::Error> {
        Err(not_an_object())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, M::Error> {
        Err(not_an_object())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, M::Error> {
        Err(not_an_object())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, M::Error> {
        Err(not_an_object())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, M::Error> {
        Err(not_an_object())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, M::Error> {
        Err(not_an_object())
    }
}

impl<'a, M: SerializeMap> SerializeStruct for Entries<'a, M> {
    type Ok = ();
    type Error = M::Error;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), M::Error> {
        if key == self.skip {
            return Ok(());
        }
        self.map.serialize_entry(key, value)
    }
    fn end(self) -> Result<(), M::Error> {
        Ok(())
    }
}

impl<'a, M: SerializeMap> SerializeMap for Entries<'a, M> {
    type Ok = ();
    type Error = M::Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), M::Error> {
        self.skipping = key.serialize(IsKey(self.skip)).unwrap_or(false);
        if self.skipping {
            return Ok(());
        }
        self.map.serialize_key(key)
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), M::Error> {
        if std::mem::take(&mut self.skipping) {
            return Ok(());
        }
        self.map.serialize_value(value)
    }
    fn end(self) -> Result<(), M::Error> {
        Ok(())
    }
}

/// Whether a map key is the string `.0` (anything but a string is not).
struct IsKey<'a>(&'a str);

impl<'a> Serializer for IsKey<'a> {
    type Ok = bool;
    type Error = serde_json::Error;
    type SerializeSeq = Impossible<bool, serde_json::Error>;
    type SerializeTuple = Impossible<bool, serde_json::Error>;
    type SerializeTupleStruct = Impossible<bool, serde_json::Error>;
    type SerializeTupleVariant = Impossible<bool, serde_json::Error>;
    type SerializeMap = Impossible<bool, serde_json::Error>;
    type SerializeStruct = Impossible<bool, serde_json::Error>;
    type SerializeStructVariant = Impossible<bool, serde_json::Error>;

    fn serialize_str(self, v: &str) -> Result<bool, Self::Error> {
        Ok(v == self.0)
    }
    fn serialize_bool(self, _: bool) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_i8(self, _: i8) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_i16(self, _: i16) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_i32(self, _: i32) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_i64(self, _: i64) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_u8(self, _: u8) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_u16(self, _: u16) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_u32(self, _: u32) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_u64(self, _: u64) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_f32(self, _: f32) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_f64(self, _: f64) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_char(self, _: char) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_none(self) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Result<bool, Self::Error> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        v: &'static str,
    ) -> Result<bool, Self::Error> {
        Ok(v == self.0)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<bool, Self::Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<bool, Self::Error> {
        Ok(false)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Self::Error> {
        Err(not_an_object())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Self::Error> {
        Err(not_an_object())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Self::Error> {
        Err(not_an_object())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Self::Error> {
        Err(not_an_object())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Self::Error> {
        Err(not_an_object())
    }
    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, Self::Error> {
        Err(not_an_object())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Self::Error> {
        Err(not_an_object())
    }
}

/// Declares `Serialize`/`Deserialize` for an enum whose variants are newtype structs selected by a
/// string field, plus an `Other(Value)` variant that keeps unknown tags verbatim.
/// What the first entry of a tagged object said.
pub(crate) enum Head<'de, A: serde::de::MapAccess<'de>> {
    /// The tag came first: its value, and the rest of the map still to read.
    Tag(String, A, std::marker::PhantomData<&'de ()>),
    /// It did not: the whole object, read into a value.
    Object(Map<String, Value>),
}

/// Read the first entry of a map: the fast path when it is the tag (as keel and the reference
/// CLI write them), else the whole map as a value.
pub(crate) fn head<'de, A: serde::de::MapAccess<'de>>(
    key: &str,
    mut map: A,
) -> Result<Head<'de, A>, A::Error> {
    let Some(first) = map.next_key::<String>()? else {
        return Ok(Head::Object(Map::new()));
    };
    if first == key {
        let tag = match map.next_value::<Value>()? {
            Value::String(tag) => return Ok(Head::Tag(tag, map, std::marker::PhantomData)),
            other => other,
        };
        // A tag that is not a string: the object is kept whole, as an unknown one.
        let mut all = Map::new();
        all.insert(first, tag);
        while let Some((k, v)) = map.next_entry::<String, Value>()? {
            all.insert(k, v);
        }
        return Ok(Head::Object(all));
    }
    let mut all = Map::new();
    all.insert(first, map.next_value::<Value>()?);
    while let Some((k, v)) = map.next_entry::<String, Value>()? {
        all.insert(k, v);
    }
    Ok(Head::Object(all))
}

/// The rest of a map (after an unknown tag) as an object, with the tag put back first.
pub(crate) fn rest<'de, A: serde::de::MapAccess<'de>>(
    key: &str,
    tag: String,
    mut map: A,
) -> Result<Value, A::Error> {
    let mut all = Map::new();
    all.insert(key.to_owned(), Value::String(tag));
    while let Some((k, v)) = map.next_entry::<String, Value>()? {
        all.insert(k, v);
    }
    Ok(Value::Object(all))
}

macro_rules! tagged_enum {
    ($ty:ident, $key:literal, { $($tag:literal => $variant:ident),* $(,)? }) => {
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $( $ty::$variant(x) => $crate::tagged::serialize_tagged(s, $key, $tag, x), )*
                    $ty::Other(v) => v.serialize(s),
                }
            }
        }
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> serde::de::Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("an object tagged by `", $key, "`"))
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<$ty, A::Error> {
                        use serde::de::Error as _;
                        match $crate::tagged::head($key, map)? {
                            // The tag first: the rest of the map goes straight into the variant.
                            $crate::tagged::Head::Tag(tag, map, _) => match tag.as_str() {
                                $( $tag => serde::Deserialize::deserialize(
                                    serde::de::value::MapAccessDeserializer::new(map),
                                )
                                .map($ty::$variant)
                                .map_err(|e: A::Error| A::Error::custom(format!(
                                    concat!("invalid ", $key, " ", $tag, ": {}"), e
                                ))), )*
                                _ => Ok($ty::Other($crate::tagged::rest($key, tag, map)?)),
                            },
                            $crate::tagged::Head::Object(mut o) => {
                                let tag = o.get($key).and_then(|t| t.as_str()).map(str::to_owned);
                                match tag.as_deref() {
                                    $( Some($tag) => {
                                        o.remove($key);
                                        serde_json::from_value(serde_json::Value::Object(o))
                                            .map($ty::$variant)
                                            .map_err(|e| A::Error::custom(format!(
                                                concat!("invalid ", $key, " ", $tag, ": {}"), e
                                            )))
                                    } )*
                                    _ => Ok($ty::Other(serde_json::Value::Object(o))),
                                }
                            }
                        }
                    }
                    // Anything that is not an object is kept as it is, like an unknown tag.
                    fn visit_unit<E: serde::de::Error>(self) -> Result<$ty, E> {
                        Ok($ty::Other(serde_json::Value::Null))
                    }
                    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<$ty, E> {
                        Ok($ty::Other(serde_json::Value::Bool(v)))
                    }
                    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<$ty, E> {
                        Ok($ty::Other(v.into()))
                    }
                    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<$ty, E> {
                        Ok($ty::Other(v.into()))
                    }
                    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<$ty, E> {
                        Ok($ty::Other(serde_json::Value::from(v)))
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$ty, E> {
                        Ok($ty::Other(serde_json::Value::String(v.to_owned())))
                    }
                    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<$ty, A::Error> {
                        let mut items = Vec::new();
                        while let Some(v) = seq.next_element::<serde_json::Value>()? {
                            items.push(v);
                        }
                        Ok($ty::Other(serde_json::Value::Array(items)))
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}
pub(crate) use tagged_enum;

/// `Option<Option<T>>` that tells an absent field (outer `None`) from an explicit `null`.
pub(crate) mod double_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer, T: Serialize>(
        v: &Option<Option<T>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            Some(inner) => inner.serialize(s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use crate::{ContentBlock, Frame};
    use serde_json::{json, Value};

    #[test]
    fn the_tag_first_or_anywhere_reads_the_same() {
        let first: ContentBlock =
            serde_json::from_str(r#"{"type":"text","text":"hi","citations":[1]}"#).unwrap();
        let later: ContentBlock =
            serde_json::from_str(r#"{"text":"hi","citations":[1],"type":"text"}"#).unwrap();
        let from_value: ContentBlock =
            serde_json::from_value(json!({"text": "hi", "type": "text", "citations": [1]}))
                .unwrap();
        assert_eq!(first, later);
        assert_eq!(first, from_value);
        let ContentBlock::Text(t) = &first else {
            panic!("{first:?}")
        };
        assert_eq!(t.extra["citations"], json!([1]), "unknown fields are kept");

        // Nested: a frame whose blocks are tagged too, tag first or not.
        let a: Frame = serde_json::from_str(
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]},"session_id":"s","parent_tool_use_id":null}"#,
        )
        .unwrap();
        let b: Frame = serde_json::from_str(
            r#"{"message":{"content":[{"content":"x","tool_use_id":"t","type":"tool_result"}],"role":"user"},"parent_tool_use_id":null,"session_id":"s","type":"user"}"#,
        )
        .unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn unknown_tags_and_other_shapes_are_kept_verbatim() {
        let b: ContentBlock =
            serde_json::from_str(r#"{"type":"server_tool_use","id":"x","n":1}"#).unwrap();
        assert_eq!(
            b,
            ContentBlock::Other(json!({"type": "server_tool_use", "id": "x", "n": 1}))
        );
        assert_eq!(
            serde_json::to_string(&b).unwrap(),
            r#"{"type":"server_tool_use","id":"x","n":1}"#
        );
        let n: ContentBlock = serde_json::from_str(r#"{"type":7,"x":1}"#).unwrap();
        assert_eq!(n, ContentBlock::Other(json!({"type": 7, "x": 1})));
        let s: ContentBlock = serde_json::from_str(r#""plain""#).unwrap();
        assert_eq!(s, ContentBlock::Other(Value::String("plain".into())));
        // A known tag with a broken body is an error that names the tag.
        let e = serde_json::from_str::<ContentBlock>(r#"{"type":"tool_use","id":5}"#).unwrap_err();
        assert!(e.to_string().contains("type tool_use"), "{e}");
    }
}
