"""Tests of verdicts and reports (eval/verdicts/, eval/report/): the numbers by hand, the verdict's rule, effective
length, plots and the shadow report."""
