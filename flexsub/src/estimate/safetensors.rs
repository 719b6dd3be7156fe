//! Exact parameter counts from safetensors headers.
//!
//! A safetensors file is an 8-byte little-endian header length, a JSON header giving each
//! tensor's dtype, shape and byte range, then the tensor data. Only the first two are read:
//! checkpoints run to hundreds of GiB and the header alone says everything we need. The
//! header is validated with the `safetensors` crate's own `Metadata` (offsets contiguous,
//! sizes matching shapes), and its end offset is checked against the file length so that a
//! truncated download is reported rather than sized.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use ::safetensors::tensor::Metadata;
use ::safetensors::Dtype as StDtype;

use super::{Dtype, EstimateError};

/// Largest header we agree to read; the same cap the `safetensors` crate applies.
pub(crate) const MAX_HEADER_BYTES: u64 = 100 * 1024 * 1024;

/// What the headers of one or more safetensors files hold.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct TensorCount {
    /// Elements over every stored tensor (buffers such as `position_ids` included).
    pub parameters: u64,
    /// Elements per stored dtype, to pick the checkpoint's dominant dtype.
    pub elements_by_dtype: BTreeMap<StDtype, u64>,
    /// Files read.
    pub files: usize,
    /// Whether any tensor looks like a packed quantised weight (GPTQ/AWQ `qweight`).
    pub packed_quantised: bool,
}

impl TensorCount {
    fn add(&mut self, other: TensorCount) {
        self.parameters += other.parameters;
        for (dtype, n) in other.elements_by_dtype {
            *self.elements_by_dtype.entry(dtype).or_default() += n;
        }
        self.files += other.files;
        self.packed_quantised |= other.packed_quantised;
    }

    /// The dtype holding most elements, among those flexsub can size.
    pub fn dominant_dtype(&self) -> Option<Dtype> {
        self.elements_by_dtype
            .iter()
            .filter_map(|(st, n)| Some((from_st_dtype(*st)?, *n)))
            .max_by_key(|(_, n)| *n)
            .map(|(dtype, _)| dtype)
    }
}

fn from_st_dtype(dtype: StDtype) -> Option<Dtype> {
    Some(match dtype {
        StDtype::F32 => Dtype::F32,
        StDtype::F16 => Dtype::F16,
        StDtype::BF16 => Dtype::Bf16,
        StDtype::I8 | StDtype::U8 => Dtype::Int8,
        StDtype::F8_E4M3 | StDtype::F8_E5M2 | StDtype::F8_E8M0 => Dtype::Fp8,
        StDtype::F4 => Dtype::Int4,
        _ => return None,
    })
}

fn corrupt(path: &Path, reason: impl Into<String>) -> EstimateError {
    EstimateError::CorruptHeader {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn unreadable(path: &Path) -> impl FnOnce(std::io::Error) -> EstimateError + '_ {
    move |source| EstimateError::Unreadable {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads and validates the header of one safetensors file, without touching tensor data.
pub(crate) fn read_header(path: &Path) -> Result<Metadata, EstimateError> {
    let mut file = File::open(path).map_err(unreadable(path))?;
    let file_len = file.metadata().map_err(unreadable(path))?.len();
    if file_len < 8 {
        return Err(corrupt(
            path,
            format!("file is {file_len} bytes, shorter than the 8-byte header length"),
        ));
    }
    let mut len_bytes = [0u8; 8];
    file.read_exact(&mut len_bytes).map_err(unreadable(path))?;
    let header_len = u64::from_le_bytes(len_bytes);
    if header_len > MAX_HEADER_BYTES {
        return Err(corrupt(
            path,
            format!("header length {header_len} exceeds the {MAX_HEADER_BYTES}-byte cap"),
        ));
    }
    if 8 + header_len > file_len {
        return Err(corrupt(
            path,
            format!("truncated: header claims {header_len} bytes but the file is {file_len}"),
        ));
    }
    let mut header = vec![0u8; header_len as usize];
    file.read_exact(&mut header).map_err(unreadable(path))?;
    let metadata: Metadata = serde_json::from_slice(&header)
        .map_err(|e| corrupt(path, format!("invalid header json: {e}")))?;
    let expected = 8 + header_len + metadata.data_len() as u64;
    if expected != file_len {
        let what = if expected > file_len {
            "truncated"
        } else {
            "trailing bytes"
        };
        return Err(corrupt(
            path,
            format!("{what}: tensors end at byte {expected} but the file is {file_len} bytes"),
        ));
    }
    Ok(metadata)
}

fn count_metadata(metadata: &Metadata) -> TensorCount {
    let mut count = TensorCount {
        files: 1,
        ..TensorCount::default()
    };
    for (name, info) in metadata.tensors() {
        // `Metadata` has already checked that these products do not overflow.
        let elements = info.shape.iter().product::<usize>() as u64;
        count.parameters += elements;
        *count.elements_by_dtype.entry(info.dtype).or_default() += elements;
        count.packed_quantised |= name.ends_with(".qweight");
    }
    count
}

/// Counts the tensors of one safetensors file.
pub(crate) fn count_file(path: &Path) -> Result<TensorCount, EstimateError> {
    Ok(count_metadata(&read_header(path)?))
}

/// Counts several independent safetensors files (a directory without an index).
pub(crate) fn count_files(paths: &[PathBuf]) -> Result<TensorCount, EstimateError> {
    let mut total = TensorCount::default();
    for path in paths {
        total.add(count_file(path)?);
    }
    Ok(total)
}

/// Counts a sharded checkpoint through its `*.safetensors.index.json`: every shard named in
/// `weight_map` is opened once, and every tensor the index places in a shard must be there.
pub(crate) fn count_index(index: &Path) -> Result<TensorCount, EstimateError> {
    let text = std::fs::read_to_string(index).map_err(unreadable(index))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| EstimateError::InvalidJson {
            path: index.to_path_buf(),
            source,
        })?;
    let weight_map = json
        .get("weight_map")
        .and_then(|v| v.as_object())
        .ok_or_else(|| EstimateError::MissingField {
            path: index.to_path_buf(),
            field: "weight_map".into(),
        })?;
    let mut shards: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (tensor, shard) in weight_map {
        let shard = shard.as_str().ok_or_else(|| EstimateError::MissingField {
            path: index.to_path_buf(),
            field: format!("weight_map.{tensor}"),
        })?;
        shards.entry(shard).or_default().insert(tensor);
    }
    if shards.is_empty() {
        return Err(EstimateError::MissingField {
            path: index.to_path_buf(),
            field: "weight_map (empty)".into(),
        });
    }
    let dir = index.parent().unwrap_or(Path::new("."));
    let mut total = TensorCount::default();
    for (shard, tensors) in shards {
        let path = dir.join(shard);
        let metadata = read_header(&path)?;
        if let Some(missing) = tensors.iter().find(|t| metadata.info(t).is_none()) {
            return Err(corrupt(
                &path,
                format!(
                    "tensor '{missing}' listed in {} is not in this shard",
                    index.display()
                ),
            ));
        }
        total.add(count_metadata(&metadata));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Writes a safetensors file by hand: header length, JSON header, zeroed data.
    fn write_raw(dir: &Path, name: &str, header: &str, data_len: usize) -> PathBuf {
        let path = dir.join(name);
        let mut f = File::create(&path).unwrap();
        f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
        f.write_all(header.as_bytes()).unwrap();
        f.write_all(&vec![0u8; data_len]).unwrap();
        path
    }

    const TWO_TENSORS: &str = r#"{"__metadata__":{"format":"pt"},
        "a":{"dtype":"BF16","shape":[3,4],"data_offsets":[0,24]},
        "b":{"dtype":"F32","shape":[5],"data_offsets":[24,44]}}"#;

    #[test]
    fn counts_elements_and_skips_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_raw(dir.path(), "m.safetensors", TWO_TENSORS, 44);
        let count = count_file(&path).unwrap();
        assert_eq!(count.parameters, 17);
        assert_eq!(count.files, 1);
        assert_eq!(count.elements_by_dtype[&StDtype::BF16], 12);
        assert_eq!(count.dominant_dtype(), Some(Dtype::Bf16));
    }

    #[test]
    fn truncated_data_is_reported_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_raw(dir.path(), "m.safetensors", TWO_TENSORS, 40);
        let err = count_file(&path).unwrap_err().to_string();
        assert!(err.contains("m.safetensors"), "{err}");
        assert!(err.contains("truncated: tensors end at byte"), "{err}");
    }

    #[test]
    fn header_longer_than_file_is_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.safetensors");
        let mut bytes = 1000u64.to_le_bytes().to_vec();
        bytes.extend_from_slice(b"{\"a\":");
        std::fs::write(&path, bytes).unwrap();
        let err = count_file(&path).unwrap_err().to_string();
        assert!(err.contains("truncated: header claims 1000 bytes"), "{err}");
    }

    #[test]
    fn oversized_header_length_is_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.safetensors");
        std::fs::write(&path, u64::MAX.to_le_bytes()).unwrap();
        let err = count_file(&path).unwrap_err().to_string();
        assert!(err.contains("exceeds the 104857600-byte cap"), "{err}");
    }

    #[test]
    fn tiny_file_and_bad_json_are_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let tiny = dir.path().join("tiny.safetensors");
        std::fs::write(&tiny, b"abc").unwrap();
        assert!(matches!(
            count_file(&tiny),
            Err(EstimateError::CorruptHeader { .. })
        ));
        let bad = write_raw(dir.path(), "bad.safetensors", "not json at all", 0);
        let err = count_file(&bad).unwrap_err().to_string();
        assert!(err.contains("invalid header json"), "{err}");
    }

    #[test]
    fn offsets_that_disagree_with_shapes_are_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let header = r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}}"#;
        let path = write_raw(dir.path(), "m.safetensors", header, 8);
        assert!(matches!(
            count_file(&path),
            Err(EstimateError::CorruptHeader { .. })
        ));
    }

    #[test]
    fn index_tensor_missing_from_its_shard_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        write_raw(dir.path(), "s1.safetensors", TWO_TENSORS, 44);
        let index = dir.path().join("model.safetensors.index.json");
        std::fs::write(
            &index,
            r#"{"weight_map":{"a":"s1.safetensors","ghost":"s1.safetensors"}}"#,
        )
        .unwrap();
        let err = count_index(&index).unwrap_err().to_string();
        assert!(err.contains("tensor 'ghost'"), "{err}");
    }
}
