"""`contextlift eval` and `contextlift eval-merge`, added to the `contextlift` command through the entry-point
group `contextlift.commands` (see `contextlift.proxy.cli`), so that serving never imports the evaluation."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contextlift.eval.command import EvalError, add_eval_arguments, add_merge_arguments, run_eval, run_merge
from contextlift.eval.sinks import Source, source

if TYPE_CHECKING:
    from contextlift.proxy.settings import Settings


def register_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `eval` and `eval-merge` to the `contextlift` command line."""
    evaluate = commands.add_parser("eval", help="replay the papers' benchmarks through the proxy and report lifts")
    add_eval_arguments(evaluate)
    evaluate.add_argument("--write-policy", type=Path, help="also write a policy for `auto` from this run's report")
    evaluate.add_argument("--max-cost", help="for --write-policy: ceiling relative to none, e.g. calls=2,latency=1.5")
    evaluate.add_argument("--keep", help="for --write-policy: " + KEEP_HELP)
    evaluate.set_defaults(run=_eval, settings_overrides=_eval_overrides)
    merge = commands.add_parser("eval-merge", help="one report from the parts of a sharded eval")
    add_merge_arguments(merge)
    merge.set_defaults(run=_merge, settings=False)
    policy = commands.add_parser("policy", help="write a policy for `auto` from eval reports (or print an example)")
    policy.add_argument(
        "reports",
        nargs="*",
        type=_source,
        help="eval report folders (results.json and run.json), shadow-report folders (probes.json), or the URL of a "
        "shadow_store (redis://...), whose probes are read from its stream",
    )
    policy.add_argument("--store-prefix", help="the stores' shadow_store_prefix, where it is not contextlift:shadow")
    policy.add_argument("--out", type=Path, help="the policy file (default: standard output)")
    policy.add_argument("--max-cost", help="ceiling relative to none, e.g. calls=2,latency=1.5")
    policy.add_argument("--keep", help=KEEP_HELP)
    policy.add_argument("--example", action="store_true", help="print a small valid policy file with comments")
    policy.set_defaults(run=_policy, settings=False)
    rankers = commands.add_parser("eval-rankers", help="where each ranker puts the gold document (no model needed)")
    rankers.add_argument("--out", type=Path, required=True, help="folder for rankers.md and rankers.json")
    rankers.add_argument("--sizes", default="10,20", help="documents per case, comma-separated (default 10,20)")
    rankers.add_argument("--samples", type=int, default=30, help="questions per regime and size (default 30)")
    rankers.add_argument(
        "--regimes",
        default="easy,hard,retriever",
        help="comma-separated: easy, hard, squad (needs --data), retriever (hard, in a retriever's order)",
    )
    rankers.add_argument("--rankers", default="client,lexical,minilm,fusion", help="comma-separated ranker names")
    rankers.add_argument("--data", type=Path, help="folder holding squad-v2.0-dev.json, for the squad regime")
    rankers.add_argument("--seed", type=int, default=0, help="seed of every generated case (default 0)")
    rankers.set_defaults(run=_eval_rankers, settings=False)
    shadow = commands.add_parser("shadow-report", help="report what shadow evaluation found on live traffic")
    shadow.add_argument(
        "sinks",
        nargs="+",
        type=_source,
        help="shadow_sink files (their rotated files are read too), folders of *.jsonl sinks (one per replica), or "
        "the URL of a shadow_store (redis://[:password@]host:6379/0), whose stream every replica writes to",
    )
    shadow.add_argument(
        "--store-prefix", help="the stores' shadow_store_prefix, where it is not the default (contextlift:shadow)"
    )
    shadow.add_argument("--out", type=Path, required=True, help="folder for report.md, report.html and probes.json")
    shadow.set_defaults(run=_shadow_report, settings=False)


def _source(text: str) -> Source:
    """`source`, its refusal said in argparse's words without the value (a store's URL may hold a password)."""
    try:
        return source(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _eval_rankers(args: argparse.Namespace, _: None) -> int:
    from contextlift.eval.ranker_quality import render, run

    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        rows = run(
            args.out,
            sizes,
            args.samples,
            [r.strip() for r in args.regimes.split(",") if r.strip()],
            [r.strip() for r in args.rankers.split(",") if r.strip()],
            args.data,
            args.seed,
        )
    except (ValueError, OSError) as error:
        print(f"contextlift eval-rankers: {error}", file=sys.stderr)
        return 2
    print(render(rows, f"written to {args.out / 'rankers.md'}"), end="")
    return 0


def _policy(args: argparse.Namespace, _: None) -> int:
    if args.example:
        from contextlift.proxy.policy import example_policy

        print(example_policy(), end="")
        return 0
    if not args.reports:
        print("contextlift policy: name report folders, or --example", file=sys.stderr)
        return 2
    return _write_policy(args.reports, args.max_cost, args.out, args.keep, args.store_prefix)


KEEP_HELP = (
    "the policy whose rules stay where the reports do not contradict them: a policy file, `built-in`, or `none`; "
    "default: the file being written where it exists, else the built-in policy"
)


def _kept_rules(keep: str | None, out: Path | None) -> tuple[str, list[dict[str, Any]]] | None:
    """The name and rules of the policy to keep from (`--keep`), None for `none`.

    Raises:
        ValueError: the file is not a policy (or not TOML).
        OSError: it cannot be read.
    """
    import tomllib
    from importlib import resources

    if keep == "none":
        return None
    if keep is None:
        keep = str(out) if out is not None and out.is_file() else "built-in"
    if keep == "built-in":
        text = resources.files("contextlift.proxy.policies").joinpath("reference.toml").read_text(encoding="utf-8")
    else:
        text = Path(keep).read_text(encoding="utf-8")
    try:
        rules = tomllib.loads(text).get("rule", [])
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"--keep {keep}: not a policy ({error})") from None
    if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        raise ValueError(f"--keep {keep}: not a policy (its rules are not a list of tables)")
    return ("the built-in policy" if keep == "built-in" else Path(keep).name), rules


def _write_policy(
    reports: list[Source], max_cost: str | None, out: Path | None, keep: str | None = None, prefix: str | None = None
) -> int:
    from contextlift.eval.policy_writer import CostCeiling, write_policy, write_policy_file

    if out is not None and out.is_dir():  # before the reports are read: nothing could be written
        print(f"contextlift policy: --out {out} is a folder; name the policy file", file=sys.stderr)
        return 2
    try:
        text = write_policy(reports, CostCeiling.parse(max_cost), _kept_rules(keep, out), prefix)
        if out is not None:
            write_policy_file(out, text)
    except OSError as error:  # the file's name and the system's reason, on one line
        detail = f"{error.filename}: {error.strerror}" if error.filename and error.strerror else str(error)
        print(f"contextlift policy: {detail}", file=sys.stderr)
        return 2
    except (ValueError, KeyError) as error:
        print(f"contextlift policy: {error}", file=sys.stderr)
        return 2
    if out is None:
        print(text, end="")
    else:
        print(f"policy: {out}", file=sys.stderr)
    return 0


def _shadow_report(args: argparse.Namespace, _: None) -> int:
    from contextlift.eval.report.shadow import write_shadow_report

    try:
        summary = write_shadow_report(args.sinks, args.out, args.store_prefix)
    except (OSError, ValueError) as error:
        print(f"contextlift shadow-report: {error}", file=sys.stderr)
        return 2
    share, samples = summary["position_sensitive"], summary["samples"]
    if samples is not None:
        lost = ", ".join(f"{v['count']} {outcome}" for outcome, v in samples["lost"].items())
        pending = f", {samples['pending']} pending" if samples["pending"] else ""
        print(f"{samples['sampled']} sampled, {samples['evaluated']} evaluated{pending}"
              + (f"; not evaluated: {lost}" if lost else ""))  # fmt: skip
        for outcome, v in samples["lost"].items():
            print(f"  {outcome}: {v['why']}")
    interval = f"[{share.low:.3f}, {share.high:.3f}]"
    print(f"{summary['requests']} evaluated requests; position-sensitive {share.value:.3f} {interval}; "
          f"{summary['skipped']} malformed lines skipped")  # fmt: skip
    for group in summary["probes"]:
        held = [_held(row["strategy"], group) for row in group["lift"] if row["significant"]]
        print(f"probes {group['model'] or '(no model)'} / {group['format']}: {group['probes']} probes; lift holds for "
              + (", ".join(held) or "no pipeline"))  # fmt: skip
    print(f"report: {args.out / 'report.md'}")
    return 0


def _held(strategy: str, group: dict[str, Any]) -> str:
    """A pipeline whose lift holds over all probes; a ranked one with its lift on the probes its ranker can find
    the needle in and on those it cannot (`nolima`), which the policy judges it by."""
    from contextlift.eval.policy_writer import ranks_documents
    from contextlift.strategies.probes import FINDABLE_KINDS, RANKER_KIND

    if not ranks_documents(strategy):
        return strategy
    said = []
    for name, table in (
        ("+".join(FINDABLE_KINDS), group.get("findable")),
        (RANKER_KIND, group.get("by_kind", {}).get(RANKER_KIND)),
    ):
        row = next((r for r in (table or {}).get("lift", []) if r["strategy"] == strategy), None)
        if row is not None:
            said.append(f"{table['probes']} {name} probes {row['value']:+.3f}")  # type: ignore[index]
    return f"{strategy} ({'; '.join(said)})" if said else strategy


def _eval_overrides(args: argparse.Namespace) -> dict[str, Any]:
    # The proxy started for an eval logs warnings only: the progress bar is the output.
    # The seed of medoid's permutations and voting calls too: a request is answered the same way in every run.
    return {
        "upstream_url": args.upstream,
        "log_level": "warning",
        "strategy_seed": args.seed,
        "local_model": args.local_model,
    }


def _eval(args: argparse.Namespace, settings: Settings) -> int:
    from contextlift.proxy.shadow.budget import local_upstream

    if not args.shard and not args.dry_run and not _can_plot():
        return _reporting_eval_errors(_missing_extra)
    if args.local_model and (args.proxy or settings.upstream_url):
        # Its answers would be another model's, filed under this one's name (a report's folder, a cache).
        print("contextlift eval: --local-model names an embedded model, which answers only without --upstream, "
              "--proxy or an upstream_url setting", file=sys.stderr)  # fmt: skip
        return 2
    # Whether the upstream is on this machine: a large run elsewhere asks first. Behind --proxy it is not known.
    local = args.proxy is None and (settings.upstream_url is None or local_upstream(settings.upstream_url))
    if args.proxy:
        code = _reporting_eval_errors(lambda: run_eval(args, None if args.dry_run else args.proxy, local=False))
    else:
        from contextlift.eval.local_proxy import embedded_speed, proxy_in_process

        # The upstream from the settings file too, so that the eval can ask it what it is (contextlift.eval.identity).
        args.upstream = args.upstream or settings.upstream_url
        known = embedded_speed(settings)

        def through_a_local_proxy() -> int:
            if args.dry_run:
                return run_eval(args, None, known_speed=known)
            with proxy_in_process(settings, args.port) as proxy:  # a taken --port: EvalError, reported below
                return run_eval(
                    args, proxy.url, local=local, upstream_identity=proxy.upstream_identity, known_speed=known
                )

        code = _reporting_eval_errors(through_a_local_proxy)
    if code == 0 and args.write_policy is not None and not args.shard:
        return _write_policy([args.out], args.max_cost, args.write_policy, args.keep)
    return code


def _merge(args: argparse.Namespace, _: None) -> int:
    return _reporting_eval_errors(run_merge if _can_plot() else _missing_extra, args)


def _can_plot() -> bool:
    """Whether the report's plots can be drawn: matplotlib comes with the `eval` extra, not with the proxy. Checked
    before a run starts rather than after hours of requests."""
    return importlib.util.find_spec("matplotlib") is not None


def _missing_extra(*_: object) -> int:
    raise EvalError("the report's plots need matplotlib: pip install 'contextlift[eval]'")


def _reporting_eval_errors(run: Callable[..., int], *args: object) -> int:
    try:
        return run(*args)
    except EvalError as error:
        print(f"contextlift eval: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("contextlift eval: interrupted; answers so far are cached, run again to resume", file=sys.stderr)
        return 130
