//! The estimator on model directories written as a user's disk would hold them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use flexsub::estimate::{
    count_parameters, estimate, Breakdown, Dtype, EstimateError, EstimateInput, Mode,
};
use safetensors::tensor::TensorView;
use safetensors::Dtype as StDtype;

/// A LLaMA-shaped model small enough to write out: 2 layers, hidden 16, 4 query heads and
/// 2 key/value heads of 4, MLP 32, vocab 100, untied head.
const TINY_LLAMA: &str = r#"{"model_type": "llama", "vocab_size": 100, "hidden_size": 16,
    "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "tie_word_embeddings": false, "torch_dtype": "float32"}"#;

/// 1600 embedding + 2 × (768 attention + 1536 MLP + 32 norms) + 16 norm + 1600 head.
const TINY_LLAMA_PARAMS: u64 = 7888;

/// The tensors of TINY_LLAMA as `transformers` names them, in three shards.
fn tiny_llama_shards() -> Vec<Vec<(String, Vec<usize>)>> {
    let layer = |i: usize| -> Vec<(String, Vec<usize>)> {
        let p = format!("model.layers.{i}");
        vec![
            (format!("{p}.self_attn.q_proj.weight"), vec![16, 16]),
            (format!("{p}.self_attn.k_proj.weight"), vec![8, 16]),
            (format!("{p}.self_attn.v_proj.weight"), vec![8, 16]),
            (format!("{p}.self_attn.o_proj.weight"), vec![16, 16]),
            (format!("{p}.mlp.gate_proj.weight"), vec![32, 16]),
            (format!("{p}.mlp.up_proj.weight"), vec![32, 16]),
            (format!("{p}.mlp.down_proj.weight"), vec![16, 32]),
            (format!("{p}.input_layernorm.weight"), vec![16]),
            (format!("{p}.post_attention_layernorm.weight"), vec![16]),
        ]
    };
    let mut last = layer(1);
    last.push(("model.norm.weight".into(), vec![16]));
    last.push(("lm_head.weight".into(), vec![100, 16]));
    vec![
        vec![("model.embed_tokens.weight".into(), vec![100, 16])],
        layer(0),
        last,
    ]
}

fn write_safetensors(path: &Path, tensors: &[(String, Vec<usize>)], dtype: StDtype) {
    let bytes = dtype.bitsize() / 8;
    let data: Vec<Vec<u8>> = tensors
        .iter()
        .map(|(_, shape)| vec![0u8; shape.iter().product::<usize>() * bytes])
        .collect();
    let views = tensors.iter().zip(&data).map(|((name, shape), d)| {
        (
            name.clone(),
            TensorView::new(dtype, shape.clone(), d).unwrap(),
        )
    });
    let info = HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::serialize_to_file(views, Some(info), path).unwrap();
}

/// Writes TINY_LLAMA sharded in three bf16 files with an index, and its config.
fn sharded_model(dir: &Path) {
    let shards = tiny_llama_shards();
    let mut weight_map = serde_json::Map::new();
    for (i, tensors) in shards.iter().enumerate() {
        let name = format!("model-{:05}-of-00003.safetensors", i + 1);
        write_safetensors(&dir.join(&name), tensors, StDtype::BF16);
        for (tensor, _) in tensors {
            weight_map.insert(tensor.clone(), name.clone().into());
        }
    }
    let index = serde_json::json!({"metadata": {"total_size": 15776}, "weight_map": weight_map});
    std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
    std::fs::write(dir.join("config.json"), TINY_LLAMA).unwrap();
}

fn input(model: PathBuf, mode: Mode) -> EstimateInput {
    EstimateInput {
        model,
        batch_size: 2,
        seq_len: Some(8),
        dtype: None,
        mode,
        margin: 0.10,
    }
}

fn parts_sum(b: &Breakdown) -> u64 {
    b.weights_bytes + b.activations_bytes + b.gradients_bytes + b.optimizer_bytes + b.kv_cache_bytes
}

#[test]
fn sharded_model_is_counted_exactly_through_its_index() {
    let dir = tempfile::tempdir().unwrap();
    sharded_model(dir.path());
    let expected = (TINY_LLAMA_PARAMS, "safetensors (3 shards)".to_string());
    assert_eq!(count_parameters(dir.path()).unwrap(), expected);
    let index = dir.path().join("model.safetensors.index.json");
    assert_eq!(count_parameters(&index).unwrap(), expected);
}

#[test]
fn config_layout_agrees_with_the_written_tensors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), TINY_LLAMA).unwrap();
    assert_eq!(
        count_parameters(dir.path()).unwrap(),
        (TINY_LLAMA_PARAMS, "config.json (llama)".to_string())
    );
}

#[test]
fn single_file_model_by_directory_and_by_file() {
    let dir = tempfile::tempdir().unwrap();
    let all: Vec<_> = tiny_llama_shards().concat();
    let file = dir.path().join("model.safetensors");
    write_safetensors(&file, &all, StDtype::F16);
    let expected = (TINY_LLAMA_PARAMS, "safetensors (1 file)".to_string());
    assert_eq!(count_parameters(dir.path()).unwrap(), expected);
    assert_eq!(count_parameters(&file).unwrap(), expected);
    // No config: weights only, dtype as stored, and the gap is said.
    let b = estimate(&input(file, Mode::Infer)).unwrap();
    assert_eq!(b.dtype, Dtype::F16);
    assert_eq!(b.weights_bytes, 2 * TINY_LLAMA_PARAMS);
    assert_eq!((b.activations_bytes, b.kv_cache_bytes), (0, 0));
    assert!(
        b.notes.iter().any(|n| n.starts_with("no config.json")),
        "{:?}",
        b.notes
    );
}

#[test]
fn inference_estimate_is_exact_for_the_tiny_model() {
    let dir = tempfile::tempdir().unwrap();
    sharded_model(dir.path());
    let b = estimate(&input(dir.path().into(), Mode::Infer)).unwrap();
    assert_eq!(b.params_source, "safetensors (3 shards)");
    // The files are bf16 although the config says float32: the files win.
    assert_eq!(b.dtype, Dtype::Bf16);
    assert_eq!(b.weights_bytes, 15_776);
    // One layer (2·4·8²·2 scores + 2·8·16·17·2 hidden) + logits 2·8·100·2.
    assert_eq!(b.activations_bytes, 1024 + 8704 + 3200);
    // 2 (k, v) · 2 layers · 2 · 8 · 2 kv heads · 4 · 2 bytes.
    assert_eq!(b.kv_cache_bytes, 1024);
    assert_eq!((b.gradients_bytes, b.optimizer_bytes), (0, 0));
    assert_eq!(b.margin_bytes, 2973); // ceil(29 728 × 0.10)
    assert_eq!(b.total_bytes, 32_701);
}

#[test]
fn training_estimate_is_exact_and_exceeds_inference() {
    let dir = tempfile::tempdir().unwrap();
    sharded_model(dir.path());
    let train = estimate(&input(dir.path().into(), Mode::Train)).unwrap();
    // Both layers (2 · 9728) + fp32 logits 2·8·100·4.
    assert_eq!(train.activations_bytes, 19_456 + 6400);
    assert_eq!(train.gradients_bytes, 15_776);
    // Adam moments 8 B + fp32 master 4 B per parameter.
    assert_eq!(train.optimizer_bytes, 12 * TINY_LLAMA_PARAMS);
    assert_eq!(train.kv_cache_bytes, 0);
    assert_eq!(train.total_bytes, 152_064 + 15_207);
    let infer = estimate(&input(dir.path().into(), Mode::Infer)).unwrap();
    assert!(train.total_bytes > infer.total_bytes);
}

#[test]
fn training_beats_inference_for_llama_7b_from_config() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
        "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 32, "torch_dtype": "float16"}"#,
    )
    .unwrap();
    let mut run = input(dir.path().into(), Mode::Infer);
    run.seq_len = Some(2048);
    let infer = estimate(&run).unwrap();
    assert_eq!(infer.params_source, "config.json (llama)");
    assert_eq!(infer.dtype, Dtype::F16);
    assert_eq!(infer.weights_bytes, 2 * 6_738_415_616);
    // 2 · 32 layers · 2 · 2048 · 4096 · 2 bytes = 2 GiB.
    assert_eq!(infer.kv_cache_bytes, 2 << 30);
    run.mode = Mode::Train;
    let train = estimate(&run).unwrap();
    assert!(train.total_bytes > 4 * infer.total_bytes);
    assert!(train.render().contains("config.json (llama)"));
}

#[test]
fn margin_is_applied_on_top_of_the_parts() {
    let dir = tempfile::tempdir().unwrap();
    sharded_model(dir.path());
    let mut run = input(dir.path().into(), Mode::Infer);
    run.margin = 0.0;
    let bare = estimate(&run).unwrap();
    assert_eq!((bare.margin_bytes, bare.total_bytes), (0, parts_sum(&bare)));
    run.margin = 0.25;
    let padded = estimate(&run).unwrap();
    assert_eq!(padded.margin_bytes, 7432); // 29 728 / 4
    assert_eq!(padded.total_bytes, bare.total_bytes + 7432);
    run.margin = 1.5;
    assert!(matches!(estimate(&run), Err(EstimateError::Margin(_))));
}

#[test]
fn dtype_given_by_the_caller_overrides_the_files() {
    let dir = tempfile::tempdir().unwrap();
    sharded_model(dir.path());
    let mut run = input(dir.path().into(), Mode::Infer);
    run.dtype = Some(Dtype::Int4);
    let b = estimate(&run).unwrap();
    assert_eq!(b.weights_bytes, TINY_LLAMA_PARAMS / 2);
    assert_eq!(b.kv_cache_bytes, 1024, "kv cache stays 16-bit");
}

#[test]
fn corrupt_header_is_reported_with_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("model.safetensors");
    let mut bytes = 12u64.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{\"a\": oops}");
    bytes.push(b' ');
    std::fs::write(&file, bytes).unwrap();
    let err = count_parameters(dir.path()).unwrap_err();
    assert!(
        matches!(err, EstimateError::CorruptHeader { .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.starts_with(&file.display().to_string()),
        "{message}"
    );
    assert!(message.contains("corrupt safetensors header"), "{message}");
}

#[test]
fn missing_shard_is_an_unreadable_path() {
    let dir = tempfile::tempdir().unwrap();
    sharded_model(dir.path());
    let shard = dir.path().join("model-00002-of-00003.safetensors");
    std::fs::remove_file(&shard).unwrap();
    let err = count_parameters(dir.path()).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("cannot read {}", shard.display())),
        "{err}"
    );
}

#[test]
fn directory_without_a_model_asks_for_mem() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("README.md"), "hello").unwrap();
    let err = count_parameters(dir.path()).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{} is not a model: no .safetensors file and no config.json; give --mem instead",
            dir.path().display()
        )
    );
    let missing = dir.path().join("nope");
    assert!(matches!(
        count_parameters(&missing),
        Err(EstimateError::Unreadable { .. })
    ));
}

#[test]
fn unknown_architecture_asks_for_mem_unless_safetensors_count_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    std::fs::write(&config, r#"{"model_type": "foo", "hidden_size": 8}"#).unwrap();
    let err = count_parameters(dir.path()).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{}: model_type 'foo' is not one flexsub can size; give --mem",
            config.display()
        )
    );
    write_safetensors(
        &dir.path().join("model.safetensors"),
        &[("w".into(), vec![3, 5])],
        StDtype::F32,
    );
    let b = estimate(&input(dir.path().into(), Mode::Train)).unwrap();
    assert_eq!((b.parameters, b.weights_bytes), (15, 60));
    assert_eq!(b.activations_bytes, 0);
    assert!(
        b.notes.iter().any(|n| n.contains("model_type 'foo'")),
        "{:?}",
        b.notes
    );
}

#[test]
fn missing_config_field_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    std::fs::write(&config, r#"{"model_type": "bert", "vocab_size": 10}"#).unwrap();
    let err = count_parameters(dir.path()).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{}: missing or invalid field 'hidden_size'",
            config.display()
        )
    );
}

#[test]
fn zero_batch_or_sequence_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    sharded_model(dir.path());
    let mut run = input(dir.path().into(), Mode::Infer);
    run.batch_size = 0;
    assert_eq!(
        estimate(&run).unwrap_err().to_string(),
        "batch size must be at least 1"
    );
    run.batch_size = 1;
    run.seq_len = Some(0);
    assert_eq!(
        estimate(&run).unwrap_err().to_string(),
        "sequence length must be at least 1"
    );
}

#[test]
fn without_a_sequence_length_the_models_context_length_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let config = |extra: &str| {
        format!(
            r#"{{"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
            "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 32, "torch_dtype": "float16"{extra}}}"#
        )
    };
    std::fs::write(
        dir.path().join("config.json"),
        config(r#", "max_position_embeddings": 2048"#),
    )
    .unwrap();
    let mut run = input(dir.path().into(), Mode::Infer);
    run.seq_len = None;
    let b = estimate(&run).unwrap();
    // As with --seq-len 2048: 2 · 32 layers · 2 · 2048 · 4096 · 2 bytes.
    assert_eq!(b.kv_cache_bytes, 2 << 30);
    assert!(b
        .render()
        .contains("sequence length 2048: the model's context length"));
    std::fs::write(dir.path().join("config.json"), config("")).unwrap();
    let e = estimate(&run).unwrap_err().to_string();
    assert!(e.contains("give --seq-len"), "{e}");
}
