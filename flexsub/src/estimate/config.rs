//! Architecture dimensions and parameter counts from a Hugging Face `config.json`.
//!
//! Four families are sized, each by the module layout of its `transformers` implementation
//! (weights and biases per linear layer, norms, embeddings, tied heads). The counts match the
//! published ones exactly for bert-base-uncased, gpt2, LLaMA-7B and t5-base (see the tests);
//! checkpoints that deviate from the family layout are better sized from their safetensors.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Dtype, EstimateError};

/// The layout families flexsub can size from a config alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    /// Encoder-only with learned positions, token types and a pooler: bert, roberta, ….
    Bert,
    /// Decoder-only with learned positions and a tied LM head.
    Gpt2,
    /// Decoder-only with RMSNorm, gated MLP and grouped-query attention.
    Llama,
    /// Encoder-decoder with relative attention bias.
    T5,
}

impl Family {
    fn of(model_type: &str) -> Option<Family> {
        Some(match model_type {
            "bert" | "roberta" | "xlm-roberta" | "camembert" => Family::Bert,
            "gpt2" => Family::Gpt2,
            "llama" | "mistral" | "qwen2" | "qwen3" => Family::Llama,
            "t5" | "mt5" => Family::T5,
            _ => return None,
        })
    }
}

/// What the memory estimate needs to know about a transformer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Arch {
    pub model_type: String,
    /// Parameters as the family layout implies (exact for the reference models).
    pub parameters: u64,
    pub hidden: u64,
    /// Transformer blocks, encoder and decoder together.
    pub layers: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub vocab: u64,
    /// Attention layers that keep keys and values while generating: 0 for an encoder-only
    /// model, self plus cross attention for each T5 decoder block.
    pub kv_cache_layers: u64,
    /// `torch_dtype` (or the newer `dtype`) from the config, when it names one we size.
    pub dtype: Option<Dtype>,
    /// The longest sequence the model takes (`max_position_embeddings`, `n_positions`), the
    /// sequence length an estimate uses when none is given.
    pub context: Option<u64>,
}

/// A `config.json` as far as flexsub understands it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Config {
    pub model_type: Option<String>,
    /// `None` when `model_type` is absent or not one of the families above, so that a
    /// caller holding safetensors can still count parameters.
    pub arch: Option<Arch>,
}

/// Reads `config.json` and sizes the model when its family is known.
pub(crate) fn read(path: &Path) -> Result<Config, EstimateError> {
    let text = std::fs::read_to_string(path).map_err(|source| EstimateError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let json: Value = serde_json::from_str(&text).map_err(|source| EstimateError::InvalidJson {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &json)
}

fn parse(path: &Path, json: &Value) -> Result<Config, EstimateError> {
    let model_type = json.get("model_type").and_then(Value::as_str);
    let Some(family) = model_type.and_then(Family::of) else {
        return Ok(Config {
            model_type: model_type.map(str::to_string),
            arch: None,
        });
    };
    let model_type = model_type.unwrap_or_default();
    let f = Fields { path, json };
    let mut arch = match family {
        Family::Bert => bert(&f)?,
        Family::Gpt2 => gpt2(&f)?,
        Family::Llama => llama(&f, model_type)?,
        Family::T5 => t5(&f)?,
    };
    arch.model_type = model_type.to_string();
    arch.dtype = ["torch_dtype", "dtype"]
        .iter()
        .find_map(|k| json.get(k)?.as_str()?.parse().ok());
    Ok(Config {
        model_type: Some(arch.model_type.clone()),
        arch: Some(arch),
    })
}

/// Typed access to config fields, so that a missing one is named in the error.
struct Fields<'a> {
    path: &'a Path,
    json: &'a Value,
}

impl Fields<'_> {
    fn missing(&self, field: &str) -> EstimateError {
        EstimateError::MissingField {
            path: PathBuf::from(self.path),
            field: field.to_string(),
        }
    }

    fn opt(&self, field: &str) -> Result<Option<u64>, EstimateError> {
        match self.json.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| self.missing(field)),
        }
    }

    fn num(&self, field: &str) -> Result<u64, EstimateError> {
        self.opt(field)?.ok_or_else(|| self.missing(field))
    }

    /// A positive count; zero heads or layers would only divide by zero later.
    fn count(&self, field: &str) -> Result<u64, EstimateError> {
        match self.num(field)? {
            0 => Err(self.missing(field)),
            n => Ok(n),
        }
    }

    fn flag(&self, field: &str, default: bool) -> bool {
        self.json
            .get(field)
            .and_then(Value::as_bool)
            .unwrap_or(default)
    }
}

/// A linear layer's weight and optional bias.
fn linear(inputs: u64, outputs: u64, bias: bool) -> u64 {
    inputs * outputs + if bias { outputs } else { 0 }
}

fn bert(f: &Fields) -> Result<Arch, EstimateError> {
    let (v, h, l) = (
        f.count("vocab_size")?,
        f.count("hidden_size")?,
        f.count("num_hidden_layers")?,
    );
    let (i, a) = (
        f.count("intermediate_size")?,
        f.count("num_attention_heads")?,
    );
    let positions = f.opt("max_position_embeddings")?.unwrap_or(512);
    let types = f.opt("type_vocab_size")?.unwrap_or(2);
    let layer_norm = 2 * h;
    let embeddings = (v + positions + types) * h + layer_norm;
    let layer =
        4 * linear(h, h, true) + layer_norm + linear(h, i, true) + linear(i, h, true) + layer_norm;
    let pooler = linear(h, h, true);
    Ok(Arch {
        parameters: embeddings + l * layer + pooler,
        hidden: h,
        layers: l,
        heads: a,
        kv_heads: a,
        head_dim: h / a,
        vocab: v,
        kv_cache_layers: 0,
        context: Some(positions),
        ..Arch::empty()
    })
}

fn gpt2(f: &Fields) -> Result<Arch, EstimateError> {
    let (v, e, l) = (
        f.count("vocab_size")?,
        f.count("n_embd")?,
        f.count("n_layer")?,
    );
    let a = f.count("n_head")?;
    let positions = f.opt("n_positions")?.unwrap_or(1024);
    let inner = f.opt("n_inner")?.unwrap_or(4 * e);
    let layer_norm = 2 * e;
    let layer = layer_norm
        + linear(e, 3 * e, true)
        + linear(e, e, true)
        + layer_norm
        + linear(e, inner, true)
        + linear(inner, e, true);
    // The LM head shares the token embedding.
    Ok(Arch {
        parameters: (v + positions) * e + l * layer + layer_norm,
        hidden: e,
        layers: l,
        heads: a,
        kv_heads: a,
        head_dim: e / a,
        vocab: v,
        kv_cache_layers: l,
        context: Some(positions),
        ..Arch::empty()
    })
}

fn llama(f: &Fields, model_type: &str) -> Result<Arch, EstimateError> {
    let (v, h, l) = (
        f.count("vocab_size")?,
        f.count("hidden_size")?,
        f.count("num_hidden_layers")?,
    );
    let (i, a) = (
        f.count("intermediate_size")?,
        f.count("num_attention_heads")?,
    );
    let kv = f.opt("num_key_value_heads")?.unwrap_or(a);
    let d = f.opt("head_dim")?.unwrap_or(h / a);
    // Qwen2 always carries q/k/v biases; LLaMA and Mistral may through `attention_bias`.
    let qkv_bias = model_type == "qwen2" || f.flag("attention_bias", false);
    let o_bias = model_type != "qwen2" && f.flag("attention_bias", false);
    let mlp_bias = f.flag("mlp_bias", false);
    let attention =
        linear(h, a * d, qkv_bias) + 2 * linear(h, kv * d, qkv_bias) + linear(a * d, h, o_bias);
    let mlp = 2 * linear(h, i, mlp_bias) + linear(i, h, mlp_bias);
    // Two RMSNorms (weight only); Qwen3 adds per-head RMSNorms on queries and keys.
    let norms = 2 * h + if model_type == "qwen3" { 2 * d } else { 0 };
    let head = if f.flag("tie_word_embeddings", false) {
        0
    } else {
        v * h
    };
    Ok(Arch {
        parameters: v * h + l * (attention + mlp + norms) + h + head,
        hidden: h,
        layers: l,
        heads: a,
        kv_heads: kv,
        head_dim: d,
        vocab: v,
        kv_cache_layers: l,
        context: f.opt("max_position_embeddings")?,
        ..Arch::empty()
    })
}

fn t5(f: &Fields) -> Result<Arch, EstimateError> {
    let (v, d, ff) = (
        f.count("vocab_size")?,
        f.count("d_model")?,
        f.count("d_ff")?,
    );
    let (kv_dim, heads) = (f.count("d_kv")?, f.count("num_heads")?);
    let encoder_layers = f.count("num_layers")?;
    let decoder_layers = f.opt("num_decoder_layers")?.unwrap_or(encoder_layers);
    let buckets = f.opt("relative_attention_num_buckets")?.unwrap_or(32);
    let gated = f
        .json
        .get("feed_forward_proj")
        .and_then(Value::as_str)
        .is_some_and(|s| s.starts_with("gated-"));
    let inner = heads * kv_dim;
    // T5 linears have no bias and its layer norms have no shift: `d` each.
    let attention = 4 * d * inner + d;
    let feed_forward = if gated { 3 } else { 2 } * d * ff + d;
    // Only the first block of each stack owns the relative attention bias; each stack ends
    // with a final layer norm.
    let encoder = encoder_layers * (attention + feed_forward) + buckets * heads + d;
    let decoder = decoder_layers * (2 * attention + feed_forward) + buckets * heads + d;
    let head = if f.flag("tie_word_embeddings", true) {
        0
    } else {
        v * d
    };
    Ok(Arch {
        parameters: v * d + encoder + decoder + head,
        hidden: d,
        layers: encoder_layers + decoder_layers,
        heads,
        kv_heads: heads,
        head_dim: kv_dim,
        vocab: v,
        kv_cache_layers: 2 * decoder_layers,
        context: f.opt("n_positions")?,
        ..Arch::empty()
    })
}

impl Arch {
    fn empty() -> Arch {
        Arch {
            model_type: String::new(),
            parameters: 0,
            hidden: 0,
            layers: 0,
            heads: 0,
            kv_heads: 0,
            head_dim: 0,
            vocab: 0,
            kv_cache_layers: 0,
            dtype: None,
            context: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arch(config: &str) -> Arch {
        let json: Value = serde_json::from_str(config).unwrap();
        parse(Path::new("config.json"), &json)
            .unwrap()
            .arch
            .unwrap()
    }

    const BERT_BASE_UNCASED: &str = r#"{"model_type": "bert", "vocab_size": 30522,
        "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
        "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2}"#;
    const GPT2: &str = r#"{"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768,
        "n_layer": 12, "n_head": 12, "n_positions": 1024, "n_inner": null}"#;
    const LLAMA_7B: &str = r#"{"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
        "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 32, "tie_word_embeddings": false, "torch_dtype": "float16"}"#;
    const T5_BASE: &str = r#"{"model_type": "t5", "vocab_size": 32128, "d_model": 768,
        "d_ff": 3072, "d_kv": 64, "num_heads": 12, "num_layers": 12, "num_decoder_layers": 12,
        "relative_attention_num_buckets": 32, "feed_forward_proj": "relu"}"#;

    fn within_2_percent(got: u64, known: f64) {
        let err = (got as f64 - known).abs() / known;
        assert!(err < 0.02, "{got} is {:.2}% from {known}", err * 100.0);
    }

    // The layouts are exact for the reference checkpoints, so both the exact count and the
    // 2% bound the estimate promises are asserted.
    #[test]
    fn bert_base_uncased_is_109_48m() {
        let a = arch(BERT_BASE_UNCASED);
        assert_eq!(a.parameters, 109_482_240);
        within_2_percent(a.parameters, 109.48e6);
        assert_eq!((a.kv_cache_layers, a.head_dim), (0, 64));
    }

    #[test]
    fn gpt2_is_124_44m() {
        let a = arch(GPT2);
        assert_eq!(a.parameters, 124_439_808);
        within_2_percent(a.parameters, 124.44e6);
    }

    #[test]
    fn llama_7b_is_6_74b() {
        let a = arch(LLAMA_7B);
        assert_eq!(a.parameters, 6_738_415_616);
        within_2_percent(a.parameters, 6.74e9);
        assert_eq!(a.dtype, Some(Dtype::F16));
    }

    #[test]
    fn t5_base_is_222_9m() {
        let a = arch(T5_BASE);
        assert_eq!(a.parameters, 222_903_552);
        within_2_percent(a.parameters, 222.9e6);
        assert_eq!((a.layers, a.kv_cache_layers), (24, 24));
    }

    #[test]
    fn grouped_query_attention_and_tied_head() {
        // Qwen3-0.6B: 16 query heads, 8 key/value heads of 128, tied embeddings; published
        // as 0.6B total, 0.44B without embeddings.
        let a = arch(
            r#"{"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024,
            "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
            "num_key_value_heads": 8, "head_dim": 128, "tie_word_embeddings": true}"#,
        );
        assert_eq!(a.parameters, 596_049_920);
        assert_eq!(a.parameters - 151_936 * 1024, 440_467_456);
        assert_eq!((a.kv_heads, a.head_dim), (8, 128));
    }

    #[test]
    fn qwen2_has_qkv_bias() {
        // Qwen2-0.5B, published as 494M.
        let a = arch(
            r#"{"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896,
            "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
            "num_key_value_heads": 2, "tie_word_embeddings": true}"#,
        );
        assert_eq!(a.parameters, 494_032_768);
    }

    #[test]
    fn gated_untied_t5() {
        // google/flan-t5-base: gated-gelu, untied head, published as 247.6M.
        let a = arch(
            r#"{"model_type": "t5", "vocab_size": 32128, "d_model": 768, "d_ff": 2048,
            "d_kv": 64, "num_heads": 12, "num_layers": 12, "num_decoder_layers": 12,
            "feed_forward_proj": "gated-gelu", "tie_word_embeddings": false}"#,
        );
        assert_eq!(a.parameters, 247_577_856);
    }

    #[test]
    fn unknown_model_type_is_none_and_missing_field_is_named() {
        let json: Value = serde_json::from_str(r#"{"model_type": "foo"}"#).unwrap();
        let config = parse(Path::new("c.json"), &json).unwrap();
        assert_eq!(
            (config.model_type.as_deref(), config.arch),
            (Some("foo"), None)
        );
        let json: Value = serde_json::from_str(r#"{"model_type": "gpt2", "n_embd": 8}"#).unwrap();
        let err = parse(Path::new("c.json"), &json).unwrap_err().to_string();
        assert!(err.contains("'vocab_size'"), "{err}");
    }
}
