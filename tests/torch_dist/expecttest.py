"""A stand-in for the `expecttest` package, which Debian 12 does not ship
and torch.testing._internal.common_utils imports: its TestCase is a plain
unittest.TestCase and nothing accepts new expected outputs. PyTorch's
distributed suite uses none of expecttest's assertExpected helpers."""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    pass
