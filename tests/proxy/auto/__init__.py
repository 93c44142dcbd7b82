"""Tests of `auto` and its policy file (proxy/policy.py): rules, margins, reloads, an untrusted file."""
