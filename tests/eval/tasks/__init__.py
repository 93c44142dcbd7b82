"""Tests of the benchmark tasks (eval/tasks/): gold placement, the papers' files, the prompt shapes and the frameworks'
own, hard distractors, SWiM and the replay."""
