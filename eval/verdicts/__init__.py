"""From answers to verdicts: the statistics (exact paired tests, intervals, Holm's correction, detectable lifts),
the results tables computed from samples, the effective context length, and the best pipeline per regime by the
one rule that the report and `contextlift policy` share.

It may import `eval.cases` and `eval.metrics`; nothing of the tasks, the report or the runner."""
