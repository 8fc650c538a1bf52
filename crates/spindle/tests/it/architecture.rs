//! ARCHITECTURE.md names every module of every crate once, under its crate's heading,
//! and names no module that does not exist: a reader finds any module from it in one hop.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A crate's product modules (test files left out), as paths under its `src/`.
fn modules(src: &Path, under: &Path, found: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(under).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "tests" {
                modules(src, &path, found);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            let relative = path.strip_prefix(src).unwrap();
            found.insert(relative.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// Each crate's section of the map: crate name → its text.
fn sections(map: &str) -> Vec<(String, String)> {
    let mut sections: Vec<(String, String)> = Vec::new();
    for line in map.lines() {
        if let Some(rest) = line.strip_prefix("### `crates/") {
            let name = rest.split('`').next().unwrap().to_owned();
            sections.push((name, String::new()));
        } else if line.starts_with("## ") || line.starts_with("### ") {
            sections.push((String::new(), String::new()));
        } else if let Some((_, text)) = sections.last_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    sections.retain(|(name, _)| !name.is_empty());
    sections
}

/// What is wrong with `map` against the crates under `crates`, each a sentence.
fn unmapped(map: &str, crates: &Path) -> Vec<String> {
    let mut wrong = Vec::new();
    let sections = sections(map);
    let mut names: Vec<String> = std::fs::read_dir(crates)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| crates.join(name).join("src").is_dir())
        .collect();
    names.sort();
    for name in names {
        let src = crates.join(&name).join("src");
        let mut found = BTreeSet::new();
        modules(&src, &src, &mut found);
        if name == "openapi-check" {
            // Test support only, named in the bird's-eye view.
            continue;
        }
        let Some((_, text)) = sections.iter().find(|(section, _)| *section == name) else {
            wrong.push(format!(
                "crate {name} has no section `### \\`crates/{name}\\``"
            ));
            continue;
        };
        for module in &found {
            if !text.contains(&format!("`{module}`")) {
                wrong.push(format!(
                    "crates/{name}/src/{module} is not named in its crate's section"
                ));
            }
        }
        for named in text.split('`').skip(1).step_by(2) {
            if named.ends_with(".rs") && !named.contains(' ') && !found.contains(named) {
                wrong.push(format!(
                    "crates/{name}: `{named}` is named but is no module"
                ));
            }
        }
    }
    wrong
}

#[test]
fn every_module_of_every_crate_is_on_the_map() {
    let root = workspace();
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    assert_eq!(unmapped(&map, &root.join("crates")), Vec::<String>::new());
    let lines = map.lines().count();
    assert!(
        lines <= 400,
        "ARCHITECTURE.md is a map of about 400 lines at most, not {lines}"
    );
}

#[test]
fn a_module_missing_from_the_map_or_one_named_that_is_gone_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("demo/src");
    std::fs::create_dir_all(src.join("sql")).unwrap();
    for file in [
        "lib.rs",
        "sql/mod.rs",
        "sql/run.rs",
        "tests.rs",
        "sql/run_tests.rs",
    ] {
        std::fs::write(src.join(file), "").unwrap();
    }
    let whole = "### `crates/demo` — a demo\n`lib.rs`, `sql/mod.rs`, `sql/run.rs`.\n";
    assert_eq!(unmapped(whole, dir.path()), Vec::<String>::new());
    let missing = "### `crates/demo` — a demo\n`lib.rs`, `sql/mod.rs`, `sql/gone.rs`.\n## Next\n`sql/run.rs`\n";
    assert_eq!(
        unmapped(missing, dir.path()),
        [
            "crates/demo/src/sql/run.rs is not named in its crate's section",
            "crates/demo: `sql/gone.rs` is named but is no module",
        ]
    );
}
