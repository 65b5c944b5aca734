//! Which cases a run selects, as libtest and nextest select tests: `--filter` (several,
//! any matches; also given as a positional argument), `--skip` (several, any excludes),
//! `--exact` (the name must equal the text instead of containing it). A name is
//! `SUITE::CASE`; on a run of several targets a filter may also name the target,
//! `TARGET::SUITE::CASE`.

use crate::suite::ExpandedCase;

/// The filters of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// A case is selected when it matches any of these (all cases when empty).
    pub filters: Vec<String>,
    /// A case is left out when it matches any of these.
    pub skip: Vec<String>,
    pub exact: bool,
}

impl Selection {
    /// Whether the case is selected; `target` is its target's label when the run has
    /// several (a filter may name it), `None` otherwise.
    pub fn selects(&self, case: &ExpandedCase, target: Option<&str>) -> bool {
        let name = format!("{}::{}", case.suite, case.name);
        let full = target.map(|t| format!("{t}::{name}"));
        let matches = |text: &String| {
            let hit = |n: &str| if self.exact { n == text } else { n.contains(text.as_str()) };
            hit(&name) || full.as_deref().is_some_and(hit)
        };
        (self.filters.is_empty() || self.filters.iter().any(matches)) && !self.skip.iter().any(matches)
    }

    /// The filters in words for messages: "--filter `a` or `b` without --skip `c`".
    pub fn describe(&self) -> String {
        let exact = if self.exact { "--exact " } else { "" };
        match (self.filters.is_empty(), self.skip.is_empty()) {
            (true, true) => "no filter".into(),
            (false, true) => format!("--filter {exact}{}", quoted(&self.filters)),
            (true, false) => format!("--skip {exact}{}", quoted(&self.skip)),
            (false, false) => {
                format!("--filter {exact}{} without --skip {}", quoted(&self.filters), quoted(&self.skip))
            }
        }
    }
}

/// Texts for messages: "`a` or `b`".
pub fn quoted(texts: &[String]) -> String {
    texts.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(" or ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(suite: &str, name: &str) -> ExpandedCase {
        ExpandedCase::named(suite, name)
    }

    fn selection(filters: &[&str], skip: &[&str], exact: bool) -> Selection {
        Selection {
            filters: filters.iter().map(|s| s.to_string()).collect(),
            skip: skip.iter().map(|s| s.to_string()).collect(),
            exact,
        }
    }

    #[test]
    fn several_filters_select_any_and_skips_leave_out_any() {
        let s = selection(&["trim::", "isolation"], &["lbads=4096"], false);
        assert!(s.selects(&case("trim", "deallocate/lbads=512"), None));
        assert!(!s.selects(&case("trim", "deallocate/lbads=4096"), None));
        assert!(s.selects(&case("namespaces", "isolation-between-namespaces"), None));
        assert!(!s.selects(&case("namespaces", "create"), None));
        assert!(Selection::default().selects(&case("a", "b"), None));
    }

    #[test]
    fn exact_names_the_whole_case_or_the_case_on_a_target() {
        let s = selection(&["trim::a"], &[], true);
        assert!(s.selects(&case("trim", "a"), Some("sim:enterprise-1.4")));
        assert!(!s.selects(&case("trim", "ab"), None));
        let on_target = selection(&["qemu:ns32::trim::a"], &[], true);
        assert!(on_target.selects(&case("trim", "a"), Some("qemu:ns32")));
        assert!(!on_target.selects(&case("trim", "a"), Some("sim:enterprise-1.4")));
        assert!(!on_target.selects(&case("trim", "a"), None));
    }

    #[test]
    fn the_description_names_every_filter() {
        assert_eq!(selection(&["a", "b"], &["c"], true).describe(), "--filter --exact `a` or `b` without --skip `c`");
    }
}
