//! The line of a node of a policy file, found by its path (`[1].rules.window`).
//!
//! `check.rs` validates documents as trees, which carry no positions. The YAML parser
//! knows every node's position but says it only with an error, so to find a path's
//! line the document is walked again and an error is raised on reaching the node: on
//! its key when the path ends in a key (the line a reader looks at), else on the node
//! itself. The error's location is the line. A path that is not in the document (a
//! missing field) is looked up again without its last step: the line of its parent.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::check::Seg;

/// The message of the error raised at the node; any other error means "not found".
const HERE: &str = "agentplane-policy-locate-here";

/// The 1-based line of `path` in document `index` of `text`, or of its nearest
/// ancestor in the document.
pub(crate) fn line(text: &str, index: usize, path: &[Seg]) -> Option<usize> {
    (0..=path.len())
        .rev()
        .find_map(|len| line_of(text, index, &path[..len]))
}

fn line_of(text: &str, index: usize, path: &[Seg]) -> Option<usize> {
    let document = yaml_serde::Deserializer::from_str(text).nth(index)?;
    let walked = Locate { path }.deserialize(document);
    match walked {
        // The message carries the path before it (`rules.max: …`).
        Err(e) if e.to_string().contains(HERE) => e.location().map(|l| l.line()),
        _ => None,
    }
}

/// Walks towards `path`; raises [`HERE`] on reaching it.
struct Locate<'p> {
    path: &'p [Seg],
}

impl<'de> DeserializeSeed<'de> for Locate<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Locate<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Seg::Key(want), rest)) = self.path.split_first() else {
            return match self.path {
                [] => Err(de::Error::custom(HERE)),
                // An index into a mapping: not here.
                _ => drain_map(map),
            };
        };
        while let Some(hit) = map.next_key_seed(Key {
            want,
            last: rest.is_empty(),
        })? {
            if hit {
                map.next_value_seed(Locate { path: rest })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Seg::Index(want), rest)) = self.path.split_first() else {
            return match self.path {
                [] => Err(de::Error::custom(HERE)),
                _ => {
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    Ok(())
                }
            };
        };
        let mut i = 0;
        loop {
            let more = if i == *want {
                seq.next_element_seed(Locate { path: rest })?.is_some()
            } else {
                seq.next_element::<IgnoredAny>()?.is_some()
            };
            if !more {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.scalar()
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.scalar()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.scalar()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.scalar()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.scalar()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.scalar()
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.scalar()
    }
}

impl Locate<'_> {
    /// A scalar is the node when the path ends here; nothing lies beneath one.
    fn scalar<E: de::Error>(self) -> Result<(), E> {
        if self.path.is_empty() {
            Err(E::custom(HERE))
        } else {
            Ok(())
        }
    }
}

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_key::<IgnoredAny>()?.is_some() {
        map.next_value::<IgnoredAny>()?;
    }
    Ok(())
}

/// A mapping key: whether it is the wanted one; raises [`HERE`] on it when the path
/// ends with it.
struct Key<'w> {
    want: &'w str,
    last: bool,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        match (key == self.want, self.last) {
            (true, true) => Err(E::custom(HERE)),
            (hit, _) => Ok(hit),
        }
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<bool, A::Error> {
        drain_map(map).map(|()| false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}
