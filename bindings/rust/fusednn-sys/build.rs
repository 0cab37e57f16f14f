// SPDX-License-Identifier: Apache-2.0
//! Finds libfusednn and tells cargo how to link it.
//!
//! The first of these that is set is used, and must hold the library: `FUSEDNN_LIB_DIR` (the
//! folder holding the library), `FUSEDNN_DIR` (a folder holding the library or an install prefix
//! with `lib/` / `lib64/`); with neither set, `pkg-config --libs fusednn`.
//! pkg-config is run as a subprocess: this crate has no build dependencies.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// File names that let the linker resolve `-lfusednn` on the platforms we build for.
const LIBRARY_FILE_NAMES: &[&str] = &[
    "libfusednn.so",
    "libfusednn.dylib",
    "libfusednn.a",
    "fusednn.lib",
];

/// Where the library was found and how.
struct Found {
    search_dirs: Vec<PathBuf>,
    libraries: Vec<String>,
    source: String,
}

fn main() {
    for variable in [
        "FUSEDNN_DIR",
        "FUSEDNN_LIB_DIR",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
    ] {
        println!("cargo:rerun-if-env-changed={variable}");
    }
    println!("cargo:rerun-if-changed=build.rs");

    // docs.rs builds documentation without any native library.
    if env::var_os("DOCS_RS").is_some() {
        return;
    }

    // The first variable that is set decides: a wrong explicit path must not silently fall back
    // to another copy of the library.
    let mut tried: Vec<String> = Vec::new();
    let found = if env::var_os("FUSEDNN_LIB_DIR").is_some() {
        from_lib_dir(&mut tried)
    } else if env::var_os("FUSEDNN_DIR").is_some() {
        from_prefix(&mut tried)
    } else {
        from_pkg_config(&mut tried)
    };

    let Some(found) = found else {
        // A plain message (no panic backtrace): cargo shows a failed build script's stderr.
        eprintln!("{}", not_found_message(&tried));
        std::process::exit(1);
    };

    for dir in &found.search_dirs {
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    for library in &found.libraries {
        println!("cargo:rustc-link-lib={library}");
    }
    // Exposed to dependents' build scripts as DEP_FUSEDNN_LIB_DIR / DEP_FUSEDNN_SOURCE.
    if let Some(first) = found.search_dirs.first() {
        println!("cargo:lib_dir={}", first.display());
    }
    println!("cargo:source={}", found.source);
}

/// The library file in `dir`, if any of the expected names is there.
fn library_in(dir: &Path) -> Option<PathBuf> {
    LIBRARY_FILE_NAMES
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
}

fn linked_from(dir: PathBuf, source: String) -> Found {
    Found {
        search_dirs: vec![dir],
        libraries: vec!["fusednn".to_string()],
        source,
    }
}

fn from_lib_dir(tried: &mut Vec<String>) -> Option<Found> {
    let dir = PathBuf::from(env::var_os("FUSEDNN_LIB_DIR")?);
    if library_in(&dir).is_some() {
        return Some(linked_from(dir, "FUSEDNN_LIB_DIR".to_string()));
    }
    tried.push(format!(
        "FUSEDNN_LIB_DIR={} holds no {}",
        dir.display(),
        LIBRARY_FILE_NAMES.join(" / ")
    ));
    None
}

fn from_prefix(tried: &mut Vec<String>) -> Option<Found> {
    let prefix = PathBuf::from(env::var_os("FUSEDNN_DIR")?);
    for dir in [prefix.clone(), prefix.join("lib"), prefix.join("lib64")] {
        if library_in(&dir).is_some() {
            return Some(linked_from(dir, "FUSEDNN_DIR".to_string()));
        }
    }
    tried.push(format!(
        "FUSEDNN_DIR={} holds no {} in itself, lib/ or lib64/",
        prefix.display(),
        LIBRARY_FILE_NAMES.join(" / ")
    ));
    None
}

fn from_pkg_config(tried: &mut Vec<String>) -> Option<Found> {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = match Command::new(&program).args(["--libs", "fusednn"]).output() {
        Ok(output) => output,
        Err(error) => {
            tried.push(format!(
                "`{program} --libs fusednn` could not be started: {error}"
            ));
            return None;
        }
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        tried.push(format!(
            "`{program} --libs fusednn` failed: {}",
            stderr.trim()
        ));
        return None;
    }
    let flags = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut found = Found {
        search_dirs: Vec::new(),
        libraries: Vec::new(),
        source: "pkg-config".to_string(),
    };
    for flag in flags.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            found.search_dirs.push(PathBuf::from(dir));
        } else if let Some(library) = flag.strip_prefix("-l") {
            found.libraries.push(library.to_string());
        }
    }
    if !found.libraries.iter().any(|library| library == "fusednn") {
        found.libraries.push("fusednn".to_string());
    }
    Some(found)
}

fn not_found_message(tried: &[String]) -> String {
    let mut message = String::from(
        "\n\nfusednn-sys: cannot find libfusednn.\n\
         Set one of these and build again:\n  \
         FUSEDNN_LIB_DIR=/path/to/folder/holding/libfusednn.so\n  \
         FUSEDNN_DIR=/path/to/install/prefix   (holding lib/libfusednn.so, or the library itself)\n  \
         PKG_CONFIG_PATH=/path/to/folder/holding/fusednn.pc\n\
         Build the library with:\n  \
         cmake -S <fusednn> -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build --target fusednn\n\
         What was tried:\n",
    );
    if tried.is_empty() {
        message.push_str("  (nothing)\n");
    }
    for line in tried {
        message.push_str("  - ");
        message.push_str(line);
        message.push('\n');
    }
    message
}
