// SPDX-License-Identifier: Apache-2.0
//! Helpers shared by the integration tests: fixture paths, random data, in-memory model specs
//! with an independent reference, and a small F32-only safetensors reader.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use fusednn::{Model, ModelOptions};

/// `tests/fixtures` of the source tree, or `FUSEDNN_FIXTURES_DIR`.
pub fn fixtures_dir() -> PathBuf {
    match std::env::var_os("FUSEDNN_FIXTURES_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures"),
    }
}

/// A small xorshift generator: fresh data for each check, reproducible from the printed seed.
pub struct Random(u64);

impl Random {
    /// Seeded from `FUSEDNN_TEST_SEED` when set, else from the clock; prints the seed.
    pub fn new(what: &str) -> Random {
        let seed = std::env::var("FUSEDNN_TEST_SEED")
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("{what}: FUSEDNN_TEST_SEED={seed}");
        Random(seed | 1)
    }

    /// Uniform in [-1, 1).
    pub fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    pub fn vec(&mut self, count: usize) -> Vec<f32> {
        (0..count).map(|_| self.next()).collect()
    }
}

/// One Linear layer, `[inputs] -> [outputs]`, as a spec (weights `fc.weight`, `fc.bias`).
pub fn linear_spec(inputs: usize, outputs: usize) -> String {
    format!(
        r#"{{"fusednn": 1, "input": {{"shape": [{inputs}]}},
            "layers": [{{"type": "Linear", "name": "fc", "in_features": {inputs}, "out_features": {outputs}}}]}}"#
    )
}

/// A Linear model with random weights, and the weights for the reference.
pub struct LinearModel {
    pub model: Model,
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
    pub inputs: usize,
    pub outputs: usize,
}

impl LinearModel {
    pub fn new(
        inputs: usize,
        outputs: usize,
        options: &ModelOptions,
        random: &mut Random,
    ) -> LinearModel {
        let mut model = Model::from_spec_with_options(&linear_spec(inputs, outputs), options)
            .unwrap_or_else(|e| panic!("creating the Linear model: {e}"));
        let weight = random.vec(outputs * inputs);
        let bias = random.vec(outputs);
        model
            .set_weight("fc.weight", &[outputs, inputs], &weight)
            .unwrap();
        model.set_weight("fc.bias", &[outputs], &bias).unwrap();
        LinearModel {
            model,
            weight,
            bias,
            inputs,
            outputs,
        }
    }

    /// y = W x + b per sample, accumulated in f64.
    pub fn reference(&self, batch: usize, input: &[f32]) -> Vec<f32> {
        let mut output = Vec::with_capacity(batch * self.outputs);
        for sample in input.chunks(self.inputs).take(batch) {
            for row in 0..self.outputs {
                let weights = &self.weight[row * self.inputs..(row + 1) * self.inputs];
                let dot: f64 = weights
                    .iter()
                    .zip(sample)
                    .map(|(w, x)| *w as f64 * *x as f64)
                    .sum();
                output.push((dot + self.bias[row] as f64) as f32);
            }
        }
        output
    }
}

/// Largest absolute difference, relative to the largest magnitude in `expected` (1 if all zero).
pub fn relative_error(actual: &[f32], expected: &[f32]) -> f32 {
    assert_eq!(actual.len(), expected.len(), "lengths differ");
    let scale = expected
        .iter()
        .fold(0f32, |m, v| m.max(v.abs()))
        .max(f32::MIN_POSITIVE);
    let worst = actual
        .iter()
        .zip(expected)
        .fold(0f32, |m, (a, e)| m.max((a - e).abs()));
    if worst.is_nan() || actual.iter().any(|v| !v.is_finite()) {
        return f32::INFINITY;
    }
    worst / scale
}

// ------------------------------------------------------------------------------------------------
// JSON, as much as a safetensors header needs.
// ------------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(f64),
    Text(String),
    List(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(items) => items.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

struct JsonReader<'a> {
    text: &'a [u8],
    at: usize,
}

impl JsonReader<'_> {
    fn skip_space(&mut self) {
        while self.at < self.text.len() && self.text[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) {
        self.skip_space();
        assert_eq!(
            self.text.get(self.at),
            Some(&byte),
            "JSON: expected '{}' at {}",
            byte as char,
            self.at
        );
        self.at += 1;
    }

    fn value(&mut self) -> Json {
        self.skip_space();
        match self.text[self.at] {
            b'{' => {
                self.at += 1;
                let mut items = Vec::new();
                self.skip_space();
                if self.text[self.at] == b'}' {
                    self.at += 1;
                    return Json::Object(items);
                }
                loop {
                    self.skip_space();
                    let key = match self.value() {
                        Json::Text(key) => key,
                        other => panic!("JSON: object key {other:?}"),
                    };
                    self.expect(b':');
                    items.push((key, self.value()));
                    self.skip_space();
                    self.at += 1;
                    if self.text[self.at - 1] == b'}' {
                        return Json::Object(items);
                    }
                }
            }
            b'[' => {
                self.at += 1;
                let mut items = Vec::new();
                self.skip_space();
                if self.text[self.at] == b']' {
                    self.at += 1;
                    return Json::List(items);
                }
                loop {
                    items.push(self.value());
                    self.skip_space();
                    self.at += 1;
                    if self.text[self.at - 1] == b']' {
                        return Json::List(items);
                    }
                }
            }
            b'"' => {
                self.at += 1;
                let mut bytes = Vec::new();
                while self.text[self.at] != b'"' {
                    if self.text[self.at] == b'\\' {
                        self.at += 1;
                        let escaped = match self.text[self.at] {
                            b'n' => b'\n',
                            b't' => b'\t',
                            b'r' => b'\r',
                            b'u' => panic!("JSON: \\u escapes are not needed by these tests"),
                            other => other,
                        };
                        bytes.push(escaped);
                    } else {
                        bytes.push(self.text[self.at]);
                    }
                    self.at += 1;
                }
                self.at += 1;
                Json::Text(String::from_utf8(bytes).expect("JSON: UTF-8"))
            }
            b't' => {
                self.at += 4;
                Json::Bool(true)
            }
            b'f' => {
                self.at += 5;
                Json::Bool(false)
            }
            b'n' => {
                self.at += 4;
                Json::Null
            }
            _ => {
                let start = self.at;
                while self.at < self.text.len() && b"+-.eE0123456789".contains(&self.text[self.at])
                {
                    self.at += 1;
                }
                let number = std::str::from_utf8(&self.text[start..self.at]).unwrap();
                Json::Number(
                    number
                        .parse()
                        .unwrap_or_else(|_| panic!("JSON: number '{number}'")),
                )
            }
        }
    }
}

pub fn parse_json(text: &str) -> Json {
    JsonReader {
        text: text.as_bytes(),
        at: 0,
    }
    .value()
}

// ------------------------------------------------------------------------------------------------
// safetensors: 8-byte little-endian header length, JSON header, raw data. F32 only.
// ------------------------------------------------------------------------------------------------

pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

pub fn read_safetensors(path: &std::path::Path) -> BTreeMap<String, Tensor> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + header_len]).expect("safetensors header UTF-8");
    let data = &bytes[8 + header_len..];
    let Json::Object(entries) = parse_json(header) else {
        panic!("safetensors header is not an object")
    };
    let mut tensors = BTreeMap::new();
    for (name, entry) in entries {
        if name == "__metadata__" {
            continue;
        }
        assert_eq!(
            entry.get("dtype"),
            Some(&Json::Text("F32".into())),
            "{name}: only F32 is read"
        );
        let Some(Json::List(shape)) = entry.get("shape") else {
            panic!("{name}: shape")
        };
        let Some(Json::List(offsets)) = entry.get("data_offsets") else {
            panic!("{name}: offsets")
        };
        let number = |value: &Json| match value {
            Json::Number(n) => *n as usize,
            other => panic!("{name}: expected a number, got {other:?}"),
        };
        let shape: Vec<usize> = shape.iter().map(number).collect();
        let (begin, end) = (number(&offsets[0]), number(&offsets[1]));
        let values: Vec<f32> = data[begin..end]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(
            values.len(),
            shape.iter().product::<usize>(),
            "{name}: size"
        );
        tensors.insert(
            name,
            Tensor {
                shape,
                data: values,
            },
        );
    }
    tensors
}
