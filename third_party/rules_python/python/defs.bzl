"""Offline stand-in for @rules_python//python:defs.bzl (loaded, never used, by @bazel_tools)."""

def py_binary(**attrs):
    native.py_binary(**attrs)

def py_library(**attrs):
    native.py_library(**attrs)

def py_runtime(**attrs):
    native.py_runtime(**attrs)

def py_runtime_pair(**attrs):
    native.py_runtime_pair(**attrs)

def py_test(**attrs):
    native.py_test(**attrs)
