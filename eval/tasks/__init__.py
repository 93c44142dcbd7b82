"""The benchmark tasks, one module each with its data builders: Lost in the Middle's QA (with its same-entity hard
regime) and key-value retrieval, SQuAD distractors, SWiM, the fiction and length tasks, several facts, the prompt
shapes apps render them in, and the replay of captured traffic; `registry` says what a task declares.

A task may import `eval.cases`, `eval.sources`, `eval.metrics`, `eval.sinks` and `strategies` (to build prompts as
the proxy reads them); nothing of the verdicts, the report or the runner."""
