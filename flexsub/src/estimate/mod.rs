//! GPU memory estimation from a model on disk, after ModelGrid (§3.3, Algorithm 1).
//!
//! `flexsub --model PATH` turns a Hugging Face model directory (or a `.safetensors` file, or
//! a `model.safetensors.index.json`) into a plain memory request, so that the daemon never
//! reads user files. Parameters are counted exactly from safetensors headers when there are
//! any, otherwise derived from `config.json`; the architecture in `config.json` sizes
//! activations and the KV cache. The formulas are documented in `memory.rs`.

mod config;
mod memory;
mod model;
mod safetensors;

use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use self::model::inspect;

/// Safety margin applied when the caller has no better value: ModelGrid's 10%.
pub const DEFAULT_MARGIN: f64 = 0.10;
/// Largest margin accepted; beyond doubling the estimate, `--mem` is the better tool.
pub const MAX_MARGIN: f64 = 1.0;

/// Element type the model will be held in on the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F32,
    F16,
    Bf16,
    Int8,
    Fp8,
    Int4,
}

impl Dtype {
    /// Bits per element; int4 is half a byte, so sizes are computed in bits.
    pub fn bits(self) -> u64 {
        match self {
            Dtype::F32 => 32,
            Dtype::F16 | Dtype::Bf16 => 16,
            Dtype::Int8 | Dtype::Fp8 => 8,
            Dtype::Int4 => 4,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dtype::F32 => "fp32",
            Dtype::F16 => "fp16",
            Dtype::Bf16 => "bf16",
            Dtype::Int8 => "int8",
            Dtype::Fp8 => "fp8",
            Dtype::Int4 => "int4",
        })
    }
}

/// A dtype name flexsub does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype '{0}'; expected one of fp32, fp16, bf16, int8, fp8, int4")]
pub struct ParseDtypeError(pub String);

impl FromStr for Dtype {
    type Err = ParseDtypeError;

    /// Accepts the short names, PyTorch's long names and `torch.`-prefixed ones, in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        Ok(match lower.strip_prefix("torch.").unwrap_or(&lower) {
            "fp32" | "float32" | "f32" | "float" => Dtype::F32,
            "fp16" | "float16" | "f16" | "half" => Dtype::F16,
            "bf16" | "bfloat16" => Dtype::Bf16,
            "int8" | "i8" | "uint8" => Dtype::Int8,
            "fp8" | "float8" | "float8_e4m3fn" | "float8_e5m2" => Dtype::Fp8,
            "int4" | "i4" | "fp4" | "nf4" => Dtype::Int4,
            _ => return Err(ParseDtypeError(s.to_string())),
        })
    }
}

/// Whether the job trains (gradients, optimizer state, all activations kept for backward)
/// or only runs the model forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    Train,
    Infer,
}

/// What the user told flexsub about the run.
#[derive(Debug, Clone, PartialEq)]
pub struct EstimateInput {
    /// A model directory, a `.safetensors` file, a `*.safetensors.index.json` or a
    /// `config.json`.
    pub model: PathBuf,
    pub batch_size: u32,
    /// `None`: the model's own context length (its config's `max_position_embeddings` or
    /// `n_positions`).
    pub seq_len: Option<u32>,
    /// `None`: the dtype most of the checkpoint is stored in, else the config's
    /// `torch_dtype`, else fp32.
    pub dtype: Option<Dtype>,
    pub mode: Mode,
    /// Fraction added on top for fragmentation and framework overhead: 0.10 is 10%.
    pub margin: f64,
}

/// The estimate, part by part; `total_bytes` is what flexsub asks the daemon for.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Breakdown {
    pub parameters: u64,
    /// Where the count came from: "safetensors (3 shards)" or "config.json (llama)".
    pub params_source: String,
    pub dtype: Dtype,
    pub weights_bytes: u64,
    pub activations_bytes: u64,
    pub gradients_bytes: u64,
    /// Adam's two fp32 moments, plus the fp32 master weights below 32-bit (see `memory.rs`).
    pub optimizer_bytes: u64,
    pub kv_cache_bytes: u64,
    pub margin_bytes: u64,
    pub total_bytes: u64,
    /// Assumptions and gaps the user should know about, one sentence each.
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum EstimateError {
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{} is not a model: no .safetensors file and no config.json; give --mem instead",
        path.display()
    )]
    NotAModel { path: PathBuf },
    #[error(
        "{}: model_type '{model_type}' is not one flexsub can size; give --mem",
        path.display()
    )]
    UnknownArchitecture { path: PathBuf, model_type: String },
    #[error("{}: corrupt safetensors header: {reason}", path.display())]
    CorruptHeader { path: PathBuf, reason: String },
    #[error("{}: invalid json: {source}", path.display())]
    InvalidJson {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: missing or invalid field '{field}'", path.display())]
    MissingField { path: PathBuf, field: String },
    #[error("{what} must be at least 1")]
    Zero { what: &'static str },
    #[error("the model's config.json names no context length: give --seq-len")]
    NoContext,
    #[error("margin {0} is outside 0..={MAX_MARGIN}")]
    Margin(f64),
}

/// Counts a model's parameters: exactly from safetensors headers when the model has any,
/// otherwise from the architecture in `config.json`. Returns the count and its source.
///
/// # Errors
///
/// An unreadable path, a directory that holds no model, a corrupt safetensors header or
/// index, or (without safetensors) a `config.json` flexsub cannot size.
pub fn count_parameters(path: &Path) -> Result<(u64, String), EstimateError> {
    let model = inspect(path)?;
    Ok((model.parameters, model.source))
}

/// Estimates the GPU memory a run of the model needs.
///
/// # Errors
///
/// Those of [`count_parameters`], a malformed `config.json`, a batch size or sequence
/// length of 0, and a margin outside `0..=MAX_MARGIN`.
pub fn estimate(input: &EstimateInput) -> Result<Breakdown, EstimateError> {
    if input.batch_size == 0 {
        return Err(EstimateError::Zero { what: "batch size" });
    }
    if input.seq_len == Some(0) {
        return Err(EstimateError::Zero {
            what: "sequence length",
        });
    }
    if !(0.0..=MAX_MARGIN).contains(&input.margin) {
        return Err(EstimateError::Margin(input.margin));
    }
    let mut model = inspect(&input.model)?;
    let seq = match (input.seq_len, model.arch.as_ref().and_then(|a| a.context)) {
        (Some(s), _) => u64::from(s),
        (None, Some(c)) => {
            model
                .notes
                .push(format!("sequence length {c}: the model's context length"));
            c
        }
        (None, None) => return Err(EstimateError::NoContext),
    };
    let config_dtype = model.arch.as_ref().and_then(|a| a.dtype);
    let dtype = match (input.dtype, model.file_dtype, config_dtype) {
        (Some(d), _, _) => d,
        (None, Some(d), _) => {
            model
                .notes
                .push(format!("dtype {d}: as stored in the safetensors"));
            d
        }
        (None, None, Some(d)) => {
            model
                .notes
                .push(format!("dtype {d}: torch_dtype in config.json"));
            d
        }
        (None, None, None) => {
            model
                .notes
                .push("dtype fp32: none given or recorded".into());
            Dtype::F32
        }
    };
    let shape = memory::RunShape {
        batch: u64::from(input.batch_size),
        seq,
        dtype,
        mode: input.mode,
    };
    let parts = memory::parts(
        model.parameters,
        model.arch.as_ref(),
        &shape,
        &mut model.notes,
    );
    let subtotal = parts.sum();
    let margin_bytes = (subtotal as f64 * input.margin).ceil() as u64;
    Ok(Breakdown {
        parameters: model.parameters,
        params_source: model.source,
        dtype,
        weights_bytes: parts.weights,
        activations_bytes: parts.activations,
        gradients_bytes: parts.gradients,
        optimizer_bytes: parts.optimizer,
        kv_cache_bytes: parts.kv_cache,
        margin_bytes,
        total_bytes: subtotal.saturating_add(margin_bytes),
        notes: model.notes,
    })
}

fn gib(bytes: u64) -> String {
    format!("{:>9.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn human_count(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.2}K", n as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.2}M", n as f64 / 1e6),
        _ => format!("{:.2}B", n as f64 / 1e9),
    }
}

impl Breakdown {
    /// A table for humans: one line per part in GiB, then the notes.
    pub fn render(&self) -> String {
        let subtotal = self.total_bytes.saturating_sub(self.margin_bytes);
        let percent = if subtotal == 0 {
            0.0
        } else {
            100.0 * self.margin_bytes as f64 / subtotal as f64
        };
        let (count, source) = (human_count(self.parameters), &self.params_source);
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = writeln!(out, "parameters  {count} ({}), {source}", self.parameters);
        let _ = writeln!(out, "dtype       {}", self.dtype);
        for (label, bytes) in [
            ("weights", self.weights_bytes),
            ("activations", self.activations_bytes),
            ("gradients", self.gradients_bytes),
            ("optimizer", self.optimizer_bytes),
            ("kv cache", self.kv_cache_bytes),
            (&format!("margin {percent:.0}%"), self.margin_bytes),
            ("total", self.total_bytes),
        ] {
            let _ = writeln!(out, "{label:<12}{}", gib(bytes));
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_names_round_trip() {
        for d in [
            Dtype::F32,
            Dtype::F16,
            Dtype::Bf16,
            Dtype::Int8,
            Dtype::Fp8,
            Dtype::Int4,
        ] {
            assert_eq!(d.to_string().parse::<Dtype>(), Ok(d));
        }
        assert_eq!("float32".parse(), Ok(Dtype::F32));
        assert_eq!("F32".parse(), Ok(Dtype::F32));
        assert_eq!("torch.bfloat16".parse(), Ok(Dtype::Bf16));
        assert!("fp64"
            .parse::<Dtype>()
            .unwrap_err()
            .to_string()
            .contains("'fp64'"));
    }

    #[test]
    fn human_counts() {
        assert_eq!(human_count(124_439_808), "124.44M");
        assert_eq!(human_count(6_738_415_616), "6.74B");
        assert_eq!(human_count(17), "17");
        assert_eq!(human_count(7888), "7.89K");
    }

    #[test]
    fn render_lists_every_part_and_the_notes() {
        let b = Breakdown {
            parameters: 1_000_000,
            params_source: "safetensors (1 file)".into(),
            dtype: Dtype::Bf16,
            weights_bytes: 1 << 30,
            activations_bytes: 1 << 29,
            gradients_bytes: 0,
            optimizer_bytes: 0,
            kv_cache_bytes: 1 << 29,
            margin_bytes: 1 << 28,
            total_bytes: (1 << 31) + (1 << 28),
            notes: vec!["something to know".into()],
        };
        let text = b.render();
        assert!(
            text.contains("1.00M (1000000), safetensors (1 file)"),
            "{text}"
        );
        assert!(text.contains("weights          1.00 GiB"), "{text}");
        assert!(text.contains("margin 12%       0.25 GiB"), "{text}");
        assert!(text.contains("total            2.25 GiB"), "{text}");
        assert!(text.ends_with("note: something to know\n"), "{text}");
    }
}
