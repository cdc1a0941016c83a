"""Checkout: answer-first, cited packets over the projections.

Stages, each a subpackage: ``plan`` (what the query asks) → ``retrieve`` (the candidate
pool) → ``synthesis`` (evidence, the operation, answerability) → ``packet`` (budgeted
assembly and renderings). ``model`` holds the contracts, ``service`` the I/O shell.
"""
