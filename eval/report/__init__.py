"""The reports: an eval's markdown and HTML with its plots, the published folder and the replay's own section; and
`contextlift shadow-report` with its positional-probe section and `probes.json`.

It may import `eval.verdicts`, `eval.tasks` (for a task's own section), `eval.cases`, `eval.metrics` and
`contextlift.eval.sinks`; nothing of the runner."""
