// SPDX-License-Identifier: Apache-2.0
//! Fails when `include/fusednn/fusednn.h` and the declarations in this crate disagree.
//!
//! Two independent checks:
//! - `declarations_match_header` parses the header (functions with parameter names and types,
//!   enums with values, struct fields with types, opaque handles, integer `#define`s), turns each
//!   C type into the Rust type it must be declared as, and compares both ways with
//!   `fusednn_sys::declared`, which the declaring macros fill in.
//! - `layout_matches_c_compiler` compiles a C99 program against the header that prints the size,
//!   alignment and offsets of every struct and field this crate declares, and every enum and
//!   constant value, and compares them with what Rust computes.
//!
//! The header is found through `FUSEDNN_INCLUDE_DIR` (the folder holding `fusednn/fusednn.h`),
//! else in the source tree this crate lives in.

use std::collections::BTreeMap;
use std::env;
use std::path::PathBuf;
use std::process::Command;

use fusednn_sys::declared;

fn include_dir() -> PathBuf {
    match env::var_os("FUSEDNN_INCLUDE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../include"),
    }
}

fn header_path() -> PathBuf {
    include_dir().join("fusednn/fusednn.h")
}

// ------------------------------------------------------------------------------------------------
// A small C declaration reader: enough for the subset the header uses (and it says so loudly when
// the header grows past that subset).
// ------------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Identifier(String),
    Number(i64),
    Text(String),
    Punct(char),
}

/// Removes comments and preprocessor lines; returns the remaining text and the integer
/// `#define`s (name, value) whose value is a plain literal.
fn strip_preprocessor_and_comments(source: &str) -> (String, Vec<(String, i64)>) {
    let mut without_comments = String::with_capacity(source.len());
    let bytes: Vec<char> = source.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == '/' && i + 1 < bytes.len() && bytes[i + 1] == '*' {
            let mut j = i + 2;
            while j + 1 < bytes.len() && !(bytes[j] == '*' && bytes[j + 1] == '/') {
                if bytes[j] == '\n' {
                    without_comments.push('\n');
                }
                j += 1;
            }
            i = j + 2;
            without_comments.push(' ');
        } else if bytes[i] == '/' && i + 1 < bytes.len() && bytes[i + 1] == '/' {
            while i < bytes.len() && bytes[i] != '\n' {
                i += 1;
            }
        } else {
            without_comments.push(bytes[i]);
            i += 1;
        }
    }

    let mut code = String::new();
    let mut defines = Vec::new();
    let mut continuing = false;
    for line in without_comments.lines() {
        let trimmed = line.trim();
        if continuing || trimmed.starts_with('#') {
            continuing = trimmed.ends_with('\\');
            let mut words = trimmed.trim_start_matches('#').split_whitespace();
            if words.next() == Some("define") {
                if let (Some(name), Some(value), None) = (words.next(), words.next(), words.next())
                {
                    if let Ok(number) = value.parse::<i64>() {
                        defines.push((name.to_string(), number));
                    }
                }
            }
            code.push('\n');
            continue;
        }
        code.push_str(line);
        code.push('\n');
    }
    (code, defines)
}

fn tokenize(code: &str) -> Vec<Token> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token::Identifier(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_alphanumeric() {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            let digits = text.trim_end_matches(['u', 'U', 'l', 'L']);
            let value = if let Some(hex) = digits.strip_prefix("0x") {
                i64::from_str_radix(hex, 16)
            } else {
                digits.parse::<i64>()
            };
            tokens.push(Token::Number(
                value.unwrap_or_else(|_| panic!("number {text}")),
            ));
        } else if c == '"' {
            let start = i + 1;
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += 1;
            }
            tokens.push(Token::Text(chars[start..i].iter().collect()));
            i += 1;
        } else {
            tokens.push(Token::Punct(c));
            i += 1;
        }
    }
    tokens
}

/// A C type as written: qualifiers and base name, then pointer levels (each maybe `const`).
#[derive(Debug, Default)]
struct CType {
    base: String,
    base_const: bool,
    pointer_const: Vec<bool>,
}

impl CType {
    /// The Rust type these declarations must use for it, whitespace removed.
    fn to_rust(&self) -> String {
        let base = match self.base.as_str() {
            "void" if self.pointer_const.is_empty() => return String::new(),
            "void" => "c_void",
            "char" => "c_char",
            "int" => "c_int",
            "size_t" => "usize",
            "int64_t" => "i64",
            "int32_t" => "i32",
            "uint32_t" => "u32",
            "uint64_t" => "u64",
            "float" => "f32",
            "double" => "f64",
            name if name.starts_with("fdnn_") => name,
            other => panic!("header_drift: no Rust mapping for C type `{other}`; add one"),
        };
        let mut rust = base.to_string();
        for level in 0..self.pointer_const.len() {
            let pointee_const = if level == 0 {
                self.base_const
            } else {
                self.pointer_const[level - 1]
            };
            rust = format!("*{}{}", if pointee_const { "const" } else { "mut" }, rust);
        }
        rust
    }
}

/// Reads `tokens` as `type name`, returning the type and the name (or None when the declarator
/// is unnamed, as in `(void)`).
fn parse_declaration(tokens: &[Token]) -> (CType, Option<String>) {
    let mut ty = CType::default();
    let mut name = None;
    for token in tokens {
        match token {
            Token::Identifier(word) if word == "const" => {
                if let Some(last) = ty.pointer_const.last_mut() {
                    *last = true;
                } else {
                    ty.base_const = true;
                }
            }
            Token::Identifier(word) if word == "FDNN_API" || word == "struct" || word == "enum" => {
            }
            Token::Identifier(word) if ty.base.is_empty() => ty.base = word.clone(),
            Token::Identifier(word) => name = Some(word.clone()),
            Token::Punct('*') => ty.pointer_const.push(false),
            other => panic!("header_drift: unexpected {other:?} in a declaration {tokens:?}"),
        }
    }
    (ty, name)
}

#[derive(Debug, Default)]
struct Header {
    functions: BTreeMap<String, (Vec<(String, String)>, String)>,
    enums: BTreeMap<String, Vec<(String, i64)>>,
    structs: BTreeMap<String, Vec<(String, String)>>,
    opaque: Vec<String>,
    defines: Vec<(String, i64)>,
}

fn split_on(tokens: &[Token], separator: char) -> Vec<&[Token]> {
    tokens
        .split(|token| *token == Token::Punct(separator))
        .filter(|part| !part.is_empty())
        .collect()
}

fn position(tokens: &[Token], from: usize, wanted: char) -> usize {
    tokens[from..]
        .iter()
        .position(|token| *token == Token::Punct(wanted))
        .map(|offset| from + offset)
        .unwrap_or_else(|| panic!("header_drift: no `{wanted}` after token {from}"))
}

fn identifier(token: &Token) -> String {
    match token {
        Token::Identifier(name) => name.clone(),
        other => panic!("header_drift: expected a name, found {other:?}"),
    }
}

fn parse_header(source: &str) -> Header {
    let (code, defines) = strip_preprocessor_and_comments(source);
    let tokens = tokenize(&code);
    let mut header = Header {
        defines,
        ..Header::default()
    };
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            // extern "C" { ... } around the declarations (C++ only), and its closing brace.
            Token::Identifier(word) if word == "extern" => {
                i = position(&tokens, i, '{') + 1;
            }
            Token::Punct('}') => i += 1,
            Token::Identifier(word) if word == "typedef" => {
                let end = position(&tokens, i, ';');
                let kind = identifier(&tokens[i + 1]);
                let body_start = tokens[i..end].iter().position(|t| *t == Token::Punct('{'));
                let alias = identifier(&tokens[end - 1]);
                match (kind.as_str(), body_start) {
                    ("struct", None) => header.opaque.push(alias),
                    ("struct", Some(offset)) => {
                        let open = i + offset;
                        let close = position(&tokens, open, '}');
                        let end = position(&tokens, close, ';');
                        let alias = identifier(&tokens[end - 1]);
                        let mut fields = Vec::new();
                        for field in split_on(&tokens[open + 1..close], ';') {
                            // An array field: `type name [ SIZE ]`.
                            let (declarator, array) =
                                match field.iter().position(|t| *t == Token::Punct('[')) {
                                    Some(bracket) => (
                                        &field[..bracket],
                                        Some(&field[bracket + 1..field.len() - 1]),
                                    ),
                                    None => (field, None),
                                };
                            let (ty, name) = parse_declaration(declarator);
                            let mut rust = ty.to_rust();
                            if let Some(extent) = array {
                                let extent = match extent {
                                    [Token::Identifier(constant)] => constant.clone(),
                                    [Token::Number(number)] => number.to_string(),
                                    other => panic!("header_drift: array extent {other:?}"),
                                };
                                rust = format!("[{rust};{extent}]");
                            }
                            fields.push((name.expect("field name"), rust));
                        }
                        header.structs.insert(alias, fields);
                        i = end + 1;
                        continue;
                    }
                    ("enum", Some(offset)) => {
                        let open = i + offset;
                        let close = position(&tokens, open, '}');
                        let end = position(&tokens, close, ';');
                        let alias = identifier(&tokens[end - 1]);
                        let mut values = Vec::new();
                        let mut next = 0i64;
                        for item in split_on(&tokens[open + 1..close], ',') {
                            let value = match item {
                                [Token::Identifier(_)] => next,
                                [Token::Identifier(_), Token::Punct('='), Token::Number(n)] => *n,
                                [Token::Identifier(_), Token::Punct('='), Token::Punct('-'), Token::Number(n)] => {
                                    -*n
                                }
                                other => panic!("header_drift: enum item {other:?}"),
                            };
                            values.push((identifier(&item[0]), value));
                            next = value + 1;
                        }
                        header.enums.insert(alias, values);
                        i = end + 1;
                        continue;
                    }
                    other => panic!("header_drift: unsupported typedef {other:?}"),
                }
                i = end + 1;
            }
            _ => {
                // A function declaration: `FDNN_API type name ( params ) ;`
                let open = position(&tokens, i, '(');
                let close = position(&tokens, open, ')');
                let end = position(&tokens, close, ';');
                let (return_type, name) = parse_declaration(&tokens[i..open]);
                let name = name.expect("function name");
                let mut params = Vec::new();
                for param in split_on(&tokens[open + 1..close], ',') {
                    let (ty, param_name) = parse_declaration(param);
                    match param_name {
                        Some(param_name) => params.push((param_name, ty.to_rust())),
                        None => assert!(ty.to_rust().is_empty(), "unnamed parameter in {name}"),
                    }
                }
                header
                    .functions
                    .insert(name, (params, return_type.to_rust()));
                i = end + 1;
            }
        }
    }
    header
}

fn squeeze(rust_type: &str) -> String {
    rust_type.chars().filter(|c| !c.is_whitespace()).collect()
}

fn field_name(rust_name: &str) -> &str {
    rust_name.strip_prefix("r#").unwrap_or(rust_name)
}

/// Every disagreement between the parsed header and the Rust declarations, one line each.
fn differences(header: &Header) -> Vec<String> {
    let mut problems = Vec::new();

    // Functions, both ways.
    let declared_functions: BTreeMap<&str, &declared::FunctionDecl> =
        declared::FUNCTIONS.iter().map(|f| (f.name, f)).collect();
    for (name, (params, returns)) in &header.functions {
        let Some(decl) = declared_functions.get(name.as_str()) else {
            problems.push(format!(
                "function {name} is in the header but not declared in Rust"
            ));
            continue;
        };
        let rust_params: Vec<(String, String)> = decl
            .params
            .iter()
            .map(|(n, t)| (n.to_string(), squeeze(t)))
            .collect();
        if rust_params != *params {
            problems.push(format!(
                "function {name}: header parameters {params:?}, Rust parameters {rust_params:?}"
            ));
        }
        if squeeze(decl.returns) != *returns {
            problems.push(format!(
                "function {name}: header returns `{returns}`, Rust returns `{}`",
                decl.returns
            ));
        }
    }
    for name in declared_functions.keys() {
        if !header.functions.contains_key(*name) {
            problems.push(format!(
                "function {name} is declared in Rust but not in the header"
            ));
        }
    }

    // Enums, both ways, values compared as sets of (name, value).
    for (name, values) in &header.enums {
        let Some(decl) = declared::ENUMS.iter().find(|e| e.name == name) else {
            problems.push(format!(
                "enum {name} is in the header but not declared in Rust"
            ));
            continue;
        };
        let mut header_values = values.clone();
        header_values.sort();
        let mut rust_values: Vec<(String, i64)> = decl
            .values
            .iter()
            .map(|(n, v)| (n.to_string(), *v))
            .collect();
        rust_values.sort();
        for value in &header_values {
            if !rust_values.contains(value) {
                problems.push(format!(
                    "enum {name}: header has {} = {}, Rust does not",
                    value.0, value.1
                ));
            }
        }
        for value in &rust_values {
            if !header_values.contains(value) {
                problems.push(format!(
                    "enum {name}: Rust has {} = {}, header does not",
                    value.0, value.1
                ));
            }
        }
    }
    for decl in declared::ENUMS {
        if !header.enums.contains_key(decl.name) {
            problems.push(format!(
                "enum {} is declared in Rust but not in the header",
                decl.name
            ));
        }
    }

    // Structs: same fields, same order, same types.
    for (name, fields) in &header.structs {
        let Some(decl) = declared::STRUCTS.iter().find(|s| s.name == name) else {
            problems.push(format!(
                "struct {name} is in the header but not declared in Rust"
            ));
            continue;
        };
        let rust_fields: Vec<(String, String)> = decl
            .fields
            .iter()
            .map(|f| (field_name(f.name).to_string(), squeeze(f.ty)))
            .collect();
        if rust_fields != *fields {
            problems.push(format!(
                "struct {name}: header fields {fields:?}, Rust fields {rust_fields:?}"
            ));
        }
    }
    for decl in declared::STRUCTS {
        if !header.structs.contains_key(decl.name) {
            problems.push(format!(
                "struct {} is declared in Rust but not in the header",
                decl.name
            ));
        }
    }

    // Opaque handles.
    for name in &header.opaque {
        if !declared::OPAQUE_TYPES.contains(&name.as_str()) {
            problems.push(format!(
                "handle {name} is in the header but not declared in Rust"
            ));
        }
    }
    for name in declared::OPAQUE_TYPES {
        if !header.opaque.iter().any(|h| h == name) {
            problems.push(format!(
                "handle {name} is declared in Rust but not in the header"
            ));
        }
    }

    // Integer #defines (expressions such as FDNN_VERSION_NUMBER are checked by the C compiler).
    for (name, value) in &header.defines {
        match declared::CONSTANTS.iter().find(|(n, _)| n == name) {
            None => problems.push(format!("#define {name} {value} is not mirrored in Rust")),
            Some((_, rust)) if rust != value => problems.push(format!(
                "#define {name} is {value} in the header, {rust} in Rust"
            )),
            Some(_) => {}
        }
    }
    problems
}

#[test]
fn declarations_match_header() {
    let path = header_path();
    let source = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {} ({e}); set FUSEDNN_INCLUDE_DIR",
            path.display()
        )
    });
    let header = parse_header(&source);

    // The reader must have seen the whole header, or a silent parse gap would hide drift.
    assert!(
        header.functions.len() >= 20,
        "parsed only {} functions",
        header.functions.len()
    );
    assert!(header.enums.len() >= 3 && header.structs.len() >= 4 && header.opaque.len() >= 2);

    let problems = differences(&header);
    assert!(
        problems.is_empty(),
        "fusednn-sys and {} disagree:\n  {}",
        path.display(),
        problems.join("\n  ")
    );
}

#[test]
fn layout_matches_c_compiler() {
    // A C99 program that prints what the C compiler thinks of every declared item.
    let mut program = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"fusednn/fusednn.h\"\n\
         #define ALIGN_OF(T) offsetof(struct { char c; T t; }, t)\n\
         int main(void) {\n",
    );
    for decl in declared::STRUCTS {
        program.push_str(&format!(
            "  printf(\"struct {0} %zu %zu\\n\", sizeof({0}), ALIGN_OF({0}));\n",
            decl.name
        ));
        for field in decl.fields {
            let c_name = field_name(field.name);
            program.push_str(&format!(
                "  printf(\"field {0}.{1} %zu %zu\\n\", offsetof({0}, {1}), sizeof((({0}*)0)->{1}));\n",
                decl.name, c_name
            ));
        }
    }
    for decl in declared::ENUMS {
        program.push_str(&format!(
            "  printf(\"size {0} %zu\\n\", sizeof({0}));\n",
            decl.name
        ));
        for (value, _) in decl.values {
            program.push_str(&format!(
                "  printf(\"value {0} %lld\\n\", (long long){0});\n",
                value
            ));
        }
    }
    for (name, _) in declared::CONSTANTS {
        program.push_str(&format!(
            "  printf(\"value {0} %lld\\n\", (long long)({0}));\n",
            name
        ));
    }
    program.push_str("  return 0;\n}\n");

    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("header_drift");
    std::fs::create_dir_all(&work).unwrap();
    let source = work.join("probe.c");
    let binary = work.join("probe");
    std::fs::write(&source, &program).unwrap();
    let compiler = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let compiled = Command::new(&compiler)
        .args(["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-I"])
        .arg(include_dir())
        .arg(&source)
        .arg("-o")
        .arg(&binary)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{compiler}` ({e}); set CC"));
    assert!(
        compiled.status.success(),
        "the probe did not compile against the header (a declared item is missing there?):\n{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    let output = Command::new(&binary).output().unwrap();
    let printed = String::from_utf8(output.stdout).unwrap();
    let c_facts: BTreeMap<String, Vec<i64>> = printed
        .lines()
        .map(|line| {
            let mut words = line.split_whitespace().skip(1);
            let key = words.next().unwrap().to_string();
            (key, words.map(|w| w.parse().unwrap()).collect())
        })
        .collect();

    let mut problems = Vec::new();
    let mut expect = |key: String, rust: Vec<i64>| {
        let c = c_facts.get(&key).cloned().unwrap_or_default();
        if c != rust {
            problems.push(format!("{key}: C says {c:?}, Rust says {rust:?}"));
        }
    };
    for decl in declared::STRUCTS {
        expect(
            decl.name.to_string(),
            vec![decl.size as i64, decl.align as i64],
        );
        for field in decl.fields {
            let key = format!("{}.{}", decl.name, field_name(field.name));
            expect(key, vec![field.offset as i64, field.size as i64]);
        }
    }
    for decl in declared::ENUMS {
        expect(
            decl.name.to_string(),
            vec![std::mem::size_of::<fusednn_sys::c_int>() as i64],
        );
        for (value_name, value) in decl.values {
            expect(value_name.to_string(), vec![*value]);
        }
    }
    for (name, value) in declared::CONSTANTS {
        expect(name.to_string(), vec![*value]);
    }
    assert!(
        problems.is_empty(),
        "layouts differ:\n  {}",
        problems.join("\n  ")
    );
}
