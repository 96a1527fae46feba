"""A module of its own for tests/e2e/test_python_semantics.py: a global with a name the test module uses too."""
counter = 0


def bump(x):
    global counter
    counter += 1
    return x * counter
