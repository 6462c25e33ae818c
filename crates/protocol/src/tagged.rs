//! Helpers for enums tagged by a string field whose unknown tags must be kept, not rejected.

use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

/// Serialize `value` (a struct) as a JSON object with `key: tag` placed first.
pub(crate) fn serialize_tagged<S: Serializer, T: Serialize>(
    s: S,
    key: &str,
    tag: &str,
    value: &T,
) -> Result<S::Ok, S::Error> {
    let inner = serde_json::to_value(value).map_err(S::Error::custom)?;
    let mut out = Map::new();
    out.insert(key.to_owned(), Value::String(tag.to_owned()));
    match inner {
        Value::Object(m) => {
            for (k, v) in m {
                if k != key {
                    out.insert(k, v);
                }
            }
        }
        Value::Null => {}
        other => {
            return Err(S::Error::custom(format!(
                "tagged value is not an object: {other}"
            )))
        }
    }
    out.serialize(s)
}

/// Deserialize one variant's struct from the object `v`, naming the tag in any error.
pub(crate) fn from_object<'de, D, T>(v: Value, what: &str) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    serde_json::from_value(v).map_err(|e| D::Error::custom(format!("invalid {what}: {e}")))
}

/// Declares `Serialize`/`Deserialize` for an enum whose variants are newtype structs selected by a
/// string field, plus an `Other(Value)` variant that keeps unknown tags verbatim.
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
                let mut v = serde_json::Value::deserialize(d)?;
                let tag = v.get($key).and_then(|t| t.as_str()).map(str::to_owned);
                match tag.as_deref() {
                    $( Some($tag) => {
                        // The tag is the variant; it must not also land in the struct's `extra`.
                        if let Some(o) = v.as_object_mut() {
                            o.remove($key);
                        }
                        Ok($ty::$variant($crate::tagged::from_object::<D, _>(v, concat!($key, " ", $tag))?))
                    } )*
                    _ => Ok($ty::Other(v)),
                }
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
