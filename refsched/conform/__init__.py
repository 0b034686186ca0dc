"""Conformance: refsched's reference model as the oracle for other schedulers.

An implementation in any language speaks the JSON-lines protocol of ``docs/conformance.md``
(:mod:`refsched.conform.protocol`, :mod:`refsched.conform.client`); a Python one can also be
checked in-process. :mod:`refsched.conform.oracle` drives it through the trace corpus and through
Hypothesis-generated sequences and compares every answer with the model.
"""
