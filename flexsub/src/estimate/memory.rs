//! The memory formulas: ModelGrid's static + dynamic split, made specific to transformers.
//!
//! With `P` parameters, batch `b`, sequence `s`, hidden `h`, `a` attention heads, `L` layers
//! and `w` bytes per element of the chosen dtype:
//!
//! - **weights** `P × w` (int4 is half a byte).
//! - **activations** per layer: the attention scores `b × a × s² × w` (eager attention;
//!   FlashAttention/SDPA never materialise them, so there this is an upper bound) plus
//!   [`HIDDEN_TENSORS_PER_LAYER`] hidden-sized tensors `b × s × h × w`. Generative models add
//!   their output logits `b × s × vocab`.
//! - **training** keeps all `L` layers of activations for the backward pass and the logits
//!   in fp32 (the loss upcasts them); adds gradients `P × w`; and Adam's optimizer state:
//!   two fp32 moments (8 bytes per parameter) plus, when weights are narrower than 32 bits,
//!   an fp32 master copy (4 bytes per parameter), as mixed-precision training keeps one.
//!   Both are counted in `optimizer_bytes`.
//! - **inference** keeps roughly one layer's activations at a time, the logits at `w`, and a
//!   KV cache `2 × L_kv × b × s × kv_heads × head_dim × w`, where `L_kv` is the number of
//!   attention layers that cache keys and values (none for an encoder-only model).
//!
//! Quantised weights (int8, fp8, int4) are computed with in 16 bits, so activations, KV
//! cache and gradients use 2 bytes per element for them.

use super::config::Arch;
use super::{Dtype, Mode};

/// Hidden-sized activations a transformer layer keeps for its backward pass, after
/// Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models"
/// (2022): `34·s·b·h` bytes at 16 bits per layer, excluding attention scores, i.e. 17 tensors
/// of `s × b × h` (layer-norm inputs, Q/K/V, attention output, the 4h MLP tensors, dropout
/// masks).
pub(crate) const HIDDEN_TENSORS_PER_LAYER: u64 = 17;

/// Adam keeps two fp32 moments per parameter.
const ADAM_BYTES_PER_PARAM: u128 = 8;
/// The fp32 master copy of sub-32-bit weights in mixed-precision training.
const MASTER_BYTES_PER_PARAM: u128 = 4;
/// Logits are upcast to fp32 for the loss when training.
const TRAIN_LOGIT_BYTES: u128 = 4;

/// The run a model is sized for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunShape {
    pub batch: u64,
    pub seq: u64,
    pub dtype: Dtype,
    pub mode: Mode,
}

/// Bytes per part, before the safety margin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Parts {
    pub weights: u64,
    pub activations: u64,
    pub gradients: u64,
    pub optimizer: u64,
    pub kv_cache: u64,
}

impl Parts {
    pub fn sum(&self) -> u64 {
        [
            self.activations,
            self.gradients,
            self.optimizer,
            self.kv_cache,
        ]
        .iter()
        .fold(self.weights, |acc, x| acc.saturating_add(*x))
    }
}

/// `elements` at `bits` each, in whole bytes.
fn bytes(elements: u128, bits: u64) -> u128 {
    (elements * u128::from(bits)).div_ceil(8)
}

fn clamp(n: u128) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Sizes each part; `arch` is `None` when only the parameter count is known, and then
/// activations and KV cache are 0 (the caller has said so in the notes).
pub(crate) fn parts(
    parameters: u64,
    arch: Option<&Arch>,
    run: &RunShape,
    notes: &mut Vec<String>,
) -> Parts {
    let p = u128::from(parameters);
    let compute_bits = run.dtype.bits().max(16);
    if compute_bits != run.dtype.bits() {
        notes.push(format!(
            "{} weights: activations, kv cache and gradients assumed 16-bit",
            run.dtype
        ));
    }
    let weights = bytes(p, run.dtype.bits());
    let (b, s) = (u128::from(run.batch), u128::from(run.seq));
    let (mut per_layer, mut layers, mut logits, mut kv_cache) = (0, 0, 0, 0);
    if let Some(arch) = arch {
        let (h, heads) = (u128::from(arch.hidden), u128::from(arch.heads));
        per_layer = bytes(b * heads * s * s, compute_bits)
            + bytes(
                b * s * h * u128::from(HIDDEN_TENSORS_PER_LAYER),
                compute_bits,
            );
        layers = u128::from(arch.layers);
        if arch.kv_cache_layers == 0 {
            notes.push(format!("{}: encoder-only, no kv cache", arch.model_type));
        } else {
            logits = b * s * u128::from(arch.vocab);
            let per_token = 2 * u128::from(arch.kv_heads) * u128::from(arch.head_dim);
            kv_cache = bytes(
                u128::from(arch.kv_cache_layers) * b * s * per_token,
                compute_bits,
            );
        }
    }
    match run.mode {
        Mode::Train => {
            let master = if run.dtype.bits() < 32 {
                MASTER_BYTES_PER_PARAM
            } else {
                0
            };
            Parts {
                weights: clamp(weights),
                activations: clamp(layers * per_layer + logits * TRAIN_LOGIT_BYTES),
                gradients: clamp(bytes(p, compute_bits)),
                optimizer: clamp(p * (ADAM_BYTES_PER_PARAM + master)),
                kv_cache: 0,
            }
        }
        Mode::Infer => Parts {
            weights: clamp(weights),
            activations: clamp(per_layer + bytes(logits, compute_bits)),
            gradients: 0,
            optimizer: 0,
            kv_cache: clamp(kv_cache),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPT-2-small shaped model.
    fn gpt2() -> Arch {
        Arch {
            model_type: "gpt2".into(),
            parameters: 124_439_808,
            hidden: 768,
            layers: 12,
            heads: 12,
            kv_heads: 12,
            head_dim: 64,
            vocab: 50257,
            kv_cache_layers: 12,
            dtype: None,
            context: Some(1024),
        }
    }

    fn run(dtype: Dtype, mode: Mode) -> RunShape {
        RunShape {
            batch: 2,
            seq: 128,
            dtype,
            mode,
        }
    }

    #[test]
    fn inference_parts_are_exact() {
        let mut notes = Vec::new();
        let p = parts(
            1000,
            Some(&gpt2()),
            &run(Dtype::Bf16, Mode::Infer),
            &mut notes,
        );
        assert_eq!(p.weights, 2000);
        // One layer: 2·12·128²·2 scores + 2·128·768·17·2 hidden; logits 2·128·50257·2.
        assert_eq!(p.activations, 786_432 + 6_684_672 + 25_731_584);
        // 2 (k, v) · 12 layers · 2 · 128 · 12 heads · 64 · 2 bytes.
        assert_eq!(p.kv_cache, 9_437_184);
        assert_eq!((p.gradients, p.optimizer), (0, 0));
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn training_keeps_every_layer_and_adds_adam_with_master_weights() {
        let mut notes = Vec::new();
        let p = parts(
            1000,
            Some(&gpt2()),
            &run(Dtype::Bf16, Mode::Train),
            &mut notes,
        );
        assert_eq!(
            p.activations,
            12 * (786_432 + 6_684_672) + 2 * 128 * 50257 * 4
        );
        assert_eq!(p.gradients, 2000);
        assert_eq!(p.optimizer, 12_000);
        assert_eq!(p.kv_cache, 0);
        let fp32 = parts(1000, None, &run(Dtype::F32, Mode::Train), &mut notes);
        assert_eq!(
            (fp32.weights, fp32.gradients, fp32.optimizer),
            (4000, 4000, 8000)
        );
        assert_eq!(fp32.activations, 0);
    }

    #[test]
    fn int4_weights_are_half_a_byte_and_compute_in_16_bits() {
        let mut notes = Vec::new();
        let p = parts(
            1001,
            Some(&gpt2()),
            &run(Dtype::Int4, Mode::Infer),
            &mut notes,
        );
        assert_eq!(p.weights, 501);
        assert_eq!(p.kv_cache, 9_437_184);
        assert_eq!(
            notes,
            ["int4 weights: activations, kv cache and gradients assumed 16-bit"]
        );
    }

    #[test]
    fn huge_runs_saturate_instead_of_overflowing() {
        let mut notes = Vec::new();
        let shape = RunShape {
            batch: u64::from(u32::MAX),
            seq: u64::from(u32::MAX),
            dtype: Dtype::F32,
            mode: Mode::Train,
        };
        let p = parts(u64::MAX, Some(&gpt2()), &shape, &mut notes);
        assert_eq!(p.sum(), u64::MAX);
    }
}
