"""Tests of finding the documents (strategies/detection/): every shape in the frameworks' own prompts, ordinary prompts
left alone, lossless round trips, linear time, bounds; and positional probes built in each shape."""
