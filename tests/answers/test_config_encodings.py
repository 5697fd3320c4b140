"""``--config`` reads a model configuration in any encoding perfkit reads JSON in (UTF-16
with its byte-order mark, as docs/errors.md says), and a file that is not text gets an
error naming it: a UTF-16 file, or a PNG saved as ``config.json``, ended in "unexpected
UnicodeDecodeError ... (please report this)", naming no file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfkit import cli

TINY = "sample:kineto-tiny-llama"
#: A Hugging Face config of a small Qwen2 (the fields perfkit reads).
QWEN = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
        "num_hidden_layers": 24, "hidden_size": 1024, "num_attention_heads": 16,
        "num_key_value_heads": 16, "intermediate_size": 2816, "vocab_size": 151936,
        "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}


def _answer(capsys: pytest.CaptureFixture[str], config: Path) -> dict:
    assert cli.main(["plan", TINY, "--hardware", "h100", "--config", str(config),
                     "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_utf16_config_is_read_as_its_utf8_copy(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    utf8 = tmp_path / "utf8.json"
    utf8.write_text(json.dumps(QWEN), encoding="utf-8")
    utf16 = tmp_path / "utf16.json"
    utf16.write_bytes(json.dumps(QWEN).encode("utf-16"))  # with its byte-order mark
    assert utf16.read_bytes()[:2] in (b"\xff\xfe", b"\xfe\xff")
    said = _answer(capsys, utf16)
    assert said["model"] == "qwen2"  # the config's model, not the profile's
    assert said == _answer(capsys, utf8)


def test_a_binary_file_named_config_json_is_named_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "config.json"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64))
    assert cli.main(["plan", TINY, "--hardware", "h100", "--config", str(png)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(png) in err
    assert "binary data" in err and "unexpected" not in err
