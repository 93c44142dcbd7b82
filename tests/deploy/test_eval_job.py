"""The sharded evaluation: `deploy/eval` renders and validates; the Indexed Job's shards, the merge step and
the command lines they run agree with each other and with the `contextlift` parser."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from contextlift.proxy.cli import _parser
from tests.deploy.kustomize import DEPLOY, kustomize

BIN = Path(sys.executable).parent


def rendered(tmp_path: Path) -> tuple[Path, dict[str, dict[str, Any]]]:
    out = kustomize(DEPLOY / "eval")
    path = tmp_path / "eval.yaml"
    path.write_text(out)
    return path, {d["metadata"]["name"] if d["kind"] == "Job" else d["kind"]: d for d in yaml.safe_load_all(out) if d}


def expand(text: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\((\w+)\)", lambda m: env[m[1]], text)


def test_eval_manifests_render_and_validate(tmp_path: Path) -> None:
    path, documents = rendered(tmp_path)
    result = subprocess.run(
        [str(BIN / "kubernetes-validate"), "--strict", "-k", "1.32.0", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert set(documents) == {"ConfigMap", "PersistentVolumeClaim", "contextlift-eval", "contextlift-eval-merge"}


def test_each_index_runs_its_own_shard_into_its_own_part(tmp_path: Path) -> None:
    _, documents = rendered(tmp_path)
    config = documents["ConfigMap"]["data"]
    job = documents["contextlift-eval"]["spec"]
    shards = int(config["SHARDS"])
    assert job["completionMode"] == "Indexed"
    assert job["completions"] == job["parallelism"] == shards
    container = job["template"]["spec"]["containers"][0]
    assert container["envFrom"][0]["configMapRef"]["name"] == documents["ConfigMap"]["metadata"]["name"]
    index_env = container["env"][0]
    assert index_env["name"] == "JOB_COMPLETION_INDEX"
    assert "job-completion-index" in index_env["valueFrom"]["fieldRef"]["fieldPath"]
    outs = set()
    for index in range(shards):
        argv = [expand(a, {**config, "JOB_COMPLETION_INDEX": str(index)}) for a in container["args"]]
        args = _parser().parse_args(argv)
        assert (args.command, args.shard, args.proxy) == ("eval", f"{index}/{shards}", config["PROXY_URL"])
        outs.add((str(args.out), str(args.cache)))
    assert len(outs) == shards
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["results"] == "/results"
    assert all(o.startswith("/results/") for pair in outs for o in pair)


def test_the_merge_waits_for_every_part_then_merges_them(tmp_path: Path) -> None:
    _, documents = rendered(tmp_path)
    pod = documents["contextlift-eval-merge"]["spec"]["template"]["spec"]
    wait = " ".join(pod["initContainers"][0]["command"])
    assert "/results/parts/*/samples.jsonl" in wait
    assert '"$SHARDS"' in wait
    merge = pod["containers"][0]["command"][-1]
    argv = merge.removeprefix("exec contextlift ").replace("/results/parts/*", "/results/parts/0 /results/parts/1")
    args = _parser().parse_args(argv.split())
    assert args.command == "eval-merge"
    assert str(args.out) == "/results/report"
    claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    job_claims = {
        v["persistentVolumeClaim"]["claimName"]
        for v in documents["contextlift-eval"]["spec"]["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert claims == job_claims == {documents["PersistentVolumeClaim"]["metadata"]["name"]}
