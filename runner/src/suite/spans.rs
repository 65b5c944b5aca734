//! Where things are in a suite file: a second, untyped reading of the YAML that keeps the
//! line and column of every node and every mapping key, so that validation of the typed
//! suite can point at the exact place of what it rejects.
//!
//! The typed model (`model.rs`) stays free of span wrappers; a checker walks the typed
//! value and asks this tree for the position of the same path (`cases[3].steps[1].io.expect`).

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// A 1-based line and column in a suite file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    /// The start of the file: used when nothing better is known.
    pub const START: Pos = Pos { line: 1, column: 1 };

    pub(crate) fn from_location(location: &serde_saphyr::Location) -> Pos {
        if location.line() == 0 {
            return Pos::START;
        }
        Pos { line: location.line() as usize, column: location.column().max(1) as usize }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One step of a path into the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    /// The value of this key of a mapping.
    Key(String),
    /// This element (0-based) of a sequence.
    Index(usize),
    /// The value of the only key of a one-entry mapping (a step: `- io: {...}`).
    Sole,
}

/// A key segment: `key("cases")`.
pub fn key(name: &str) -> Seg {
    Seg::Key(name.to_string())
}

/// A YAML node with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub pos: Pos,
    pub kind: NodeKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    /// Entries in file order: key text, key position, value.
    Map(Vec<(String, Pos, Node)>),
    Seq(Vec<Node>),
    /// A scalar as the YAML core schema reads it (`512`, `true`, `LBA Out of Range`).
    Scalar(String),
}

impl Node {
    /// Parses `text` into a positioned tree, with the options the typed reading uses.
    pub fn parse(text: &str, options: serde_saphyr::Options) -> Result<Node, serde_saphyr::Error> {
        let raw: Spanned<Raw> = serde_saphyr::from_str_with_options(text, options)?;
        Ok(Node::from_raw(raw))
    }

    fn from_raw(raw: Spanned<Raw>) -> Node {
        let pos = Pos::from_location(&raw.referenced);
        let kind = match raw.value {
            Raw::Scalar(text) => NodeKind::Scalar(text),
            Raw::Seq(items) => NodeKind::Seq(items.into_iter().map(Node::from_raw).collect()),
            Raw::Map(entries) => NodeKind::Map(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.value.0, Pos::from_location(&k.referenced), Node::from_raw(v)))
                    .collect(),
            ),
        };
        Node { pos, kind }
    }

    /// The node one segment below this one, if there is one.
    pub fn child(&self, seg: &Seg) -> Option<&Node> {
        match (&self.kind, seg) {
            (NodeKind::Map(entries), Seg::Key(name)) => entries.iter().find(|(k, _, _)| k == name).map(|(_, _, v)| v),
            (NodeKind::Map(entries), Seg::Sole) if entries.len() == 1 => entries.first().map(|(_, _, v)| v),
            (NodeKind::Seq(items), Seg::Index(i)) => items.get(*i),
            _ => None,
        }
    }

    /// The node at `path`, if the file has one there.
    pub fn get(&self, path: &[Seg]) -> Option<&Node> {
        path.iter().try_fold(self, |node, seg| node.child(seg))
    }

    /// Where the value at `path` is; when the file has no node there (a defaulted field),
    /// the position of the deepest node that exists on the way.
    pub fn pos(&self, path: &[Seg]) -> Pos {
        let mut node = self;
        for seg in path {
            match node.child(seg) {
                Some(next) => node = next,
                None => break,
            }
        }
        node.pos
    }

    /// Where the key of the last segment of `path` is written (for "this key is wrong");
    /// the value's position when the last segment is not a key.
    pub fn key_pos(&self, path: &[Seg]) -> Pos {
        let Some((Seg::Key(name), parent_path)) = path.split_last() else {
            return self.pos(path);
        };
        match self.get(parent_path).map(|n| &n.kind) {
            Some(NodeKind::Map(entries)) => {
                entries.iter().find(|(k, _, _)| k == name).map(|(_, p, _)| *p).unwrap_or_else(|| self.pos(path))
            }
            _ => self.pos(path),
        }
    }

    /// The keys of the mapping at `path` with their positions (empty if it is no mapping).
    pub fn keys(&self, path: &[Seg]) -> Vec<(&str, Pos)> {
        match self.get(path).map(|n| &n.kind) {
            Some(NodeKind::Map(entries)) => entries.iter().map(|(k, p, _)| (k.as_str(), *p)).collect(),
            _ => Vec::new(),
        }
    }
}

/// The untyped reading, before positions are flattened into [`Node`].
enum Raw {
    Map(Vec<(Spanned<KeyText>, Spanned<Raw>)>),
    Seq(Vec<Spanned<Raw>>),
    Scalar(String),
}

/// A mapping key read as text (`n` stays `n`, not a YAML 1.1 boolean).
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(KeyText)
    }
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RawVisitor)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Raw, E> {
        Ok(Raw::Scalar(v.to_string()))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Raw, E> {
        Ok(Raw::Scalar(v.to_string()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Raw, E> {
        Ok(Raw::Scalar(v.to_string()))
    }

    fn visit_i128<E>(self, v: i128) -> Result<Raw, E> {
        Ok(Raw::Scalar(v.to_string()))
    }

    fn visit_u128<E>(self, v: u128) -> Result<Raw, E> {
        Ok(Raw::Scalar(v.to_string()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Raw, E> {
        Ok(Raw::Scalar(v.to_string()))
    }

    fn visit_str<E>(self, v: &str) -> Result<Raw, E> {
        Ok(Raw::Scalar(v.to_string()))
    }

    fn visit_bytes<E>(self, v: &[u8]) -> Result<Raw, E> {
        Ok(Raw::Scalar(String::from_utf8_lossy(v).into_owned()))
    }

    fn visit_unit<E>(self) -> Result<Raw, E> {
        Ok(Raw::Scalar(String::new()))
    }

    fn visit_none<E>(self) -> Result<Raw, E> {
        Ok(Raw::Scalar(String::new()))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Raw, D::Error> {
        Raw::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Raw::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key()? {
            let value = map.next_value()?;
            entries.push((key, value));
        }
        Ok(Raw::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Node {
        Node::parse(text, crate::suite::yaml_options()).unwrap()
    }

    #[test]
    fn positions_of_values_keys_and_step_bodies() {
        let tree =
            parse("suite: x\ncases:\n  - name: a\n    matrix: {n: [1, 2]}\n    steps:\n      - io: {blocks: $n}\n");
        let case = [key("cases"), Seg::Index(0)];
        assert_eq!(tree.pos(&[key("suite")]), Pos { line: 1, column: 8 });
        assert_eq!(tree.key_pos(&[&case[..], &[key("matrix"), key("n")]].concat()), Pos { line: 4, column: 14 });
        assert_eq!(
            tree.pos(&[&case[..], &[key("matrix"), key("n"), Seg::Index(1)]].concat()),
            Pos { line: 4, column: 21 }
        );
        let blocks = [&case[..], &[key("steps"), Seg::Index(0), Seg::Sole, key("blocks")]].concat();
        assert_eq!(tree.pos(&blocks), Pos { line: 6, column: 22 });
        assert_eq!(tree.get(&blocks).map(|n| &n.kind), Some(&NodeKind::Scalar("$n".into())));
    }

    #[test]
    fn a_missing_path_falls_back_to_the_deepest_node_present() {
        let tree = parse("suite: x\ncases:\n  - name: a\n");
        let missing = [key("cases"), Seg::Index(0), key("steps"), Seg::Index(4)];
        assert_eq!(tree.pos(&missing), Pos { line: 3, column: 5 });
        assert!(tree.get(&missing).is_none());
    }

    #[test]
    fn keys_stay_text() {
        let tree = parse("n: 1\ny: 2\n");
        let keys: Vec<&str> = tree.keys(&[]).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["n", "y"]);
    }
}
