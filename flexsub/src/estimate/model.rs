//! Finding a model's files on disk: a directory, a `.safetensors` file, a shard index or a
//! `config.json`, and what they say about the model before the run's shape is applied.

use std::path::{Path, PathBuf};

use super::config::{self, Arch};
use super::{safetensors, Dtype, EstimateError};

/// The files that make up a model, as found on disk.
#[derive(Debug)]
enum Weights {
    Index(PathBuf),
    /// One file, or every `.safetensors` in a directory that has no index.
    Files(Vec<PathBuf>),
    None,
}

fn locate(path: &Path) -> Result<(Weights, Option<PathBuf>), EstimateError> {
    let meta = std::fs::metadata(path).map_err(|source| EstimateError::Unreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let dir = if meta.is_dir() {
        path
    } else {
        path.parent().unwrap_or(Path::new("."))
    };
    let config = Some(dir.join("config.json")).filter(|c| c.is_file());
    if !meta.is_dir() {
        let weights = if name.ends_with(".index.json") {
            Weights::Index(path.to_path_buf())
        } else if name.ends_with(".safetensors") {
            Weights::Files(vec![path.to_path_buf()])
        } else if name.ends_with(".json") {
            // A config.json given directly: size it alone, whatever it is called.
            return Ok((Weights::None, Some(path.to_path_buf())));
        } else {
            return Err(EstimateError::NotAModel {
                path: path.to_path_buf(),
            });
        };
        return Ok((weights, config));
    }
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        return Ok((Weights::Index(index), config));
    }
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok((Weights::Files(vec![single]), config));
    }
    let entries = std::fs::read_dir(dir).map_err(|source| EstimateError::Unreadable {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "safetensors") && p.is_file())
        .collect();
    files.sort();
    let weights = if files.is_empty() {
        Weights::None
    } else {
        Weights::Files(files)
    };
    Ok((weights, config))
}

/// Everything known about a model before the run's shape is applied.
pub(crate) struct Model {
    pub parameters: u64,
    pub source: String,
    pub file_dtype: Option<Dtype>,
    pub arch: Option<Arch>,
    pub notes: Vec<String>,
}

/// Finds a model's files and reads what they say about it.
pub(crate) fn inspect(path: &Path) -> Result<Model, EstimateError> {
    let (weights, config_path) = locate(path)?;
    let config = config_path.as_deref().map(config::read).transpose()?;
    let count = match &weights {
        Weights::Index(index) => Some((safetensors::count_index(index)?, "shard")),
        Weights::Files(files) => Some((safetensors::count_files(files)?, "file")),
        Weights::None => None,
    };
    let Some((count, unit)) = count else {
        return match (config_path, config) {
            (Some(config_path), Some(config)) => from_config(config_path, config),
            _ => Err(EstimateError::NotAModel {
                path: path.to_path_buf(),
            }),
        };
    };
    let mut notes = Vec::new();
    if count.packed_quantised {
        notes.push(
            "packed quantised tensors (qweight) found: parameters are stored elements, \
             not logical weights"
                .into(),
        );
    }
    let arch = match config {
        None => {
            notes.push(
                "no config.json: activations and kv cache not estimated (counted as 0)".into(),
            );
            None
        }
        Some(config::Config {
            arch: None,
            model_type,
        }) => {
            notes.push(format!(
                "model_type '{}' is not one flexsub can size: activations and kv cache not \
                 estimated (counted as 0)",
                model_type.as_deref().unwrap_or("(none)")
            ));
            None
        }
        Some(config::Config { arch, .. }) => arch,
    };
    let plural = if count.files == 1 { "" } else { "s" };
    Ok(Model {
        parameters: count.parameters,
        source: format!("safetensors ({} {unit}{plural})", count.files),
        file_dtype: count.dominant_dtype(),
        arch,
        notes,
    })
}

/// Sizes a model that has a `config.json` and no safetensors.
fn from_config(config_path: PathBuf, config: config::Config) -> Result<Model, EstimateError> {
    let arch = match (config.arch, config.model_type) {
        (Some(arch), _) => arch,
        (None, Some(model_type)) => {
            return Err(EstimateError::UnknownArchitecture {
                path: config_path,
                model_type,
            })
        }
        (None, None) => {
            return Err(EstimateError::MissingField {
                path: config_path,
                field: "model_type".into(),
            })
        }
    };
    Ok(Model {
        parameters: arch.parameters,
        source: format!("config.json ({})", arch.model_type),
        file_dtype: None,
        notes: vec![format!(
            "no safetensors: parameters derived from the {} layout in config.json",
            arch.model_type
        )],
        arch: Some(arch),
    })
}
