//! Scalars validated where they are read: a string deserialized and checked inside the
//! scalar's visitor, so a refusal carries the scalar's line and field path. Every
//! validated field type of the policy format reads through here.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};

/// Deserializes a string and validates it inside the scalar's visitor, so a refusal is
/// located at the scalar (its line and field path), not at the enclosing mapping.
pub(crate) fn parse_str<'de, D, T>(
    deserializer: D,
    parse: fn(&str) -> Result<T, String>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    struct StrVisitor<T>(fn(&str) -> Result<T, String>);
    impl<T> Visitor<'_> for StrVisitor<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            (self.0)(v).map_err(E::custom)
        }
    }
    deserializer.deserialize_str(StrVisitor(parse))
}
