//! Running the nvtest binary and reading the figures of its JSON run record (shared by
//! the load and power-fail suite tests).

use std::path::Path;
use std::process::{Command, Output};

pub fn nvtest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvtest")).args(args).output().expect("nvtest runs")
}

pub fn figures(record: &Path) -> Vec<(String, f64)> {
    let text = std::fs::read_to_string(record).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut out = Vec::new();
    for target in json["targets"].as_array().unwrap() {
        for case in target["cases"].as_array().unwrap() {
            for f in case["figures"].as_array().unwrap() {
                let name = format!("{}::{}", case["case"].as_str().unwrap(), f["name"].as_str().unwrap());
                out.push((name, f["value"].as_f64().unwrap()));
            }
        }
    }
    out
}
