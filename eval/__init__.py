"""Evaluation: the papers' positional benchmarks replayed through the proxy over HTTP, scored as each paper
scores, and reported with confidence intervals, the lift of each strategy over `none`, the positional gap
it recovers, and its cost. `contextlift eval` is the command line; these are its parts for use from Python.

Rooms: `tasks/` (one module each, each exporting its `Task` as `TASK`; `eval.plan.TASKS` lists them), `verdicts/`
(statistics, results, the best pipeline), `report/` (markdown, HTML, plots, the shadow report). Beside them the
plan, the runner and its cache, the command line, and `policy_writer`, which reads eval and shadow reports alike.
Each room's `__init__.py` says what it may import; `eval` itself may import `proxy` and `strategies`.
"""

from contextlift.eval.cache import Answer, ResponseCache
from contextlift.eval.cases import Case, Grid, Sample, TaskInfo
from contextlift.eval.plan import PROFILES, TASKS, Plan, build_cases, make_plan
from contextlift.eval.report.publish import write_report
from contextlift.eval.runner import Runner, Target, jobs, score
from contextlift.eval.sources import Sources, find_sources
from contextlift.eval.tasks.registry import BuildContext, Option, Task
from contextlift.eval.verdicts.results import RunInfo, load_samples

__all__ = [
    "PROFILES",
    "TASKS",
    "Answer",
    "BuildContext",
    "Case",
    "Grid",
    "Option",
    "Plan",
    "ResponseCache",
    "RunInfo",
    "Runner",
    "Sample",
    "Sources",
    "Target",
    "Task",
    "TaskInfo",
    "build_cases",
    "find_sources",
    "jobs",
    "load_samples",
    "make_plan",
    "score",
    "write_report",
]
