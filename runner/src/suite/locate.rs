//! Finding suites: what `--suite NAME|PATH.yaml` names, and where suites are: a
//! directory of the user's (`--suites-dir DIR` or `NVTEST_SUITES_DIR`) first, then the
//! shipped `suites/` (found walking up from the executable, else the source tree's the
//! binary was built from). A `suites/` in the current directory is not looked at: it
//! would hide the shipped suites without saying so.

use std::path::{Path, PathBuf};

/// A suite file to load, and the name it must carry when it was asked for by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SuiteFile {
    pub path: PathBuf,
    pub expected_name: Option<String>,
}

/// Finds the `suites/` directory; the error is one line saying where it looked.
pub fn suites_dir() -> Result<PathBuf, String> {
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        candidates.extend(exe.ancestors().skip(1).map(|dir| dir.join("suites")));
    }
    candidates.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("suites"));
    let found = candidates.into_iter().find(|dir| dir.is_dir());
    found
        .map(|dir| std::fs::canonicalize(&dir).unwrap_or(dir))
        .ok_or_else(|| "no suites directory: looked for suites/ above the executable, and the source tree's".into())
}

/// Whether a `--suite` argument is a path rather than a name.
pub fn is_path(argument: &str) -> bool {
    argument.ends_with(".yaml") || argument.ends_with(".yml") || argument.contains('/') || argument.contains('\\')
}

/// The names of the suites in `dir` (file stems of `*.yaml`), sorted.
pub fn available(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml") && path.is_file())
        .filter_map(|path| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names
}

/// The environment variable naming a directory of suites looked in before the shipped.
pub const SUITES_DIR_ENV: &str = "NVTEST_SUITES_DIR";

/// [`resolve`] with a directory of the user's looked in first: a name found there is
/// that file, otherwise the shipped suite; no arguments means every suite of `own`.
pub fn resolve_with(
    arguments: &[String],
    own: Option<&Path>,
    shipped: impl Fn() -> Result<PathBuf, String>,
) -> Result<Vec<SuiteFile>, String> {
    let Some(own) = own else { return resolve(arguments, shipped) };
    if !own.is_dir() {
        return Err(format!("the suites directory {} is not a directory", own.display()));
    }
    if arguments.is_empty() {
        return resolve(arguments, || Ok(own.to_path_buf()));
    }
    let mut files = Vec::new();
    for argument in arguments {
        let mine = own.join(format!("{argument}.yaml"));
        if !is_path(argument) && mine.is_file() {
            files.push(SuiteFile { path: mine, expected_name: Some(argument.clone()) });
            continue;
        }
        let found = resolve(std::slice::from_ref(argument), &shipped).map_err(|e| {
            let names = available(own);
            let names = if names.is_empty() { "none".to_string() } else { names.join(", ") };
            format!("{e}; nor in {} (available: {names})", own.display())
        })?;
        files.extend(found);
    }
    Ok(files)
}

/// Turns `--suite` arguments into files: paths as given, names as `DIR/NAME.yaml`; no
/// arguments means every suite in `DIR`. `dir` is only looked up when a name needs it.
pub fn resolve(arguments: &[String], dir: impl Fn() -> Result<PathBuf, String>) -> Result<Vec<SuiteFile>, String> {
    if arguments.is_empty() {
        let dir = dir()?;
        let names = available(&dir);
        if names.is_empty() {
            return Err(format!("no suites in {}: it has no NAME.yaml files", dir.display()));
        }
        return Ok(names
            .into_iter()
            .map(|name| SuiteFile { path: dir.join(format!("{name}.yaml")), expected_name: Some(name) })
            .collect());
    }
    let mut files = Vec::new();
    for argument in arguments {
        if is_path(argument) {
            files.push(SuiteFile { path: PathBuf::from(argument), expected_name: None });
            continue;
        }
        let dir = dir()?;
        let path = dir.join(format!("{argument}.yaml"));
        if !path.is_file() {
            let names = available(&dir);
            let names = if names.is_empty() { "none".to_string() } else { names.join(", ") };
            return Err(format!("no suite `{argument}` in {} (available: {names})", dir.display()));
        }
        files.push(SuiteFile { path, expected_name: Some(argument.clone()) });
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            std::fs::write(dir.path().join(f), "suite: x\n").unwrap();
        }
        dir
    }

    #[test]
    fn names_resolve_in_the_directory_and_paths_as_given() {
        let dir = dir_with(&["trim.yaml", "namespaces.yaml"]);
        let d = dir.path().to_path_buf();
        let files = resolve(&["trim".into(), "x/mine.yaml".into()], || Ok(d.clone())).unwrap();
        assert_eq!(
            files,
            [
                SuiteFile { path: d.join("trim.yaml"), expected_name: Some("trim".into()) },
                SuiteFile { path: "x/mine.yaml".into(), expected_name: None },
            ]
        );
    }

    #[test]
    fn a_missing_name_lists_the_available_ones() {
        let dir = dir_with(&["trim.yaml", "namespaces.yaml", "README.md"]);
        let d = dir.path().to_path_buf();
        let error = resolve(&["trimm".into()], || Ok(d.clone())).unwrap_err();
        assert_eq!(error, format!("no suite `trimm` in {} (available: namespaces, trim)", d.display()));
    }

    #[test]
    fn no_argument_means_every_suite_sorted() {
        let dir = dir_with(&["trim.yaml", "namespaces.yaml"]);
        let d = dir.path().to_path_buf();
        let names: Vec<Option<String>> =
            resolve(&[], || Ok(d.clone())).unwrap().into_iter().map(|f| f.expected_name).collect();
        assert_eq!(names, [Some("namespaces".into()), Some("trim".into())]);
        let empty = dir_with(&[]);
        let e = empty.path().to_path_buf();
        assert!(resolve(&[], || Ok(e.clone())).unwrap_err().starts_with("no suites in "));
    }

    #[test]
    fn a_directory_of_ones_own_comes_first_and_the_shipped_suites_are_still_found() {
        let mine = dir_with(&["trim.yaml", "extra.yaml"]);
        let shipped = dir_with(&["trim.yaml", "namespaces.yaml"]);
        let (m, s) = (mine.path().to_path_buf(), shipped.path().to_path_buf());
        let args = ["trim".to_string(), "namespaces".into(), "extra".into()];
        let files = resolve_with(&args, Some(&m), || Ok(s.clone())).unwrap();
        let paths: Vec<PathBuf> = files.into_iter().map(|f| f.path).collect();
        assert_eq!(paths, [m.join("trim.yaml"), s.join("namespaces.yaml"), m.join("extra.yaml")]);
        let e = resolve_with(&["nope".into()], Some(&m), || Ok(s.clone())).unwrap_err();
        assert!(e.contains("no suite `nope` in ") && e.contains("(available: extra, trim)"), "{e}");
        let all = resolve_with(&[], Some(&m), || Ok(s.clone())).unwrap();
        assert_eq!(all.len(), 2);
        assert!(resolve_with(&[], Some(&m.join("none")), || Ok(s.clone())).unwrap_err().contains("not a directory"));
    }

    #[test]
    fn the_source_tree_suites_directory_is_found() {
        assert!(suites_dir().unwrap().join("trim.yaml").is_file());
    }
}
