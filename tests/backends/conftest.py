"""Every LLVM test under tests/backends compiles into the tests' kept cache (tests/llvm_cache.py),
apart from the user's."""

from tests.llvm_cache import llvm_test_cache  # noqa: F401 - an autouse fixture, active here
